"""Input layer: coding, validation and storage of responses (cbmm.as_responses, cbmm._ingest).

Property tests draw random matrices in every supported container, dtype, coding and pattern of
missing cells and compare cbmm.as_responses with an independent pure-Python coding of the same
cells: either the same int8 coding and counts, or a ResponseError naming the same first cell.
"""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cbmm
from cbmm import _ingest
from cbmm.registry import get_method
from cbmm.responses import SPARSE_BELOW, ResponseError
from cbmm.simulate import simulate

NAN = math.nan
PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ---- an independent reference: the rules of docs/model.md, cell by cell, in plain Python -------

def _missing(v):
    return v is None or (isinstance(v, float) and math.isnan(v))


def reference(cells, coding):
    """("ok", y rows) or ("bad", (r, c)) / ("ambiguous", None) / ("empty", None) / ("shape", None)
    for a list of rows of Python values."""
    n = len(cells)
    j = len(cells[0]) if n else 0
    if n < 2 or j < 1:
        return "shape", None
    allowed = {None: (0.0, 1.0, -1.0), "binary": (0.0, 1.0), "signed": (0.0, 1.0, -1.0)}[coding]
    seen = set()
    for r, row in enumerate(cells):
        for c, v in enumerate(row):
            if _missing(v):
                continue
            if float(v) not in allowed:
                return "bad", (r, c)
            seen.add(float(v))
    if coding is None and {0.0, -1.0} <= seen:
        return "ambiguous", None
    zero = 0 if coding == "signed" else -1
    y = [[0 if _missing(v) else {1.0: 1, -1.0: -1, 0.0: zero}[float(v)] for v in row]
         for row in cells]
    if any(not any(row) for row in y) or any(not any(col) for col in zip(*y)):
        return "empty", None
    return "ok", y


def check_against_reference(cells, coding, make, labels=(None, None)):
    """as_responses(make(cells)) agrees with the reference (result, counts, or error cell)."""
    kind, detail = reference(cells, coding)
    data = make(cells)
    if kind != "ok":
        with pytest.raises(ResponseError) as info:
            cbmm.as_responses(data, coding=coding)
        message = str(info.value)
        assert "\n" not in message
        if kind == "bad":
            r, c = detail
            rows, cols = labels
            assert f"row {r}" + (f" ({rows[r]!r})" if rows is not None else "") in message
            assert f"column {c}" + (f" ({cols[c]!r})" if cols is not None else "") in message
        else:
            assert {"ambiguous": "ambiguous coding", "empty": "no observed entry",
                    "shape": "at least 2 models"}[kind] in message
        return None
    responses = cbmm.as_responses(data, coding=coding)
    expected = np.array(detail, dtype=np.int8)
    np.testing.assert_array_equal(responses.to_dense().y, expected)
    observed = expected != 0
    assert responses.n_observed == observed.sum()
    assert responses.fully_observed == observed.all()
    with np.errstate(invalid="ignore"):
        for axis in (0, 1):
            np.testing.assert_array_equal(responses.accuracy(axis),
                                          (expected == 1).sum(axis) / observed.sum(axis))
    share = observed.mean()
    assert responses.storage == ("sparse" if share < SPARSE_BELOW else "dense")
    return responses


# ---- strategies -------------------------------------------------------------------------------

PALETTES = {
    "binary": [0.0, 1.0, NAN],
    "signed": [-1.0, 1.0, NAN],
    "paper": [-1.0, 0.0, 1.0, NAN],
    "binary-full": [0.0, 1.0],
    "bad": [0.0, 1.0, NAN, 2.0, 0.5, math.inf, -math.inf, -1.0, 1.0000001],
}


@st.composite
def matrices(draw, palettes=tuple(PALETTES), max_side=7):
    palette = PALETTES[draw(st.sampled_from(palettes))]
    n = draw(st.integers(0, max_side))
    j = draw(st.integers(0, max_side))
    # weight the palette so that most matrices are valid and most rows observed
    cell = st.sampled_from(palette[:2] * 3 + palette)
    return [[draw(cell) for _ in range(j)] for _ in range(n)]


def _float_array(dtype, order="C"):
    def make(cells):
        shape = (len(cells), len(cells[0]) if cells else 0)
        return np.array(cells, dtype=float).reshape(shape).astype(dtype, order=order)
    return make


FLOAT_CONTAINERS = {
    "float64": _float_array(np.float64),
    "float32": _float_array(np.float32),
    "float16": _float_array(np.float16),
    "float64-F": _float_array(np.float64, "F"),
    "big-endian": _float_array(">f8"),
    "strided": lambda cells: np.repeat(_float_array(np.float64)(cells), 2, axis=1)[:, ::2],
    "object-array": lambda cells: _float_array(object)(
        [[None if _missing(v) else v for v in row] for row in cells]),
    "list": lambda cells: [[None if _missing(v) else v for v in row] for row in cells]
    if cells and cells[0] else np.zeros((len(cells), 0)),
    "masked": lambda cells: _masked(_float_array(np.float64)(cells)),
    "frame": lambda cells: pd.DataFrame(_float_array(np.float64)(cells)),
    "frame-object": lambda cells: pd.DataFrame(_float_array(np.float64)(cells)).astype(object),
    "frame-nullable": lambda cells: pd.DataFrame(_float_array(np.float64)(cells)).astype("Float64"),
    "frame-columns": lambda cells: _mixed_frame(cells),
}
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]


def _masked(values):
    return np.ma.masked_where(np.isnan(values), values)


def _mixed_frame(cells):
    """One column per dtype in turn: float64, object, float32, nullable Float64."""
    values = _float_array(np.float64)(cells)
    frame = pd.DataFrame(values)
    kinds = [np.float64, object, np.float32, "Float64"]
    return frame.astype({k: kinds[k % 4] for k in range(values.shape[1])})


# ---- property tests ---------------------------------------------------------------------------

@PROPERTY
@given(cells=matrices(), container=st.sampled_from(sorted(FLOAT_CONTAINERS)),
       coding=st.sampled_from([None, None, "binary", "signed"]))
def test_float_containers_agree_with_the_reference(cells, container, coding):
    if container == "float16":  # 1.0000001 is 1.0 in half precision
        cells = [[2.0 if v == 1.0000001 else v for v in row] for row in cells]
    check_against_reference(cells, coding, FLOAT_CONTAINERS[container])


@PROPERTY
@given(cells=matrices(palettes=("binary-full", "paper", "signed")),
       dtype=st.sampled_from(INT_DTYPES), coding=st.sampled_from([None, "binary", "signed"]),
       order=st.sampled_from("CF"))
def test_integer_dtypes_agree_with_the_reference(cells, dtype, coding, order):
    cells = [[0.0 if _missing(v) else v for v in row] for row in cells]
    if dtype == "bool" or dtype.startswith("uint"):
        cells = [[abs(v) for v in row] for row in cells]  # representable values only
    check_against_reference(cells, coding, _float_array(dtype, order))


@PROPERTY
@given(cells=matrices(), coding=st.sampled_from([None, "binary", "signed"]))
def test_labelled_frames_name_the_cell_by_its_labels(cells, coding):
    n, j = len(cells), len(cells[0]) if cells else 0
    rows, cols = [f"m{i}" for i in range(n)], [f"i{k}" for k in range(j)]
    check_against_reference(
        cells, coding,
        lambda c: pd.DataFrame(_float_array(np.float64)(c), index=rows, columns=cols),
        labels=(rows, cols))


@PROPERTY
@given(cells=matrices(palettes=("paper",)))
def test_ambiguous_matrices_raise_unless_the_coding_is_stated(cells):
    values = _float_array(np.float64)(cells)
    kind, _ = reference(cells, None)
    both = (values == -1).any() and (values == 0).any()
    if kind in ("shape", "empty"):
        return
    if both:
        with pytest.raises(ResponseError, match="ambiguous coding"):
            cbmm.as_responses(values)
    signed = reference(cells, "signed")
    if signed[0] == "ok":
        np.testing.assert_array_equal(
            cbmm.as_responses(values, coding="signed").to_dense().y, signed[1])


@PROPERTY
@given(cells=matrices(palettes=("binary", "signed", "binary-full")),
       coding=st.sampled_from([None, "binary", "signed"]))
def test_scipy_sparse_stored_cells_are_the_observed_ones(cells, coding):
    def make(c):
        values = _float_array(np.float64)(c)
        stored = ~np.isnan(values)
        rows, cols = np.nonzero(stored)
        return scipy.sparse.coo_array((values[stored], (rows, cols)), shape=values.shape)

    check_against_reference(cells, coding, make)


@PROPERTY
@given(cells=matrices(palettes=("binary", "signed", "paper", "bad")),
       storage=st.sampled_from(["dense", "sparse"]))
def test_dense_and_sparse_storage_round_trip(cells, storage):
    kind, expected = reference(cells, "signed")
    if kind != "ok":
        return
    values = _float_array(np.float64)(cells)
    responses = cbmm.as_responses(values, coding="signed", storage=storage)
    assert responses.storage == storage
    dense, sparse = responses.to_dense(), responses.to_sparse()
    np.testing.assert_array_equal(dense.y, expected)
    canonical = scipy.sparse.csr_array(np.array(expected, dtype=np.int8))
    np.testing.assert_array_equal(sparse.indptr, canonical.indptr)
    np.testing.assert_array_equal(sparse.indices, canonical.indices)
    np.testing.assert_array_equal(sparse.values, canonical.data)
    np.testing.assert_array_equal(sparse.to_dense().y, expected)
    for axis in (0, 1):
        np.testing.assert_array_equal(dense.accuracy(axis), sparse.accuracy(axis))
    np.testing.assert_array_equal(dense.degenerate_items(), sparse.degenerate_items())
    np.testing.assert_array_equal(dense.degenerate_models(), sparse.degenerate_models())
    np.testing.assert_array_equal(sparse.observed.toarray(), dense.observed)
    pd.testing.assert_frame_equal(dense.to_frame(), sparse.to_frame())


def test_a_signed_matrix_without_a_wrong_answer_warns_that_every_answer_is_correct():
    """A 0/1 matrix read as signed (every 0 missing, every answer correct) is likely a
    mistake; a signed one whose 0s are unanswered items is not (a strong new model)."""
    for data, zeros in ((np.array([[1, 0], [0, 1]]), 2),
                        (pd.DataFrame([[1.0, np.nan], [0.0, 1.0]]), 1)):
        with pytest.warns(cbmm.CodingWarning, match=f"coding 'signed' reads its {zeros} "
                                                    r"cell\(s\) of 0 as missing, and it holds "
                                                    "no -1"):
            responses = cbmm.as_responses(data, coding="signed")
        assert responses.n_observed == 2 and (responses.to_dense().y >= 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cbmm.as_responses(np.array([[1, 0], [-1, 1]]), coding="signed")
        cbmm.as_responses(np.array([[1, 0], [0, 1]]), coding="binary")


def _same_pattern_pairs(rows):
    """Pairs (i, k), i < k, of equal rows, by comparing them as tuples."""
    rows = [tuple(r) for r in rows]
    return {(i, k) for i in range(len(rows)) for k in range(i + 1, len(rows)) if rows[i] == rows[k]}


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1), shape=st.tuples(st.integers(2, 12), st.integers(1, 9)),
       copies=st.integers(0, 4), storage=st.sampled_from(["dense", "sparse"]))
def test_answer_patterns_group_exactly_the_identical_rows_and_columns(seed, shape, copies,
                                                                        storage):
    rng = np.random.default_rng(seed)
    y = rng.choice(np.array([-1, 0, 1], dtype=np.int8), size=shape, p=[0.4, 0.3, 0.3])
    for _ in range(copies):  # planted copies of a row and of a column
        y[rng.integers(shape[0])] = y[rng.integers(shape[0])]
        y[:, rng.integers(shape[1])] = y[:, rng.integers(shape[1])]
    y[:, 0] = np.where(y[:, 0] == 0, 1, y[:, 0])  # no empty row or column
    y[0] = np.where(y[0] == 0, -1, y[0])
    y[0, 0] = -1  # a wrong answer: 0 is missing in the signed coding
    responses = cbmm.as_responses(y, coding="signed", storage=storage)
    for axis, lines in ((1, y), (0, y.T)):
        groups = responses.answer_patterns(axis)
        expected = _same_pattern_pairs(lines)
        if groups is None:
            assert not expected
            continue
        found = {(i, k) for i in range(len(lines)) for k in range(i + 1, len(lines))
                 if groups[i] == groups[k]}
        assert found == expected and expected


@st.composite
def long_tables(draw):
    """Records (model, item, correct) over small id pools, with NaN records and duplicates."""
    models = draw(st.lists(st.sampled_from(["a", "b", "c", "d", 7, 8]), min_size=1, max_size=30))
    items = draw(st.lists(st.sampled_from(["q1", "q2", "q3", 10, 11]), min_size=len(models),
                          max_size=len(models)))
    palette = PALETTES[draw(st.sampled_from(["binary", "signed", "paper", "bad"]))]
    correct = draw(st.lists(st.sampled_from(palette), min_size=len(models),
                            max_size=len(models)))
    return list(zip(models, items, correct))


def long_reference(records, coding):
    """The reference outcome of a long table: fewer than 2 model ids first, then bad values
    (record number), an ambiguous coding, duplicated cells among the kept records, then the wide
    rules on the matrix of the ids in first-appearance order."""
    rows = list(dict.fromkeys(m for m, _, _ in records))
    cols = list(dict.fromkeys(i for _, i, _ in records))
    if len(rows) < 2:
        return "shape", None
    allowed = {None: (0, 1, -1), "binary": (0, 1), "signed": (0, 1, -1)}[coding]
    values = [v for _, _, v in records]
    bad = [k for k, v in enumerate(values) if not _missing(v) and float(v) not in allowed]
    if bad:
        return "bad", bad[0]
    seen = {float(v) for v in values if not _missing(v)}
    if coding is None and {0.0, -1.0} <= seen:
        return "ambiguous", None
    kept = [(m, i) for m, i, v in records
            if not _missing(v) and not (coding == "signed" and v == 0)]
    if len(set(kept)) < len(kept):
        return "duplicate", None
    cells = [[NAN] * len(cols) for _ in rows]
    for m, i, v in records:
        if not _missing(v) and not (coding == "signed" and v == 0):
            cells[rows.index(m)][cols.index(i)] = v
    return reference(cells, coding)[0], (rows, cols, cells)


@PROPERTY
@given(records=long_tables(), coding=st.sampled_from([None, "binary", "signed"]))
def test_long_tables_agree_with_the_wide_reference(records, coding):
    frame = pd.DataFrame(records, columns=["model", "item", "correct"])
    kind, detail = long_reference(records, coding)
    if kind != "ok":
        message = {"bad": f"at row {detail} \\(model", "ambiguous": "ambiguous coding",
                   "duplicate": "duplicated cell", "empty": "no observed entry",
                   "shape": "at least 2 models"}[kind]
        with pytest.raises(ResponseError, match=message):
            cbmm.as_responses(frame, coding=coding)
        return
    rows, cols, cells = detail
    responses = cbmm.as_responses(frame, coding=coding)
    assert list(responses.row_labels) == rows and list(responses.col_labels) == cols
    wide = cbmm.as_responses(pd.DataFrame(cells, index=rows, columns=cols), coding=coding,
                             storage=responses.storage)
    np.testing.assert_array_equal(responses.to_dense().y, wide.to_dense().y)
    # and back: the long form (1/0) of the result gives the same responses
    again = cbmm.as_responses(responses.to_long())
    pd.testing.assert_frame_equal(again.to_frame().loc[rows, cols], responses.to_frame())


# ---- the cases of issue 11 --------------------------------------------------------------------

def test_one_minus_one_in_a_binary_matrix_is_refused_not_recoded():
    """Issue 11.1: one -1 in a 0/1 file used to turn every 0 into "missing" (15 cells -> 9)."""
    values = np.array([[1, 0, 1, 0, 1], [0, 1, 1, 0, 1], [1, 1, 0, -1, 0]], dtype=float)
    with pytest.raises(ResponseError, match=r"ambiguous coding.*-1 \(1 cell\(s\), first at "
                                            r"row 2, column 3\).*0 \(6 cell\(s\), first at "
                                            r"row 0, column 1; row 0, column 3; row 1, column 0"):
        cbmm.as_responses(values)
    with pytest.raises(ResponseError, match=r"value -1\.0 at row 2, column 3.*coding='binary'"):
        cbmm.as_responses(values, coding="binary")
    assert cbmm.as_responses(values, coding="signed").n_observed == 9  # stated, so 0 = missing
    with pytest.raises(ValueError, match="ambiguous coding"):
        cbmm.fit(values)
    # read so, every item's answers are alike (its 0s missing), which no fit can use
    with pytest.raises(ResponseError, match="every item was answered alike"):
        cbmm.fit(values, coding="signed", max_iter=5)


def test_bad_coding_storage_and_layout_arguments_are_named():
    values = np.eye(2)
    for kwargs, name in (({"coding": "pm1"}, "coding"), ({"storage": "csr"}, "storage"),
                         ({"layout": "tall"}, "layout")):
        with pytest.raises(ResponseError, match=name):
            cbmm.as_responses(values, **kwargs)


def test_object_dataframe_of_valid_responses_is_accepted():
    frame = pd.DataFrame([[1, 0, None], [0, "1", 1.0], [True, 1, 0]], index=["a", "b", "c"],
                         dtype=object)
    np.testing.assert_array_equal(cbmm.as_responses(frame).y,
                                  [[1, -1, 0], [-1, 1, 1], [1, 1, -1]])


@pytest.mark.parametrize("column", [pd.Series([1, 2], dtype=object), pd.Series([1.0, 2.0]),
                                    pd.Series(["1", "x"]), pd.Series([1, 2], dtype="Int8")])
def test_a_bad_cell_is_reported_against_its_own_column(column):
    frame = pd.DataFrame({f"i{k}": [1, 0] for k in range(5)}, index=["m0", "m1"])
    frame["i5"] = column.to_numpy()
    with pytest.raises(ResponseError, match=r"at row 1 \('m1'\), column 5 \('i5'\)"):
        cbmm.as_responses(frame)


def test_labels_read_as_the_first_item_are_named_as_such():
    # pd.read_csv without index_col: the labels became a column 'Unnamed: 0'
    frame = pd.DataFrame({"Unnamed: 0": ["m0", "m1", "m2"], **{f"i{k}": [1, 0, 1]
                                                              for k in range(5)}})
    with pytest.raises(ResponseError, match="its first column 'Unnamed: 0' holds text: the "
                                            "models' labels\\? make it the index"):
        cbmm.as_responses(frame)
    # text in another column too: no such guess
    frame["i3"] = ["x", "y", "z"]
    with pytest.raises(ResponseError) as raised:
        cbmm.as_responses(frame)
    assert "holds text" not in str(raised.value)
    # labels of its own (a file read with its label column): the text column is metadata,
    # or the labels where another column was taken for them; set_index was no advice there
    meta = pd.DataFrame({"family": ["a", "b", "a"], **{f"i{k}": [1, 0, 1] for k in range(5)}},
                        index=pd.Index(["m0", "m1", "m2"], name="model"))
    with pytest.raises(ResponseError, match=r"its column 'family' holds text, not answers: "
                                            r"metadata to leave out .* --label-column") as raised:
        cbmm.as_responses(meta)
    assert "set_index" not in str(raised.value)


def test_duplicate_labels_are_refused_with_their_positions():
    with pytest.raises(ResponseError, match=r"duplicate item ids: 'q' \(columns 0, 2\)"):
        cbmm.as_responses(pd.DataFrame(np.eye(3), columns=["q", "r", "q"]))
    with pytest.raises(ResponseError, match=r"duplicate model labels: 'm' \(rows 1, 2\)"):
        cbmm.as_responses(pd.DataFrame(np.eye(3), index=["a", "m", "m"]))


def test_duplicated_long_records_are_named_by_position_where_the_index_repeats():
    """Two logs joined by pd.concat repeat their row index: a repeated pair was named
    'at row 0, row 0'."""
    log = pd.DataFrame({"model": ["m1", "m2"], "item": ["q", "q"], "correct": [1, 0]})
    with pytest.raises(ResponseError, match=r"first: row 0 \('m1'\), column 0 \('q'\) at row 0, "
                                            r"row 2; row 1 \('m2'\), column 0 \('q'\) at row 1, "
                                            r"row 3; each"):
        cbmm.as_responses(pd.concat([log, log]))
    with pytest.raises(ResponseError, match=r"at row 8, row 9"):  # a unique index: its labels
        cbmm.as_responses(pd.concat([log, log.iloc[:1]]).set_axis([8, 7, 9]))


@pytest.mark.parametrize("data,message", [
    (np.ones(3), "expected a 2-D models x items matrix, got 1-D"),
    (np.ones((2, 2, 2)), "got 3-D"),
    (None, "got 0-D"),
    ([[1, 0], [1]], "cannot be read as a models x items matrix"),
    (np.zeros((0, 3)), "need at least 2 models and 1 item, got N=0, J=3"),
    (pd.DataFrame(), "need at least 2 models"),
    (np.array([[1, 0], [0, 1]], dtype=complex), "complex values"),
    (np.array([["2020-01-01"] * 2] * 2, dtype="datetime64[D]"), "datetime64"),
    (np.array([[1.0, -np.inf], [0, 1]]), r"infinite value at row 0, column 1"),
    (np.array([["1", "0"], ["x", "1"]]), r"value 'x' at row 1, column 0"),
    (np.array([[1, 0], [0, 300]], dtype=np.int16), r"value 300 at row 1, column 1"),
    (pd.Series([1.0, 0.0]), "got 1-D"),
])
def test_malformed_input_gives_one_clear_error(data, message):
    with pytest.raises(ResponseError, match=message) as info:
        cbmm.as_responses(data)
    assert "\n" not in str(info.value)


def test_masked_cells_are_missing():
    values = np.ma.masked_array([[1.0, 5.0], [0.0, 1.0]], mask=[[False, True], [False, False]])
    np.testing.assert_array_equal(cbmm.as_responses(values).y, [[1, 0], [-1, 1]])


def test_storage_follows_the_observed_share():
    values = np.full((10, 10), np.nan)
    np.fill_diagonal(values, 1.0)
    values[0, 1] = 0.0  # 11 % observed
    assert cbmm.as_responses(values).storage == "sparse"
    assert cbmm.as_responses(values, storage="dense").storage == "dense"
    values[:, :3] = 1.0  # 37 % observed
    assert cbmm.as_responses(values).storage == "dense"
    assert cbmm.as_responses(values, storage="sparse").storage == "sparse"
    sparse = cbmm.as_responses(values, storage="sparse")
    assert cbmm.as_responses(sparse) is sparse
    assert cbmm.as_responses(sparse, storage="dense").storage == "dense"


def _long_table_99_percent_missing():
    """A long table with 99 % of the cells missing, and the same cells as a dense wide frame in
    the order cbmm.as_responses gives the long table's ids (so both fits share one start)."""
    sim = simulate(600, 400, missing="mcar", missing_rate=0.99, seed=5)
    frame = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(600)])
    for _ in range(3):  # drop the models and items left without an observed cell
        frame = frame.loc[frame.notna().sum(axis=1) > 0, frame.notna().sum() > 0]
    long = (frame.stack(future_stack=True).dropna().rename("correct")
            .rename_axis(["model", "item"]).reset_index())
    sparse = cbmm.as_responses(long)
    assert sparse.storage == "sparse" and sparse.n_observed < 0.012 * np.prod(sparse.shape)
    dense = cbmm.as_responses(frame.loc[sparse.row_labels, sparse.col_labels], storage="dense")
    return long, dense


@pytest.mark.parametrize("method", ["cbmm", "lbfgsb", "manopt"])
@pytest.mark.parametrize("isolate", [True, False])
def test_fit_of_a_sparse_long_table_equals_the_dense_fit(method, isolate):
    """At 99 % missing cbmm.fit keeps a long table in CSR for the methods that read it (also
    through the forked worker) and expands it for the others; the estimates equal the dense
    path's either way."""
    if method == "manopt":
        pytest.importorskip("pymanopt")
    long, dense = _long_table_99_percent_missing()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cbmm.DegenerateDataWarning)
        warnings.simplefilter("ignore", cbmm.ConvergenceWarning)
        wide_fit = cbmm.fit(dense, method, max_iter=30, isolate=isolate)
        long_fit = cbmm.fit(long, method, max_iter=30, isolate=isolate)
    assert wide_fit.info["storage"] == "dense"
    assert long_fit.info["storage"] == ("sparse" if get_method(method).reads_sparse
                                        else "dense")
    assert long_fit.status == wide_fit.status and long_fit.n_iter == wide_fit.n_iter
    for name in ("theta", "a", "b"):
        pd.testing.assert_series_equal(getattr(long_fit, name), getattr(wide_fit, name),
                                       rtol=1e-9)
    assert long_fit.loss == pytest.approx(wide_fit.loss, rel=1e-12)


# ---- the C entry points check their arguments -------------------------------------------------

def test_ingest_rejects_inconsistent_arguments_instead_of_crashing():
    y = np.zeros((2, 2), np.int8)
    counts = [np.zeros(2, np.int64) for _ in range(4)]
    stats = np.zeros(_ingest.STATS_SIZE, np.int64)
    values = np.ones((2, 2))
    with pytest.raises(ValueError, match="dtype code"):
        _ingest.scan_rows(values, 99, 0, y, *counts, 0, stats)
    with pytest.raises(ValueError, match="2-D buffer of 4-byte items"):
        _ingest.scan_rows(values, 1, 0, y, *counts, 0, stats)
    with pytest.raises(ValueError, match="mode"):
        _ingest.scan_rows(values, 0, 7, y, *counts, 0, stats)
    with pytest.raises(ValueError, match="y: expected"):
        _ingest.scan_rows(values, 0, 0, np.zeros(3, np.int8), *counts, 0, stats)
    with pytest.raises(ValueError, match="column range"):
        _ingest.scan_columns([values[:, 0]], [0], 0, 2, y, -1, 0, *counts, stats)
    with pytest.raises(ValueError, match="out of range"):
        _ingest.triplets_count(np.array([0, 5]), 9, np.array([0, 1]), 9, np.ones(2), 0, 2, 2, 0,
                               *counts, stats)
    with pytest.raises(ValueError, match="inconsistent CSR"):
        _ingest.csr_to_dense(np.array([0, 3, 1]), np.zeros(1, np.int32), np.ones(1, np.int8), 2,
                             y)
    with pytest.raises(ValueError, match="out of range"):
        _ingest.csr_to_dense(np.array([0, 1, 1]), np.array([-4], np.int32),
                             np.ones(1, np.int8), 2, y)
    with pytest.raises(ValueError, match="bad shape"):
        _ingest.dense_to_csr(y, -2, 2, np.zeros(1), np.zeros(0, np.int32), np.zeros(0, np.int8))


def test_responses_checks_its_fields():
    with pytest.raises(ResponseError, match="2-D int8"):
        cbmm.Responses(y=np.zeros((2, 2)))
    with pytest.raises(ResponseError, match="indptr, indices, values, n_items"):
        cbmm.Responses(y=None, indptr=np.array([0, 0]))
    with pytest.raises(ResponseError, match="2 row labels for 3 rows"):
        cbmm.Responses(y=np.zeros((3, 1), np.int8), row_labels=pd.Index(["a", "b"]))


def test_sparse_input_costs_memory_per_observed_cell_not_per_cell():
    """100,000 x 100,000 with 50,000 observed cells: dense storage would need 10 GB."""
    import tracemalloc

    rng = np.random.default_rng(0)
    cells = rng.choice(10 ** 10, size=50_000, replace=False)
    long = pd.DataFrame({"model": cells // 10 ** 5, "item": cells % 10 ** 5,
                         "correct": rng.integers(0, 2, cells.size)})
    matrix = scipy.sparse.coo_array((2.0 * long["correct"].to_numpy() - 1,
                                     (long["model"].to_numpy(), long["item"].to_numpy())),
                                    shape=(10 ** 5, 10 ** 5))
    for data in (long, matrix):
        tracemalloc.start()
        try:
            cbmm.as_responses(data)
        except ResponseError as exc:  # ids without cells in the matrix: rows with nothing seen
            assert "no observed entry" in str(exc)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 30 * 2 ** 20
    responses = cbmm.as_responses(long)
    assert responses.storage == "sparse" and responses.n_observed == 50_000
    assert responses.shape == (long["model"].nunique(), long["item"].nunique())


def test_int8_input_in_the_signed_coding_is_used_without_a_copy():
    values = np.array([[1, -1, 0], [-1, 1, 1]], dtype=np.int8)
    responses = cbmm.as_responses(values, coding="signed", storage="dense")
    assert np.shares_memory(responses.y, values) and responses.n_observed == 5
    bad = np.array([[1, -1, 2], [-1, 1, 1]], dtype=np.int8)
    with pytest.raises(ResponseError, match="value 2 at row 0, column 2"):
        cbmm.as_responses(bad, coding="signed")
    np.testing.assert_array_equal(bad, [[1, -1, 2], [-1, 1, 1]])  # checked, never written
    full = np.array([[1, -1], [-1, 1]], dtype=np.int8)
    inferred = cbmm.as_responses(full, storage="dense")  # no 0: inferred signed, not copied
    assert np.shares_memory(inferred.y, full) and inferred.n_observed == 4
    binary = np.array([[1, 0], [0, 1]], dtype=np.int8)
    coded = cbmm.as_responses(binary, storage="dense")  # 0/1: coded into a new array
    assert not np.shares_memory(coded.y, binary)
    np.testing.assert_array_equal(coded.y, [[1, -1], [-1, 1]])
    np.testing.assert_array_equal(coded.accuracy(axis=1), [0.5, 0.5])
    np.testing.assert_array_equal(binary, [[1, 0], [0, 1]])


def test_a_row_left_empty_by_signed_coding_says_what_signed_coding_does():
    """0/1 answers read as signed: a model with only wrong answers has none observed, and
    the error named the row alone."""
    with pytest.warns(cbmm.CodingWarning):
        with pytest.raises(cbmm.ResponseError, match=r"1 model row\(s\) with no observed "
                           r"entry: 1; drop them before fitting; signed coding reads 0 as "
                           r"missing: if the answers are 1/0, give coding='binary'"):
            cbmm.as_responses(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), coding="signed")
    with pytest.raises(cbmm.ResponseError, match="drop them before fitting$"):
        cbmm.as_responses(np.array([[1.0, 0.0], [np.nan, np.nan], [1.0, 1.0]]))


def test_a_scipy_matrix_storing_no_zero_is_told_its_zeros_are_missing():
    """scipy stores a dense 0/1 array's 1s alone: its wrong answers become missing, and the
    fit said only "every observed answer is correct" (or named empty items)."""
    from cbmm.responses import CodingWarning

    answers = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0.]])
    with pytest.warns(CodingWarning, match="a scipy sparse matrix storing no 0: its unstored "
                                           "entries are missing, not wrong"):
        cbmm.as_responses(scipy.sparse.csr_array(answers))
    rows, cols = np.indices(answers.shape)
    stored = scipy.sparse.coo_array((answers.ravel(), (rows.ravel(), cols.ravel())))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cbmm.as_responses(stored).n_observed == 9  # the 0s stored: no warning


def test_a_long_table_read_as_wide_is_told_its_layout():
    """Read with layout='wide', a long table's model column is the labels and item,
    correct its items: the hint said to name the columns model, item, correct, as they
    were."""
    frame = pd.DataFrame({"item": ["q1", "q2", "q1", "q2"], "correct": [1, 0, 0, 1]},
                         index=pd.Index(["m1", "m1", "m2", "m2"], name="model"))
    with pytest.raises(ResponseError, match=r"a long table \(columns model, item, correct\) "
                                            r"read as a wide one: give layout 'long' or "
                                            r"'auto'") as raised:
        cbmm.as_responses(frame, layout="wide")
    assert "must be named" not in str(raised.value)
