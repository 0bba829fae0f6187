"""Atomic file writing: readers never see a half-written output file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_path"]


@contextlib.contextmanager
def atomic_path(path, suffix: str = ".tmp"):
    """Yield a temporary sibling of ``path``; rename it onto ``path`` on success.

    On any exception the temporary file is removed and ``path`` is left as it
    was.  ``suffix`` lets writers that infer the format from the file name
    (``np.savez``, matplotlib) see the right extension.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
