"""Response matrices: validation and the paper's internal ±1/0 coding.

Users hand in an ``N x J`` matrix (models x items) with 1 = correct,
0 = incorrect and NaN = missing, as a NumPy array or a pandas DataFrame.
A matrix that contains -1 is read in the paper's coding instead
(+1 correct, -1 incorrect, 0 or NaN missing).  Internally every method sees
:class:`Responses`, whose ``y`` is a compact ``int8`` array with the paper's
coding ``y_ij in {-1, 0, +1}`` (0 = not observed), so a 2211 x 12032 matrix
takes 27 MB rather than 213 MB as float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["Responses", "as_responses", "ResponseError"]


class ResponseError(ValueError):
    """Raised for a response matrix that cannot be fitted (names what is wrong)."""


def _describe(indices, labels, limit=5):
    shown = [str(labels[i]) if labels is not None else str(i) for i in indices[:limit]]
    more = f" and {len(indices) - limit} more" if len(indices) > limit else ""
    return ", ".join(shown) + more


@dataclass(frozen=True)
class Responses:
    """A validated response matrix in the paper's coding, stored dense or sparse.

    Dense storage keeps the whole matrix; sparse storage keeps only the
    observed cells, row by row (CSR), for matrices where most cells are
    missing.  Solvers read whichever is present (``storage``).

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

    @property
    def storage(self) -> str:
        """``"dense"`` or ``"sparse"``."""
        return "dense" if self.y is not None else "sparse"

    @property
    def shape(self) -> tuple[int, int]:
        if self.y is not None:
            return self.y.shape
        return (self.indptr.size - 1, int(self.n_items))

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of observed entries (Omega)."""
        if "observed" not in self._cache:
            self._cache["observed"] = self.y != 0
        return self._cache["observed"]

    @property
    def n_observed(self) -> int:
        return int(np.count_nonzero(self.y))

    @property
    def fully_observed(self) -> bool:
        return self.n_observed == self.y.size

    def accuracy(self, axis: int) -> np.ndarray:
        """Share of correct answers among observed entries (axis=1: per model)."""
        correct = np.count_nonzero(self.y == 1, axis=axis)
        seen = np.count_nonzero(self.y, axis=axis)
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

    def label_rows(self, idx) -> list:
        return [self.row_labels[i] if self.row_labels is not None else int(i) for i in idx]

    def label_cols(self, idx) -> list:
        return [self.col_labels[j] if self.col_labels is not None else int(j) for j in idx]

    def to_frame(self) -> pd.DataFrame:
        """0/1/NaN float DataFrame (the user-facing coding)."""
        values = np.where(self.y == 0, np.nan, (self.y + 1) / 2)
        return pd.DataFrame(values, index=self.row_labels, columns=self.col_labels)


def as_responses(data, *, source: str = "responses") -> Responses:
    """Validate a response matrix and convert it to :class:`Responses`.

    Parameters
    ----------
    data : array-like, pandas.DataFrame or Responses
        ``N x J`` matrix, 0/1 with NaN for missing, or -1/+1 with 0/NaN for
        missing.
    source : str
        Name used in error messages (e.g. the file the matrix came from).

    Raises
    ------
    ResponseError
        For non-2-D input, N < 2 or J < 1, infinite or non-binary values, or a
        row or column with no observed entry.  The message names the offending
        rows/columns.
    """
    if isinstance(data, Responses):
        return data
    row_labels = col_labels = None
    if isinstance(data, pd.DataFrame):
        row_labels, col_labels = data.index, data.columns
        bad = [c for c in data.columns if not (pd.api.types.is_numeric_dtype(data[c])
                                               or pd.api.types.is_bool_dtype(data[c]))]
        if bad:
            _raise_non_numeric(data, bad, source)
        values = data.to_numpy()
        if values.dtype == object:  # mixed nullable columns
            values = data.to_numpy(dtype=float, na_value=np.nan)
    else:
        try:
            values = np.asarray(data)
        except (TypeError, ValueError) as exc:
            raise ResponseError(f"{source}: cannot be read as a numeric matrix ({exc})") from exc
    if values.dtype.kind not in "biuf":
        try:
            values = values.astype(float)
        except (TypeError, ValueError) as exc:
            raise ResponseError(f"{source}: cannot be read as a numeric matrix ({exc})") from exc
    if values.ndim != 2:
        raise ResponseError(f"{source}: expected a 2-D models x items matrix, got {values.ndim}-D")
    n, j = values.shape
    if n < 2 or j < 1:
        raise ResponseError(f"{source}: need at least 2 models and 1 item, got N={n}, J={j}")
    # Integer input is coded without a float copy (a 2211 x 12032 float64
    # copy alone would be 213 MB).
    y = _code_integers(values, source, row_labels, col_labels) if values.dtype.kind in "biu" \
        else _code_floats(values, source, row_labels, col_labels)

    empty_rows = np.flatnonzero(~y.any(axis=1))
    if empty_rows.size:
        raise ResponseError(
            f"{source}: {empty_rows.size} model row(s) with no observed entry: "
            f"{_describe(empty_rows, row_labels)}; drop them before fitting"
        )
    empty_cols = np.flatnonzero(~y.any(axis=0))
    if empty_cols.size:
        raise ResponseError(
            f"{source}: {empty_cols.size} item column(s) with no observed entry: "
            f"{_describe(empty_cols, col_labels)}; drop them before fitting"
        )
    return Responses(y=y, row_labels=row_labels, col_labels=col_labels)


def _code_integers(values, source, row_labels, col_labels):
    if values.dtype == np.bool_:
        return np.where(values, 1, -1).astype(np.int8)
    signed = bool((values == -1).any())
    bad = _outside(values, (-1, 0, 1) if signed else (0, 1))
    if bad.any():
        _raise_bad_value(values, bad, signed, source, row_labels, col_labels)
    if signed:
        return np.ascontiguousarray(values, dtype=np.int8)
    return (2 * values.astype(np.int8) - 1).astype(np.int8, copy=False)


def _code_floats(values, source, row_labels, col_labels):
    infinite = np.isinf(values)
    if infinite.any():
        r, c = np.argwhere(infinite)[0]
        raise ResponseError(
            f"{source}: infinite value at row {_cell(r, row_labels)}, column {_cell(c, col_labels)}"
        )
    signed = bool((values == -1).any())
    bad = _outside(values, (-1.0, 0.0, 1.0) if signed else (0.0, 1.0))
    bad &= ~np.isnan(values)
    if bad.any():
        _raise_bad_value(values, bad, signed, source, row_labels, col_labels)
    y = np.zeros(values.shape, dtype=np.int8)
    y[values == 1] = 1
    y[values == (-1 if signed else 0)] = -1
    return y


def _raise_non_numeric(frame, columns, source):
    column = frame[columns[0]]
    cells = column[pd.to_numeric(column, errors="coerce").isna() & column.notna()]
    where = f"value {cells.iloc[0]!r} at row {cells.index[0]!r}" if len(cells) else "values"
    raise ResponseError(
        f"{source}: column {columns[0]!r} has non-numeric {where} ({len(columns)} non-numeric "
        "column(s)); expected 0/1/NaN values")


def _outside(values, allowed):
    """Mask of entries not in ``allowed`` (np.isin would sort the whole matrix
    with int64 indices: 8 bytes per entry)."""
    bad = values != allowed[0]
    for value in allowed[1:]:
        bad &= values != value
    return bad


def _raise_bad_value(values, bad, signed, source, row_labels, col_labels):
    r, c = np.argwhere(bad)[0]
    coding = "-1/+1 (0 or NaN = missing)" if signed else "0/1 (NaN = missing)"
    raise ResponseError(
        f"{source}: value {values[r, c].item()!r} at row {_cell(r, row_labels)}, column "
        f"{_cell(c, col_labels)} ({int(bad.sum())} such cells); expected {coding}"
    )


def _cell(i, labels):
    return f"{i} ({labels[i]!r})" if labels is not None else str(i)
