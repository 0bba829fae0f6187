"""The public entry point :func:`fit`: checks, the isolated worker, time limits, progress.

A fit runs in a forked worker process by default.  The caller checks the
arguments, the method's options and the data first (bad input raises here,
in the caller), draws the shared start, and then forks: the worker inherits
the validated data without a copy, runs the method's solver and sends its
raw output back through a pipe, together with the warnings the solver
raised and the log records it wrote.  Whatever happens in the worker (an
exception, a crash by a signal, a hang past the time limit) the caller
records a failed :class:`FitResult` and carries on.  The canonical form, the
float64 loss and the stationarity measure are computed in the caller from
the raw output, by the same code as for an in-process fit, so an isolated
fit equals an in-process one exactly.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import numbers
import os
import pickle
import re
import signal
import sys
import threading
import time
import warnings

import numpy as np

from .initialization import initial_values
from .model import check_sigma, loss_and_stationarity
from .registry import get_method
from .responses import as_responses
from .result import FitResult, SolverOutput, canonicalize

__all__ = ["fit", "DegenerateDataWarning", "ConvergenceWarning", "FORK_AVAILABLE"]

logger = logging.getLogger("cbmm")

#: Whether this platform can fork (Linux, macOS and other POSIX systems; not Windows).
FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()


class DegenerateDataWarning(UserWarning):
    """Items or models answered all-correct / all-wrong: no finite optimum for them."""


class ConvergenceWarning(UserWarning):
    """A fit stopped at ``max_iter`` before its stopping rule was met."""


# ------------------------------------------------------------------ argument checks

def _number(name, value, *, positive=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or (positive and value <= 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _integer(name, value, *, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        what = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value)


def _check_timeout(timeout_s, isolate):
    if timeout_s is None or (isinstance(timeout_s, str) and timeout_s == "auto"):
        return timeout_s
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real) \
            or not timeout_s > 0 or math.isnan(timeout_s):
        raise ValueError(f"timeout_s must be 'auto', None or a number of seconds > 0, "
                         f"got {timeout_s!r}")
    if not isolate:
        raise ValueError("timeout_s needs isolate=True (a time limit stops the worker "
                         "process); pass timeout_s=None with isolate=False")
    return float(timeout_s)


# ------------------------------------------------------------------------ the fit

def fit(responses, method: str = "cbmm", *, sigma: float = 1.0, tol: float = 1e-4,
        max_iter: int = 1000, seed: int = 0, init_scale: float = 1.0,
        coding: str | None = None, timeout_s="auto", isolate: bool = True, verbose: int = 0,
        **method_options) -> FitResult:
    """Fit the 2PL model ``X = theta a^T + 1 b^T`` (``a >= 0``) to a response matrix.

    Parameters
    ----------
    responses : array-like, pandas.DataFrame, scipy.sparse matrix or Responses
        ``N x J`` matrix (models x items): 1 correct, 0 incorrect, NaN missing
        (or the paper's -1/+1 coding with 0/NaN missing), or a long table
        (see :func:`cbmm.as_responses`).  DataFrame labels are kept on the
        returned parameters.  Storage follows ``as_responses(storage="auto")``
        (sparse when most cells are missing; a Responses keeps its own); a
        method that does not read sparse storage (``Method.reads_sparse``)
        gets it dense.  ``info["storage"]`` of the result says which the
        solver read.
    method : str
        A registered method: ``"cbmm"`` (default), and the baselines
        ``"lbfgsb"``, ``"manopt"``, ``"pyirt"``, ``"mirt"`` when installed.
    sigma : float
        Known temperature of the logistic link, > 0.
    tol : float
        Relative-loss-change tolerance, > 0 (each method maps it to its own
        stopping rule; see docs/baselines.md).
    max_iter : int
        Maximum iterations / epochs / EM cycles, >= 1.
    seed : int
        Seed of the shared initial values (and of any method randomness): any
        non-negative integer (NumPy integers and values >= 2**63 included).
    init_scale : float
        Variance ``s^2`` of ``log a`` and ``b`` at the start, > 0.
    coding : {None, "binary", "signed"}
        How to read ``responses`` (see :func:`cbmm.as_responses`); None infers it and refuses a
        matrix holding both -1 and 0.
    timeout_s : "auto", float or None
        Wall-clock limit of the worker process.  ``"auto"`` (default):
        :meth:`cbmm.registry.Method.default_timeout_s`, ten times the
        method's declared cost for this size plus a minute; ``None``: no
        limit.  A fit that reaches the limit is stopped and recorded as
        ``failed: timeout after <limit> s``.
    isolate : bool
        Run the solver in a forked worker process (default), so that a crash
        or a hang inside a library becomes a failed result.  ``False`` runs
        it in this process (for debugging; no time limit).  Where the
        platform cannot fork (Windows) the fit runs in-process with a
        ``RuntimeWarning``.
    verbose : int
        Log progress every ``verbose`` iterations / epochs / EM cycles
        (iteration, loss, relative change, elapsed seconds) at level INFO on
        the ``"cbmm"`` logger; 0 (default) logs nothing.  For the duration
        of the fit the logger's level is lowered to INFO if needed, and a
        handler writing to stderr is attached if none is configured.
    **method_options
        The method's declared options (``cbmm methods`` lists them), e.g.
        ``engine``, ``precision``, ``accelerate`` for cbmm.

    Returns
    -------
    FitResult
        Parameters in the canonical form (theta mean 0, sd 1).  A failure
        inside the method (an exception, non-finite parameters, a crash of
        the worker, the time limit) gives ``status="failed: <reason>"`` with
        NaN parameters instead of an exception.

    Raises
    ------
    ValueError
        Bad input (the message names the offending rows/columns/arguments),
        an unknown method or option, or an option of the wrong type.
    cbmm.MethodUnavailableError
        The method's software is not installed (the message says what to run).

    Warns
    -----
    DegenerateDataWarning
        Items or models answered all-correct or all-wrong.
    ConvergenceWarning
        The fit stopped at ``max_iter``.
    """
    sigma = check_sigma(sigma)
    tol = _number("tol", tol)
    init_scale = _number("init_scale", init_scale)
    max_iter = _integer("max_iter", max_iter, minimum=1)
    seed = _integer("seed", seed, minimum=0)
    verbose = _integer("verbose", verbose, minimum=0)
    if not isinstance(isolate, (bool, np.bool_)):
        raise ValueError(f"isolate must be True or False, got {isolate!r}")
    timeout_s = _check_timeout(timeout_s, isolate)
    spec = get_method(method)
    options = spec.check_options(method_options)
    data = as_responses(responses, coding=coding, storage="auto")
    if data.storage == "sparse" and not spec.reads_sparse:
        data = data.to_dense()
    # here, not in the forked worker, where an import would die with it and be paid again
    # by every fit (Method.preload)
    spec.load_software(options)

    n, j = data.shape
    if timeout_s == "auto":
        timeout_s = spec.default_timeout_s(n, j, max_iter) if isolate else None
    bad_items = data.degenerate_items()
    bad_models = data.degenerate_models()
    if bad_items.size or bad_models.size:
        warnings.warn(
            f"{bad_items.size} item(s) answered all-correct or all-wrong and "
            f"{bad_models.size} model(s) with all answers correct or wrong: their "
            "easiness/ability has no finite optimum and drifts until the stopping rule; "
            "see FitResult.degenerate_items / degenerate_models",
            DegenerateDataWarning, stacklevel=2)
    if isolate and not FORK_AVAILABLE:
        warnings.warn("this platform cannot fork: the fit runs in this process, without "
                      "crash isolation or time limit", RuntimeWarning, stacklevel=2)
        isolate, timeout_s = False, None

    start = initial_values(n, j, seed=seed, init_scale=init_scale, sigma=sigma)
    settings = dict(sigma=sigma, tol=tol, max_iter=max_iter, seed=seed)
    with _progress_logging(verbose):
        if isolate:
            out = _solve_in_worker(spec, data, start, settings, options, verbose, timeout_s)
        else:
            out = _solve(spec, data, start, settings, options, verbose)
        result = _finish(out, data, start, method, settings, init_scale,
                         data.label_cols(bad_items), data.label_rows(bad_models))
        if verbose:
            logger.info("%s: %s after %d iterations, loss %.10g, %.3f s", method,
                        result.status, result.n_iter, result.loss, result.runtime_s)
    if result.status == "max_iter":
        warnings.warn(f"{method} stopped at max_iter={max_iter} before the relative change "
                      f"of the loss fell below tol={tol:g}; raise max_iter or tol",
                      ConvergenceWarning, stacklevel=2)
    return result


def _finish(out, data, start, method, settings, init_scale, bad_items, bad_models):
    """The FitResult of a solver's raw output: canonical form, float64 loss, stationarity."""
    common = dict(method=method, sigma=settings["sigma"], tol=settings["tol"],
                  max_iter=settings["max_iter"], seed=settings["seed"], init_scale=init_scale,
                  degenerate_items=bad_items, degenerate_models=bad_models)
    theta, a, b = (np.asarray(v, dtype=float) for v in (out.theta, out.a, out.b))
    status = out.status
    if not status.startswith("failed") and not (np.isfinite(theta).all()
                                                 and np.isfinite(a).all()
                                                 and np.isfinite(b).all()):
        status = "failed: non-finite parameters"
    if status.startswith("failed"):
        return FitResult.failure(status, responses=data, runtime_s=out.runtime_s,
                                 n_iter=out.n_iter, loss_history=out.loss_history,
                                 info=out.info, **common)
    raw_mean, raw_sd = float(theta.mean()), float(theta.std())
    theta, a, b = canonicalize(theta, a, b)
    final_loss, reached = loss_and_stationarity(
        theta, a, b, canonicalize(*start), data, settings["sigma"],
        reference=out.info.get("stationarity_reference"))
    info = dict(out.info, theta_mean_raw=raw_mean, theta_sd_raw=raw_sd, stationarity=reached,
                storage=data.storage)
    return FitResult(
        theta=_label(theta, data.row_labels, "theta"), a=_label(a, data.col_labels, "a"),
        b=_label(b, data.col_labels, "b"), loss=final_loss,
        loss_history=list(map(float, out.loss_history)), n_iter=int(out.n_iter),
        status=status, runtime_s=float(out.runtime_s), info=info, **common)


def _label(values, labels, name):
    if labels is None:
        return values
    import pandas as pd  # labels come from pandas input: already imported

    return pd.Series(values, index=labels, name=name)


# ------------------------------------------------------------------- the solver call

def _solve(spec, data, start, settings, options, verbose) -> SolverOutput:
    """Run the method's solver; an exception or a malformed output is a failed output."""
    n, j = data.shape
    progress = _ProgressLog(spec.name, verbose) if verbose else None
    wall = time.perf_counter()
    try:
        out = spec.solve(data, *start, progress=progress, **settings, **options)
        problem = _malformed(out, n, j)
    except (Exception, SystemExit) as exc:  # a library failure is a result (the paper's NA)
        message = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, SystemExit):
            message = f"the method called sys.exit({exc.code!r})"
        return _failed_output(message, time.perf_counter() - wall, n, j,
                              {"exception": type(exc).__name__})
    if problem:
        return _failed_output(problem, time.perf_counter() - wall, n, j)
    return out


def _malformed(out, n, j) -> str | None:
    if not isinstance(out, SolverOutput):
        return f"the solver returned {type(out).__name__}, not a SolverOutput"
    for name, size in (("theta", n), ("a", j), ("b", j)):
        if np.shape(getattr(out, name)) != (size,):
            return (f"the solver returned {name} of shape {np.shape(getattr(out, name))}, "
                    f"expected ({size},)")
    if not isinstance(out.status, str):
        return f"the solver returned status {out.status!r}, not a string"
    return None


def _failed_output(reason, runtime_s, n, j, info=None) -> SolverOutput:
    return SolverOutput(theta=np.full(n, np.nan), a=np.full(j, np.nan), b=np.full(j, np.nan),
                        loss_history=[], n_iter=0, status=f"failed: {reason}",
                        runtime_s=runtime_s, info=dict(info or {}))


class _ProgressLog:
    """The solver's ``progress(iteration, loss)`` callback: one INFO line every ``every``."""

    def __init__(self, method, every):
        self.method, self.every = method, every
        self.start = time.perf_counter()
        self.previous = math.nan
        self.next_due = every

    def __call__(self, iteration, loss):
        loss = float(loss)
        change = abs(loss - self.previous) / abs(self.previous) if self.previous else math.nan
        self.previous = loss
        if iteration >= self.next_due:
            # iteration counts may jump (SQUAREM counts 3-4 MM maps per step)
            self.next_due = (iteration // self.every + 1) * self.every
            logger.info("%s: iteration %d, loss %.10g, relative change %.3g, %.2f s",
                        self.method, iteration, loss, change, time.perf_counter() - self.start)


@contextlib.contextmanager
def _progress_logging(verbose):
    """Make INFO progress lines visible for the duration of a ``verbose`` fit."""
    if not verbose:
        yield
        return
    level = logger.level
    handler = None
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    if not logger.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        logger.addHandler(handler)
    try:
        yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)


# ----------------------------------------------------------------- the worker process

class _PipeSender:
    """Thread-safe ``send`` on the worker's end of the pipe."""

    def __init__(self, connection):
        self.connection = connection
        self.lock = threading.Lock()

    def send(self, message) -> None:
        with self.lock:
            self.connection.send(message)


_RECORD_FIELDS = ("name", "levelno", "levelname", "pathname", "filename", "module", "lineno",
                  "funcName", "created", "msecs", "relativeCreated", "thread", "threadName",
                  "process", "processName")


class _PipeLogHandler(logging.Handler):
    """Forwards the worker's log records to the caller, which hands them to its own loggers."""

    def __init__(self, sender):
        super().__init__()
        self.sender = sender
        self.last = None

    def emit(self, record):
        if record is self.last:  # the same record reaching a second logger on its way up
            return
        self.last = record
        try:
            message = self.format(record) if record.exc_info else record.getMessage()
            # the standard attributes only: extras may not survive pickling
            fields = {key: getattr(record, key) for key in _RECORD_FIELDS}
            self.sender.send(("log", logging.makeLogRecord(dict(fields, msg=message))))
        except Exception:  # a log line is never worth a failed fit
            self.handleError(record)


def _route_logging(sender) -> None:
    """In the worker: every handler of every logger is replaced by one pipe handler."""
    handler = _PipeLogHandler(sender)
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    for lg in loggers:
        if lg.handlers or lg is logging.getLogger():
            lg.handlers = [handler]


def _transferable_warnings(caught):
    out = []
    for w in caught:
        category = w.category
        try:
            pickle.dumps(category)
        except Exception:  # a class defined inside a function: keep its name in the text
            category = UserWarning
        text = str(w.message) if category is w.category else \
            f"{w.category.__name__}: {w.message}"
        out.append((text, category, w.filename, w.lineno))
    return out


def _die_with_parent() -> None:
    """Linux: the kernel kills the worker when the caller dies (no orphaned fits)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


#: Paths of OpenMP runtimes (GNU, LLVM, Intel) in /proc/self/maps.
_OPENMP_RUNTIME = re.compile(r"/\S*/lib(?:gomp|omp|iomp5)[^/\s]*\.so[^/\s]*$", re.MULTILINE)


def _release_openmp_threads() -> None:
    """Linux: stop the thread pools of the OpenMP runtimes loaded here before a fork.

    A forked child gets only the forking thread.  An OpenMP runtime whose
    pool the parent had started (libgomp, also inside torch) then waits
    forever for the missing threads at the child's first parallel region.
    ``omp_pause_resource_all(omp_pause_hard)`` (OpenMP 5.0) ends the pool;
    the parent's next parallel region starts a new one.
    """
    try:
        if len(os.listdir("/proc/self/task")) < 2:
            return  # no thread besides this one: no pool to stop
        with open("/proc/self/maps") as maps:
            runtimes = set(_OPENMP_RUNTIME.findall(maps.read()))
    except OSError:  # no /proc: not Linux
        return
    import ctypes

    for path in sorted(runtimes):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(path).omp_pause_resource_all(2)  # omp_pause_hard


def _worker(connection, spec, data, start, settings, options, verbose):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    _die_with_parent()
    sender = _PipeSender(connection)
    _route_logging(sender)
    with warnings.catch_warnings(record=True) as caught:
        out = _solve(spec, data, start, settings, options, verbose)
    sender.send(("warnings", _transferable_warnings(caught)))
    try:
        sender.send(("result", out))
    except Exception as exc:  # e.g. an info entry that cannot be pickled
        n, j = data.shape
        sender.send(("result", _failed_output(
            f"the solver's output could not be sent back ({type(exc).__name__}: {exc})",
            out.runtime_s, n, j)))
    connection.close()


def _solve_in_worker(spec, data, start, settings, options, verbose, timeout_s) -> SolverOutput:
    """Run :func:`_solve` in a forked worker under a time limit; a dead worker is a failure."""
    n, j = data.shape
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(target=_worker, name=f"cbmm-fit-{spec.name}",
                             args=(sender, spec, data, start, settings, options, verbose))
    began = time.perf_counter()
    _release_openmp_threads()
    worker.start()
    sender.close()
    caught, out = [], None
    try:
        while out is None:
            wait = None if timeout_s is None else max(0.0, began + timeout_s - time.perf_counter())
            if not receiver.poll(wait):
                out = _failed_output(f"timeout after {timeout_s:g} s",
                                     time.perf_counter() - began, n, j)
                break
            try:
                kind, payload = receiver.recv()
            except EOFError:
                worker.join()
                out = _failed_output(_death(worker.exitcode), time.perf_counter() - began, n, j)
                break
            if kind == "log":
                logging.getLogger(payload.name).handle(payload)
            elif kind == "warnings":
                caught = payload
            else:
                out = payload
    finally:
        if worker.is_alive():
            worker.kill()
        worker.join()
        receiver.close()
    for text, category, filename, lineno in caught:
        warnings.warn_explicit(text, category, filename, lineno)
    return out


def _death(exitcode) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = str(-exitcode)
        return f"worker process killed by signal {name}"
    if exitcode:
        return f"worker process exited with status {exitcode}"
    return "worker process ended without a result"
