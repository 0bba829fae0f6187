"""Canonical matrix storage and summary."""

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cbmm.data import DataError, matrix_summary, read_matrix, write_matrix
from cbmm.data.matrix import atomic_path, write_json


def _frame():
    values = np.array(
        [
            [1, 0, np.nan, 1],
            [1, 1, np.nan, 0],
            [1, np.nan, np.nan, 0],
            [np.nan, np.nan, np.nan, np.nan],
        ]
    )
    return pd.DataFrame(
        values, index=["m/a", "m/b", "7", "empty"], columns=["x_0", "x_1", "2", "y"]
    )


def test_roundtrip_keeps_labels_order_values_and_nan(tmp_path):
    df = _frame()
    path = write_matrix(df, tmp_path / "m.parquet")
    back = read_matrix(path)
    assert back.index.tolist() == ["m/a", "m/b", "7", "empty"]
    assert back.columns.tolist() == ["x_0", "x_1", "2", "y"]
    np.testing.assert_array_equal(back.to_numpy(), df.to_numpy())  # NaN positions included
    schema = pq.read_schema(path)
    assert str(schema.field("x_0").type) == "int8"


def test_summary_matches_hand_count():
    s = matrix_summary(_frame())
    assert (s["n_models"], s["n_items"], s["n_observed"]) == (4, 4, 8)
    assert s["missing_rate"] == pytest.approx(0.5)
    assert s["mean_accuracy"] == pytest.approx(5 / 8)
    assert s["all_correct_items"] == ["x_0"] and s["all_wrong_items"] == []
    assert s["empty_items"] == ["2"] and s["empty_models"] == ["empty"]
    assert s["all_correct_models"] == [] and s["all_wrong_models"] == []
    assert s["model_accuracy"] == {
        "m/a": pytest.approx(2 / 3),
        "m/b": pytest.approx(2 / 3),
        "7": 0.5,
        "empty": None,
    }
    assert s["item_accuracy"]["y"] == pytest.approx(1 / 3)
    json.dumps(s, allow_nan=False)  # serialisable as strict JSON


def test_summary_flags_duplicates():
    df = pd.DataFrame([[1, 0], [0, 1]], index=["a", "a"], columns=["i", "i"])
    s = matrix_summary(df)
    assert s["duplicate_models"] == ["a"] and s["duplicate_items"] == ["i"]


def test_bad_value_names_the_cell_and_writes_nothing(tmp_path):
    df = _frame()
    df.loc["m/b", "y"] = 2
    with pytest.raises(DataError, match=r"value 2.0 at row 'm/b', column 'y'"):
        write_matrix(df, tmp_path / "m.parquet")
    assert list(tmp_path.iterdir()) == []


def test_reserved_item_name_is_refused(tmp_path):
    df = pd.DataFrame([[1.0], [0.0]], index=["a", "b"], columns=["model"])
    with pytest.raises(DataError, match="reserved"):
        write_matrix(df, tmp_path / "m.parquet")


def test_read_matrix_refuses_foreign_parquet(tmp_path):
    path = tmp_path / "other.parquet"
    pd.DataFrame({"model": ["a"], "0": [1]}).to_parquet(path)
    with pytest.raises(DataError, match="not a cbmm response matrix"):
        read_matrix(path)
    with pytest.raises(DataError, match="no such matrix file"):
        read_matrix(tmp_path / "absent.parquet")


def test_atomic_path_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "s.json"
    write_json({"v": 1}, target)
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]
