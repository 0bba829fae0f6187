"""Resumable, verified HTTP(S) downloads (standard library only).

:func:`download` streams a URL into ``<dest>.part`` next to the destination,
retries connection errors, time-outs, truncated bodies and HTTP 429/5xx with
exponential back-off, resumes an interrupted transfer with an HTTP ``Range``
request, checks the SHA-256 of the complete file and only then renames it onto
``dest``.  So ``dest`` is either absent or complete and verified.

What happens to the ``.part`` file on failure is deliberate:

* transient failure (retries exhausted): it is kept, so the next call resumes
  where this one stopped (``keep_partial=False`` removes it instead);
* checksum mismatch or a non-retryable HTTP error (e.g. 404): it is removed,
  because its bytes cannot become the wanted file.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

from .matrix import DataError

__all__ = ["ChecksumError", "DownloadError", "download", "sha256_file"]

log = logging.getLogger(__name__)

_RETRYABLE_STATUS = {408, 425, 429, 500, 502, 503, 504}
_CHUNK = 1 << 20
_USER_AGENT = "cbmm-data/1 (+https://github.com/JackQuu/cBMM)"


class DownloadError(DataError):
    """A download failed (network, HTTP status or incomplete transfer)."""


class ChecksumError(DownloadError):
    """A downloaded file does not have the pinned SHA-256."""


def sha256_file(path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


class _Transient(Exception):
    """Internal: a failure worth retrying (possibly after resuming)."""


def _progress_bar(total, initial, desc, enabled):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is optional (extra "data")
        return None
    return tqdm(total=total, initial=initial, desc=desc, unit="B", unit_scale=True, leave=False)


def _fetch_once(url: str, part: Path, timeout: float, progress: bool) -> None:
    """One attempt: continue ``part`` from its current size to the end of ``url``."""
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # .part is not a prefix of this resource: start over
            part.unlink()
            raise _Transient(f"HTTP 416 for a resume at byte {offset}; restarting") from exc
        if exc.code in _RETRYABLE_STATUS:
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from exc
        part.unlink(missing_ok=True)
        raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise _Transient(f"connection failed: {getattr(exc, 'reason', exc)}") from exc

    with response:
        if response.status == 206:
            match = re.match(r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get("Content-Range", ""))
            if not match or int(match.group(1)) != offset:
                part.unlink(missing_ok=True)
                raise _Transient(f"unexpected Content-Range {response.headers.get('Content-Range')!r}")
            total = None if match.group(2) == "*" else int(match.group(2))
            mode = "ab"
        else:  # 200: the server ignored the range (or none was sent); start from zero
            offset = 0
            length = response.headers.get("Content-Length")
            total = int(length) if length is not None else None
            mode = "wb"
        bar = _progress_bar(total, offset, Path(url).name, progress)
        written = offset
        try:
            with open(part, mode) as handle:
                while True:
                    try:
                        block = response.read(_CHUNK)
                    except (http.client.IncompleteRead, OSError, socket.timeout) as exc:
                        raise _Transient(f"transfer interrupted at byte {written}: {exc!r}") from exc
                    if not block:
                        break
                    handle.write(block)
                    written += len(block)
                    if bar is not None:
                        bar.update(len(block))
        finally:
            if bar is not None:
                bar.close()
    if total is not None and written < total:
        raise _Transient(f"transfer ended at byte {written} of {total}")


def download(url: str, dest, *, sha256: str | None = None, retries: int = 4, backoff: float = 1.0,
             timeout: float = 60.0, keep_partial: bool = True, progress: bool = True) -> Path:
    """Download ``url`` to ``dest``, verified and atomically.

    Parameters
    ----------
    url : str
        http(s) URL.
    dest : path-like
        Destination file.  If it already exists with the expected ``sha256`` it
        is reused without any network access; with another hash it is deleted
        and downloaded again.
    sha256 : str, optional
        Expected lower-case hex SHA-256 of the complete file.  Strongly
        recommended: without it an existing ``dest`` is re-downloaded.
    retries : int
        Retries after the first attempt for transient failures (connection
        errors, time-outs, truncated bodies, HTTP 408/425/429/5xx).  Attempt
        ``k`` waits ``backoff * 2**(k-1)`` seconds before starting.
    timeout : float
        Socket time-out in seconds for connecting and for each read.
    keep_partial : bool
        Keep ``<dest>.part`` after a transient failure so the next call resumes.
    progress : bool
        Show a tqdm progress bar (when tqdm is installed).

    Returns
    -------
    pathlib.Path
        ``dest``.

    Raises
    ------
    ChecksumError
        The complete file's SHA-256 differs from ``sha256`` (nothing is left
        at ``dest`` or in ``.part``).
    DownloadError
        Non-retryable HTTP error, or retries exhausted.
    """
    dest = Path(dest)
    if sha256 is not None and dest.is_file():
        if sha256_file(dest) == sha256.lower():
            return dest
        log.warning("%s does not have the expected SHA-256; downloading it again", dest)
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    last_error = None
    for attempt in range(retries + 1):
        if attempt:
            wait = backoff * 2 ** (attempt - 1)
            log.warning("download %s: %s; retry %d/%d in %.1fs", url, last_error, attempt, retries, wait)
            time.sleep(wait)
        try:
            _fetch_once(url, part, timeout, progress)
            break
        except _Transient as exc:
            last_error = exc
    else:
        if not keep_partial:
            part.unlink(missing_ok=True)
        kept = f"; partial data kept in {part} for resuming" if part.exists() else ""
        raise DownloadError(f"{url}: failed after {retries + 1} attempt(s): {last_error}{kept}")

    if sha256 is not None:
        actual = sha256_file(part)
        if actual != sha256.lower():
            part.unlink()
            raise ChecksumError(
                f"{url}: SHA-256 mismatch: expected {sha256.lower()}, got {actual}; "
                "the downloaded data was deleted"
            )
    os.replace(part, dest)
    return dest
