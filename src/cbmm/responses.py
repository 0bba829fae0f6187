"""Response matrices: validation, coding and storage.

Users hand in models x items responses in one of two codings:

* ``"binary"``: 1 correct, 0 incorrect, NaN (or empty) missing;
* ``"signed"`` (the paper's): +1 correct, -1 incorrect, 0 or NaN missing.

The coding is inferred only where that is unambiguous: values within {0, 1, NaN} are binary,
values within {-1, 1, NaN} signed, and a matrix holding both -1 and 0 is refused unless the caller
states the coding (``coding=``).  Accepted containers: NumPy arrays (any numeric or boolean dtype,
object and string arrays of numbers, masked arrays), pandas DataFrames (wide: models in rows;
long: one record per observed cell with columns ``model``, ``item``, ``correct``) and
``scipy.sparse`` matrices (stored entries are the observed cells).

Internally every method sees :class:`Responses`: the paper's coding ``y_ij in {-1, 0, +1}``
(0 = not observed) in ``int8``, stored dense (an N x J matrix) or sparse (CSR, the observed
cells only).  Validation and coding run in one pass in C (:mod:`cbmm._ingest`), which also
counts observed and correct cells per row and column; the counts give accuracies, empty and
degenerate rows/columns without another pass over the data.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from . import _ingest
from ._warn import CbmmWarning, warn

if TYPE_CHECKING:  # imported where used, so that ``import cbmm`` does not load pandas
    import pandas as pd

__all__ = ["CODINGS", "FIRST_LINE", "LONG_COLUMNS", "SPARSE_BELOW", "CodingWarning", "ResponseError",
           "Responses", "as_responses", "no_information"]

CODINGS = ("binary", "signed")
#: Column names of a long-format table: model id, item id, response.
LONG_COLUMNS = ("model", "item", "correct")
#: The key of a wide table's ``attrs`` that holds its file's line of the first row, set by
#: the file's reader where each record is one line: errors then name lines, not rows.
FIRST_LINE = "first_line"
#: ``storage="auto"`` stores a matrix sparse when its observed share is below this.
SPARSE_BELOW = 0.2

_MODES = {None: 0, "binary": 1, "signed": 2}
_CODES = {np.dtype(t): code for code, t in enumerate(
    [np.float64, np.float32, np.int8, np.uint8, np.bool_, np.int16, np.uint16, np.int32,
     np.uint32, np.int64, np.uint64])}
_F64 = _CODES[np.dtype(np.float64)]
_ZERO, _MINUS, _BAD, _DUP = range(4)
_K = _ingest.K_CELLS
# Inputs the C scan cannot read directly (object, float16, non-native byte order, extension
# dtypes) are converted to float64 in blocks of at most this many bytes.
_BLOCK_BYTES = 8 << 20
_EXPECTED = {
    None: "0/1 (binary coding, NaN = missing) or -1/+1 (signed coding, 0 or NaN = missing)",
    "binary": "0/1 with NaN = missing (coding='binary')",
    "signed": "-1/+1 with 0 or NaN = missing (coding='signed')",
}


#: What to say when a wide table's answers are ids: a long table with other column names.
_LONG_HINT = ("a long table? its columns must be named model, item, correct (DataFrame."
              "rename; files: cbmm.data.read_table(..., model_column=, item_column=, "
              "correct_column=), `cbmm fit --model-column --item-column --correct-column`, "
              "or in the workflow the options model_column, item_column, correct_column of "
              "the dataset's entry)")


class CodingWarning(CbmmWarning):
    """The stated coding reads the data in a way that is likely a mistake."""


def label_order(labels) -> np.ndarray:
    """Positions of ``labels`` in the order of their text (stable): the one order in which
    the library's seeded draws visit models and items."""
    import pandas as pd

    return np.argsort(pd.Index(labels).to_numpy(dtype=str), kind="stable")


class ResponseError(ValueError):
    """Raised for responses that cannot be fitted (the message names what is wrong and where)."""


@dataclass(frozen=True, eq=False)
class Responses:
    """A validated response matrix in the paper's coding, stored dense or sparse.

    Dense storage keeps the whole matrix; sparse storage keeps only the observed cells, row by
    row (CSR), for matrices where most cells are missing.  Solvers read whichever is present
    (``storage``); :meth:`to_dense` and :meth:`to_sparse` convert.

    Attributes
    ----------
    y : ndarray of int8, shape (N, J), or None
        Dense storage: +1 correct, -1 incorrect, 0 missing.
    row_labels, col_labels : pandas.Index or None
        Labels of the models (rows) and items (columns) when the input had them.
    indptr : ndarray of int64, shape (N + 1,), or None
        Sparse storage: the observed cells of row i are ``indptr[i]:indptr[i+1]``.
    indices : ndarray of int32, shape (n_observed,), or None
        Sparse storage: their columns, increasing within each row.
    values : ndarray of int8, shape (n_observed,), or None
        Sparse storage: their responses, +1 or -1.
    n_items : int or None
        Sparse storage: J.
    """

    y: np.ndarray | None
    row_labels: pd.Index | None = None
    col_labels: pd.Index | None = None
    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None
    values: np.ndarray | None = None
    n_items: int | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        sparse = (self.indptr, self.indices, self.values, self.n_items)
        if self.y is not None:
            if any(part is not None for part in sparse):
                raise ResponseError("Responses: give either y (dense) or the CSR fields, not both")
            if self.y.dtype != np.int8 or self.y.ndim != 2:
                raise ResponseError(f"Responses: y must be a 2-D int8 array, got {self.y.ndim}-D "
                                    f"{self.y.dtype}")
        elif any(part is None for part in sparse):
            raise ResponseError("Responses: sparse storage needs indptr, indices, values, n_items")
        elif (self.indptr.dtype != np.int64 or self.indices.dtype != np.int32
              or self.values.dtype != np.int8 or self.indptr.ndim != 1
              or self.indices.shape != self.values.shape
              or int(self.indptr[-1]) != self.indices.size):
            raise ResponseError("Responses: CSR fields must be indptr int64 (N + 1), indices "
                                "int32 and values int8 of length indptr[-1]")
        n, j = self.shape
        for labels, size, what in ((self.row_labels, n, "row"), (self.col_labels, j, "column")):
            if labels is not None and len(labels) != size:
                raise ResponseError(f"Responses: {len(labels)} {what} labels for {size} {what}s")

    @property
    def storage(self) -> str:
        """``"dense"`` or ``"sparse"``."""
        return "dense" if self.y is not None else "sparse"

    @property
    def shape(self) -> tuple[int, int]:
        if self.y is not None:
            return self.y.shape
        return (self.indptr.size - 1, int(self.n_items))

    def coded_buffers(self) -> tuple:
        """The coded cells as the passes of ``cbmm._ingest`` take them, read where they lie:
        ``(y, None, None)`` for dense storage, ``(values, indptr, indices)`` for CSR."""
        if self.y is not None:
            return np.ascontiguousarray(self.y), None, None
        return self.values, self.indptr, self.indices

    def _counts(self):
        """Observed and correct cells per row and per column (computed once)."""
        if "counts" not in self._cache:
            n, j = self.shape
            counts = _Counts(n, j)
            _ingest.coded_counts(*self.coded_buffers(), n, j, *counts.arrays())
            self._cache["counts"] = counts
        return self._cache["counts"]

    @property
    def observed(self):
        """Mask of the observed entries (Omega): a boolean ndarray (dense storage) or a
        ``scipy.sparse.csr_array`` of booleans sharing the CSR layout (sparse storage)."""
        if "observed" not in self._cache:
            if self.y is not None:
                self._cache["observed"] = self.y != 0
            else:
                import scipy.sparse

                self._cache["observed"] = scipy.sparse.csr_array(
                    (np.ones(self.indices.size, dtype=bool), self.indices, self.indptr),
                    shape=self.shape)
        return self._cache["observed"]

    @property
    def n_observed(self) -> int:
        return int(self._counts().row_obs.sum())

    @property
    def fully_observed(self) -> bool:
        n, j = self.shape
        return self.n_observed == n * j

    def accuracy(self, axis: int) -> np.ndarray:
        """Share of correct answers among observed entries (axis=1: per model, 0: per item)."""
        counts = self._counts()
        if axis not in (0, 1):
            raise ValueError(f"axis must be 0 (items) or 1 (models), got {axis!r}")
        correct, seen = ((counts.col_cor, counts.col_obs) if axis == 0
                         else (counts.row_cor, counts.row_obs))
        with np.errstate(invalid="ignore", divide="ignore"):
            return correct / seen

    def degenerate_items(self) -> np.ndarray:
        """Indices of items answered all-correct or all-wrong by every observed model.

        Such an item has no finite optimum: its easiness b_j drifts to +-inf.
        """
        acc = self.accuracy(axis=0)
        return np.flatnonzero((acc == 0) | (acc == 1))

    def degenerate_models(self) -> np.ndarray:
        """Indices of models with all observed answers correct (or all wrong)."""
        acc = self.accuracy(axis=1)
        return np.flatnonzero((acc == 0) | (acc == 1))

    def answer_patterns(self, axis: int) -> np.ndarray | None:
        """Which models (axis=1) or items (axis=0) share their whole answer pattern.

        Returns one group number per model (or item), equal for those whose correct, wrong
        and missing cells all coincide, or None when every pattern is unique.  Patterns are
        matched by two sums of their cells times random 64-bit weights, modulo 2**64 (one
        pass over the data gives both axes): two different patterns share both sums with
        probability at most 2**-126.
        """
        if axis not in (0, 1):
            raise ValueError(f"axis must be 0 (items) or 1 (models), got {axis!r}")
        if "patterns" not in self._cache:
            self._cache["patterns"] = _identical_patterns(self)
        return self._cache["patterns"][0 if axis == 1 else 1]

    def label_rows(self, idx) -> list:
        return [self.row_labels[i] if self.row_labels is not None else int(i) for i in idx]

    def label_cols(self, idx) -> list:
        return [self.col_labels[j] if self.col_labels is not None else int(j) for j in idx]

    def to_dense(self) -> Responses:
        """The same responses in dense storage (itself if already dense)."""
        if self.y is not None:
            return self
        n, j = self.shape
        y = np.zeros((n, j), dtype=np.int8)
        _ingest.csr_to_dense(self.indptr, self.indices, self.values, j, y)
        return Responses(y=y, row_labels=self.row_labels, col_labels=self.col_labels,
                         _cache=_shared_counts(self))

    def to_sparse(self) -> Responses:
        """The same responses in sparse (CSR) storage (itself if already sparse)."""
        if self.y is None:
            return self
        n, j = self.shape
        if j > np.iinfo(np.int32).max:
            raise ResponseError(f"{j} items: sparse storage holds at most 2**31 - 1 columns")
        counts = self._counts()
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts.row_obs, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        values = np.empty(int(indptr[-1]), dtype=np.int8)
        _ingest.dense_to_csr(np.ascontiguousarray(self.y), n, j, indptr, indices, values)
        return Responses(y=None, row_labels=self.row_labels, col_labels=self.col_labels,
                         indptr=indptr, indices=indices, values=values, n_items=j,
                         _cache=_shared_counts(self))

    def label_order(self, axis: int) -> np.ndarray:
        """The rows' (axis 0) or columns' (axis 1) positions in the order of their labels
        as text (the identity without labels): seeded draws visit models and items in
        this order, so that one seed draws the same labels whatever the order of the
        rows and columns given."""
        labels = self.row_labels if axis == 0 else self.col_labels
        if labels is None:
            return np.arange(self.shape[axis])
        return label_order(labels)

    def take(self, rows=None, cols=None) -> Responses:
        """The responses of the models ``rows`` and the items ``cols``, in this storage.

        Parameters
        ----------
        rows, cols : array of int, optional
            Row and column indices (repeats allowed: a bootstrap resample); None
            keeps every row or column.  Labels follow the indices.
        """
        n, j = self.shape
        rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.intp)
        cols = np.arange(j) if cols is None else np.asarray(cols, dtype=np.intp)
        row_labels = None if self.row_labels is None else self.row_labels[rows]
        col_labels = None if self.col_labels is None else self.col_labels[cols]
        if self.y is not None:  # np.take: about 3x faster than fancy indexing here
            y = np.take(np.take(self.y, rows, axis=0), cols, axis=1)
            return Responses(y=np.ascontiguousarray(y), row_labels=row_labels,
                             col_labels=col_labels)
        import scipy.sparse

        csr = scipy.sparse.csr_array((self.values, self.indices, self.indptr), shape=self.shape)
        part = csr[rows][:, cols].tocsr()
        part.sort_indices()
        return Responses(y=None, row_labels=row_labels, col_labels=col_labels,
                         indptr=part.indptr.astype(np.int64), indices=part.indices.astype(np.int32),
                         values=part.data.astype(np.int8), n_items=len(cols))

    def without(self, rows, cols) -> Responses:
        """The same responses with the cells ``(rows[k], cols[k])`` made missing (held out)."""
        rows, cols = np.asarray(rows, dtype=np.intp), np.asarray(cols, dtype=np.intp)
        if self.y is not None:
            y = self.y.copy()
            y[rows, cols] = 0
            return Responses(y=y, row_labels=self.row_labels, col_labels=self.col_labels)
        n, j = self.shape
        cell = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.indptr)) * j + self.indices
        keep = ~np.isin(cell, rows.astype(np.int64) * j + cols)
        counts = np.bincount(np.repeat(np.arange(n), np.diff(self.indptr))[keep], minlength=n)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return Responses(y=None, row_labels=self.row_labels, col_labels=self.col_labels,
                         indptr=indptr, indices=self.indices[keep], values=self.values[keep],
                         n_items=j)

    def to_frame(self) -> pd.DataFrame:
        """Dense 0/1/NaN float DataFrame (the user-facing coding; 8 bytes per cell)."""
        import pandas as pd

        dense = self.to_dense()
        values = np.where(dense.y == 0, np.nan, (dense.y + 1) / 2)
        return pd.DataFrame(values, index=self.row_labels, columns=self.col_labels)

    def to_long(self) -> pd.DataFrame:
        """The observed cells as a long table: columns ``model``, ``item`` (labels, or row and
        column numbers) and ``correct`` (1/0, int8), rows in row-major order."""
        import pandas as pd

        sparse = self.to_sparse()
        rows = np.repeat(np.arange(self.shape[0]), np.diff(sparse.indptr))
        model = self.row_labels[rows] if self.row_labels is not None else rows
        item = self.col_labels[sparse.indices] if self.col_labels is not None else sparse.indices
        correct = ((sparse.values + 1) // 2).astype(np.int8)
        return pd.DataFrame({LONG_COLUMNS[0]: np.asarray(model), LONG_COLUMNS[1]: np.asarray(item),
                             LONG_COLUMNS[2]: correct})


#: Seed of the random weights that match answer patterns (:meth:`Responses.answer_patterns`).
PATTERN_SEED = 20240611


def _identical_patterns(responses):
    """``(models, items)``: the group numbers of the rows and of the columns of
    ``responses`` by their whole pattern, each None when every pattern is unique
    (:meth:`Responses.answer_patterns`)."""
    n, j = responses.shape
    weights = [np.random.default_rng([PATTERN_SEED, axis]).integers(
        0, np.iinfo(np.uint64).max, size=(size, 2), dtype=np.uint64, endpoint=True)
        for axis, size in enumerate((n, j))]
    sums = [np.empty((size, 2), dtype=np.uint64) for size in (n, j)]
    _ingest.pattern_sums(*responses.coded_buffers(), n, j, *weights, *sums)
    return tuple(_groups(axis_sums) for axis_sums in sums)


def _groups(sums):
    """Group numbers of equal rows of ``sums``; None when every group has one member."""
    _, groups, sizes = np.unique(sums, axis=0, return_inverse=True, return_counts=True)
    return groups.reshape(-1) if sizes.size and sizes.max() > 1 else None


def _shared_counts(responses):
    return {"counts": responses._cache["counts"]} if "counts" in responses._cache else {}


class _Counts:
    """Per-row and per-column counts and the first offending cells of one scan (filled in C)."""

    def __init__(self, n, j):
        self.row_obs, self.row_cor = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.col_obs, self.col_cor = np.zeros(j, np.int64), np.zeros(j, np.int64)
        self.stats = np.zeros(_ingest.STATS_SIZE, np.int64)

    def arrays(self):
        return self.row_obs, self.row_cor, self.col_obs, self.col_cor

    def count(self, category) -> int:
        return int(self.stats[category])

    def cells(self, category) -> list[tuple[int, int]]:
        """The smallest (row, column) cells of a category, in order (at most cbmm._ingest.K_CELLS;
        for long tables (record, 0))."""
        found = int(self.stats[4 + category])
        cells = self.stats[8:].reshape(4, _K, 2)[category, :found]
        return [(int(r), int(c)) for r, c in cells]


# ---- the entry point --------------------------------------------------------------------------

def as_responses(data, *, coding: str | None = None, storage: str = "auto",
                 layout: str = "auto", source: str = "responses") -> Responses:
    """Validate responses and convert them to :class:`Responses`.

    Parameters
    ----------
    data : array-like, pandas.DataFrame, scipy.sparse matrix or Responses
        Wide: an ``N x J`` matrix, models in rows (NumPy array of any numeric or boolean dtype,
        nested lists, masked array (masked = missing), DataFrame with any column dtypes).
        Long: a DataFrame with columns ``model``, ``item``, ``correct`` (one record per cell;
        other columns are ignored; a record whose ``correct`` is NaN is not observed).
        Sparse: a ``scipy.sparse`` matrix or array whose stored entries are the observed cells.
        A :class:`Responses` is returned as it is (converted to ``storage`` if that is forced).
        A C-contiguous int8 array in the signed coding (``coding="signed"``, or inferred: no 0
        in it) is checked and used as the dense matrix without a copy: the result shares its
        memory.
    coding : {None, "binary", "signed"}
        ``"binary"``: 1 correct, 0 incorrect, NaN missing.  ``"signed"``: +1 correct,
        -1 incorrect, 0 or NaN missing.  None infers it: {0, 1, NaN} is binary, {-1, 1, NaN}
        signed; a matrix holding both -1 and 0 raises.
    storage : {"auto", "dense", "sparse"}
        ``"auto"`` stores sparse when fewer than :data:`SPARSE_BELOW` of the cells are observed.
    layout : {"auto", "wide", "long"}
        ``"auto"`` reads a DataFrame that has the columns ``model``, ``item`` and ``correct``
        as a long table, any other input as wide.
    source : str
        Name used in error messages (e.g. the file the matrix came from).

    Returns
    -------
    Responses
        Labels: a wide DataFrame's index and columns; a long table's model and item ids in order
        of first appearance; None for arrays and sparse matrices.

    Raises
    ------
    ResponseError
        Naming the offending cell (row and column, with labels where there are any; the
        record for long tables), label or argument: values other than the coding's, an
        ambiguous coding, non-2-D or empty input, N < 2 or J < 1, duplicate labels or
        (model, item) pairs, rows or columns with no observed entry.
    """
    if coding not in _MODES:
        raise ResponseError(f"coding must be 'binary', 'signed' or None (infer), got {coding!r}")
    if storage not in ("auto", "dense", "sparse"):
        raise ResponseError(f"storage must be 'auto', 'dense' or 'sparse', got {storage!r}")
    if layout not in ("auto", "wide", "long"):
        raise ResponseError(f"layout must be 'auto', 'wide' or 'long', got {layout!r}")
    if isinstance(data, (str, os.PathLike)):
        raise ResponseError(f"{source}: got the file name {str(data)!r}, not a matrix; read the "
                            f"file first: cbmm.data.read_table({str(data)!r}) (CSV or Parquet, "
                            "wide or long, as the command line reads it)")
    if isinstance(data, Responses):
        responses = data
    elif _is_frame(data) and (layout == "long" or (
            layout == "auto" and all(c in data.columns for c in LONG_COLUMNS))):
        responses = _from_long(data, coding, source)
    elif layout == "long":
        raise ResponseError(f"{source}: layout='long' needs a DataFrame with columns "
                            f"{', '.join(LONG_COLUMNS)}; got {type(data).__name__}")
    elif _is_scipy_sparse(data):
        responses = _from_scipy(data, coding, source)
    elif _is_frame(data):
        responses = _from_frame(data, coding, source)
    else:
        responses = _from_array(data, coding, source)
    if storage == "auto" and isinstance(data, Responses):
        return responses
    n, j = responses.shape
    if storage == "sparse" or (storage == "auto" and responses.n_observed < SPARSE_BELOW * n * j):
        return responses.to_sparse()
    return responses.to_dense()


def no_information(responses: Responses, coding: str | None = None) -> str | None:
    """Why ``responses`` cannot tell the models apart, or None: every item was answered
    alike by the models that answered it (all correct, all wrong, or each one way).  Such
    a matrix was fitted, as ``converged``; it is the wrong file or the wrong ``coding`` (a
    0/1 file read as signed has every 0 missing)."""
    if responses.degenerate_items().size < responses.shape[1]:
        return None
    correct = responses.accuracy(axis=0)
    if (correct == 1).all():
        return "every observed answer is correct" + (
            " (coding='signed' reads a 0/1 file's every 0 as missing)" if coding == "signed"
            else "") + ": the answers cannot tell the models apart; nothing to fit"
    what = ("every observed answer is wrong" if (correct == 0).all() else
            "every item was answered alike (all correct or all wrong) by the models answering it")
    return f"{what}: the answers cannot tell the models apart; nothing to fit"


# The input types of pandas and SciPy are recognised without importing them: an object of
# theirs exists only once the library has been imported.

def _is_frame(data) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(data, pandas.DataFrame)


def _is_scipy_sparse(data) -> bool:
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(data)


# ---- wide input --------------------------------------------------------------------------------

def _check_shape(n, j, source):
    if n < 2 or j < 1:
        raise ResponseError(f"{source}: need at least 2 models and 1 item, got N={n}, J={j}")


def _from_array(data, coding, source):
    mask = None
    if isinstance(data, np.ma.MaskedArray):
        mask, values = np.ma.getmaskarray(data), np.ma.getdata(data)
    else:
        try:
            values = np.asarray(data)
        except (TypeError, ValueError) as exc:
            raise ResponseError(f"{source}: cannot be read as a models x items matrix "
                                f"({' '.join(str(exc).split())})") from exc
    if values.ndim != 2:
        raise ResponseError(f"{source}: expected a 2-D models x items matrix, got {values.ndim}-D")
    n, j = values.shape
    _check_shape(n, j, source)
    _check_kind(values.dtype, source)
    y, counts = _scan_matrix(values, mask, coding)
    responses = Responses(y=y, _cache={"counts": counts})
    _check_scan(counts, coding, source, lambda r, c: values[r, c], _GridNamer(None, None))
    return responses


def _scan_matrix(values, mask, coding):
    """Code a 2-D array (and its mask of missing cells, or None) into int8, counting.  A
    C-contiguous int8 array in the signed coding, stated or inferred, is the coded matrix
    itself (no copy)."""
    n, j = values.shape
    counts = _Counts(n, j)
    mode = _MODES[coding]
    if coding != "binary" and values.dtype == np.int8 and values.flags.c_contiguous \
            and mask is None:  # maybe the internal coding already: checked, counted, not copied
        _ingest.scan_rows(values, _CODES[values.dtype], mode, None, *counts.arrays(), 0,
                          counts.stats)
        # the infer mode counts 0 and -1 alike, so a matrix without 0 (or refused as
        # ambiguous) is done; 0/1 costs a second scan that writes the codes
        if coding == "signed" or not counts.count(_ZERO) or counts.count(_MINUS):
            return values, counts
        counts = _Counts(n, j)
    y = np.empty((n, j), dtype=np.int8)
    code = _CODES.get(values.dtype) if values.dtype.isnative and mask is None else None
    if code is None:  # converted to float64 in blocks of rows
        step = max(1, _BLOCK_BYTES // (8 * j))
        for r0 in range(0, n, step):
            block = _float_block(values[r0:r0 + step],
                                 None if mask is None else mask[r0:r0 + step])
            _ingest.scan_rows(block, _F64, mode, y[r0:r0 + step], counts.row_obs[r0:r0 + step],
                              counts.row_cor[r0:r0 + step], counts.col_obs, counts.col_cor, r0,
                              counts.stats)
    elif abs(values.strides[1]) <= abs(values.strides[0]):  # row-major
        _ingest.scan_rows(values, code, mode, y, *counts.arrays(), 0, counts.stats)
    else:  # column-major: read down the columns, a few side by side
        _ingest.scan_columns([values[:, k] for k in range(j)], [code] * j, mode, n, y, j, 0,
                             *counts.arrays(), counts.stats)
    return y, counts


def _check_kind(dtype, source):
    if dtype.kind == "c":
        raise ResponseError(f"{source}: complex values ({dtype}); expected 0/1 or -1/+1 responses")
    if dtype.kind in "mMV":
        raise ResponseError(f"{source}: {dtype} values are not responses; expected numbers "
                            "0/1 or -1/+1")


def _float_block(block, mask):
    """float64 copy of a block; cells that are not numbers become inf so that the scan reports
    them as bad values (their original value is read back for the message)."""
    if block.dtype.kind in "biuf":
        out = block.astype(np.float64)
    else:
        import pandas as pd

        out = _numeric(pd.Series(block.ravel(), dtype=object)).reshape(block.shape)
    if mask is not None:
        out[mask] = np.nan
    return out


def _as_float(column) -> np.ndarray:
    """A column (ndarray or Series) that the C scan cannot read, as float64 (see _numeric)."""
    if isinstance(column, np.ndarray) and column.dtype.kind in "biuf":
        return column.astype(np.float64)
    import pandas as pd

    return _numeric(column if isinstance(column, pd.Series) else pd.Series(column, dtype=object))


#: Words for an answer, as Arrow's CSV reader (the long tables') reads them: a wide column
#: mixing them with 1 and 0 was refused where a long one was read.
_ANSWER_WORDS = {"true": 1.0, "True": 1.0, "TRUE": 1.0, "false": 0.0, "False": 0.0,
                 "FALSE": 0.0}


def _numeric(series: pd.Series) -> np.ndarray:
    """A Series of any dtype as float64: numbers and numeric strings as themselves, the words
    true and false (:data:`_ANSWER_WORDS`) as 1 and 0, missing values (None, NaN, NA, empty
    strings) as NaN, anything else as inf."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    numbers = pd.to_numeric(series, errors="coerce")
    out = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    failed = np.flatnonzero(numbers.isna().to_numpy() & series.notna().to_numpy())
    if failed.size:
        original = series.to_numpy(dtype=object)[failed]
        words = [_ANSWER_WORDS.get(v.strip(), np.inf) if isinstance(v, str) else np.inf
                 for v in original]
        blank = np.array([isinstance(v, str) and not v.strip() for v in original], dtype=bool)
        out[failed[~blank]] = np.asarray(words)[~blank]
    return out


def _from_frame(frame, coding, source):
    n, j = frame.shape
    _check_shape(n, j, source)
    try:
        return _checked_frame(frame, coding, source)
    except ResponseError as exc:
        # a long table whose columns have other names reads as a wide one: ids as labels
        # and answers; say so rather than leave a puzzling message about either
        if j <= 3 and (not frame.index.is_unique or any(
                _holds_text(frame.iloc[:, k]) for k in range(j))):
            if [frame.index.name, *frame.columns] == list(LONG_COLUMNS):  # read as wide
                raise ResponseError(f"{exc}; a long table (columns model, item, correct) read "
                                    "as a wide one: give layout 'long' or 'auto' (--layout)"
                                    ) from None
            raise ResponseError(f"{exc}; {_LONG_HINT}") from None
        if j > 1 and _holds_text(frame.iloc[:, 0]) and not any(
                _holds_text(frame.iloc[:, k]) for k in range(1, min(j, 20))):
            column = _show(frame.columns[0])
            if default_index(frame.index):  # the labels read as the first item
                raise ResponseError(f"{exc}; its first column {column} holds text: the "
                                    "models' labels? make it the index (DataFrame.set_index, "
                                    "or pd.read_csv(..., index_col=0))") from None
            # labels of its own (a file read with its label column): a column of metadata,
            # or the labels where another column was taken for them
            raise ResponseError(f"{exc}; its column {column} holds text, not answers: "
                                "metadata to leave out of the table, or the models' labels "
                                "(then name it as the label column: --label-column on the "
                                "command line, label_column= reading a file)") from None
        raise


def default_index(index) -> bool:
    """Whether ``index`` is pandas' default 0, 1, ... (no labels of the user's)."""
    import pandas as pd  # a DataFrame's: already imported

    return index.name is None and index.equals(pd.RangeIndex(len(index)))


def _holds_text(column) -> bool:
    """Whether a column holds text (ids, not answers)."""
    return getattr(column, "dtype", None) == np.dtype(object) and any(
        isinstance(v, str) and v.strip() and not _is_number(v) for v in column.head(20))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _checked_frame(frame, coding, source):
    n, j = frame.shape
    # a file's line of the first row, where its reader knows it (cbmm.data.read_csv_matrix)
    first_line = frame.attrs.get(FIRST_LINE)
    _check_labels(frame.index, "model labels", "row", source, first_line)
    _check_labels(frame.columns, "item ids", "column", source)
    for dtype in frame.dtypes.unique():
        if isinstance(dtype, np.dtype):
            _check_kind(dtype, source)
    columns = _frame_columns(frame)
    if isinstance(columns, np.ndarray):
        y, counts = _scan_matrix(columns, None, coding)
    else:
        y, counts = _scan_frame_columns(columns, n, coding)
    responses = Responses(y=y, row_labels=frame.index, col_labels=frame.columns,
                          _cache={"counts": counts})
    _check_scan(counts, coding, source, lambda r, c: frame.iat[r, c],
                _GridNamer(frame.index, frame.columns, first_line))
    return responses


def _scan_frame_columns(columns, n, coding):
    """Code a list of columns (arrays or Series), converting those the C scan cannot read in
    batches of at most _BLOCK_BYTES."""
    j = len(columns)
    y = np.empty((n, j), dtype=np.int8)
    counts = _Counts(n, j)
    batch, codes, start, converted = [], [], 0, 0
    for k, column in enumerate(columns):
        code = _CODES.get(column.dtype) if isinstance(column, np.ndarray) else None
        if code is None or not column.dtype.isnative:
            column, code = _as_float(column), _F64
            converted += column.nbytes
        batch.append(column)
        codes.append(code)
        if converted >= _BLOCK_BYTES or k == j - 1:
            _ingest.scan_columns(batch, codes, _MODES[coding], n, y, j, start, *counts.arrays(),
                                 counts.stats)
            batch, codes, start, converted = [], [], k + 1, 0
    return y, counts


def _frame_columns(frame):
    """A DataFrame's values without a copy where pandas holds them in NumPy blocks: the N x J
    view of a frame held in one block, else the list of columns (1-D views, or Series for
    columns held otherwise).  pandas has no public zero-copy access to its blocks, and taking
    columns one by one through the public API costs ~50 us each (0.7 s for 12,000 items)."""
    columns = [None] * frame.shape[1]
    try:
        blocks = frame._mgr.blocks
        for block in blocks:
            if isinstance(block.values, np.ndarray) and block.values.ndim == 2:
                positions = block.mgr_locs.as_array
                if len(blocks) == 1 and np.array_equal(positions, np.arange(frame.shape[1])):
                    return block.values.T
                for k, position in enumerate(positions):
                    columns[position] = block.values[k]
    except AttributeError:  # another pandas layout: use the public route below
        columns = [None] * frame.shape[1]
    return [frame.iloc[:, k] if column is None else column for k, column in enumerate(columns)]


def headerless_column(position: int, n_columns: int) -> str:
    """What is wrong with item column ``position`` (0-based) of ``n_columns`` whose header
    is blank, in the words of every reader of response tables."""
    trailing = " (a comma at the end of each line?)" if position == n_columns - 1 else ""
    return f"item column {position + 1} has no header{trailing}; each column needs an item id"


def spaced_twins(labels):
    """Two labels that are the same but for spaces around them (kept as written, they are
    two models or items, printed alike), or None."""
    import pandas as pd

    text = pd.Index(labels).map(str)
    stripped = text.str.strip()
    twins = stripped.duplicated(keep=False) & ~text.duplicated(keep=False)
    if not twins.any():
        return None
    first = stripped[twins][0]
    return tuple(text[stripped == first][:2])


def _check_label_text(labels, what, source, name, headers=False):
    """No label blank, none another's twin but for spaces around it; ``name(k)`` names the
    row, column or record of label ``k``; ``headers``: the labels are a wide table's item
    columns' headers."""
    text = labels.map(str)
    blank = np.flatnonzero(text.str.strip() == "")
    if blank.size and headers:
        raise ResponseError(f"{source}: {headerless_column(blank[0], len(labels))}")
    if blank.size:
        raise ResponseError(f"{source}: {name(blank[0])} has a blank {what[:-1]} "
                            f"({_show(text[blank[0]])}; {blank.size} in all); each needs a name")
    twins = spaced_twins(text)
    if twins:
        thing = "model" if what.startswith("model") else "item"
        raise ResponseError(f"{source}: {what} {twins[0]!r} and {twins[1]!r} differ only by "
                            f"spaces around them (one {thing} twice?)")


def _check_labels(labels, what, axis, source, first_line=None):
    """Labels name one model or item each, as the text they are saved and compared as: none
    missing, none repeated, no two with the same text (``1`` and ``'1'``); rows are named
    by their file's lines where ``first_line`` (the line of row 0) is given."""
    import pandas as pd

    if isinstance(labels, pd.MultiIndex):
        raise ResponseError(f"{source}: the {what} have {labels.nlevels} levels (a "
                            "MultiIndex); give one level of labels (e.g. join the levels into "
                            "one string)")
    missing = np.flatnonzero(pd.isna(labels))
    if missing.size:
        raise ResponseError(f"{source}: {missing.size} {axis}(s) without a label, first at "
                            f"{axis} {missing[0]}; each {axis} needs one")
    if labels.dtype == object or labels.inferred_type == "string":
        _check_label_text(labels, what, source, lambda k: (
            f"line {k + first_line}" if first_line else f"{axis} {k}"), axis == "column")
    if labels.is_unique and (labels.dtype != object or labels.inferred_type == "string"):
        return  # distinct values of one type: distinct text
    text = labels.map(str)
    if labels.is_unique and text.is_unique:
        return
    dup = text[text.duplicated()].unique()
    where = ", ".join(
        f"{' and '.join(_show(v) for v in pd.unique(labels[text == label])[:3])} "
        f"({'lines' if first_line else f'{axis}s'} "
        f"{', '.join(str(k + (first_line or 0)) for k in np.flatnonzero(text == label)[:3])})"
        for label in dup[:3])
    same = any(len(pd.unique(labels[text == label])) > 1 for label in dup[:3])
    answers = axis == "row" and text.str.strip().isin(
        ["0", "1", "-1", "0.0", "1.0", "-1.0", "True", "False"]).all()
    raise ResponseError(f"{source}: duplicate {what}: {where}"
                        f"{f' and {len(dup) - 3} more' if len(dup) > 3 else ''}; "
                        + ("labels are saved and compared as text, where these are the same; "
                           if same else "")
                        + "each label must name one " + ("model" if axis == "row" else "item")
                        + ("; these look like answers: a table needs its model labels in "
                           "its first column (pandas' to_csv(index=False) leaves them out)"
                           if answers else ""))


# ---- sparse and long input ---------------------------------------------------------------------

def _from_scipy(matrix, coding, source):
    n, j = matrix.shape
    _check_shape(n, j, source)
    coo = matrix.tocoo()
    values = coo.data
    if _CODES.get(values.dtype) is None or not values.dtype.isnative:
        _check_kind(values.dtype, source)
        values = _as_float(values)
    if coding != "signed" and values.size and (np.asarray(values, dtype=float) > 0).all():
        # built from a dense 0/1 array, scipy keeps its 1s alone: every 0 became missing
        warn(f"{source}: a scipy sparse matrix storing no 0: its unstored entries are missing, "
             "not wrong, so every observed answer is correct; if its wrong answers were 0s "
             "of a dense array (scipy stores none), store them (e.g. coo_array((values, "
             "(rows, cols))) with the 0s among the values) or give +1/-1 with coding='signed'",
             CodingWarning)
    namer = _GridNamer(None, None)

    def cell(k, _):
        return namer(int(coo.row[k]), int(coo.col[k]))

    return _from_triplets(coo.row, coo.col, values, None, None, n, j, coding, source,
                          lambda k, _: coo.data[k], cell, None)


def _from_long(frame, coding, source):
    missing = [c for c in LONG_COLUMNS if c not in frame.columns]
    if missing:
        raise ResponseError(f"{source}: a long table needs the columns {', '.join(LONG_COLUMNS)}; "
                            f"missing {', '.join(missing)}")
    for name in LONG_COLUMNS:
        if _is_frame(frame[name]):
            raise ResponseError(f"{source}: more than one column named {name!r}")
    if len(frame) == 0:
        raise ResponseError(f"{source}: the long table has no records")
    where = frame.index.name or "row"
    unique = frame.index.is_unique  # else (a pd.concat's) by position

    def record(k):
        return f"{where} {_show(frame.index[k]) if unique else k}"

    rows, row_labels = _ids(frame[LONG_COLUMNS[0]], "model", record, source)
    cols, col_labels = _ids(frame[LONG_COLUMNS[1]], "item", record, source)
    n, j = len(row_labels), len(col_labels)
    if n < 2 or j < 1:
        raise ResponseError(f"{source}: need at least 2 models and 1 item, got {n} model id(s) "
                            f"and {j} item id(s)")
    correct = frame[LONG_COLUMNS[2]]
    values = correct.to_numpy() if isinstance(correct.dtype, np.dtype) else None
    if values is None or _CODES.get(values.dtype) is None or not values.dtype.isnative:
        if values is not None:
            _check_kind(values.dtype, source)
        values = _as_float(correct)

    def cell(k, _):
        return (f"{record(k)} (model {_show(frame[LONG_COLUMNS[0]].iat[k])}, "
                f"item {_show(frame[LONG_COLUMNS[1]].iat[k])})")

    return _from_triplets(rows, cols, values, row_labels, col_labels, n, j, coding, source,
                          lambda k, _: correct.iat[k], cell, record)


def _ids(series, what, record, source):
    """Integer codes (first appearance order) and labels of a column of ids."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        codes = series.cat.codes.to_numpy()
        present = pd.unique(codes)  # first appearance order
        used = present[present >= 0]
        bad = np.flatnonzero(codes < 0) if used.size < present.size else ()
        lookup = np.full(len(series.cat.categories), -1, dtype=np.int32)
        lookup[used] = np.arange(used.size, dtype=np.int32)
        labels = series.cat.categories[used]
        codes = lookup[codes]
    else:
        codes, labels = pd.factorize(series, sort=False)
        labels = pd.Index(labels)
        bad = np.flatnonzero(codes < 0) if codes.size and codes.min() < 0 else ()
    if len(bad):
        article = "an" if what == "item" else "a"
        raise ResponseError(f"{source}: {len(bad)} record(s) without {article} {what} id, first "
                            f"at {', '.join(record(k) for k in bad[:3])}")
    _check_label_text(labels, f"{what} ids", source,
                      lambda k: record(np.flatnonzero(codes == k)[0]))
    if labels.dtype == object and labels.inferred_type != "string":
        text = labels.map(str)
        if not text.is_unique:
            same = labels[text == text[text.duplicated()][0]]
            raise ResponseError(f"{source}: {what} ids {' and '.join(map(_show, same[:3]))} "
                                "are the same as text, which ids are saved and compared as; "
                                f"each {what} needs one id")
    return codes, labels


def _from_triplets(rows, cols, values, row_labels, col_labels, n, j, coding, source, value_at,
                   describe, record):
    """CSR responses from (row, column, value) records; describe(k, _) names record k with its
    cell, record(k) the record alone (None: records are not named, as in scipy matrices)."""
    if j > np.iinfo(np.int32).max:
        raise ResponseError(f"{source}: {j} items; at most 2**31 - 1 are supported")
    mode = _MODES[coding]
    counts = _Counts(n, j)
    rcode, ccode, vcode = (_CODES[np.dtype(a.dtype)] for a in (rows, cols, values))
    kept = _ingest.triplets_count(rows, rcode, cols, ccode, values, vcode, n, j, mode,
                                  *counts.arrays(), counts.stats)
    _check_values(counts, coding, source, value_at, describe)
    indptr, col_ptr = np.zeros(n + 1, dtype=np.int64), np.zeros(j + 1, dtype=np.int64)
    np.cumsum(counts.row_obs, out=indptr[1:])
    np.cumsum(counts.col_obs, out=col_ptr[1:])
    indices = np.empty(kept, dtype=np.int32)
    coded = np.empty(kept, dtype=np.int8)
    _ingest.triplets_fill(rows, rcode, cols, ccode, values, vcode, mode, indptr, col_ptr, indices,
                          coded, counts.stats)
    if counts.count(_DUP):
        namer = _GridNamer(row_labels, col_labels)

        def pair(r, c):
            where = f"row {namer.row(r)}, column {namer.col(c)}"
            if record is None:
                return where
            records = np.flatnonzero((rows == r) & (cols == c))[:3]
            return f"{where} at {', '.join(record(k) for k in records)}"

        first = "; ".join(pair(r, c) for r, c in counts.cells(_DUP)[:3])
        raise ResponseError(f"{source}: {counts.count(_DUP)} duplicated cell(s), first: {first}; "
                            "each (model, item) pair may occur once")
    _check_empty(counts, row_labels, col_labels, source, coding)
    return Responses(y=None, row_labels=row_labels, col_labels=col_labels, indptr=indptr,
                     indices=indices, values=coded, n_items=j, _cache={"counts": counts})


# ---- messages ----------------------------------------------------------------------------------

def _show(value) -> str:
    """repr of a label or value without NumPy's type wrapper (np.int64(3) -> 3)."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


class _GridNamer:
    """Names cells of a wide matrix: ``row 3 ('m3'), column 5 ('i5')``, or ``line 5 (model
    'm3', item 'i5')`` where the file's line of row 0 is known (``first_line``: a file's
    column is named by its item, as a long file's records are; its number would not count
    the labels' column)."""

    def __init__(self, row_labels, col_labels, first_line=None):
        self.row_labels, self.col_labels = row_labels, col_labels
        self.first_line = first_line

    @staticmethod
    def _one(i, labels):
        return f"{i} ({_show(labels[i])})" if labels is not None else str(i)

    def row(self, i):
        return self._one(i, self.row_labels)

    def col(self, j):
        return self._one(j, self.col_labels)

    def __call__(self, r, c):
        if self.first_line:
            return (f"line {r + self.first_line} (model {_show(self.row_labels[r])}, item "
                    f"{_show(self.col_labels[c])})")
        return f"row {self.row(r)}, column {self.col(c)}"


def _check_scan(counts, coding, source, value_at, namer):
    _check_values(counts, coding, source, value_at, namer)
    _check_empty(counts, namer.row_labels, namer.col_labels, source, coding)


def _check_values(counts, coding, source, value_at, describe):
    """Raise for bad values, then for an ambiguous coding; describe(r, c) names a cell."""
    if counts.count(_BAD):
        r, c = counts.cells(_BAD)[0]
        value = value_at(r, c)
        what = ("infinite value" if isinstance(value, (float, np.floating)) and np.isinf(value)
                else f"value {_show(value)}")
        more = counts.count(_BAD) - 1
        raise ResponseError(f"{source}: {what} at {describe(r, c)}"
                            f"{f' ({more} more such cell(s))' if more else ''}; "
                            f"expected {_EXPECTED[coding]}")
    if coding is None and counts.count(_ZERO) and counts.count(_MINUS):
        def listing(category):
            return "; ".join(describe(r, c) for r, c in counts.cells(category)[:3])
        raise ResponseError(
            f"{source}: ambiguous coding: the matrix holds both -1 ({counts.count(_MINUS)} "
            f"cell(s), first at {listing(_MINUS)}) and 0 ({counts.count(_ZERO)} cell(s), first at "
            f"{listing(_ZERO)}); state it with coding= (the commands' --coding): 'binary' "
            "(1 correct, 0 incorrect, NaN missing; -1 is then an error) or 'signed' (+1 "
            "correct, -1 incorrect, 0 or NaN missing)")
    if coding == "signed" and counts.count(_ZERO) and not counts.count(_MINUS):
        # a 0/1 file read as signed, or a model that answered all it was asked correctly
        warn(
            f"{source}: coding 'signed' reads its {counts.count(_ZERO)} cell(s) of 0 as "
            "missing, and it holds no -1, so every observed answer is correct; if 0 means "
            "wrong, use coding='binary' (--coding binary) (if it means unanswered, leave "
            "those cells empty to say so)", CodingWarning)


def _check_empty(counts, row_labels, col_labels, source, coding=None):
    for obs, labels, what in ((counts.row_obs, row_labels, "model row"),
                              (counts.col_obs, col_labels, "item column")):
        empty = np.flatnonzero(obs == 0)
        if empty.size:
            shown = ", ".join(_show(labels[i]) if labels is not None else str(i)
                              for i in empty[:5])
            more = f" and {empty.size - 5} more" if empty.size > 5 else ""
            signed = ("; signed coding reads 0 as missing: if the answers are 1/0, give "
                      "coding='binary'" if coding == "signed" else "")
            raise ResponseError(f"{source}: {empty.size} {what}(s) with no observed entry: "
                                f"{shown}{more}; drop them before fitting{signed}")
