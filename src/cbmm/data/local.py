"""Reading response matrices from CSV or Parquet files.

A table has one label column (the models) and one column per item, with
values 1 (correct), 0 (incorrect) or empty/``NA``/``NaN`` (missing).  The
reader refuses, with the file, line and column named, anything that pandas
would otherwise "fix" silently: duplicate item ids (pandas renames them),
rows with too few or too many fields (pandas pads or fails obscurely), and
missing labels.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from ..responses import ResponseError, as_responses
from .matrix import LABEL_COLUMN, DataError, read_matrix

__all__ = ["load_local", "read_csv_matrix", "read_table"]


def _header(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        try:
            return next(csv.reader(handle))
        except StopIteration:
            raise DataError(f"{path}: empty file; expected a header of item ids") from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: cannot parse the header line ({exc})") from exc


def _check_field_counts(path: Path, expected: int) -> None:
    """Every line must have ``expected`` comma-separated fields."""
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = raw.rstrip(b"\r\n")
            if not line and lineno > 1:
                raise DataError(f"{path}, line {lineno}: empty line inside the table")
            if b'"' in line:  # quoted fields may contain commas: let the csv module count
                fields = len(next(csv.reader([line.decode("utf-8")])))
            else:
                fields = line.count(b",") + 1
            if fields != expected:
                raise DataError(
                    f"{path}, line {lineno}: {fields} fields, expected {expected} "
                    f"(one label plus {expected - 1} items, as in the header)"
                )


def read_csv_matrix(path, *, label_column: str | None = None) -> pd.DataFrame:
    """Read a CSV response table without any silent repair.

    Parameters
    ----------
    path : path-like
        CSV with a header line.  The release format is the special case of an
        empty first header cell: ``,item1,item2,...`` then ``model,0,1,...``.
    label_column : str, optional
        Header name of the column holding the model labels; default: the
        first column.

    Returns
    -------
    pandas.DataFrame
        Index = labels (strings, named ``model``), columns = item ids
        (strings, file order), values as parsed by pandas (validated later).
    """
    path = Path(path)
    header = _header(path)
    if label_column is None:
        label_pos = 0
    elif label_column in header:
        label_pos = header.index(label_column)
    else:
        raise DataError(f"{path}: no label column {label_column!r} in the header (columns: {header[:5]}...)")
    items = header[:label_pos] + header[label_pos + 1:]
    if not items:
        raise DataError(f"{path}: the header has no item columns")
    seen, duplicates = set(), []
    for item in items:
        if item in seen:
            duplicates.append(item)
        seen.add(item)
    if duplicates:
        raise DataError(f"{path}: duplicate item ids in the header: {sorted(set(duplicates))[:5]}")
    _check_field_counts(path, len(header))
    try:
        frame = pd.read_csv(path, skiprows=1, header=None, index_col=label_pos, dtype={label_pos: str},
                            encoding="utf-8")
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be parsed as CSV ({exc})") from exc
    frame.columns = pd.Index(items, dtype=object)
    frame.index = pd.Index(frame.index, name=LABEL_COLUMN, dtype=object)
    if frame.index.hasnans:
        row = int(pd.isna(frame.index).argmax())
        raise DataError(f"{path}, line {row + 2}: empty model label")
    return frame


def read_table(path, *, label_column: str | None = None) -> pd.DataFrame:
    """Read a CSV, a plain Parquet table or a canonical matrix file.

    Parquet tables follow the CSV layout (label column + item columns);
    ``label_column`` defaults to the first column, or to the stored index of
    a table written from a labelled DataFrame (``DataFrame.to_parquet``).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".txt"):
        return read_csv_matrix(path, label_column=label_column)
    if suffix not in (".parquet", ".pq"):
        raise DataError(f"{path}: unsupported file type {suffix!r}; expected .csv or .parquet")
    try:
        return read_matrix(path)
    except DataError:
        pass  # a plain Parquet table, not our canonical form
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several unrelated types
        raise DataError(f"{path}: cannot be read as Parquet ({exc})") from exc
    # a table written from a labelled DataFrame keeps its labels as the stored index
    if label_column is not None or isinstance(frame.index, pd.RangeIndex):
        label = label_column if label_column is not None else frame.columns[0]
        if label not in frame.columns:
            raise DataError(
                f"{path}: no label column {label!r} (columns: {list(frame.columns[:5])}...)")
        frame = frame.set_index(label)
    frame.index = pd.Index(frame.index.astype(object), name=LABEL_COLUMN)
    frame.columns = pd.Index([str(c) for c in frame.columns], dtype=object)
    if frame.columns.duplicated().any():
        raise DataError(f"{path}: duplicate item ids {list(frame.columns[frame.columns.duplicated()][:5])}")
    return frame


def load_local(path, *, label_column: str | None = None) -> pd.DataFrame:
    """A user's response table, validated, as a 0/1/NaN float DataFrame.

    Values are checked by :func:`cbmm.as_responses` (so a table in the
    paper's -1/+1 coding with 0 = missing is accepted and converted); rows or
    columns with no observed entry are refused, since they cannot be fitted.
    """
    frame = read_table(path, label_column=label_column)
    try:
        responses = as_responses(frame, source=str(path))
    except ResponseError as exc:
        raise DataError(str(exc)) from exc
    out = responses.to_frame()
    out.index.name = LABEL_COLUMN
    return out
