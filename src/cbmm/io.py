"""Atomic file output: a reader never sees a half-written file, and files honour the umask.

Every writer of the package and the workflow goes through this module.  A
file is written to a hidden temporary sibling (``.<name>.<random><suffix>``)
and renamed onto its target only when the write succeeded; on any error the
temporary file is removed and the target is left as it was.  Folders that
had to be created for the output are removed again when the write fails, so
a failed write leaves nothing behind.

Files are created with mode ``0o666`` filtered by the process umask, like
``open(path, "w")`` (``tempfile.mkstemp`` would give ``0o600`` whatever the
umask, which hides results from the rest of a group on a shared cluster).

>>> from cbmm.io import write_text, write_json, write_csv, atomic_path
>>> write_json({"n": 3}, "out/summary.json")                   # doctest: +SKIP
>>> with atomic_path("out/figure.pdf", suffix=".pdf") as tmp:   # doctest: +SKIP
...     fig.savefig(tmp)
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
from pathlib import Path

__all__ = ["atomic_path", "atomic_paths", "write_text", "write_json", "write_csv", "read_csv",
           "LABEL_COLUMNS", "write_with_manifest", "file_record"]

#: Columns of the result tables that hold the user's labels: read back as the text
#: written, as "NA", "None", "null", "01" and "1e3" are valid model, item and dataset
#: labels (pandas would read them as missing or as numbers).
LABEL_COLUMNS = ("model", "item", "dataset")


def _create_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing ancestors; return the created ones, deepest first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    created = []
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:  # made meanwhile by another process: not ours to remove
            continue
        except OSError:
            _remove_folders(created[::-1])
            raise
        created.append(path)
    return created[::-1]


def _remove_folders(folders) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty: someone else wrote there meanwhile
            return


def _temporary_sibling(path: Path, suffix: str) -> Path:
    # O_EXCL with mode 0o666: the kernel applies the umask, unlike mkstemp's fixed 0o600
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{suffix}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue
        except OSError as exc:  # named by the file asked for, not by its temporary name
            raise OSError(exc.errno, exc.strerror, str(path)) from None


@contextlib.contextmanager
def atomic_paths(paths, suffixes=None):
    """Yield temporary siblings of several ``paths``; rename all of them into place on success.

    Nothing is renamed until the body has finished without error, so either
    every output appears or none does (up to a failure of ``rename`` itself,
    which only happens when a target became a folder meanwhile).

    Parameters
    ----------
    paths : sequence of path-like
        The final files.
    suffixes : sequence of str, optional
        Suffix of each temporary file (default: the target's own suffix), for
        writers that infer the format from the name (``np.savez``, matplotlib).

    Yields
    ------
    list of pathlib.Path
        The temporary files, in the order of ``paths``.
    """
    paths = [Path(p) for p in paths]
    suffixes = list(suffixes) if suffixes is not None else [p.suffix for p in paths]
    if len(suffixes) != len(paths):
        raise ValueError(f"atomic_paths: {len(paths)} paths but {len(suffixes)} suffixes")
    created: list[Path] = []
    temporaries: list[Path] = []
    done = False
    try:
        for path in paths:
            created += _create_parents(path.parent)
        for path, suffix in zip(paths, suffixes):
            temporaries.append(_temporary_sibling(path, suffix))
        yield list(temporaries)
        for tmp, path in zip(temporaries, paths):
            os.replace(tmp, path)
        done = True
    finally:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)
        if not done:
            _remove_folders(created)


@contextlib.contextmanager
def atomic_path(path, suffix: str | None = None):
    """Yield a temporary sibling of ``path``; rename it onto ``path`` when the body succeeds.

    Missing parent folders are created (and removed again if the write
    fails).  ``suffix`` (default: ``path``'s own) lets writers that infer the
    format from the file name see the right extension.
    """
    with atomic_paths([path], None if suffix is None else [suffix]) as (tmp,):
        yield tmp


def write_text(text: str, path) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(obj, path, *, indent: int = 2) -> Path:
    """Write ``obj`` as strict JSON (NaN/inf refused) with a final newline, atomically."""
    return write_text(json.dumps(obj, indent=indent, allow_nan=False) + "\n", path)


def write_csv(frame, path, *, index: bool = False, **to_csv) -> Path:
    """Write a DataFrame to CSV atomically (without its index unless ``index=True``).

    Extra keyword arguments go to :meth:`pandas.DataFrame.to_csv`.
    """
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=index, **to_csv)
    return Path(path)


def read_csv(path, **options):
    """A table :func:`write_csv` wrote, its :data:`LABEL_COLUMNS` read as the text written
    (the other columns as :func:`pandas.read_csv` reads them, with ``options``)."""
    import pandas as pd

    converters = {column: str for column in LABEL_COLUMNS}
    converters.update(options.pop("converters", {}))
    # a converter for a column the file lacks is ignored, as pandas ignores it
    return pd.read_csv(path, converters=converters, **options)


#: The key of a manifest's SHA-256 of its own other fields (:func:`write_with_manifest`).
SEAL = "manifest_sha256"


def _seal(record: dict) -> str:
    return hashlib.sha256(json.dumps(_as_floats(record), sort_keys=True).encode()).hexdigest()


def _as_floats(value):
    """``value`` with every number a float: a JSON tool that writes 1.0 as 1 (jq) does not
    edit the manifest."""
    if isinstance(value, dict):
        return {k: _as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_floats(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


def _sealed_manifest(record: dict) -> bytes:
    """``record`` as the JSON of a manifest, with the SHA-256 of its own fields under
    :data:`SEAL`: a manifest edited after it was written (its sigma, its list of files) is
    told from the one written (:func:`seal_broken`), as its files are by their records."""
    return (json.dumps({**record, SEAL: _seal(record)}, indent=2) + "\n").encode()


def seal_broken(record: dict) -> bool:
    """Whether a manifest read back (a dict) is not the one :func:`write_with_manifest` wrote:
    its fields changed, or its seal did.  A manifest written before seals (2026-12-07) has
    none and is taken as it is, so the seal guards against edits, not against one who
    deletes it too."""
    if SEAL not in record:
        return False
    return _seal({k: v for k, v in record.items() if k != SEAL}) != record[SEAL]


def file_record(data: bytes) -> dict:
    """What a manifest records of one file: its size and SHA-256."""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def write_with_manifest(folder, files: dict, manifest: str, fields: dict, *,
                        replace: bool = True) -> None:
    """Write a set of files into ``folder`` so that a reader sees all of one write or none.

    ``files`` maps names to bytes; the file ``manifest`` holds the JSON of ``fields`` with
    ``"files"``: ``{name: file_record(data)}``, sealed by the SHA-256 of its own fields
    (:data:`SEAL`).  It binds the others: a reader that checks them against it (as
    :meth:`cbmm.FitResult.load` does) never takes a folder holding parts of two writes, or
    of an interrupted one, for a whole result, nor one whose manifest was edited.

    ``replace=True``: the old manifest is removed first, the files are renamed into
    place, the new manifest comes last, all under an exclusive ``flock`` of the folder,
    so that of writers replacing it together the last one's write stands whole.
    ``replace=False``: the folder is claimed by
    creating the manifest exclusively first, then the files are renamed into place
    where none exists; ``FileExistsError`` when any of them exists, so of two writers
    starting together exactly one succeeds.  Either way the files are all written
    (under temporary names) before anything is renamed: a full disk or any other error
    leaves the folder as it was.

    Raises
    ------
    FileExistsError
        ``replace=False`` and a file exists.
    IsADirectoryError, NotADirectoryError
        A target is a folder, or ``folder`` is a file.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a folder", str(folder))
    names = [*files, manifest]
    for name in names:
        if (folder / name).is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(folder / name))
    if not replace:
        _refuse_existing(folder, names)
    content = _sealed_manifest({**fields, "files": {name: file_record(data)
                                                    for name, data in files.items()}})
    created = _create_parents(folder)
    temporaries = {}
    claimed = done = False
    try:
        for name, data in files.items():
            temporaries[name] = _temporary_sibling(folder / name, Path(name).suffix)
            temporaries[name].write_bytes(data)
        if replace:
            temporaries[manifest] = _temporary_sibling(folder / manifest, Path(manifest).suffix)
            temporaries[manifest].write_bytes(content)
            with _renaming_alone(folder):
                (folder / manifest).unlink(missing_ok=True)
                for name in files:
                    os.replace(temporaries[name], folder / name)
                os.replace(temporaries[manifest], folder / manifest)
        else:
            _create_exclusively(folder / manifest, content)
            claimed = True
            _refuse_existing(folder, files)
            for name in files:
                os.replace(temporaries[name], folder / name)
        done = True
    finally:
        for tmp in temporaries.values():
            tmp.unlink(missing_ok=True)
        if not done:
            if claimed:
                (folder / manifest).unlink(missing_ok=True)
            _remove_folders(created)


@contextlib.contextmanager
def _renaming_alone(folder: Path):
    """Hold an exclusive ``flock`` on ``folder`` itself (no file of ours in it): writers
    that replace one folder together rename their files in turn, so the last one leaves
    its whole write (without it, 3 of 10 trials of four processes saving at once left a
    mix that no reader takes).  Where ``fcntl`` is missing (Windows), nothing is held."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


def _refuse_existing(folder: Path, names) -> None:
    existing = [name for name in names if (folder / name).exists()]
    if existing:
        raise FileExistsError(errno.EEXIST, f"already holds {', '.join(existing)}", str(folder))


def _create_exclusively(path: Path, content: bytes) -> None:
    """Create ``path`` with ``content``; ``FileExistsError`` if it exists (mode 0o666 & ~umask)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
