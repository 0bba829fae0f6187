"""The canonical on-disk response matrix and its summary.

Every dataset, whatever its source, ends up as one Parquet file:

* one string column ``model`` holding the row labels (models), in source order;
* one ``int8`` column per item, named by the item id (a string), in source
  order, holding 1 (correct) or 0 (incorrect), with Arrow nulls for missing
  entries;
* the schema metadata key ``cbmm.format`` set to :data:`FORMAT`.

Int8 with a validity bitmap keeps a 2211 x 12032 matrix at a few MB on disk
and lets any Arrow/Parquet reader open it.  A summary JSON (shape, missing
rate, constant and empty rows/columns, accuracies) is written next to it as
``<stem>.summary.json``.  Both files are written to a temporary name and then
renamed, so a failure never leaves a partial file at the output path.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..io import atomic_path

__all__ = [
    "FORMAT",
    "LABEL_COLUMN",
    "DataError",
    "atomic_path",
    "check_binary",
    "iter_jsonl",
    "matrix_summary",
    "read_matrix",
    "summary_path",
    "write_json",
    "write_matrix",
]

FORMAT = "cbmm-response-matrix/1"
LABEL_COLUMN = "model"
_FORMAT_KEY = b"cbmm.format"


class DataError(ValueError):
    """Raised for data that cannot be fetched, read or stored (says which file and where)."""


def iter_jsonl(path, *, source: str | None = None):
    """Yield ``(line number, record)`` for each non-blank line of a JSON Lines file.

    Raises
    ------
    DataError
        For a line that is not valid JSON (naming the file and line).
    """
    source = source or str(path)
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{source}, line {lineno}: invalid JSON ({exc})") from exc


def write_json(obj, path) -> Path:
    """Write ``obj`` as indented JSON at ``path`` atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def summary_path(matrix_path) -> Path:
    """Path of the summary JSON that belongs to a matrix file."""
    matrix_path = Path(matrix_path)
    return matrix_path.with_name(matrix_path.stem + ".summary.json")


def check_binary(df: pd.DataFrame, source: str) -> np.ndarray:
    """Return ``df`` as a float array after checking every cell is 0, 1 or NaN.

    Raises
    ------
    DataError
        Naming the first offending cell (row label, column id, value) and how
        many cells are bad.
    """
    try:
        values = df.to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError):
        for col in df.columns:
            numeric = pd.to_numeric(df[col], errors="coerce")
            bad = numeric.isna() & df[col].notna()
            if bad.any():
                row = df.index[np.flatnonzero(bad.to_numpy())[0]]
                raise DataError(
                    f"{source}: non-numeric value {df[col][bad].iloc[0]!r} at row {row!r}, "
                    f"column {col!r}; expected 0, 1 or empty (missing)"
                ) from None
        raise
    bad = ~np.isnan(values) & (values != 0) & (values != 1)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DataError(
            f"{source}: value {float(values[r, c])!r} at row {df.index[r]!r}, "
            f"column {df.columns[c]!r} "
            f"({int(bad.sum())} such cells); expected 0, 1 or empty (missing)"
        )
    return values


def _check_labels(df: pd.DataFrame, source: str) -> None:
    if LABEL_COLUMN in map(str, df.columns):
        raise DataError(
            f"{source}: an item is named {LABEL_COLUMN!r}, which is reserved for the model labels"
        )
    if df.index.hasnans:
        raise DataError(f"{source}: {int(df.index.isna().sum())} row(s) without a model label")


def write_matrix(df: pd.DataFrame, path, *, source: str | None = None) -> Path:
    """Write a models x items 0/1/NaN DataFrame in the canonical Parquet form.

    Parameters
    ----------
    df : pandas.DataFrame
        Index = model labels, columns = item ids; values 0, 1 or NaN.
    path : path-like
        Output file; written atomically.
    source : str, optional
        Name used in error messages (defaults to ``path``).
    """
    source = source or str(path)
    _check_labels(df, source)
    values = check_binary(df, source)
    observed = ~np.isnan(values)
    coded = np.where(observed, values, 0).astype(np.int8)
    arrays = [pa.array(df.index.astype(str), type=pa.string())]
    arrays += [
        pa.array(coded[:, j], mask=~observed[:, j], type=pa.int8()) for j in range(coded.shape[1])
    ]
    names = [LABEL_COLUMN] + [str(c) for c in df.columns]
    table = pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(
        {_FORMAT_KEY: FORMAT.encode()}
    )
    path = Path(path)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return path


def read_matrix(path) -> pd.DataFrame:
    """Read a canonical matrix file.

    Returns
    -------
    pandas.DataFrame
        float64 values 1.0/0.0/NaN, index = model labels (named ``model``),
        columns = item ids as strings, both in stored order.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such matrix file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc}); a table of answers "
                        f"(CSV or Parquet) becomes one with `cbmm data import`") from exc
    metadata = table.schema.metadata or {}
    if metadata.get(_FORMAT_KEY) != FORMAT.encode():
        raise DataError(
            f"{path}: not a cbmm response matrix (schema metadata {_FORMAT_KEY.decode()!r} is "
            f"{metadata.get(_FORMAT_KEY)!r}, expected {FORMAT!r}); a table of answers becomes "
            "one with `cbmm data import` (a registry's dataset with `cbmm data build`)"
        )
    labels = table.column(LABEL_COLUMN).to_pylist()
    items = table.drop_columns([LABEL_COLUMN])
    values = np.empty((table.num_rows, items.num_columns), dtype=float)
    for j, column in enumerate(items.columns):
        values[:, j] = column.to_numpy(zero_copy_only=False)  # nulls become NaN
    return pd.DataFrame(
        values,
        index=pd.Index(labels, name=LABEL_COLUMN, dtype=object),
        columns=pd.Index(items.column_names, dtype=object),
    )


def _accuracy_map(labels, correct, seen) -> dict:
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = correct / seen
    return {str(k): (None if np.isnan(v) else round(float(v), 6)) for k, v in zip(labels, acc)}


def matrix_summary(df: pd.DataFrame) -> dict:
    """Descriptive summary of a 0/1/NaN response matrix.

    Returns
    -------
    dict
        ``n_models``, ``n_items``, ``n_observed``, ``missing_rate``,
        ``mean_accuracy`` (over observed cells), ``all_correct_items`` /
        ``all_wrong_items`` (constant columns among observed cells),
        ``empty_items`` / ``empty_models`` (nothing observed),
        ``all_correct_models`` / ``all_wrong_models``, ``duplicate_models`` /
        ``duplicate_items`` (labels that occur more than once), and the
        per-model and per-item accuracy maps ``model_accuracy`` and
        ``item_accuracy`` (None where nothing is observed).
    """
    values = df.to_numpy(dtype=float, na_value=np.nan)
    observed = ~np.isnan(values)
    correct = values == 1
    seen_items, seen_models = observed.sum(axis=0), observed.sum(axis=1)
    right_items, right_models = correct.sum(axis=0), correct.sum(axis=1)
    items = df.columns.astype(str)
    models = df.index.astype(str)

    def pick(labels, mask):
        return [str(x) for x in labels[mask]]

    n_observed = int(observed.sum())
    return {
        "n_models": int(values.shape[0]),
        "n_items": int(values.shape[1]),
        "n_observed": n_observed,
        "missing_rate": round(1.0 - n_observed / values.size, 8) if values.size else None,
        "mean_accuracy": round(float(correct.sum() / n_observed), 6) if n_observed else None,
        "all_correct_items": pick(items, (seen_items > 0) & (right_items == seen_items)),
        "all_wrong_items": pick(items, (seen_items > 0) & (right_items == 0)),
        "empty_items": pick(items, seen_items == 0),
        "all_correct_models": pick(models, (seen_models > 0) & (right_models == seen_models)),
        "all_wrong_models": pick(models, (seen_models > 0) & (right_models == 0)),
        "empty_models": pick(models, seen_models == 0),
        "duplicate_models": sorted(set(models[models.duplicated()])),
        "duplicate_items": sorted(set(items[items.duplicated()])),
        "model_accuracy": _accuracy_map(models, right_models, seen_models),
        "item_accuracy": _accuracy_map(items, right_items, seen_items),
    }
