"""The paper authors' released matrices (exact reproduction).

The files live in GitHub ``JackQuu/cBMM`` at commit ``b6cb036`` under
``data/``, stored as Git LFS objects.  GitHub serves an LFS object's content
at ``https://media.githubusercontent.com/media/<repo>/<commit>/<path>``;
the base URL is configurable so that mirrors (and tests) can stand in.
Each file is verified against the SHA-256 pinned in ``config/datasets.yaml``
(the LFS oid) before it is used.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .download import download
from .local import read_csv_matrix
from .matrix import DataError

__all__ = ["DEFAULT_RELEASE", "fetch_release_file", "read_release", "release_url"]

DEFAULT_RELEASE = {
    "base_url": "https://media.githubusercontent.com/media",
    "repo": "JackQuu/cBMM",
    "commit": "b6cb036",
}


def _release(release: dict | None) -> dict:
    merged = {**DEFAULT_RELEASE, **(release or {})}
    for key in ("base_url", "repo", "commit"):
        if not merged.get(key):
            raise DataError(f"release block: {key!r} must be a non-empty string")
    return merged


def release_url(file: str, release: dict | None = None) -> str:
    """URL of ``file`` (a path in the release repository) on the LFS media endpoint."""
    rel = _release(release)
    return f"{rel['base_url'].rstrip('/')}/{rel['repo']}/{rel['commit']}/{file.lstrip('/')}"


def fetch_release_file(file: str, sha256: str, cache_dir, release: dict | None = None, **download_options) -> Path:
    """Download (or reuse) one release file, verified, into the cache.

    The file lands at ``<cache_dir>/release/<owner>__<repo>/<commit>/<file>``.
    ``download_options`` go to :func:`cbmm.data.download.download`
    (``retries``, ``backoff``, ``timeout``, ``progress``).
    """
    if not sha256:
        raise DataError(f"release file {file!r}: no sha256 pinned; refusing an unverified download")
    rel = _release(release)
    dest = Path(cache_dir) / "release" / rel["repo"].replace("/", "__") / rel["commit"] / file
    return download(release_url(file, rel), dest, sha256=sha256, **download_options)


def read_release(path) -> pd.DataFrame:
    """Read a release CSV (header ``,<item ids>``; first column the model name)."""
    return read_csv_matrix(path)
