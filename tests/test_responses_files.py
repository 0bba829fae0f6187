"""Response files: wide and long CSV/Parquet tables through cbmm.data.read_table,
read_responses and load_local, with the file and the line, row, column or record named."""

import numpy as np
import pandas as pd
import pytest

import cbmm
from cbmm.data import DataError, load_local, read_responses, read_table

LONG_CSV = "model,item,correct,seconds\nm0,q1,1,0.5\nm0,q2,0,0.7\nm1,q1,0,0.1\nm1,q3,1,2.0\n"
# the same responses as a wide table (ids in order of first appearance)
WIDE = pd.DataFrame([[1.0, 0.0, np.nan], [0.0, np.nan, 1.0]], index=["m0", "m1"],
                    columns=["q1", "q2", "q3"])


def _write(path, text):
    path.write_text(text)
    return path


def test_long_csv_is_recognised_by_its_header_and_equals_the_wide_table(tmp_path):
    frame = read_table(_write(tmp_path / "log.csv", LONG_CSV))
    assert list(frame.columns) == ["model", "item", "correct"]  # extra columns dropped
    assert list(frame.index) == [2, 3, 4, 5] and frame.index.name == "line"
    out = load_local(tmp_path / "log.csv")
    pd.testing.assert_frame_equal(out, WIDE.rename_axis("model"))
    responses = read_responses(tmp_path / "log.csv", storage="sparse")
    assert responses.storage == "sparse"
    np.testing.assert_array_equal(responses.indptr, [0, 2, 4])
    np.testing.assert_array_equal(responses.indices, [0, 1, 0, 2])
    np.testing.assert_array_equal(responses.values, [1, -1, -1, 1])


def test_long_table_with_other_column_names_and_ids_that_look_like_numbers(tmp_path):
    path = _write(tmp_path / "log.csv", "llm,question,score\n007,1,1\n1e3,1,0\n007,2,0\n")
    with pytest.raises(DataError, match=r"a long table needs the columns \['model', 'item', "
                                        r"'correct'\]; the header lacks"):
        read_table(path, layout="long")  # the default names are not in the header
    out = load_local(path, model_column="llm", item_column="question", correct_column="score")
    assert list(out.index) == ["007", "1e3"] and list(out.columns) == ["1", "2"]
    np.testing.assert_array_equal(out.to_numpy(), [[1, 0], [0, np.nan]])


@pytest.mark.parametrize("text,message", [
    (LONG_CSV + "m1,q2,7,0.1\n", r"log.csv: value 7 at line 6 \(model 'm1', item 'q2'\)"),
    (LONG_CSV + ",q2,1,0.1\n", r"log.csv: 1 record\(s\) without a model id, first at line 6"),
    (LONG_CSV + "m1,q1,1,0.3\n", (r"log.csv: 1 duplicated cell\(s\), first: row 1 \('m1'\), "
                                  r"column 0 \('q1'\) at line 4, line 6")),
    (LONG_CSV + "m1,q2,-1,0.1\n", (r"log.csv: ambiguous coding: .*-1 \(1 cell\(s\), first at "
                                   r"line 6 \(model 'm1', item 'q2'\)\)")),
    (LONG_CSV + "m1,q2\n", r"log.csv, line 6: 2 fields, expected 4 \(as in the header\)"),
    ("model,item,correct\n", r"log.csv: no records after the header"),
    (LONG_CSV + "m2,q1,,0.1\n", r"log.csv: 1 model row\(s\) with no observed entry: 'm2'"),
])
def test_long_csv_errors_name_the_file_and_line(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        load_local(_write(tmp_path / "log.csv", text))


def test_empty_correct_means_not_observed_and_coding_can_be_stated(tmp_path):
    path = _write(tmp_path / "log.csv",
                  "model,item,correct\na,x,1\na,y,\na,y,1\nb,x,-1\nb,y,0\n")
    with pytest.raises(DataError, match="ambiguous coding"):
        load_local(path)
    out = load_local(path, coding="signed")  # the empty record and the 0 are not observed
    np.testing.assert_array_equal(out.to_numpy(), [[1, 1], [0, np.nan]])


@pytest.mark.parametrize("ids", ["str", "int", "category"])
def test_long_parquet(tmp_path, ids):
    frame = pd.DataFrame({"model": ["m0", "m0", "m1", "m1"], "item": ["q1", "q2", "q1", "q3"],
                          "correct": [1.0, 0.0, 0.0, 1.0]})
    if ids == "int":
        frame = frame.assign(model=[10, 10, 11, 11], item=[1, 2, 1, 3])
    if ids == "category":
        frame = frame.astype({"model": "category", "item": "category"})
    frame.to_parquet(tmp_path / "log.parquet")
    out = load_local(tmp_path / "log.parquet")
    np.testing.assert_array_equal(out.to_numpy(), WIDE.to_numpy())
    assert list(out.index) == [str(m) for m in frame["model"].unique()]  # ids are text


def test_wide_parquet_label_rules(tmp_path):
    values = {"q0": [1.0, 0.0, None], "q1": [0, 1, 1]}
    stored = tmp_path / "stored.parquet"  # written from a labelled DataFrame: the stored index
    pd.DataFrame(values, index=pd.Index(["a", "b", "c"], name="llm")).to_parquet(stored)
    named = tmp_path / "named.parquet"  # a column 'model', anywhere
    pd.DataFrame({**values, "model": ["a", "b", "c"]}).to_parquet(named)
    first = tmp_path / "first.parquet"  # a first column of strings
    pd.DataFrame({"llm": ["a", "b", "c"], **values}).to_parquet(first)
    for path in (stored, named, first):
        out = load_local(path)
        assert list(out.index) == ["a", "b", "c"] and list(out.columns) == ["q0", "q1"]
    numbers = tmp_path / "numbers.parquet"  # no labels anywhere: refused, not the first item
    pd.DataFrame({**values, "id": [5, 6, 7]}).to_parquet(numbers)
    with pytest.raises(DataError, match=r"numbers.parquet: no model labels: .* the first column "
                                        r"'q0' holds numbers .*label_column"):
        load_local(numbers)
    out = load_local(numbers, label_column="id")
    assert list(out.index) == ["5", "6", "7"] and list(out.columns) == ["q0", "q1"]


def test_wide_files_duplicate_labels_and_other_errors(tmp_path):
    with pytest.raises(DataError, match=r"d.csv: duplicate model labels: 'm0' \(lines 2, 4\)"):
        load_local(_write(tmp_path / "d.csv", ",a,b\nm0,1,0\nm1,0,1\nm0,1,1\n"))
    # a table written without its model labels: the first item's answers taken for them
    with pytest.raises(DataError, match=r"n.csv: duplicate model labels: .*these look like "
                                        r"answers: a table needs its model labels"):
        load_local(_write(tmp_path / "n.csv", "a,b,c\n1,0,1\n0,1,1\n1,1,0\n"))
    with pytest.raises(DataError, match=r"t.csv: item column 2 has no header \(a comma at "
                                        "the end of each line"):
        load_local(_write(tmp_path / "t.csv", "model,a,\nm0,1,\nm1,0,\n"))
    with pytest.raises(DataError, match="h.csv: no model rows after the header"):
        load_local(_write(tmp_path / "h.csv", ",a,b\n"))
    for name, text in (("h2.csv", ",a,b"), ("h3.csv", ",a,b\r\n")):  # no final line feed
        with pytest.raises(DataError, match=f"{name}: no model rows after the header"):
            load_local(_write(tmp_path / name, text))
    for name, text in (("c.csv", ",a,b\rm0,1,0\rm1,0,1\r"), ("c2.csv", ",a,b\r")):
        with pytest.raises(DataError, match=f"{name}: its lines end in a carriage return "
                                            "alone"):
            load_local(_write(tmp_path / name, text))
    with pytest.raises(DataError, match="a directory; expected a CSV or Parquet file"):
        load_local(tmp_path)
    with pytest.raises(DataError, match=r"s.csv: ambiguous coding: .*-1 \(1 cell\(s\), first at "
                                        r"line 3 \(model 'm1', item 'b'\)\)"):
        load_local(_write(tmp_path / "s.csv", ",a,b\nm0,1,0\nm1,0,-1\n"))
    with pytest.raises(DataError, match="layout must be"):
        read_table(tmp_path / "s.csv", layout="tall")
    with pytest.raises(DataError, match="not UTF-8 text"):
        (tmp_path / "l.csv").write_bytes(b",a\nm\xe9,1\nm1,0\n")
        load_local(tmp_path / "l.csv")


def test_a_table_with_a_label_column_is_read_as_wide(tmp_path):
    path = _write(tmp_path / "w.csv", "name,model,item,correct\nx,1,0,1\ny,0,0,0\nz,0,1,1\n")
    wide = load_local(path, label_column="name")
    assert list(wide.index) == ["x", "y", "z"]
    assert list(wide.columns) == ["model", "item", "correct"]
    long = load_local(path)  # no label column: the header names a long table
    assert list(long.index) == ["1", "0"] and list(long.columns) == ["0", "1"]


# ---- ordinary files that pandas or Arrow would misread ------------------------------------

def test_a_byte_order_mark_does_not_hide_the_header(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(b"\xef\xbb\xbf" + LONG_CSV.encode())
    pd.testing.assert_frame_equal(load_local(path), WIDE.rename_axis("model"))
    path.write_bytes(b"\xef\xbb\xbf" + b",q1,q2\nm0,1,0\nm1,0,1\n")
    assert list(load_local(path).columns) == ["q1", "q2"]


@pytest.mark.parametrize("ending", ["\n", "\n\n\n", "\r\n", "\r\n\r\n"])
def test_blank_lines_may_end_a_file(tmp_path, ending):
    wide = _write(tmp_path / "w.csv", ",q1,q2\nm0,1,0\nm1,0,1" + ending)
    assert load_local(wide).shape == (2, 2)
    long = _write(tmp_path / "l.csv", LONG_CSV + ending)
    assert load_local(long).shape == (2, 3)


def test_a_blank_line_inside_a_table_is_named(tmp_path):
    with pytest.raises(DataError, match=r"w.csv, line 3: empty line inside the table"):
        load_local(_write(tmp_path / "w.csv", ",q1,q2\nm0,1,0\n\nm1,0,1\n\n"))


def test_models_and_items_named_like_missing_values_are_names(tmp_path):
    """NA, None and null name models (and items); as answers they are missing."""
    wide = _write(tmp_path / "w.csv", ",NA,q2\nNA,1,NA\nNone,0,1\nnull,,0\n")
    out = load_local(wide)
    assert list(out.index) == ["NA", "None", "null"] and list(out.columns) == ["NA", "q2"]
    np.testing.assert_array_equal(out.to_numpy(), [[1, np.nan], [0, 1], [np.nan, 0]])
    long = _write(tmp_path / "l.csv",
                  "model,item,correct\nNA,null,1\nNone,null,0\nNA,q2,NA\nNone,q2,1\n")
    out = load_local(long)
    assert list(out.index) == ["NA", "None"] and list(out.columns) == ["null", "q2"]
    np.testing.assert_array_equal(out.to_numpy(), [[1, np.nan], [0, 1]])
    with pytest.raises(DataError, match=r"l2.csv: 1 record\(s\) without an? item id, first at "
                                        r"line 3"):
        load_local(_write(tmp_path / "l2.csv", "model,item,correct\na,x,1\nb,,0\n"))


def test_quoted_labels_may_hold_line_breaks_and_commas(tmp_path):
    wide = _write(tmp_path / "w.csv", ',"q,1",q2\n"org/m\n0",1,0\nm1,0,1\n')
    out = load_local(wide)
    assert list(out.index) == ["org/m\n0", "m1"] and list(out.columns) == ["q,1", "q2"]
    long = _write(tmp_path / "l.csv", 'model,item,correct\n"m\n0",q1,1\nm1,q1,0\n"m\n0",q2,0\n')
    out = load_local(long)
    assert list(out.index) == ["m\n0", "m1"]
    np.testing.assert_array_equal(out.to_numpy(), [[1, 0], [0, np.nan]])
    with pytest.raises(DataError, match=r"r.csv, line 4: 2 fields, expected 3"):
        load_local(_write(tmp_path / "r.csv", ',q1,q2\n"m\n0",1,0\nm1,0\n'))


@pytest.mark.parametrize("text,line", [(b",q1,q2\nm\x000,1,0\nm1,0,1\n", 2),
                                       (b',"q1",q2\nm0,1,0\nm\x001,0,1\n', 3)])
def test_a_nul_byte_is_refused_not_cut(tmp_path, text, line):
    path = tmp_path / "n.csv"
    path.write_bytes(text)
    with pytest.raises(DataError, match=rf"n.csv, line {line}: a NUL byte"):
        load_local(path)


def test_a_parquet_file_with_a_repeated_column_is_one_line(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_arrays([pa.array(["a", "b"]), pa.array([1, 0]), pa.array([0, 1])],
                                 names=["model", "q1", "q1"])
    pq.write_table(table, tmp_path / "d.parquet")
    with pytest.raises(DataError, match=r"^\S*d.parquet: column name\(s\) \['q1'\] occur more "
                                        r"than once; [^\n]*$"):
        load_local(tmp_path / "d.parquet")


def test_a_multiindex_table_is_refused_saying_what_to_do(tmp_path):
    frame = pd.DataFrame([[1, 0], [0, 1]], index=["a", "b"],
                         columns=pd.MultiIndex.from_tuples([("math", "q1"), ("math", "q2")]))
    frame.to_parquet(tmp_path / "m.parquet")
    with pytest.raises(DataError, match="MultiIndex"):
        load_local(tmp_path / "m.parquet")
    with pytest.raises(ValueError, match=r"the item ids have 2 levels \(a MultiIndex\)"):
        cbmm.fit(frame)


def test_a_headerless_file_gets_a_hint(tmp_path):
    with pytest.raises(DataError, match="the first line looks like data, not a header"):
        load_local(_write(tmp_path / "h.csv", "m0,1,0,1\nm1,0,1,1\nm2,1,1,0\n"))


def test_true_and_false_beside_1_and_0_read_alike_in_wide_and_long_tables(tmp_path):
    """Arrow reads a long table's column of true, 1, FALSE and 0 as answers; a wide column
    of the same was text for pandas, and refused ("value 'True'")."""
    wide = _write(tmp_path / "w.csv", "model,i1,i2\nm1,True,1\nm2,1,false\nm3,0,FALSE\n")
    long = _write(tmp_path / "l.csv", "model,item,correct\nm1,i1,True\nm2,i1,1\nm3,i1,0\n"
                                      "m1,i2,1\nm2,i2,false\nm3,i2,FALSE\n")
    expected = pd.DataFrame({"i1": [1.0, 1.0, 0.0], "i2": [1.0, 0.0, 0.0]},
                            index=["m1", "m2", "m3"])
    for path in (wide, long):
        frame = read_responses(path).to_frame()
        pd.testing.assert_frame_equal(frame.loc[expected.index, expected.columns], expected,
                                      check_names=False)
    with pytest.raises(DataError, match="value .yes. at line 2"):  # other words stay refused
        read_responses(_write(tmp_path / "y.csv", "model,i1\nm1,yes\nm2,1\n"))
