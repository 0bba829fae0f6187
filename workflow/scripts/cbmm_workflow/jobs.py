"""What every job does first: its log, its threads, the user's methods and their software."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import math
import os
import re
import sys
import time
import warnings
from pathlib import Path

from cbmm import io as cbmm_io
from cbmm.registry import MethodUnavailableError, get_method

from .paths import LOGS


def start_log(log_path, *, job: str) -> logging.Logger:
    """Send this job's messages, warnings and uncaught errors to its log file.

    The first line records ``SLURM_JOB_ID`` (``none`` outside SLURM) so a log
    can be matched with the scheduler's accounting; the second the job's start-up
    (:func:`log_start_up`).
    """
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    stream = open(log_path, "w", buffering=1)  # noqa: SIM115 (lives as long as the job)
    sys.stdout = sys.stderr = stream
    logging.basicConfig(stream=stream, level=logging.INFO, force=True,
                        format="%(asctime)s %(levelname)s %(message)s")
    logging.captureWarnings(True)
    # libraries that narrate their work at INFO (fontTools subsetting each PDF's fonts:
    # 176 of a render log's 245 lines) keep to warnings
    for chatty in ("fontTools", "matplotlib"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    warnings.simplefilter("default")
    logger = logging.getLogger(job)
    stream.write(f"SLURM_JOB_ID={os.environ.get('SLURM_JOB_ID', 'none')}\n")
    log_start_up(logger)
    uncaught = sys.excepthook

    def interrupted(kind, value, traceback):
        if issubclass(kind, KeyboardInterrupt):  # Ctrl-C: nothing went wrong to read about
            logger.error("interrupted; the same command resumes the run")
            return
        uncaught(kind, value, traceback)

    sys.excepthook = interrupted
    return logger


def logged_warnings(since: float, folder=LOGS, shown: int = 3, width: int = 300) -> list[str]:
    """What the job logs written since ``since`` (seconds since the epoch) warn of, for the
    end of a run: per rule (a folder of ``folder``), how many of its logs hold a warning
    and the first warning of up to ``shown`` of them, cut at ``width`` characters.  A
    job's warnings (a dataset's k skipped, calibrations that did not converge) went to its
    log alone, and a run that ended well said nothing of them.  A log that cannot be read
    is passed over: this runs as the run ends, and must not end it otherwise."""
    lines = []
    for rule in sorted(path for path in Path(folder).glob("*") if path.is_dir()):
        warned = []
        for log in sorted(rule.rglob("*.log")):
            try:
                if log.stat().st_mtime < since:
                    continue
                with open(log, encoding="utf-8", errors="replace") as stream:
                    first = next((line for line in stream if " WARNING " in line), None)
            except OSError:
                continue
            if first is not None:  # a Python warning's "file.py:line: " says nothing here
                message = _WARNED_AT.sub("", first.split(" WARNING ", 1)[1]).rstrip()
                warned.append(f"  {log}: {message[:width]}")
        if warned:
            lines.append(f"{rule}: {len(warned)} job log(s) with warnings, e.g.")
            lines += warned[:shown]
    return lines


#: Where a Python warning was raised, before its category (``/a b/x.py:12: UserWarning:``).
_WARNED_AT = re.compile(r"^.*?:\d+: (?=[A-Za-z_][\w.]*: )")


def log_start_up(log) -> None:
    """Log the CPU this process has used so far: its start-up before the job's work
    (interpreter, Snakemake's script preamble, imports; a fit job logs it again once
    its methods' software is loaded). ``benchmarks/bench_workflow.py`` sums the last
    such line of each job's log."""
    log.info("start-up: %.3f CPU-s", time.process_time())


def use_job_threads(threads: int) -> None:
    """cbmm's fused passes use the job's ``threads`` (one core per fit, as in the paper).

    Snakemake's script runner already sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
    MKL_NUM_THREADS to them; this overrides a ``CBMM_NUM_THREADS`` the user exported,
    which cbmm reads at each fit (so it may be set after import).
    """
    os.environ["CBMM_NUM_THREADS"] = str(threads)


def import_method_modules(specs) -> None:
    """Import the modules of config key ``method_modules`` (they call
    ``cbmm.register_method``): importable module names, or ``.py`` files."""
    for spec in specs:
        try:
            if spec.endswith(".py"):
                path = Path(spec)
                if not path.is_file():
                    raise FileNotFoundError(f"no such file {path}")
                name = "cbmm_user_methods_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
                module_spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(module_spec)
                sys.modules[name] = module
                module_spec.loader.exec_module(module)
            else:
                importlib.import_module(spec)
        except SystemExit as exc:  # at import: never a reason to end the run as if done
            raise RuntimeError(f"cannot import {spec!r}: it called sys.exit({exc.code!r}) "
                               "while being imported") from None
        except Exception as exc:  # a user's module: report it as configuration
            raise RuntimeError(f"cannot import {spec!r}: {type(exc).__name__}: {exc}") from exc


def module_files(specs) -> list[Path]:
    """The source files of method modules: a ``.py`` file, or an importable module's file
    (every ``.py`` file of a package)."""
    files = []
    for spec in specs:
        if spec.endswith(".py"):
            files.append(Path(spec))
            continue
        try:
            found = importlib.util.find_spec(spec)
        except (ImportError, ValueError):
            found = None
        origin = Path(found.origin) if found is not None and found.origin else None
        if origin is None or not origin.is_file():
            continue  # not importable: the configuration's check says so
        if origin.name == "__init__.py":
            files += sorted(origin.parent.rglob("*.py"))
        else:
            files.append(origin)
    return files


def code_digest(specs, extra=()) -> str:
    """SHA-256 of the source of the method modules ``specs`` (and of the files ``extra``):
    it changes when their code does."""
    digest = hashlib.sha256()
    for path in [*module_files(specs), *map(Path, extra)]:
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"(unreadable)")
    return digest.hexdigest()


def method_code(method: str, specs) -> str | None:
    """What a fit's key records of its method's code: None for cbmm's own methods (the cbmm
    version stands for them), else the digest of the user's method modules and of the
    module that defines its solver."""
    solve = get_method(method).solve
    module = sys.modules.get(getattr(solve, "__module__", None) or "")
    if module is not None and (module.__name__ == "cbmm" or module.__name__.startswith("cbmm.")):
        return None
    own = getattr(module, "__file__", None)
    return code_digest(specs, [own] if own else [])


def load_method_software(units) -> None:
    """Load the software of the units' methods now, as cbmm.fit would at the first fit
    of each method and options (:meth:`cbmm.registry.Method.load_software`).  A method
    whose software is missing is left to cbmm.fit, which records each of its fits as
    ``failed`` with the install command.
    """
    settings = {(unit["method"], json.dumps(unit["options"], sort_keys=True)) for unit in units}
    for name, options in sorted(settings):
        method = get_method(name)
        try:
            method.load_software(method.check_options(json.loads(options)))
        except (MethodUnavailableError, ImportError, ValueError):
            pass


def json_safe(value):
    """NaN/inf become None so the JSON is strict; numpy scalars become Python ones."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(obj, path) -> None:
    """Strict JSON (:func:`json_safe`), written atomically by :mod:`cbmm.io`."""
    cbmm_io.write_json(json_safe(obj), path)
