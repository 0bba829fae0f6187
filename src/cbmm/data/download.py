"""Verified, bounded, resumable downloads into a cache folder.

:func:`download` splits the work between pooch and a transfer of our own:

* ``pooch.retrieve`` decides whether the cached file already has the pinned
  SHA-256 (then nothing is fetched), hands out a temporary name beside it,
  checks the SHA-256 of what arrived and moves it into place.  So the
  destination is only ever absent, the previous file, or the new verified file:
  a stale cached file is replaced after its replacement is verified, never
  deleted before.
* The HTTP transfer is ours (pooch's "downloader" hook), because pooch's own
  HTTP downloader has neither an overall deadline (a server sending one byte
  every 2 s outlives any socket time-out), nor a size cap, nor resumption of an
  interrupted transfer; see ``docs/data.md`` for the measurements.  Ours
  streams into ``<dest>.part``, resumes it with an HTTP ``Range`` request,
  retries connection errors, time-outs, malformed responses, cut-off bodies and
  HTTP 408/425/429/5xx with exponential back-off, stops at the deadline and at
  the size cap, and never accepts a body shorter than its ``Content-Length``
  (or than the pinned size).
* An advisory lock (``fcntl.flock`` on ``<dest>.lock``) makes concurrent calls
  for the same file - threads or processes - wait for each other; the second
  then finds the first one's verified file.

Every path (destination, ``.part``, ``.lock``) is checked to stay inside the
cache folder, links resolved, before anything is read, written or deleted.

What happens to ``<dest>.part`` on failure is deliberate: after a transient
failure or the deadline it is kept, so the next call resumes
(``keep_partial=False`` removes it); after a checksum mismatch, a non-retryable
HTTP error (e.g. 404) or an oversized body it is removed, because its bytes
cannot become the wanted file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import logging
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

from .checks import SHA256_PATTERN, boolean, http_url, inside, integer, matches, number, one_line
from .matrix import DataError

__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_BYTES",
    "DOWNLOAD_OPTIONS",
    "ChecksumError",
    "DownloadError",
    "StaleCacheError",
    "download",
    "sha256_file",
]

log = logging.getLogger(__name__)

#: Seconds one download may take in all (attempts, back-off and waiting for another process's lock).
DEFAULT_DEADLINE = 1800.0
#: Size cap in bytes when no size is pinned: 256 MiB, 5 times the largest release file (53 MB).
DEFAULT_MAX_BYTES = 256 << 20

#: Options of a download that a registry entry may set, with their checks.
DOWNLOAD_OPTIONS = {
    "retries": integer(0),
    "backoff": number(0),
    "timeout": number(0, exclusive=True),
    "deadline": number(0, exclusive=True),
    "progress": boolean,
}

_RETRYABLE_STATUS = {408, 425, 429, 500, 502, 503, 504}
_CHUNK = 1 << 20
_USER_AGENT = "cbmm-data/1 (+https://github.com/JackQuu/cBMM)"


class DownloadError(DataError):
    """A download failed (network, HTTP status, malformed or oversized response, deadline)."""


class ChecksumError(DownloadError):
    """A downloaded file does not have the pinned SHA-256."""


class StaleCacheError(DownloadError):
    """A download failed, and the file already at its destination does not have the pinned
    SHA-256 (so it cannot stand in for the download)."""


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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError):
        return one_line(f"connection failed: {exc.reason}")
    if isinstance(exc, TimeoutError):
        return "no data within the time-out"
    if isinstance(exc, http.client.HTTPException) and not isinstance(exc, ConnectionError):
        return f"malformed response ({type(exc).__name__}: {one_line(exc)[:160]})"
    return one_line(f"connection failed: {exc}")


def _content_length(response) -> int | None:
    value = response.headers.get("Content-Length")
    return int(value) if value is not None and value.strip().isdigit() else None


class _Transfer:
    """pooch downloader: fetch ``url`` into ``part`` (resuming it), then move it to pooch's file."""

    def __init__(
        self,
        part: Path,
        *,
        size,
        max_bytes,
        verifiable,
        retries,
        backoff,
        timeout,
        deadline,
        deadline_at,
        keep_partial,
        progress,
    ):
        self.part, self.size, self.verifiable = part, size, verifiable
        self.cap = size if size is not None else max_bytes
        self.cap_text = (
            f"the pinned size of {size} bytes"
            if size is not None
            else f"the cap of {max_bytes} bytes (max_bytes)"
        )
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self.deadline, self.deadline_at = deadline, deadline_at
        self.keep_partial, self.progress = keep_partial, progress

    def __call__(self, url: str, output_file: str, pooch) -> None:
        last_error = None
        for attempt in range(self.retries + 1):
            if attempt:
                wait = self.backoff * 2 ** (attempt - 1)
                if time.monotonic() + wait >= self.deadline_at:
                    raise self._give_up(
                        f"{url}: {last_error}; no time left for retry {attempt} within the "
                        f"deadline of {self.deadline:g} s"
                    )
                log.warning(
                    "download %s: %s; retry %d/%d in %.1fs",
                    url,
                    last_error,
                    attempt,
                    self.retries,
                    wait,
                )
                time.sleep(wait)
            try:
                self._once(url)
                break
            except _Transient as exc:
                last_error = exc
        else:
            raise self._give_up(f"{url}: failed after {self.retries + 1} attempt(s): {last_error}")
        os.replace(self.part, output_file)

    def _give_up(self, message: str) -> DownloadError:
        if not self.keep_partial:
            self.part.unlink(missing_ok=True)
        kept = f"; partial data kept in {self.part} for resuming" if self.part.exists() else ""
        return DownloadError(message + kept)

    def _discard(self, message: str) -> DownloadError:
        self.part.unlink(missing_ok=True)
        return DownloadError(message + "; nothing kept")

    def _once(self, url: str) -> None:
        """One attempt: continue ``part`` from its current size to the end of ``url``."""
        remaining = self.deadline_at - time.monotonic()
        offset = self.part.stat().st_size if self.part.exists() else 0
        if self.size is not None and offset > self.size:  # not a prefix of the pinned file
            self.part.unlink()
            offset = 0
        if self.size is not None and offset == self.size and offset:
            return  # complete from an earlier call; the SHA-256 decides
        if remaining <= 0:
            raise self._give_up(f"{url}: not complete at the deadline of {self.deadline:g} s")
        request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
        if offset:
            request.add_header("Range", f"bytes={offset}-")
        try:
            response = urllib.request.urlopen(request, timeout=min(self.timeout, remaining))
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 416 and offset:  # .part is not a prefix of this resource: start over
                self.part.unlink()
                raise _Transient(f"HTTP 416 for a resume at byte {offset}; restarting") from None
            if exc.code in _RETRYABLE_STATUS:
                raise _Transient(one_line(f"HTTP {exc.code} {exc.reason}")) from None
            raise self._discard(one_line(f"{url}: HTTP {exc.code} {exc.reason}")) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise _Transient(_describe(exc)) from None

        with response:
            length = _content_length(response)
            if response.status == 206:
                match = re.match(
                    r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get("Content-Range", "")
                )
                if not match or int(match.group(1)) != offset:
                    self.part.unlink(missing_ok=True)
                    raise _Transient(
                        one_line(
                            f"unexpected Content-Range {response.headers.get('Content-Range')!r}"
                        )
                    )
                total = None if match.group(2) == "*" else int(match.group(2))
                mode = "ab"
            else:  # 200: the server ignored the range (or none was sent); start from zero
                offset, mode, total = 0, "wb", length
            if total is not None and total > self.cap:
                raise self._discard(
                    f"{url}: the server announces {total} bytes, more than {self.cap_text}"
                )
            if total is not None and self.size is not None and total != self.size:
                raise self._discard(
                    f"{url}: the server announces {total} bytes, not the pinned size of "
                    f"{self.size} bytes"
                )
            if total is None and not response.chunked and not self.verifiable:
                raise self._discard(
                    f"{url}: the server sent neither Content-Length nor chunked encoding, so a "
                    "cut-off body cannot be told from a complete one; pin its sha256 or size"
                )
            self._stream(url, response, mode, offset, total)

    def _stream(self, url, response, mode, offset, total) -> None:
        bar = _progress_bar(total, offset, Path(url).name, self.progress)
        written = offset
        try:
            with open(self.part, mode) as handle:
                while True:
                    if time.monotonic() >= self.deadline_at:
                        handle.close()
                        raise self._give_up(
                            f"{url}: not complete at the deadline of {self.deadline:g} s "
                            f"({written} bytes received)"
                        )
                    try:
                        block = response.read1(_CHUNK)  # at most one read from the socket
                    except (OSError, http.client.HTTPException) as exc:
                        raise _Transient(
                            f"transfer interrupted at byte {written}: {_describe(exc)}"
                        ) from None
                    if not block:
                        break
                    if written + len(block) > self.cap:
                        handle.close()
                        raise self._discard(
                            f"{url}: the body is longer than {self.cap_text}; stopped at byte "
                            f"{written + len(block)}"
                        )
                    handle.write(block)
                    written += len(block)
                    if bar is not None:
                        bar.update(len(block))
        finally:
            if bar is not None:
                bar.close()
        expected = total if total is not None else self.size
        if expected is not None and written < expected:
            raise _Transient(f"transfer ended at byte {written} of {expected}")


@contextlib.contextmanager
def _locked(path: Path, deadline_at: float, what: str):
    """Hold an exclusive ``flock`` on ``path`` (created, and removed when done)."""
    waited = False
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:  # e.g. a read-only cache that lacks the verified file
            raise DownloadError(f"{what}: cannot write into the cache folder {path.parent} "
                                f"({exc.strerror or exc})") from None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline_at:
                        raise DownloadError(
                            f"{what}: another process still held {path} at the deadline"
                        ) from None
                    if not waited:
                        log.info("waiting for another process that downloads %s", what)
                        waited = True
                    time.sleep(0.05)
            try:  # the holder before us removes the file: then lock the new one
                current = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
            except FileNotFoundError:
                current = False
        except BaseException:
            os.close(fd)
            raise
        if current:
            break
        os.close(fd)
    try:
        yield
    finally:
        # Removed before unlocking, so that a waiter sees a removed file and retries.
        path.unlink(missing_ok=True)
        os.close(fd)


def _raise_if_stale(exc: DownloadError, dest: Path, sha256: str | None) -> None:
    """Raise :class:`StaleCacheError` for ``exc`` when ``dest`` exists with another SHA-256
    than ``sha256``: pooch tried to replace it, so the user must (a file is there already,
    "put the file there" would not help)."""
    if sha256 is None or not dest.is_file():
        return
    found = sha256_file(dest)
    if found != sha256.lower():
        raise StaleCacheError(
            f"{exc}; the cached file {dest} failed the SHA-256 check (expected "
            f"{sha256.lower()}, found {found})"
        ) from None


@contextlib.contextmanager
def _quiet_pooch():
    """pooch logs every download at INFO (with advice about its own API); we log our own way."""
    import pooch

    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def download(
    url: str,
    dest,
    *,
    root=None,
    sha256: str | None = None,
    size: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    retries: int = 4,
    backoff: float = 1.0,
    timeout: float = 60.0,
    deadline: float = DEFAULT_DEADLINE,
    keep_partial: bool = True,
    progress: bool = True,
) -> Path:
    """Download ``url`` to ``dest``: verified, bounded in time and size, atomically.

    Parameters
    ----------
    url : str
        http(s) URL.
    dest : path-like
        Destination file.  If it exists with the expected ``sha256`` (or, with
        no ``sha256``, at all) it is reused without network access; with
        another hash it is replaced once the new file is verified.
    root : path-like, optional
        Folder that ``dest`` (and ``<dest>.part``, ``<dest>.lock``) must stay
        in, symbolic links resolved; default ``dest``'s folder.
    sha256 : str, optional
        Expected hex SHA-256 of the complete file.
    size : int, optional
        Expected size in bytes: the body may not be longer (the transfer stops
        there) nor shorter (it is resumed).
    max_bytes : int
        Size cap when ``size`` is not given (default :data:`DEFAULT_MAX_BYTES`).
    retries : int
        Retries after the first attempt for transient failures (connection
        errors, time-outs, malformed responses, cut-off bodies, HTTP
        408/425/429/5xx).  Attempt ``k`` waits ``backoff * 2**(k-1)`` seconds.
    timeout : float
        Socket time-out in seconds for connecting and for each read.
    deadline : float
        Seconds for the whole call: waiting for another process's lock, every
        attempt and back-off (default :data:`DEFAULT_DEADLINE`).  It is checked
        between reads, so a call ends at most ``timeout`` after it.
    keep_partial : bool
        Keep ``<dest>.part`` after a transient failure or the deadline so the
        next call resumes.
    progress : bool
        Show a tqdm progress bar (when tqdm is installed).

    Returns
    -------
    pathlib.Path
        ``dest``.

    Raises
    ------
    ChecksumError
        The complete file's SHA-256 differs from ``sha256`` (nothing is kept).
    StaleCacheError
        The download failed and the file at ``dest`` has another SHA-256 than
        ``sha256``; the message gives both digests (the file is kept).
    DownloadError
        Non-retryable HTTP error, retries exhausted, deadline passed, body
        longer than the cap, or a body whose completeness cannot be checked
        (no ``Content-Length``, no chunked encoding, no ``sha256`` or
        ``size``).  One line, naming the URL.
    DataError
        A bad argument, a destination outside ``root`` or a cache folder that
        cannot be created.
    """
    http_url(url, "url")
    if sha256 is not None:
        matches(SHA256_PATTERN, "a hex SHA-256 (64 characters)")(sha256, "sha256")
    if size is not None:
        integer(0)(size, "size")
    integer(1)(max_bytes, "max_bytes")
    arguments = {
        "retries": retries,
        "backoff": backoff,
        "timeout": timeout,
        "deadline": deadline,
        "progress": progress,
        "keep_partial": keep_partial,
    }
    for name, value in arguments.items():
        DOWNLOAD_OPTIONS.get(name, boolean)(value, name)
    dest = Path(dest)
    root = Path(root) if root is not None else dest.parent
    try:
        relative = dest.relative_to(root).as_posix()
    except ValueError:
        raise DataError(f"download destination {dest} is not inside {root}") from None
    for suffix in ("", ".part", ".lock"):
        inside(root, relative + suffix, "download destination")
    if dest.is_dir():
        raise DataError(f"download destination {dest}: is a folder; expected a file name")
    if sha256 is not None and dest.is_file() and sha256_file(dest) == sha256.lower():
        return dest  # verified: used without a lock, so that a read-only pre-filled cache serves
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(
            f"{dest.parent}: cannot create the cache folder ({exc.strerror or exc})"
        ) from None

    import pooch

    deadline_at = time.monotonic() + deadline
    transfer = _Transfer(
        dest.with_name(dest.name + ".part"),
        size=size,
        max_bytes=max_bytes,
        verifiable=sha256 is not None or size is not None,
        retries=retries,
        backoff=backoff,
        timeout=timeout,
        deadline=deadline,
        deadline_at=deadline_at,
        keep_partial=keep_partial,
        progress=progress,
    )
    with _locked(dest.with_name(dest.name + ".lock"), deadline_at, url), _quiet_pooch():
        try:
            pooch.retrieve(
                url,
                known_hash=sha256.lower() if sha256 else None,
                fname=dest.name,
                path=dest.parent,
                downloader=transfer,
                progressbar=False,
            )
        except DownloadError as exc:
            _raise_if_stale(exc, dest, sha256)
            raise
        except ValueError as exc:  # pooch's hash check; it has deleted the data
            found = re.search(r"got ([0-9a-f]{64})", str(exc))
            digests = (f"expected {sha256.lower()}, found {found.group(1)}" if found
                       else one_line(exc))
            raise ChecksumError(
                f"{url}: SHA-256 mismatch ({digests}); the downloaded data was deleted (a "
                "corrupted transfer, or another file than the pinned one)"
            ) from None
        except OSError as exc:
            raise DownloadError(one_line(f"{dest}: {exc}")) from None
    return dest
