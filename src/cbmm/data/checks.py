"""Checks on values that come from a registry, a configuration or an API call.

Every check raises :class:`~cbmm.data.DataError` naming the key it was given
(``config/datasets.yaml: datasets.IFEval.options.file``) and what was expected,
so a bad value fails before any file is touched.

Paths.  A registry names files (``file: data/IFEval.csv``), a repository and a
commit that become folders of the cache, a URL whose last segment becomes a
cache file name, dataset names that become file names.  Two checks keep every
such path inside the folder it belongs to:

* :func:`relative_path` (at load time): the value is a relative path of plain
  names - letters, digits and ``_ . + -``, not starting with a dot, joined by
  single ``/``.  That excludes ``..``, absolute paths, backslashes, empty
  segments and hidden files.  The same rules exist as JSON-schema patterns
  (:data:`RELATIVE_PATH_PATTERN` and friends) for configuration schemas.
* :func:`inside` (right before a path is read, written or deleted): the path,
  with every symbolic link resolved, lies inside its folder (also resolved).
  This catches links planted in the cache that point elsewhere.
"""

from __future__ import annotations

import datetime
import math
import re
from pathlib import Path
from urllib.parse import urlsplit

from .matrix import DataError

__all__ = [
    "COMMIT_PATTERN",
    "DATASET_NAME_PATTERN",
    "NAME_PATTERN",
    "RELATIVE_PATH_PATTERN",
    "REPO_PATTERN",
    "SHA256_PATTERN",
    "boolean",
    "date",
    "http_url",
    "inside",
    "integer",
    "mapping",
    "matches",
    "number",
    "one_line",
    "relative_path",
    "string",
]

_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*"
#: One file or folder name.
NAME_PATTERN = rf"^{_NAME}$"
#: A relative path of such names joined by single slashes.
RELATIVE_PATH_PATTERN = rf"^{_NAME}(/{_NAME})*$"
#: ``owner/name`` of a GitHub repository or a Hugging Face repo id.
REPO_PATTERN = rf"^{_NAME}/{_NAME}$"
#: A full 40-character git commit id (lower-case hex).
COMMIT_PATTERN = r"^[0-9a-f]{40}$"
#: A hex SHA-256 digest.
SHA256_PATTERN = r"^[0-9a-fA-F]{64}$"
#: A dataset name (it becomes a file name).
DATASET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"

_PATH_RULE = (
    "a relative path of names made of letters, digits, '_', '.', '+', '-' "
    "(not starting with '.'), joined by single '/'"
)


def one_line(text) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


def mapping(value, key: str) -> dict:
    """``value`` if it is a mapping (``{}`` for ``None``)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DataError(
            f"{key}: expected a mapping, got {type(value).__name__} {one_line(repr(value))[:60]}"
        )
    return value


def string(value, key: str) -> str:
    """A non-empty string (YAML turns unquoted digits into numbers: quote them)."""
    if not isinstance(value, str) or not value:
        raise DataError(
            f"{key}: expected a non-empty string, got {value!r}"
            + (" (quote it in YAML)" if isinstance(value, (int, float)) else "")
        )
    return value


def matches(pattern: str, what: str):
    """A check for strings matching ``pattern``, described as ``what`` in errors."""

    def check(value, key):
        if not isinstance(value, str) or not re.fullmatch(pattern, value):
            raise DataError(
                f"{key}: {value!r} is not {what}"
                + (" (quote it in YAML)" if isinstance(value, (int, float)) else "")
            )
        return value

    return check


def relative_path(value, key: str) -> str:
    """A safe relative path (see the module docstring)."""
    return matches(RELATIVE_PATH_PATTERN, _PATH_RULE)(value, key)


def integer(minimum: int):
    """A check for integers ``>= minimum`` (booleans refused)."""

    def check(value, key):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise DataError(f"{key}: expected an integer >= {minimum}, got {value!r}")
        return value

    return check


def number(minimum: float, *, exclusive: bool = False):
    """A check for real numbers ``>= minimum`` (``> minimum`` if ``exclusive``)."""

    def check(value, key):
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and not math.isnan(value)
        )
        if not ok or value < minimum or (exclusive and value == minimum):
            raise DataError(
                f"{key}: expected a number {'>' if exclusive else '>='} {minimum:g}, got {value!r}"
            )
        return value

    return check


def boolean(value, key: str) -> bool:
    """``true`` or ``false`` (not strings such as ``"no"``)."""
    if not isinstance(value, bool):
        raise DataError(f"{key}: expected true or false, got {value!r}")
    return value


def date(value, key: str):
    """A calendar date: YAML date or ``YYYY-MM-DD`` string."""
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise DataError(f"{key}: expected a date YYYY-MM-DD, got {value!r}")


def http_url(value, key: str) -> str:
    """An ``http://`` or ``https://`` URL with a host."""
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise DataError(f"{key}: expected an http(s) URL, got {value!r}")
    return value


def inside(folder, relative, key: str) -> Path:
    """``folder / relative``, checked to stay inside ``folder`` once symbolic links are resolved.

    ``relative`` must be a safe relative path (checked again here).  Call this
    right before the path is used.

    Raises
    ------
    DataError
        If ``relative`` is not a safe relative path, or the path, following
        links, leads outside ``folder``.
    """
    relative_path(str(relative), key)
    folder = Path(folder)
    path = folder / relative
    root, target = folder.resolve(), path.resolve()
    if not target.is_relative_to(root):
        raise DataError(
            f"{key}: {path} leads to {target}, outside {root} (a symbolic link?); "
            "refusing to read, write or delete it"
        )
    return path
