"""Reading response tables from CSV or Parquet files.

A wide table has one label column (the models) and one column per item; a long
table has one record per observed cell with the columns ``model``, ``item`` and
``correct`` (other names can be given).  Values are 1 (correct), 0 (incorrect)
or empty/``NA``/``NaN`` (missing), or the paper's -1/+1 (0 = missing) when the
coding says so.  The reader refuses, with the file, line and column named,
anything that pandas would otherwise "fix" silently: duplicate item ids (pandas
renames them), rows with too few or too many fields (pandas pads or fails
obscurely), missing labels, and a Parquet table without a label column.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..responses import (FIRST_LINE, LONG_COLUMNS, ResponseError, Responses, as_responses,
                         default_index, headerless_column, no_information, spaced_twins)
from .matrix import LABEL_COLUMN, DataError, read_matrix

__all__ = ["load_local", "read_csv_matrix", "read_responses", "read_table"]

#: Cells that mean a missing answer (pandas' defaults); labels are never missing.
_MISSING = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
            "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _header(path: Path) -> list[str]:
    """The header line's fields (a UTF-8 byte-order mark is not part of the first one)."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        try:
            header = next(csv.reader(handle))
        except StopIteration:
            raise DataError(f"{path}: empty file; expected a header of item ids") from None
        except UnicodeDecodeError as exc:
            raise _not_text(path, exc) from exc
        except csv.Error as exc:
            raise DataError(f"{path}: cannot parse the header line ({exc})") from exc
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        start = handle.read(64).lstrip()
    if re.match(r'\{\s*["}]|\[\s*[\[{"\]]', start):  # read as CSV it said "no rows"
        raise DataError(f"{path}: JSON text (it starts with {start[0]!r}), not CSV: write it "
                        "as CSV or Parquet (e.g. pandas.read_json(...).to_csv(...); JSON Lines: "
                        "read_json(..., lines=True))")
    # lines a spreadsheet or a script writes above the header (read as one, they named
    # no item or an item "sep=")
    if header and header[0].lower().startswith("sep=") and not any(header[1:]):
        raise DataError(f"{path}: line 1 is {','.join(header)!r}, a spreadsheet's note of the "
                        "separator, not the header; delete that line")
    if header and header[0].startswith("#") and (len(header) == 1 or header[0].startswith("# ")):
        raise DataError(f"{path}: line 1 is a comment (it starts with '#'), which is not read; "
                        "delete it, or if it is the header (as numpy.savetxt writes one), remove the "
                        "'# ' (the first line must be the header of item ids)")
    return header


#: The first bytes of files users hand over as CSV, and what to do with them.
_BINARY_FORMATS = {b"\x1f\x8b": "a gzip-compressed file, not CSV text: decompress it first "
                                "(gunzip)",
                   b"PK\x03\x04": "a ZIP archive (an Excel .xlsx workbook?), not CSV text: "
                                 "save it as CSV (UTF-8)",
                   b"\xd0\xcf\x11\xe0": "an Excel .xls workbook, not CSV text: save it as "
                                       "CSV (UTF-8)",
                   b"PAR1": "a Parquet file: name it .parquet"}


def _not_text(path: Path, exc: UnicodeDecodeError) -> DataError:
    """The error for a file that is not UTF-8 text, naming a compressed or spreadsheet file
    by its first bytes (a gzip file renamed .csv read as "can't decode byte 0x8b")."""
    with open(path, "rb") as handle:
        start = handle.read(4)
    for magic, what in _BINARY_FORMATS.items():
        if start.startswith(magic):
            return DataError(f"{path}: {what}")
    return DataError(f"{path}: not UTF-8 text ({exc})")


def _headerless_hint(header: list[str]) -> str:
    """A hint when the header line looks like data: answers where item ids should be."""
    answers = {"0", "1", "-1", "0.0", "1.0", "-1.0", ""}
    if len(header) > 2 and all(field.strip() in answers for field in header[1:]):
        return ("; the first line looks like data, not a header: the file needs a header line "
                "naming the items (e.g. model,item_1,item_2,...)")
    return ""


def _separator_hint(path: Path) -> str:
    """A hint when the file looks separated by semicolons or tabs: its first record after
    the header holds them and no comma (a header of labels with commas then splits into
    odd "items")."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as lines:
            lines.readline()
            record = lines.readline(1 << 16)
    except OSError:
        return ""
    for separator, name in ((";", "semicolons"), ("\t", "tabs")):
        if separator in record and "," not in record:
            return (f"; its first row holds {name} and no comma: the file must be "
                    f"comma-separated, not separated by {name}")
    return ""


def _check_field_counts(path: Path, expected: int, layout: str) -> tuple[int, bool]:
    """Every record must have ``expected`` comma-separated fields; returns the number of
    records (the header included) and whether a record spans lines (a quoted line break).
    Blank lines may end the file, not interrupt the table; a NUL byte is refused (readers
    would silently cut the field there).

    Reads the file in 16 MB blocks and counts the commas of a block's lines with NumPy (a
    Python loop over the 9 million lines of an evaluation log takes seconds).  From the
    first block holding a quote on, the csv module reads the rest: a quoted field may hold
    commas and line breaks.
    """
    state = _Lines(path, expected, layout)
    with open(path, "rb") as handle:
        tail = b""
        for chunk in iter(lambda: handle.read(1 << 24), b""):
            data = tail + chunk
            if not state.lines and b"\r" in data and b"\n" not in data:
                raise DataError(f"{path}: its lines end in a carriage return alone (old Mac "
                                "line endings); save it with LF or CRLF line endings")
            if b'"' in data:
                handle.seek(handle.tell() - len(data))
                state.quoted(handle)
                return state.records, state.multiline
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            state.block(data[:cut])
        if tail:
            state.unterminated = state.lines + 1
            state.block(tail + b"\n")
    return state.records, state.multiline


class _Lines:
    """The field counts of a CSV file's lines, checked in order, block by block (see
    :func:`_check_field_counts`)."""

    def __init__(self, path, expected, layout):
        self.path, self.expected, self.layout = path, expected, layout
        self.lines = 0  # lines read so far
        self.records = 0  # lines that are not blank
        self.blank = None  # the first blank line after the last record, if any
        self.multiline = False  # whether a record spans lines
        self.unterminated = None  # the last line, where the file ends inside it

    def _bad_fields(self, number, fields):
        hint = (f"one label plus {self.expected - 1} items, as in the header"
                if self.layout == "wide" else "as in the header")
        cut = ("; the file ends in the middle of this line: cut short?"
               if number == self.unterminated else "")
        raise DataError(f"{self.path}, line {number}: {fields} fields, expected "
                        f"{self.expected} ({hint}{cut})")

    def _inner_blank(self, number):
        raise DataError(f"{self.path}, line {number}: empty line inside the table")

    def _nul(self, number):
        raise DataError(f"{self.path}, line {number}: a NUL byte; not a text table (a "
                        "binary file, or a damaged one)")

    def block(self, block: bytes) -> None:
        """Complete lines (each ending in a line feed), numbered from ``self.lines + 1``."""
        buf = np.frombuffer(block, dtype=np.uint8)
        ends = np.flatnonzero(buf == ord("\n"))
        if not ends.size:  # a block within one line
            return
        starts = np.concatenate(([0], ends[:-1] + 1))
        nul = np.flatnonzero(buf == 0)
        if nul.size:
            self._nul(self.lines + 1 + int(np.searchsorted(ends, nul[0])))
        fields = np.add.reduceat(buf == ord(","), starts, dtype=np.int64) + 1
        cr = buf[np.maximum(ends - 1, 0)] == ord("\r")
        blank = ends - starts - cr <= 0
        numbers = self.lines + 1 + np.arange(ends.size)
        records = np.flatnonzero(~blank)
        if records.size and self.blank is not None:
            self._inner_blank(self.blank)
        # the first problem in file order: a record with other field counts, or a blank
        # line followed by a record
        wrong = np.flatnonzero(~blank & (fields != self.expected))
        blanks = np.flatnonzero(blank)
        inner = blanks[blanks < records[-1]] if records.size else blanks[:0]
        if wrong.size and (not inner.size or wrong[0] < inner[0]):
            self._bad_fields(numbers[wrong[0]], fields[wrong[0]])
        if inner.size:
            self._inner_blank(numbers[inner[0]])
        self.records += records.size
        if blanks.size and self.blank is None:
            self.blank = numbers[blanks[0]]  # trailing: after every record of the block
        self.lines += ends.size

    def quoted(self, handle) -> None:
        """The rest of the file, from the start of a line, read by the csv module (quoted
        fields may hold line breaks: a record is named by its first line)."""
        text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
        reader = csv.reader(text)
        read = 0
        try:
            for record in reader:
                number = self.lines + read + 1
                self.multiline |= reader.line_num > read + 1
                read = reader.line_num
                if not record:
                    self.blank = number if self.blank is None else self.blank
                    continue
                if self.blank is not None:
                    self._inner_blank(self.blank)
                if any("\0" in field for field in record):
                    self._nul(number)
                if len(record) != self.expected:
                    self._bad_fields(number, len(record))
                self.records += 1
        except csv.Error as exc:
            raise DataError(f"{self.path}, line {self.lines + read + 1}: cannot be parsed "
                            f"as CSV ({exc})") from None
        except UnicodeDecodeError as exc:
            raise _not_text(Path(self.path), exc) from exc
        finally:
            text.detach()  # the caller's handle, closed by the caller (no ResourceWarning)


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
        raise DataError(f"{path}: no label column {label_column!r} in the header "
                        f"(columns: {header[:5]}...)")
    items = header[:label_pos] + header[label_pos + 1:]
    if not items:
        raise DataError(f"{path}: the header has no item columns" + _separator_hint(path))
    blank = [k for k, item in enumerate(items) if not item.strip()]
    if blank:
        raise DataError(f"{path}: {headerless_column(blank[0], len(items))}")
    seen, duplicates = set(), []
    for item in items:
        if item in seen:
            duplicates.append(item)
        seen.add(item)
    if duplicates:
        raise DataError(f"{path}: duplicate item ids in the header: {sorted(set(duplicates))[:5]}"
                        + (_separator_hint(path) or _headerless_hint(header)))
    twins = spaced_twins(items)
    if twins:
        raise DataError(f"{path}: item ids {twins[0]!r} and {twins[1]!r} differ only by "
                        "spaces around them (one item twice?)")
    records, multiline = _check_field_counts(path, len(header), "wide")
    if records < 2:
        raise DataError(f"{path}: no model rows after the header" + _headerless_hint(header))
    # labels are text as written ("NA" and "null" are models); empty or NA answers missing
    missing = {k: _MISSING for k in range(len(header)) if k != label_pos}
    try:
        # header=0 with names: the header is skipped as a record (skiprows=1 skipped one
        # line, which split a header with a quoted line break and misread the quotes after)
        frame = pd.read_csv(path, header=0, names=range(len(header)), index_col=label_pos,
                            dtype={label_pos: str}, encoding="utf-8-sig",
                            keep_default_na=False, na_values=missing)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be parsed as CSV ({_one_line(exc)})") from exc
    frame.columns = pd.Index(items, dtype=object)
    frame.index = pd.Index(frame.index, name=LABEL_COLUMN, dtype=object)
    empty = np.flatnonzero(frame.index.str.strip() == "")
    if empty.size:
        where = (f"in the {_ordinal(empty[0] + 1)} record after the header" if multiline
                 else f"line {empty[0] + 2}")  # blank lines only end a table
        raise DataError(f"{path}, {where}: empty model label")
    twins = spaced_twins(frame.index)
    if twins:
        raise DataError(f"{path}: model labels {twins[0]!r} and {twins[1]!r} differ only by "
                        "spaces around them (one model twice?)")
    if not multiline:  # each record one line: the answers' errors name the file's lines
        frame.attrs[FIRST_LINE] = 2
    return frame


def read_table(path, *, layout: str = "auto", label_column: str | None = None,
               model_column: str = "model", item_column: str = "item",
               correct_column: str = "correct") -> pd.DataFrame:
    """Read a response table from CSV or Parquet, wide or long.

    Parameters
    ----------
    path : path-like
        ``.csv``/``.txt`` or ``.parquet``/``.pq``.
    layout : {"auto", "wide", "long"}
        ``"auto"``: a table whose header has the columns ``model_column``, ``item_column`` and
        ``correct_column`` (default ``model``, ``item``, ``correct``) is long, and so is any
        table when one of them is named otherwise, unless ``label_column`` is given; any other
        table is wide.
    label_column : str, optional
        Wide tables: the column holding the model labels.  Default for CSV: the first column.
        Default for Parquet: the stored index of a table written from a labelled DataFrame, else
        a column named ``model``, else the first column if it does not hold numbers; a Parquet
        table with none of these is refused (its first item would silently become the labels).
    model_column, item_column, correct_column : str
        Long tables: the names of the model id, item id and response columns.

    Returns
    -------
    pandas.DataFrame
        Wide: index = model labels (named ``model``), columns = item ids (strings), values as
        parsed (validated by :func:`cbmm.as_responses`).  Long: the columns ``model``, ``item``
        (categorical; CSV ids are strings) and ``correct`` (other columns are dropped); the index
        is the CSV line number (named ``line``) or the Parquet row number, so that errors name
        the record.  :func:`cbmm.as_responses` recognises the long form by its column names.
    """
    return _read(path, layout, label_column, model_column, item_column, correct_column)[0]


def _read(path, layout, label_column, model_column, item_column, correct_column):
    """(frame, layout) of a table; see read_table."""
    if layout not in ("auto", "wide", "long"):
        raise DataError(f"layout must be 'auto', 'wide' or 'long', got {layout!r}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (str or os.PathLike), got "
                        f"{type(path).__name__}")
    named = {"model_column": model_column, "item_column": item_column,
             "correct_column": correct_column}
    if len(set(named.values())) < 3:
        raise DataError(f"{', '.join(f'{k}={v!r}' for k, v in named.items())}: a long table's "
                        "three columns need three different names")
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: a directory; expected a CSV or Parquet file")
    if not path.is_file():
        raise DataError(f"{path}: " + ("not a regular file (a device, pipe or socket); expected "
                                       "a CSV or Parquet file" if path.exists()
                                       else "no such file"))
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".txt", ".parquet", ".pq"):
        packed = (" (compressed: decompress it first)" if suffix in (".gz", ".zip", ".bz2", ".xz")
                  else " (a spreadsheet: save it as CSV)" if suffix in (".xlsx", ".xls", ".ods")
                  else "")
        raise DataError(f"{path}: unsupported file type {suffix!r}{packed}; expected .csv or "
                        ".parquet")
    csv_file = suffix in (".csv", ".txt")
    long_names = {model_column: LONG_COLUMNS[0], item_column: LONG_COLUMNS[1],
                  correct_column: LONG_COLUMNS[2]}
    # a long table's columns named other than the defaults say the table is long
    renamed = [f"{key}={value!r}" for (key, value), default in zip(named.items(), LONG_COLUMNS)
               if value != default]
    _check_layout_options(path, layout, label_column, renamed)
    if layout == "auto":
        header = _header(path) if csv_file else _parquet_columns(path)
        if label_column in long_names and set(long_names) <= set(header):
            raise DataError(f"{path}: label_column={label_column!r} (--label-column) reads a "
                            f"wide table, but the header has a long table's columns "
                            f"{', '.join(long_names)}; leave it out, or give layout='wide' "
                            "(--layout wide) if the table is wide")
        layout = "long" if label_column is None and (renamed or set(long_names) <= set(header)) \
            else "wide"
    if layout == "long":
        reader = _read_long_csv if csv_file else _read_long_parquet
        return reader(path, long_names), layout
    if csv_file:
        return read_csv_matrix(path, label_column=label_column), layout
    return _read_wide_parquet(path, label_column), layout


def _check_layout_options(path, layout, label_column, renamed) -> None:
    """Refuse a wide table's option beside a long table's (either was ignored)."""
    wide = f"label_column={label_column!r} (--label-column: a wide table's model labels)"
    long = f"{', '.join(renamed)} (--model-column, --item-column, --correct-column: a long table's)"
    if label_column is not None and renamed:
        raise DataError(f"{path}: {wide} and {long} contradict each other; give the one for "
                        "the table's layout")
    if layout == "wide" and renamed:
        raise DataError(f"{path}: layout='wide' with {long}; drop them, or read it as long")
    if layout == "long" and label_column is not None:
        raise DataError(f"{path}: layout='long' with {wide}; drop it, or read it as wide")


def _parquet_columns(path: Path) -> list[str]:
    try:
        names = pq.read_schema(path).names
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: cannot be read as Parquet ({_one_line(exc)})") from exc
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DataError(f"{path}: column name(s) {repeated[:5]} occur more than once; each "
                        "column (a label column or an item) needs a name of its own")
    return names


def _one_line(exc) -> str:
    return " ".join(str(exc).split())


def _read_wide_parquet(path: Path, label_column: str | None) -> pd.DataFrame:
    try:
        return read_matrix(path)
    except DataError:
        pass  # a plain Parquet table, not our canonical form
    _parquet_columns(path)
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several unrelated types
        raise DataError(f"{path}: cannot be read as Parquet ({_one_line(exc)})") from exc
    if isinstance(frame.columns, pd.MultiIndex) or isinstance(frame.index, pd.MultiIndex):
        raise DataError(f"{path}: a table with several levels of column or row labels (a "
                        "MultiIndex); write it with one level of item ids and model labels")
    # pandas stores a RangeIndex as metadata, not a column: one named or not 0, 1, ... is
    # the user's labels where no column is (refused as "no stored index" before), and is
    # kept by falling through; the unnamed 0, 1, ... is none
    index = frame.index
    if label_column is not None and label_column == index.name \
            and label_column not in frame.columns:
        label_column = None  # the stored index it names
    elif label_column is None and isinstance(index, pd.RangeIndex):
        if LABEL_COLUMN in frame.columns:
            label_column = LABEL_COLUMN
        elif len(frame.columns) and not pd.api.types.is_numeric_dtype(frame.iloc[:, 0]) \
                and not pd.api.types.is_bool_dtype(frame.iloc[:, 0]):
            label_column = frame.columns[0]
        elif default_index(index):
            first = frame.columns[0] if len(frame.columns) else None
            raise DataError(
                f"{path}: no model labels: no stored index, no column {LABEL_COLUMN!r}, and the "
                f"first column {first!r} holds numbers (an item, not labels); name the label "
                "column (label_column)")
    if label_column is not None:
        if label_column not in frame.columns:
            raise DataError(
                f"{path}: no label column {label_column!r} (columns: {list(frame.columns[:5])}...)")
        frame = frame.set_index(label_column)
    labels = frame.index
    missing = np.flatnonzero(pd.isna(labels))
    if missing.size:
        raise DataError(f"{path}: row {missing[0]} has no model label ({missing.size} such "
                        "row(s))")
    frame.index = pd.Index([str(v) for v in labels], name=LABEL_COLUMN, dtype=object)
    frame.columns = pd.Index([str(c) for c in frame.columns], dtype=object)
    if frame.columns.duplicated().any():
        raise DataError(
            f"{path}: duplicate item ids {list(frame.columns[frame.columns.duplicated()][:5])}")
    return frame


def _read_long_csv(path: Path, names: dict) -> pd.DataFrame:
    header = _header(path)
    missing = [name for name in names if name not in header]
    if missing:
        raise DataError(f"{path}: a long table needs the columns {list(names)}; the header lacks "
                        f"{missing}")
    repeated = [name for name in names if header.count(name) > 1]
    if repeated:
        raise DataError(f"{path}: the header names {repeated} more than once")
    records, multiline = _check_field_counts(path, len(header), "long")
    if records < 2:
        raise DataError(f"{path}: no records after the header")
    ids = pa.dictionary(pa.int32(), pa.string())  # one copy of each distinct id
    # ids are text as written ("NA", "null" and "007" name models and items); "NA" or an
    # empty field in the correct column is a missing answer
    options = pacsv.ConvertOptions(include_columns=list(names), strings_can_be_null=False,
                                   null_values=_MISSING,  # the wide reader's, "None" included
                                   column_types={name: ids for name in list(names)[:2]})
    try:  # Arrow's reader: several times faster than pandas' on a log of millions of lines
        table = pacsv.read_csv(path, convert_options=options,
                               parse_options=pacsv.ParseOptions(newlines_in_values=multiline))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: cannot be parsed as CSV ({_one_line(exc)})") from exc
    frame = pd.DataFrame({canonical: table.column(name).to_pandas()
                          for name, canonical in names.items()})
    # records are named by line, or by number where a quoted field spans lines
    frame.index = (pd.RangeIndex(1, len(frame) + 1, name="record") if multiline
                   else pd.RangeIndex(2, len(frame) + 2, name="line"))
    for name, what in ((LONG_COLUMNS[0], "a model"), (LONG_COLUMNS[1], "an item")):
        empty = np.flatnonzero(frame[name].astype(object).str.strip() == "")
        if empty.size:
            raise DataError(f"{path}: {empty.size} record(s) without {what} id, first at "
                            f"{frame.index.name} {frame.index[empty[0]]}")
    return frame[list(LONG_COLUMNS)]


def _read_long_parquet(path: Path, names: dict) -> pd.DataFrame:
    present = _parquet_columns(path)
    missing = [name for name in names if name not in present]
    if missing:
        raise DataError(f"{path}: a long table needs the columns {list(names)}; it lacks {missing}")
    try:
        table = pq.read_table(path, columns=list(names))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path}: cannot be read as Parquet ({_one_line(exc)})") from exc
    columns = {}
    for name, canonical in names.items():
        column = table.column(name)
        if canonical != LONG_COLUMNS[2]:
            # ids as text, like a CSV's, and as categoricals: one copy of each distinct id,
            # integer codes per record
            if pa.types.is_dictionary(column.type):
                column = column.cast(pa.dictionary(column.type.index_type, pa.string()))
            else:
                column = column.cast(pa.string()).dictionary_encode()
        columns[canonical] = column.to_pandas()
    return pd.DataFrame(columns)[list(LONG_COLUMNS)]


def read_responses(path, *, coding: str | None = None, storage: str = "auto",
                   layout: str = "auto", label_column: str | None = None,
                   model_column: str = "model", item_column: str = "item",
                   correct_column: str = "correct") -> Responses:
    """Read a response table (:func:`read_table`) and validate it (:func:`cbmm.as_responses`).

    ``coding`` and ``storage`` are those of :func:`cbmm.as_responses`; the other keyword
    arguments those of :func:`read_table`.  Every problem is a :class:`DataError` that names the
    file and, where there is one, the line, row, column or record.
    """
    frame, layout = _read(path, layout, label_column, model_column, item_column, correct_column)
    try:
        return as_responses(frame, coding=coding, storage=storage, layout=layout,
                            source=str(path))
    except ResponseError as exc:
        raise DataError(str(exc)) from exc


def load_local(path, *, coding: str | None = None, layout: str = "auto",
               label_column: str | None = None, model_column: str = "model",
               item_column: str = "item", correct_column: str = "correct") -> pd.DataFrame:
    """A user's response table, validated, as a 0/1/NaN float DataFrame (models x items).

    Read and checked by :func:`read_responses` (same arguments): ``coding`` None infers it where
    that is unambiguous, so a table holding both -1 and 0 is refused until the coding is stated.
    Rows or columns with no observed entry, duplicate labels or duplicate (model, item) records
    are refused, and so are answers that cannot tell the models apart
    (:func:`cbmm.responses.no_information`), which no fit takes.
    """
    responses = read_responses(path, coding=coding, storage="dense", layout=layout,
                               label_column=label_column, model_column=model_column,
                               item_column=item_column, correct_column=correct_column)
    reason = no_information(responses, coding)
    if reason:
        raise DataError(f"{path}: {reason}")
    out = responses.to_frame()
    out.index.name = LABEL_COLUMN
    return out
