"""Reading users' CSV/Parquet tables: clear errors, no silent repair."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from cbmm.data import DataError, build_dataset, load_local, read_matrix, read_responses, read_table
from cbmm.data.matrix import summary_path


def _write(path, text):
    path.write_text(text)
    return path


def test_csv_with_missing_cells_and_label_column(tmp_path):
    path = _write(tmp_path / "r.csv", "id,q1,name,q2\n1,0,alpha,1\n0,,beta,1\n")
    df = load_local(path, label_column="name")
    assert df.index.tolist() == ["alpha", "beta"] and df.columns.tolist() == ["id", "q1", "q2"]
    np.testing.assert_array_equal(df.to_numpy(), [[1, 0, 1], [0, np.nan, 1]])


def test_numeric_looking_labels_stay_strings(tmp_path):
    path = _write(tmp_path / "r.csv", ",0,1\n007,1,0\n1e3,0,1\n")
    assert read_table(path).index.tolist() == ["007", "1e3"]


@pytest.mark.parametrize("text, separators", [
    ("model;AMC, 2023, #1;AMC, 2023, #2\nm1;1;0\nm2;0;1\n", "semicolons"),
    ("model;q1;q2\nm1;1;0\nm2;0;1\n", "semicolons"),
    ("model\tq1\tq2\nm1\t1\t0\nm2\t0\t1\n", "tabs"),
])
def test_a_file_separated_otherwise_is_named_so(tmp_path, text, separators):
    """A semicolon-separated file whose labels hold commas was 'duplicate item ids in the
    header: [' 2023']', with no word of its separator."""
    path = _write(tmp_path / "r.csv", text)
    with pytest.raises(DataError, match=f"its first row holds {separators} and no comma: the "
                                        "file must be comma-separated"):
        read_table(path)


def test_a_compressed_file_or_a_workbook_is_named_for_what_it_is(tmp_path):
    """A gzip file or an .xlsx workbook renamed .csv was "not UTF-8 text ('utf-8' codec
    can't decode byte 0x8b ...)"."""
    import gzip
    import zipfile

    text = b"model,q1,q2\nm1,1,0\nm2,0,1\n"
    (tmp_path / "packed.csv").write_bytes(gzip.compress(text))
    with pytest.raises(DataError, match=r"packed.csv: a gzip-compressed file, not CSV text: "
                                        r"decompress it first \(gunzip\)$"):
        read_table(tmp_path / "packed.csv")
    with zipfile.ZipFile(tmp_path / "book.csv", "w") as book:  # an .xlsx is a ZIP archive
        book.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(DataError, match=r"book.csv: a ZIP archive \(an Excel .xlsx workbook\?\), "
                                        r"not CSV text: save it as CSV \(UTF-8\)$"):
        read_table(tmp_path / "book.csv")
    (tmp_path / "r.csv.gz").write_bytes(gzip.compress(text))
    with pytest.raises(DataError, match=r"unsupported file type '.gz' \(compressed: decompress "
                                        r"it first\); expected .csv or .parquet"):
        read_table(tmp_path / "r.csv.gz")
    # text that is not UTF-8 and no known format keeps the decoder's words
    (tmp_path / "latin.csv").write_bytes("model,q\u00e9\nm1,1\nm2,0\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin.csv: not UTF-8 text \('utf-8' codec"):
        read_table(tmp_path / "latin.csv")


def test_duplicate_item_ids_are_refused(tmp_path):
    path = _write(tmp_path / "r.csv", ",a,b,a\nm1,1,0,1\nm2,0,1,0\n")
    with pytest.raises(DataError, match=r"duplicate item ids in the header: \['a'\]"):
        read_table(path)


def test_labels_alike_but_for_spaces_around_them_are_refused(tmp_path):
    # kept as written they were two items (or models): " 3" beside "3", without a word
    path = _write(tmp_path / "r.csv", ",3,4, 3\nm1,1,0,1\nm2,0,1,0\n")
    with pytest.raises(DataError, match=r"r.csv: item ids '3' and ' 3' differ only by spaces "
                                        r"around them \(one item twice\?\)"):
        read_table(path)
    path = _write(tmp_path / "m.csv", ",a,b\nm1 ,1,0\nm2,0,1\nm1,1,1\n")
    with pytest.raises(DataError, match=r"m.csv: model labels 'm1 ' and 'm1' differ only by "
                                        r"spaces around them"):
        read_table(path)
    # spaces alone are kept, as written
    path = _write(tmp_path / "ok.csv", ", a,b\n m1,1,0\nm2,0,1\n")
    assert list(read_table(path).columns) == [" a", "b"]


@pytest.mark.parametrize("first,message", [
    ("sep=,", r"line 1 is 'sep=,', a spreadsheet's note of the separator, not the header; "
              r"delete that line"),
    ("# exported 2024-05-01, by hand", r"line 1 is a comment \(it starts with '#'\), which is "
                                       r"not read; delete it, or if it is the header"),
    ("#", r"line 1 is a comment"),
])
def test_a_line_above_the_header_is_named(tmp_path, first, message):
    path = _write(tmp_path / "r.csv", f"{first}\n,a,b\nm1,1,0\nm2,0,1\n")
    with pytest.raises(DataError, match="r.csv: " + message):
        read_table(path)
    # a label column headed "#" is a header
    path = _write(tmp_path / "ok.csv", "#,a,b\nm1,1,0\nm2,0,1\n")
    assert list(read_table(path).columns) == ["a", "b"]


def test_ragged_row_names_the_line(tmp_path):
    path = _write(tmp_path / "r.csv", ",a,b\nm1,1,0\nm2,0\n")
    with pytest.raises(DataError, match=r"r.csv, line 3: 2 fields, expected 3 \(one label "
                                        r"plus 2 items, as in the header\)$"):
        read_table(path)
    path = _write(tmp_path / "cut.csv", ",a,b\nm1,1,0\nm2,0")   # the file cut mid-line
    with pytest.raises(DataError, match=r"cut.csv, line 3: 2 fields, expected 3 \(one label "
                                        r"plus 2 items, as in the header; the file ends in "
                                        r"the middle of this line: cut short\?\)"):
        read_table(path)


def test_bad_value_names_file_line_and_column(tmp_path):
    path = _write(tmp_path / "r.csv", ",a,b\nm1,1,0\nm2,0,2\n")
    with pytest.raises(
        DataError, match=r"r.csv: value 2(\.0)? at line 3 \(model 'm2', item 'b'\)"
    ):
        load_local(path)
    # a quoted line break: lines and records part, so the record is named by its row
    path = _write(tmp_path / "q.csv", ',a,b\n"m\n1",1,0\nm2,0,2\n')
    with pytest.raises(DataError, match=r"q.csv: value 2(\.0)? at row 1 \('m2'\), column 1"):
        load_local(path)


def test_a_header_with_a_quoted_line_break_before_quoted_commas_reads_as_pandas_does(tmp_path):
    """An item id holding a line break (question text as ids) and a model label holding a
    comma: the header was skipped as one line, and the quotes after it were misread
    ("Expected 3 fields in line 3, saw 4")."""
    path = _write(tmp_path / "q.csv", ',"multi\nline",b\n"a,b",1,0\nm2,,1\n"say ""x""",0,0\n')
    frame = read_table(path)
    expected = pd.read_csv(path, index_col=0)
    assert list(frame.columns) == ["multi\nline", "b"] == list(expected.columns)
    assert list(frame.index) == ["a,b", "m2", 'say "x"']
    np.testing.assert_array_equal(frame.to_numpy(dtype=float), expected.to_numpy(dtype=float))


def test_a_table_that_cannot_tell_the_models_apart_is_refused_by_name(tmp_path):
    # the workflow's local datasets are built by load_local: refused there, not at the fit
    path = _write(tmp_path / "ones.csv", ",a,b\nm1,1,1\nm2,1,\nm3,1,1\n")
    with pytest.raises(DataError, match=r"ones.csv: every observed answer is correct: the "
                                        r"answers cannot tell the models apart"):
        load_local(path)
    path = _write(tmp_path / "signed.csv", ",a,b\nm1,1,0\nm2,0,1\n")
    with pytest.raises(DataError, match=r"signed.csv: every observed answer is correct "
                                        r"\(coding='signed' reads a 0/1 file's every 0"):
        load_local(path, coding="signed")
    assert load_local(path).shape == (2, 2)   # read as 0/1, it tells them apart


def test_duplicate_model_labels_name_their_lines(tmp_path):
    """Named by 0-based rows (2 and 156 where the file's lines were 4 and 158)."""
    path = _write(tmp_path / "r.csv", ",a,b\nm1,1,0\nm2,0,1\nm1,1,1\n")
    with pytest.raises(DataError, match=r"r.csv: duplicate model labels: 'm1' \(lines 2, 4\)"):
        load_local(path)


def test_a_quoted_file_is_read_without_a_resource_warning(tmp_path):
    """The csv module's text wrapper over the reader's handle was left to the garbage
    collector, which warned of an unclosed file (in a process of its own: the warning
    comes from a finaliser, which pytest would report as a warning, not a failure)."""
    path = _write(tmp_path / "q.csv", ',a,b\n"m\n1",1,0\nm2,0,1\n')
    script = ("import gc, sys; from cbmm.data import read_table; "
              "frame = read_table(sys.argv[1]); gc.collect(); print(list(frame.index))")
    run = subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", script,
                          str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "['m\\n1', 'm2']"
    assert "ResourceWarning" not in run.stderr, run.stderr


def test_empty_label_names_the_line(tmp_path):
    path = _write(tmp_path / "r.csv", ",a,b\nm1,1,0\n,0,1\n")
    with pytest.raises(DataError, match="line 3: empty model label"):
        read_table(path)


def test_signed_coding_is_converted(tmp_path):
    path = _write(tmp_path / "r.csv", ",a,b\nm1,1,-1\nm2,0,1\n")
    np.testing.assert_array_equal(load_local(path, coding="signed").to_numpy(),
                                  [[1, 0], [np.nan, 1]])


def test_unknown_label_column_and_suffix(tmp_path):
    path = _write(tmp_path / "r.csv", ",a\nm1,1\nm2,0\n")
    with pytest.raises(DataError, match="no label column 'who'"):
        read_table(path, label_column="who")
    with pytest.raises(DataError, match="unsupported file type '.xlsx'"):
        read_table(_write(tmp_path / "r.xlsx", "x"))


def test_parquet_table_builds_canonical_dataset(tmp_path):
    src = tmp_path / "in.parquet"
    pd.DataFrame({"llm": ["a", "b", "c"], "q0": [1.0, 0.0, None], "q1": [0, 1, 1]}).to_parquet(src)
    out = build_dataset(
        "mine",
        {"source": "local", "options": {"path": str(src), "label_column": "llm"}},
        tmp_path / "mine.parquet",
        cache_dir=tmp_path / "cache",
    )
    df = read_matrix(out)
    assert df.index.tolist() == ["a", "b", "c"] and df.columns.tolist() == ["q0", "q1"]
    np.testing.assert_array_equal(df.to_numpy(), [[1, 0], [0, 1], [np.nan, 1]])
    assert summary_path(out).name == "mine.summary.json" and summary_path(out).exists()


def test_local_source_options_reach_the_reader(tmp_path):
    # a long table holding both -1 and 0 needs the dataset's `coding` option
    long = pd.DataFrame({"model": ["m1", "m1", "m2", "m2", "m3", "m3"],
                         "item": ["i1", "i2", "i1", "i2", "i1", "i2"],
                         "correct": [1, -1, -1, 1, 0, 1]})
    source = tmp_path / "long.csv"
    long.to_csv(source, index=False)
    out = tmp_path / "out.parquet"
    with pytest.raises(DataError, match="ambiguous coding"):
        build_dataset("x", {"source": "local", "options": {"path": str(source)}}, out,
                      cache_dir=tmp_path / "cache")
    with pytest.raises(DataError, match="options.coding"):
        build_dataset("x", {"source": "local", "options": {"path": str(source), "coding": "01"}},
                      out, cache_dir=tmp_path / "cache")
    assert not out.exists()
    build_dataset("x", {"source": "local", "options": {"path": str(source), "coding": "signed"}},
                  out, cache_dir=tmp_path / "cache")
    matrix = read_matrix(out)
    assert matrix.loc["m1"].tolist() == [1, 0] and matrix.loc["m2"].tolist() == [0, 1]
    assert pd.isna(matrix.loc["m3", "i1"]) and matrix.loc["m3", "i2"] == 1  # signed: 0 = missing


def test_labels_from_parquet_and_long_tables_obey_the_csv_readers_rules(tmp_path):
    """A user's trial: blank labels came in from Parquet and DataFrames (the CSV reader
    refused them), and a long table's 'm1 ' beside 'm1' became two models, shown alike."""
    wide = pd.DataFrame({"q1": [1, 0, 1], "q2": [0, 0, 1]}, index=["m1", "  ", "m3"])
    wide.to_parquet(tmp_path / "w.parquet")
    with pytest.raises(DataError, match=r"w.parquet: row 1 has a blank model label \('  '; 1 "
                                        r"in all\); each needs a name"):
        read_responses(tmp_path / "w.parquet")
    long = pd.DataFrame({"model": ["m1", "m2", ""], "item": ["q1", "q1", "q1"],
                         "correct": [1, 0, 1]})
    long.to_parquet(tmp_path / "l.parquet")
    with pytest.raises(DataError, match=r"l.parquet: row 2 has a blank model id"):
        read_responses(tmp_path / "l.parquet")
    path = _write(tmp_path / "l.csv", "model,item,correct\nm1,q1,1\nm1 ,q2,0\nm2,q1,0\n")
    with pytest.raises(DataError, match=r"l.csv: model ids 'm1' and 'm1 ' differ only by "
                                        r"spaces around them \(one model twice\?\)"):
        read_responses(path)


def test_a_long_csv_reads_the_wide_readers_missing_markers(tmp_path):
    """'None' (an f-string's None) and '<NA>' (pandas') were wrong answers in a long CSV and
    missing in a wide one."""
    records = "model,item,correct\nm1,q1,1\nm1,q2,{}\nm2,q1,0\nm2,q2,1\nm3,q1,1\nm3,q2,{}\n"
    path = _write(tmp_path / "l.csv", records.format("None", "<NA>"))
    frame = load_local(path)
    expected = load_local(_write(tmp_path / "e.csv", records.format("", "")))
    pd.testing.assert_frame_equal(frame, expected)
    assert frame.isna().sum().sum() == 2


def test_naming_a_long_tables_columns_reads_it_as_long(tmp_path):
    path = _write(tmp_path / "l.csv", "model,item,correct\nm1,q1,1\nm2,q1,0\n")
    # a column named that the file lacks: said so, not read as a wide table
    with pytest.raises(DataError, match=r"l.csv: a long table needs the columns \['name', "
                                        r"'item', 'correct'\]; the header lacks \['name'\]"):
        read_responses(path, model_column="name")
    with pytest.raises(DataError, match=r"item_column='model'.*three different names"):
        read_responses(path, item_column="model")
    # a wide table's option beside a long table's: one of them was ignored
    for options, message in (
            ({"layout": "wide", "model_column": "x"},
             r"layout='wide' with model_column='x' \(--model-column"),
            ({"layout": "long", "label_column": "model"},
             r"layout='long' with label_column='model' \(--label-column"),
            ({"label_column": "model", "item_column": "q"},
             r"label_column='model' .* and item_column='q' .* contradict each other"),
            ({"label_column": "model"},  # read as wide: 'duplicate model labels ... a long
             r"label_column='model' \(--label-column\) reads a wide table, but the header "
             r"has a long table's columns model, item, correct")):   # table?'
        with pytest.raises(DataError, match=message):
            read_responses(path, **options)
    renamed = _write(tmp_path / "r.csv", "name,question,ok\nm1,q1,1\nm2,q1,0\n")
    responses = read_responses(renamed, model_column="name", item_column="question",
                               correct_column="ok")
    assert responses.to_frame().loc[["m1", "m2"], "q1"].tolist() == [1, 0]
    with pytest.raises(TypeError, match="path must be a file path"):
        read_responses(None)


@pytest.mark.parametrize("index", [pd.RangeIndex(100, 103, name="model_id"),
                                   pd.RangeIndex(0, 3, name="model"), pd.RangeIndex(5, 8)])
def test_a_parquet_tables_stored_range_of_labels_is_its_model_labels(tmp_path, index):
    """pandas keeps a RangeIndex as metadata, not a column: a named one, or one that is not
    0, 1, ..., is the user's labels (they were refused as "no stored index", and naming the
    index with label_column failed too); the unnamed 0, 1, ... still is no labels."""
    frame = pd.DataFrame({"q1": [1.0, 0.0, 1.0], "q2": [0.0, 1.0, 1.0]}, index=index)
    path = tmp_path / "r.parquet"
    frame.to_parquet(path)
    labels = [str(v) for v in index]
    assert list(read_table(path).index) == labels
    if index.name:
        assert list(read_table(path, label_column=index.name).index) == labels
    frame.reset_index(drop=True).to_parquet(path)
    with pytest.raises(DataError, match="no model labels: no stored index"):
        read_table(path)


@pytest.mark.parametrize("text", ['{"a": [1, 0]}', '{\n  "a": {"m1": 1}\n}\n',
                                  '{"model":"m1","q1":1}\n{"model":"m2","q1":0}\n',
                                  '[{"model": "m1", "q1": 1}]'])
def test_json_named_csv_is_told_to_be_json(tmp_path, text):
    """JSON in a .csv file was read as CSV: "no model rows after the header", "the header
    has no item columns", or a value '0:0' of a model '{"model":"m1"'."""
    path = _write(tmp_path / "r.csv", text)
    with pytest.raises(DataError, match=r"r.csv: JSON text \(it starts with '[{[]'\), not CSV"):
        read_table(path)
    # a label column headed in brackets is a header
    for header in ("[model]", "[2024] model"):
        path = _write(tmp_path / "ok.csv", f"{header},a,b\nm1,1,0\nm2,0,1\n")
        assert list(read_table(path).columns) == ["a", "b"]


def test_a_path_that_is_no_regular_file_is_named_so():
    """/dev/null exists: "no such file" was wrong there."""
    with pytest.raises(DataError, match=r"/dev/null: not a regular file \(a device, pipe or "
                                        r"socket\)"):
        read_table("/dev/null")
