"""What every ``cbmm`` command shares: :class:`CliError`, the parser that raises it,
argument types, checks of input and output paths, and reading ``--responses``.

Its own module so that the commands kept beside their features (``cbmm.data.cli``,
``cbmm.efficient.cli``) use it without importing :mod:`cbmm.cli`, which registers them.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import signal
from contextlib import contextmanager
from pathlib import Path

#: errno values of an OSError that mean a bad path given by the user.
_PATH_ERRORS = {errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR, errno.EISDIR,
                errno.EEXIST, errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP}


class CliError(Exception):
    """Bad input, reported as one line on stderr with exit status 2."""


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store``, refusing an option given twice: argparse keeps the last,
    so ``--k 10 --k 20`` would run with 20 without a word."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_options", set())
        if option_string is not None and self.dest in given:
            parser.error(f"argument {'/'.join(self.option_strings)}: given twice; give it once")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors raised as :class:`CliError` (one line, no usage block),
    a single-value option given twice refused, and no abbreviated options (``validate
    --se`` was read as ``--seed``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def parse_known_args(self, args=None, namespace=None):
        parsed, extras = super().parse_known_args(args, namespace)
        parsed.__dict__.pop("_given_options", None)
        return parsed, extras

    def error(self, message):
        raise CliError(f"{self.prog}: {message} (see {self.prog} --help)")


# ----------------------------------------------------------------- argument types

def _integer(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, "
                                             f"got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value
    return parse


def _number(low=None, high=None, *, low_open=True, high_open=True):
    """A finite float in the interval (or half-open interval) given."""
    def describe():
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        if high is None:
            return f"a finite number {'>' if low_open else '>='} {low:g}"
        return f"a number in {left}{low:g}, {high:g}{right}"

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value)
        ok = ok and (low is None or (value > low if low_open else value >= low))
        ok = ok and (high is None or (value < high if high_open else value <= high))
        if not ok:
            raise argparse.ArgumentTypeError(f"expected {describe()}, got {text!r}")
        return value
    return parse


def _path(text):
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r}")
    return Path(text)


def _file_path(text):
    """A path that names a file: a name ending in a separator, ``.`` or ``..`` names a
    folder, which :class:`~pathlib.Path` would quietly drop (``out/`` becomes ``out``)."""
    path = _path(text)
    if os.path.basename(text) in ("", ".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder; give a file name")
    return path


_INTERRUPTS = []


@contextmanager
def noting_interrupts():
    """Within: note each Ctrl-C (SIGINT) before raising KeyboardInterrupt as Python does.
    pandas' CSV reader turns one that arrives while it reads into an error of its own
    ("Calling read(nbytes) on source failed"), which would blame the file."""
    _INTERRUPTS.clear()

    def note(signum, frame):
        _INTERRUPTS.append(signum)
        (previous if callable(previous) else signal.default_int_handler)(signum, frame)

    previous = None
    if signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, None):
        try:
            previous = signal.signal(signal.SIGINT, note)
        except ValueError:  # not the main thread: its interrupts are not ours to note
            pass
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def interrupted() -> bool:
    """Whether a Ctrl-C arrived within :func:`noting_interrupts`."""
    return bool(_INTERRUPTS)


def add_reading_options(command) -> None:
    """The options that say how to read a response table (:func:`cbmm.data.read_table`,
    :func:`cbmm.as_responses`): its coding, layout and column names."""
    command.add_argument("--coding", choices=["binary", "signed"],
                         help="binary: 1/0/empty; signed: +1/-1/0 (default: inferred "
                              "where unambiguous)")
    command.add_argument("--layout", choices=["auto", "wide", "long"], default="auto",
                         help="wide: models x items; long: model, item, correct rows "
                              "(default: auto)")
    command.add_argument("--label-column", metavar="NAME",
                         help="wide tables: the column of model labels (default: the "
                              "first; Parquet: the stored index or a column 'model')")
    for role in ("model", "item", "correct"):
        command.add_argument(f"--{role}-column", default=role, metavar="NAME",
                             help=f"long tables: the column of the {role}"
                                  f"{' ids' if role != 'correct' else ' answers'} "
                                  f"(default {role})")


def _declared(name, option):
    """An argparse type for one of fit's declared settings (:data:`cbmm.api.FIT_OPTIONS`,
    :data:`cbmm.api.TIMEOUT`): the number as written, checked by the declaration."""
    def parse(text):
        word = text.strip()
        if word in option.specials or (option.nullable and word.lower() == "none"):
            return option.validate(name, None if word.lower() == "none" else word)
        try:
            value = int(word) if option.kind == "int" else float(word)
            return option.validate(name, value)
        except ValueError:
            nothing = (" (none for the method's default)" if name == "n_starts"
                       else " (none for no limit)" if option.nullable else "")
            raise argparse.ArgumentTypeError(
                f"expected {option.describe().replace(' or null', '')}{nothing}, "
                f"got {text!r}") from None
    return parse


# --------------------------------------------------------------------- path checks

def _nearest_existing(path: Path) -> Path:
    probe = path.absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return probe


def _check_folder_writable(folder: Path, flag: str, given: Path | None = None) -> None:
    """``folder`` exists and is writable, or can be created (its nearest existing ancestor
    is): a file is made there and dropped at once (unnamed where the system allows), since
    permissions alone do not tell, e.g. to root under /proc.  The errors name ``flag`` and
    its value ``given`` (default ``folder``)."""
    import tempfile

    given = folder if given is None else given
    probe = _nearest_existing(folder)
    if not probe.is_dir():
        raise CliError(f"{flag} {given}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise CliError(f"{flag} {given}: cannot write into {probe} (permission denied)")
    try:
        tempfile.TemporaryFile(dir=probe).close()
    except OSError as exc:
        raise CliError(f"{flag} {given}: cannot write into {probe} "
                       f"({exc.strerror or exc})") from None


@contextmanager
def _named_path_errors(flag: str, path: Path):
    """A name the system refuses to look up (too long, a loop of links) as a CliError
    naming ``flag``."""
    try:
        yield
    except OSError as exc:
        raise CliError(f"{flag} {path}: {exc.strerror or exc}") from None


#: Suffixes of the table formats a CSV output must not be named with (the reader of the
#: file would take it for one).
_NOT_CSV = {".parquet", ".pq", ".feather", ".arrow", ".json", ".xlsx", ".xls", ".tsv", ".npz",
            ".npy", ".pkl", ".pickle", ".h5", ".hdf5", ".yaml", ".yml", ".png", ".pdf", ".svg",
            ".jpg", ".jpeg", ".html", ".gz", ".zip", ".bz2", ".xz"}


def _check_output_file(path: Path, flag: str, force: bool, *, csv: bool = False,
                       suffix: str | None = None) -> None:
    """``path`` can be written: not a folder, new unless ``force``, its folder writable;
    ``csv``: a CSV table's, not named as another format's; ``suffix``: named with the one
    suffix of the format written (e.g. ``.parquet``)."""
    with _named_path_errors(flag, path):
        _not_standard_output(flag, path, "a file")
        if path.is_dir():
            raise CliError(f"{flag} {path}: is a folder; expected a file name")
        if csv and path.suffix.lower() in _NOT_CSV:
            raise CliError(f"{flag} {path}: this command writes a CSV table; name the file "
                           f".csv (not {path.suffix})")
        if suffix is not None and path.suffix != suffix:
            raise CliError(f"{flag} {path}: expected a file name ending in {suffix} (the "
                           f"format written), not {path.suffix or 'no suffix'}")
        if path.exists() and not force:
            raise CliError(f"{flag} {path}: exists; pass --force to replace it")
        _check_folder_writable(path.parent, flag, path)


def _check_output_folder(path: Path, names, flag: str, force: bool, foreign=()) -> None:
    """``path`` can take the files ``names``: a folder or new, without them unless
    ``force``, and without any of ``foreign`` (another result's files, which would stay
    beside these and mix the two: a fit written over a bootstrap's folder)."""
    with _named_path_errors(flag, path):
        _not_standard_output(flag, path, "a folder of files")
        if path.exists() and not path.is_dir():
            raise CliError(f"{flag} {path}: exists and is not a folder")
        other = [name for name in foreign if (path / name).exists()]
        if other:
            raise CliError(f"{flag} {path}: holds another result's {', '.join(other)}; "
                           "write into another folder")
        for name in names:
            if (path / name).is_dir():
                raise CliError(f"{flag} {path}: {name} is a folder; cannot write the result "
                               "there")
        existing = [name for name in names if (path / name).exists()]
        if existing and not force:
            raise CliError(f"{flag} {path}: already holds {', '.join(existing)}; "
                           "pass --force to replace them")
        _check_folder_writable(path, flag)


def _not_standard_output(flag: str, path: Path, written: str) -> None:
    """``-`` (standard output, to many tools) names no output here: it was written as a
    file or folder named "-" in the current folder."""
    if str(path) == "-":
        raise CliError(f"{flag} -: this command writes {written}, not to standard output; "
                       "name it")


def _check_input_file(path: Path, flag: str) -> None:
    if path.is_dir():
        raise CliError(f"{flag} {path}: is a folder; expected a file")
    if not path.exists():
        raise CliError(f"{flag} {path}: no such file")
    if not os.access(path, os.R_OK):
        raise CliError(f"{flag} {path}: cannot be read (permission denied)")


def _distinct(*flags_and_paths) -> None:
    seen = {}
    for flag, path in flags_and_paths:
        if path is None:
            continue
        key = Path(path).resolve()  # "sub/../x" and links name x
        if key in seen:
            raise CliError(f"{seen[key]} and {flag} name the same file {path}")
        seen[key] = flag


def _outside(folder_flag: str, folder: Path, *flags_and_outputs) -> None:
    """No output is written inside the input folder ``folder`` (a fit: its files are
    checked against its fit.json, so one replaced would spoil it)."""
    if not folder.is_dir():
        return
    inside = folder.resolve()
    for flag, path in flags_and_outputs:
        if path is not None and inside in Path(path).resolve().parents:
            raise CliError(f"{flag} {path}: inside the folder {folder_flag} {folder}; write "
                           "it elsewhere, so that the fit stays as saved")


@contextmanager
def _files_named(args, *flags):
    """The library's errors about ``responses`` (or ``reference``, ...) name the file
    given to ``--responses`` (``--reference``, ...) instead."""
    try:
        yield
    except ValueError as exc:
        message = str(exc)
        for flag in flags:
            word = flag.removeprefix("--") + ": "
            path = getattr(args, flag.removeprefix("--").replace("-", "_"), None)
            if path is not None and message.startswith(word):
                raise CliError(f"{flag} {path}: {message.removeprefix(word)}") from None
        raise


def _read_responses(args, flag="--responses"):
    """The response table of ``--responses``, or of another ``flag`` read the same way
    (checked), as a labelled DataFrame."""
    from .data import read_table

    path = getattr(args, flag.removeprefix("--").replace("-", "_"))
    _check_input_file(path, flag)
    return read_table(path, layout=args.layout, label_column=args.label_column,
                      model_column=args.model_column, item_column=args.item_column,
                      correct_column=args.correct_column)


def _check_some_answered(args, answered: int) -> None:
    """A file of answers of which no model answered any calibrated item is a mistake (the
    wrong file, or its items named otherwise), not models to place by the prior alone:
    ``predict``, ``adaptive`` and ``score`` wrote such rows and exited 0 where ``audit``
    refused the file."""
    if not answered:
        raise CliError(f"--responses {args.responses}: no model answered any calibrated "
                       f"item of --items {args.items}")
