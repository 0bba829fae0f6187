"""The paper authors' released matrices (exact reproduction).

The files live in GitHub ``JackQuu/cBMM`` at commit
``b6cb036d80b34f036822383e8514be4ee4ed648f`` under ``data/``, stored as Git
LFS objects.  GitHub serves an LFS object's content at
``https://media.githubusercontent.com/media/<repo>/<commit>/<path>``; the base
URL is configurable so that mirrors (and tests) can stand in.  Each file is
verified against the SHA-256 (the LFS oid) and size pinned in
``config/datasets.yaml`` before it is used.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .checks import COMMIT_PATTERN, REPO_PATTERN, http_url, mapping, matches, relative_path
from .download import download
from .local import read_csv_matrix
from .matrix import DataError, check_binary

__all__ = [
    "DEFAULT_RELEASE",
    "RELEASE_KEYS",
    "check_release",
    "fetch_release_file",
    "read_release",
    "release_path",
    "release_url",
]

DEFAULT_RELEASE = {
    "base_url": "https://media.githubusercontent.com/media",
    "repo": "JackQuu/cBMM",
    "commit": "b6cb036d80b34f036822383e8514be4ee4ed648f",
}

#: Keys of a registry's ``release`` block, with their checks.
RELEASE_KEYS = {
    "base_url": http_url,
    "repo": matches(REPO_PATTERN, "a repository 'owner/name'"),
    "commit": matches(COMMIT_PATTERN, "a full 40-character lower-case commit id"),
}


def check_release(release, key: str = "release") -> dict:
    """The defaults updated with ``release``, every key checked (errors name ``key``)."""
    release = mapping(release, key)
    unknown = sorted(set(release) - set(RELEASE_KEYS))
    if unknown:
        raise DataError(f"{key}: unknown key(s) {unknown}; allowed: {sorted(RELEASE_KEYS)}")
    merged = {**DEFAULT_RELEASE, **release}
    for name, check in RELEASE_KEYS.items():
        check(merged[name], f"{key}.{name}")
    return merged


def release_url(file: str, release: dict | None = None) -> str:
    """URL of ``file`` (a path in the release repository) on the LFS media endpoint."""
    rel = check_release(release)
    return (
        f"{rel['base_url'].rstrip('/')}/{rel['repo']}/{rel['commit']}/{relative_path(file, 'file')}"
    )


def release_path(file: str, cache_dir, release: dict | None = None) -> Path:
    """Where ``file`` is cached: ``<cache_dir>/release/<owner>__<repo>/<commit>/<file>``."""
    rel = check_release(release)
    return (
        Path(cache_dir)
        / "release"
        / rel["repo"].replace("/", "__")
        / rel["commit"]
        / relative_path(file, "file")
    )


def fetch_release_file(
    file: str,
    sha256: str,
    cache_dir,
    release: dict | None = None,
    *,
    size: int | None = None,
    **download_options,
) -> Path:
    """Download (or reuse) one release file, verified, into the cache.

    The file lands at :func:`release_path`; every path is checked to stay in
    ``cache_dir``, links resolved.  ``download_options`` go to
    :func:`cbmm.data.download.download` (``retries``, ``backoff``,
    ``timeout``, ``deadline``, ``progress``).
    """
    if not sha256:
        raise DataError(f"release file {file!r}: no sha256 pinned; refusing an unverified download")
    dest = release_path(file, cache_dir, release)
    return download(
        release_url(file, release),
        dest,
        root=cache_dir,
        sha256=sha256,
        size=size,
        **download_options,
    )


def read_release(path) -> pd.DataFrame:
    """Read a release CSV (header ``,<item ids>``; first column the model name), every
    answer checked to be 0, 1 or empty (an error names the file, row and column)."""
    frame = read_csv_matrix(path)
    check_binary(frame, str(path))
    return frame
