"""`cbmm data compare`: a rebuilt suite beside the release (models, items, cells)."""

import json

import numpy as np
import pandas as pd
import pytest

from cbmm.data import write_matrix
from cbmm.data.cli import main
from cbmm.data.compare import compare_matrices, read_any_matrix

NAN = np.nan


def _release_csv(path, labels, items, rows):
    """The release's format: header ``,<items>``, labels ``org__name``, empty = missing."""
    lines = ["," + ",".join(items)]
    for label, row in zip(labels, rows, strict=True):
        lines.append(label + "," + ",".join("" if np.isnan(v) else str(int(v)) for v in row))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def pair(tmp_path):
    release = _release_csv(
        tmp_path / "IFEval.csv",
        ["a__m1", "a__m2", "b__gone"],
        [f"ifeval_{k}" for k in range(5)],
        [[1, 0, 1, 1, 0], [0, 0, NAN, 1, 1], [1, 1, 1, 1, 1]],
    )
    rebuilt = pd.DataFrame(
        [[1, 0, 1, 0, 1], [0, NAN, 1, 1, 0], [0, 0, 0, 0, 0]],
        index=pd.Index(["a/m1", "a/m2", "c/new"], name="model"),
        columns=["ifeval_0", "ifeval_1", "ifeval_2", "ifeval_3", "ifeval_5"],
        dtype=float,
    )
    return write_matrix(rebuilt, tmp_path / "IFEval_hub.parquet"), release


def test_models_items_and_cells_side_by_side(pair):
    result = compare_matrices(*map(read_any_matrix, pair))
    assert result["models"] == {"both": 2, "only_rebuilt": ["c/new"], "only_release": ["b__gone"]}
    assert result["items"] == {"both": 4, "only_rebuilt": ["ifeval_5"], "only_release": ["ifeval_4"],
                               "matched_by_position": False}
    # m1: 4 cells in both, ifeval_3 differs; m2: ifeval_0 and ifeval_3 in both, both agree
    assert result["cells"] == {
        "compared": 6,
        "agree": 5,
        "agreement": 5 / 6,
        "observed_only_rebuilt": 1,
        "observed_only_release": 1,
    }
    assert result["per_model"] == {
        "min": 0.75,
        "median": 0.875,
        "n_below_1": 1,
        "lowest": {"a/m1": 0.75, "a/m2": 1.0},
    }
    assert result["duplicate_labels"] == {"rebuilt": [], "release": []}


def test_mmlu_pro_positions_match_the_rebuilt_ids(tmp_path):
    release = pd.DataFrame([[1, 0, 1]], index=["o__m"], columns=["0", "1", "2"], dtype=float)
    rebuilt = pd.DataFrame(
        [[1, 1, 0]], index=["o/m"], columns=["mmlu_pro_0", "mmlu_pro_1", "mmlu_pro_3"], dtype=float
    )
    result = compare_matrices(rebuilt, release)
    # each side's own labels: the release's "2", not the "mmlu_pro_2" it was compared as
    assert result["items"] == {"both": 2, "only_rebuilt": ["mmlu_pro_3"], "only_release": ["2"],
                               "matched_by_position": True}
    assert result["cells"]["compared"] == 2 and result["cells"]["agree"] == 1


def test_cli_prints_a_summary_and_writes_every_label(pair, tmp_path, capsys):
    out = tmp_path / "comparison.json"
    assert main(["data", "compare", str(pair[0]), str(pair[1]), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "models: 2 in both, 1 only in the rebuild, 1 only in the release",
        "items: 4 in both, 1 only in the rebuild, 1 only in the release",
        "cells observed in both: 6, 83.33 % agree; observed only in the rebuild: 1, only in the "
        "release: 1",
        "per model: agreement min 0.7500, median 0.8750; 1 model(s) below 1",
    ]
    assert json.loads(out.read_text())["models"]["only_release"] == ["b__gone"]


def test_cli_names_duplicate_labels_it_compared_by_their_first_row(pair, tmp_path, capsys):
    release = _release_csv(tmp_path / "dup.csv", ["a__m1", "a__m1", "b__gone"],
                           [f"ifeval_{k}" for k in range(5)],
                           [[1, 0, 1, 1, 0], [0, 0, NAN, 1, 1], [1, 1, 1, 1, 1]])
    assert main(["data", "compare", str(pair[0]), str(release)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "duplicate model labels in the release (their first row compared): a__m1"


@pytest.mark.parametrize(
    "name, content, problem",
    [
        ("missing.parquet", None, "no such matrix file"),
        ("missing.csv", None, "no such file"),
        ("matrix.tsv", "x", "expected a .parquet matrix or a release .csv"),
        ("bad.csv", ",i0,i1\nm0,1,2\n", "value 2.0 at row 'm0', column 'i1'"),
        # read as a matrix it named its item ids as answers
        ("long.csv", "model,item,correct\nm0,q1,1\nm0,q2,0\n",
         "long.csv: a long table (columns model, item, correct); compare reads matrices: a "
         "table of answers becomes one with `cbmm data import`"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, pair, name, content, problem):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    out = tmp_path / "comparison.json"
    assert main(["data", "compare", str(pair[0]), str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cbmm data: error: ") and problem in err
    assert not out.exists()
