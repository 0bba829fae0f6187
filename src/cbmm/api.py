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
import multiprocessing.connection
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

from ._checks import check_integer, check_positive
from ._warn import CbmmWarning, warn
from .diagnostics import (STATIONARY_BELOW, components, identified_core, scaled_gradient,
                          separation)
from .engine import Objective
from .inference import standard_errors
from .initialization import initial_values, spectral_start
from .intervals import prior_biased, warn_few_models, warn_prior_biased
from .methods._prior import penalty_of, takes_prior
from .model import SIGMA_RANGE, check_sigma, fit_measures, loss
from .prior import Penalty
from .registry import Option, get_method
from .responses import ResponseError, as_responses, no_information
from .result import ConvergenceWarning, FitResult, SolverOutput, canonicalize
from .stopping import PAPER_TOL

__all__ = ["fit", "paper_settings", "run_in_worker", "check_timeout", "DegenerateDataWarning",
           "ConvergenceWarning", "IsolationWarning", "FitFailedError", "NOT_AN_OPTIMUM", "FORK_AVAILABLE",
           "AGREE_OBJECTIVE", "AGREE_SE", "FIT_OPTIONS", "PAPER_FIT", "STARTS",
           "DEGENERATE", "TIMEOUT"]

logger = logging.getLogger("cbmm")

#: Whether this platform can fork (Linux, macOS and other POSIX systems; not Windows).
FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()


class DegenerateDataWarning(CbmmWarning):
    """Items or models answered all-correct / all-wrong, or separated: no finite optimum;
    or answers in groups that share none: the groups' abilities are not compared by them."""


#: Statuses of a fit that stopped short of an optimum: its estimates are not an answer,
#: nor what is computed from them (docs/trust.md, "Status").
NOT_AN_OPTIMUM = ("max_iter", "not_stationary", "unbounded")


class IsolationWarning(CbmmWarning, RuntimeWarning):
    """The fit could not run in a forked worker (a platform without ``fork``): it runs in
    this process, without crash isolation or time limit.  A RuntimeWarning too, as it was."""


class FitFailedError(ValueError):
    """The fit that a result rests on (a bootstrap's, a coverage check's) failed; its
    status says why.  A ValueError for the callers that caught one before."""


#: fit's ``timeout_s``, declared once (the command line's ``--timeout`` and the
#: workflow's ``fit.timeout_s`` take it from here): ``"auto"``, a finite number of seconds
#: or None, the one spelling of no limit (``none`` on the command line, ``null`` in YAML).
TIMEOUT = Option("float", "auto", exclusive_minimum=0, nullable=True, specials=("auto",),
                 doc="time limit of a fit in seconds: auto (ten times the method's declared "
                     "cost plus a minute), a number, or none (no limit)")


def check_timeout(timeout_s, isolate=True):
    """A time limit as :func:`fit` takes it (:data:`TIMEOUT`): ``"auto"``, None (no
    limit) or a finite number of seconds > 0, returned as a float."""
    try:
        timeout_s = TIMEOUT.validate("timeout_s", timeout_s)
    except ValueError:
        raise ValueError(f"timeout_s must be 'auto', None (no limit) or a finite number of "
                         f"seconds > 0, got {timeout_s!r}") from None
    if timeout_s not in (None, "auto") and not isolate:
        raise ValueError("timeout_s needs isolate=True (a time limit stops the worker "
                         "process); pass timeout_s=None with isolate=False")
    return timeout_s


# ------------------------------------------------------------------------ the fit

#: Values of ``start`` besides explicit starting values.
STARTS = ("spectral", "random")
#: Values of ``degenerate``.
DEGENERATE = ("keep", "set_aside")

#: :func:`fit`'s own settings, declared once: their defaults are fit's, and the command
#: line and the workflow's schema take defaults and documentation from here.
FIT_OPTIONS = {
    "sigma": Option("float", 1.0, minimum=SIGMA_RANGE[0], maximum=SIGMA_RANGE[1],
                    doc="known temperature of the logistic link"),
    "tol": Option("float", 1e-6, exclusive_minimum=0,
                  doc="the method's stopping tolerance (the paper's: 1e-4); whether the fit "
                      "is an answer is its status"),
    "max_iter": Option("int", 1000, minimum=1,
                       doc="maximum iterations / epochs / EM cycles per start"),
    "seed": Option("int", 0, minimum=0, doc="seed of the random starts"),
    "init_scale": Option("float", 1.0, exclusive_minimum=0,
                         doc="variance s^2 of log a and b in the random starts"),
    "start": Option("str", "spectral", choices=STARTS,
                    doc="first start: spectral (deterministic, from the data) or random "
                        "(the paper's)"),
    "n_starts": Option("int", None, minimum=1, nullable=True,
                       doc="starts in all (the others random); the best objective is kept; "
                           "default 3 for the methods minimising loss (3), 1 for the others "
                           "(more for mml and mirt: compared by their marginal likelihood)"),
    "degenerate": Option("str", "keep", choices=DEGENERATE,
                         doc="all-correct / all-wrong models and items: keep (fit them) or "
                             "set_aside (fit the rest; theta, b = +-inf)"),
    "se": Option("bool", False,
                 doc="standard errors from the observed information (cbmm, lbfgsb, manopt, mml)"),
}
#: Starts agree when their objectives differ by at most this (a likelihood ratio of e:
#: statistically indistinguishable), or by float64 rounding on very large data.
AGREE_OBJECTIVE = 1.0
#: ... and their abilities differ from the best's by at most this many of its standard
#: errors (root mean square): starts as good as the best whose abilities differ by more
#: are a second answer that fits the data as well (reversed, say), one its intervals miss.
AGREE_SE = 1.0

#: The arguments of :func:`fit` under which it is the paper's procedure (the random start,
#: the relative-loss rule at 1e-4, 1000 iterations), with each method's
#: ``Method.paper_options`` (:func:`paper_settings`).
PAPER_FIT = {"start": "random", "n_starts": 1, "tol": PAPER_TOL, "max_iter": 1000,
             "degenerate": "keep"}


def paper_settings(method: str) -> dict:
    """Keyword arguments of :func:`fit` that reproduce the paper's fits by ``method``.

    >>> cbmm.fit(responses, "cbmm", **cbmm.paper_settings("cbmm"))  # doctest: +SKIP
    """
    return {**PAPER_FIT, **get_method(method).paper_options}


_DEFAULT = {name: option.default for name, option in FIT_OPTIONS.items()}


def fit(responses, method: str = "cbmm", *, sigma: float = _DEFAULT["sigma"],
        tol: float = _DEFAULT["tol"], max_iter: int = _DEFAULT["max_iter"],
        seed: int = _DEFAULT["seed"], init_scale: float = _DEFAULT["init_scale"],
        start=_DEFAULT["start"], n_starts: int = _DEFAULT["n_starts"],
        degenerate: str = _DEFAULT["degenerate"], se: bool = _DEFAULT["se"],
        coding: str | None = None, layout: str = "auto", timeout_s="auto", isolate: bool = True,
        verbose: int = 0, **method_options) -> FitResult:
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
        The method's stopping tolerance, > 0 (each method maps it to its own
        rule; see docs/baselines.md); the paper's is 1e-4.  Whether the fit is
        an answer is judged afterwards, the same way for every method
        (``status``).
    max_iter : int
        Maximum iterations / epochs / EM cycles per start, >= 1.
    seed : int
        Seed of the random starts (and of any method randomness): any
        non-negative integer (NumPy integers and values >= 2**63 included).
        With ``start="random"`` the first start is the paper's draw from
        ``seed``; further starts draw from ``(seed, k)``.
    init_scale : float
        Variance ``s^2`` of ``log a`` and ``b`` in the random starts, > 0.
    start : {"spectral", "random"}, tuple of arrays or FitResult
        The first start: ``"spectral"`` (default), deterministic and data-driven
        (:func:`cbmm.initialization.spectral_start`); ``"random"``, the paper's
        (:func:`cbmm.initial_values`); or explicit values ``(theta0, a0, b0)`` /
        a FitResult's raw parameters (a warm start: its models and items matched to the
        responses' by label where both have labels, so another order or a subset of its
        answers starts from its values; under ``degenerate="set_aside"`` its own set-aside
        models and items are left out too).
    n_starts : int, optional
        Starts in all, >= 1: the first as ``start`` says, the others random.
        The fit with the lowest objective is returned; ``info["starts"]`` lists
        every start, ``info["starts_agreeing"]`` how many reached the best
        objective (within :data:`AGREE_OBJECTIVE`) with abilities like the best's
        (within :data:`AGREE_SE` of its standard errors) and ``info["starts_distinct"]`` how many reached it
        with others.  Default: 3 for the methods
        that minimise loss (3) (``Method.minimises_loss``: cbmm, lbfgsb,
        manopt), 1 for the others, which fit their own model.  Their starts are
        compared by what they minimise where the method says (``Method.objective``:
        mml and mirt, minus the marginal log-likelihood); py-irt takes one.
    degenerate : {"keep", "set_aside"}
        Models and items answered all-correct or all-wrong: fitted with the rest
        (``"keep"``; without a prior they have no finite optimum), or set aside,
        repeatedly until none is left (``"set_aside"``): the fit and the
        canonical scale use the rest, and set-aside models get theta = +-inf,
        set-aside items b = +-inf and a = NaN (``info["set_aside"]`` lists them).
    se : bool
        Also compute standard errors from the observed information
        (``theta_se``, ``a_se``, ``b_se``, :meth:`FitResult.confint`); for the
        methods that minimise loss (3) (those with a ``prior`` option) and for
        ``mml`` (Louis' information of the marginal likelihood; the abilities'
        posterior sd).  Under ``prior="normal"`` also ``prior_bias``: how far the prior
        could bias each ability, in standard errors (summary: ``info["prior_bias"]``), and
        an ``IntervalWarning`` where it could bias more than a quarter of them, or a group
        of 5 whose estimates move together, by more than one
        (:data:`cbmm.intervals.PRIOR_BIAS`; docs/trust.md, weakly linked groups).
    coding : {None, "binary", "signed"}
        How to read ``responses`` (see :func:`cbmm.as_responses`); None infers it and refuses a
        matrix holding both -1 and 0.
    layout : {"auto", "wide", "long"}
        How to read a DataFrame (see :func:`cbmm.as_responses`): ``"auto"`` reads one with
        the columns ``model``, ``item`` and ``correct`` as a long table.
    timeout_s : "auto", float or None
        Wall-clock limit of the worker process (all starts).  ``"auto"``
        (default): :meth:`cbmm.registry.Method.default_timeout_s` per start,
        ten times the method's declared cost for this size plus a minute;
        ``None``: no limit.  A fit that reaches the limit is stopped and
        recorded as ``failed: timeout after <limit> s``.
    isolate : bool
        Run the solver in a forked worker process (default), so that a crash
        or a hang inside a library becomes a failed result.  ``False`` runs
        it in this process (for debugging; no time limit).  Where the
        platform cannot fork (Windows) the fit runs in-process with an
        :class:`IsolationWarning` (a ``RuntimeWarning`` and a ``CbmmWarning``).
    verbose : int
        Log progress every ``verbose`` iterations / epochs / EM cycles
        (iteration, loss, relative change, elapsed seconds) at level INFO on
        the ``"cbmm"`` logger; 0 (default) logs nothing.  For the duration
        of the fit the logger's level is lowered to INFO if needed, and a
        handler writing to stderr is attached if none is configured.
    **method_options
        The method's declared options (``cbmm methods`` lists them), e.g.
        ``accelerate`` and ``prior`` for cbmm.

    Returns
    -------
    FitResult
        Parameters in the canonical form (theta mean 0, sd 1).  ``status`` says
        whether the fit is an answer: ``"converged"`` (a stationary point:
        :data:`cbmm.diagnostics.STATIONARY_BELOW`), ``"not_stationary"`` (the
        method's rule stopped it short of one), ``"max_iter"``, ``"unbounded"``
        (no finite optimum: parameters run away), ``"multimodal"`` (one start
        alone reached the best objective, or starts reached it with other abilities),
        ``"disconnected"`` (answers in groups that share none:
        :func:`cbmm.diagnostics.components`) or ``"failed: <reason>"``
        (an exception, non-finite parameters, a crash of the worker, the time
        limit) with NaN parameters instead of an exception.

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
        Items or models answered all-correct or all-wrong (under the normal prior their
        values are the prior's; under maximum likelihood they have no finite optimum),
        and a fit whose status is ``unbounded``.
    ConvergenceWarning
        The fit stopped at ``max_iter``, short of a stationary point, or the
        starts disagree.
    """
    sigma = check_sigma(sigma)
    tol = check_positive("tol", tol)
    init_scale = check_positive("init_scale", init_scale)
    max_iter = check_integer("max_iter", max_iter, minimum=1)
    seed = check_integer("seed", seed, minimum=0)
    verbose = check_integer("verbose", verbose, minimum=0)
    for name, value in (("isolate", isolate), ("se", se)):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {value!r}")
    if degenerate not in DEGENERATE:
        raise ValueError(f"degenerate must be one of {list(DEGENERATE)}, got {degenerate!r}")
    if isinstance(start, str) and start not in STARTS:
        raise ValueError(f"start must be one of {list(STARTS)}, starting values (theta0, a0, b0) "
                         f"or a FitResult, got {start!r}")
    timeout_s = check_timeout(timeout_s, isolate)
    spec = get_method(method)
    options = spec.check_options(method_options)
    if n_starts is None:
        n_starts = 3 if spec.minimises_loss else 1
    n_starts = check_integer("n_starts", n_starts, minimum=1)
    if se and not (spec.minimises_loss or spec.standard_errors):
        raise ValueError(f"se=True needs a method that gives standard errors (cbmm, lbfgsb, "
                         f"manopt, mml); {method!r} does not")
    if n_starts > 1 and not (spec.minimises_loss or spec.objective):
        raise ValueError(f"n_starts={n_starts} needs a method whose starts can be compared "
                         f"(cbmm, lbfgsb, manopt by loss (3); mml, mirt by their marginal "
                         f"likelihood); {method!r} reports no objective")
    penalty = penalty_of(spec, options)
    data = as_responses(responses, coding=coding, layout=layout, storage="auto")
    reason = no_information(data, coding)
    if reason:
        raise ResponseError(f"responses: {reason}")
    if data.storage == "sparse" and not spec.reads_sparse:
        data = data.to_dense()
    given = None if isinstance(start, str) else _given_start(start, data)
    # here, not in the forked worker, where an import would die with it and be paid again
    # by every fit (Method.preload)
    spec.load_software(options)

    n, j = data.shape
    bad_items = data.degenerate_items()
    # a marginal fit's abilities are posterior means, finite for any answers; its models
    # who answered every item alike belong to the population it estimates, and setting
    # them aside would cut its tails off (a's 95 % intervals then covered none)
    bad_models = (data.degenerate_models() if not spec.population_scale
                  else np.array([], dtype=int))
    core, kept = data, None
    if degenerate == "set_aside" and (bad_items.size or bad_models.size):
        kept = (identified_core(data) if not spec.population_scale
                else (np.arange(n), np.setdiff1d(np.arange(j), bad_items)))
        if kept[0].size < 2 or kept[1].size < 1:
            raise ValueError(f"degenerate='set_aside' leaves {kept[0].size} model(s) and "
                             f"{kept[1].size} item(s): nothing to fit")
        core = data.take(*kept)
        if given is not None:
            given = (given[0][kept[0]], given[1][kept[1]], given[2][kept[1]])
    if given is not None:
        _check_finite_start(given, core, degenerate)
    if bad_items.size or bad_models.size:
        warn(_degenerate_message(bad_items.size, bad_models.size, degenerate, penalty,
                                 spec.population_scale, takes_prior(spec)),
             DegenerateDataWarning)
    if isolate and not FORK_AVAILABLE:
        warn("this platform cannot fork: the fit runs in this process, without "
             "crash isolation or time limit", IsolationWarning)
        isolate, timeout_s = False, None
    if timeout_s == "auto":
        timeout_s = spec.default_timeout_s(n, j, max_iter) * n_starts if isolate else None

    starts = _starts(start, given, n_starts, core, seed, init_scale, sigma, penalty)
    settings = dict(sigma=sigma, tol=tol, max_iter=max_iter, seed=seed)
    with _progress_logging(verbose):
        def task():
            return _solve_starts(spec, core, starts, settings, options, verbose, penalty)

        if isolate:
            n_core, j_core = core.shape
            out = run_in_worker(
                task, lambda reason, seconds: SolverOutput.failed(reason, n_core, j_core,
                                                                  runtime_s=seconds),
                timeout_s, f"cbmm-fit-{spec.name}")
        else:
            out = task()
        best = out.info.get("best_start", 0)
        if spec.minimises_loss and not out.status.startswith("failed"):
            share_identical(out.theta, out.a, out.b, core.answer_patterns(1),
                            core.answer_patterns(0))
        result = _finish(out, core, starts[best][1], method, settings, init_scale,
                         data.label_cols(bad_items), data.label_rows(bad_models), penalty,
                         canonical=not spec.population_scale)
        result.info.update(start=starts[best][0], n_starts=len(starts), degenerate=degenerate,
                           options=options)
        if "runaway_items" in result.info:   # the solver's columns, as labels
            result.info["runaway_items"] = core.label_cols(
                np.asarray(result.info["runaway_items"], dtype=int))
        if spec.minimises_loss:
            result.status = _judged_status(result, core, penalty, len(starts))
        elif result.status == "converged":  # its own status; compared starts can say more
            result.status = _multimodal(result.info, len(starts)) or result.status
        if result.status == "max_iter":  # every method's, as the other statuses' reasons
            result.info["status_reason"] = (f"stopped at max_iter={result.max_iter} before "
                                            "its stopping rule was met")
        if result.failed:  # the reason every status has, as its warning gives it
            result.info["status_reason"] = result.status.removeprefix("failed: ")
        disconnected = _disconnected(result.info, core, spec)
        if disconnected and result.status in ("converged", "multimodal"):
            result.status, result.info["status_reason"] = "disconnected", disconnected
        elif disconnected and not result.failed:  # a status that says more keeps it, with both
            reason = result.info.get("status_reason")
            result.info["status_reason"] = f"{reason}; and {disconnected}" if reason \
                else disconnected
        if se and not result.failed:
            _add_standard_errors(result, core, penalty, spec, options)
            if "se_problem" in result.info:
                warn(f"{method}: no standard errors for some or all parameters (NaN): "
                     f"{result.info['se_problem']}", ConvergenceWarning)
            warn_few_models(core.shape[0])
            if "prior_bias" in result.info and result.status != "disconnected":
                warn_prior_biased(result.info["prior_bias"],
                                  bad_models.size if degenerate == "keep" else 0)
        if kept is not None:
            result = _with_set_aside(result, data, core, kept)
        if verbose:
            objective = result.info.get("objective")
            minimised = ("" if objective is None or objective == result.loss
                         else f", objective {objective:.10g}")   # the progress lines'
            logger.info("%s: %s (%d iterations, loss %.10g%s, %.3f s)", method,
                        result.status, result.n_iter, result.loss, minimised, result.runtime_s)
    _warn_status(result, method)
    return result


def share_identical(theta, a, b, models, items):
    """Give models (items) with identical answers their mean ability (discrimination and
    easiness), in place; ``models`` and ``items`` are their group numbers
    (:meth:`Responses.answer_patterns`), None where every pattern is unique.

    Their blocks of loss (3) plus the penalty are the same convex function, so the mean is
    no worse than the parts and the optimum has them equal; a solver stopped by its
    tolerance from different starts leaves them apart by about that tolerance, which
    would rank identical models apart (docs/model.md).
    """
    for groups, values in ((models, (theta,)), (items, (a, b))):
        if groups is None:
            continue
        _, groups = np.unique(groups, return_inverse=True)  # a resample's groups, numbered
        sizes = np.bincount(groups)
        for value in values:
            value[...] = (np.bincount(groups, weights=value) / sizes)[groups]


def _given_start(start, data):
    """Explicit starting values: a FitResult's raw parameters, its models and items matched
    to the responses' by label where both have labels, or ``(theta0, a0, b0)`` by position."""
    if isinstance(start, FitResult):
        if start.failed:
            raise ValueError(f"start: the FitResult failed ({start.status}); it has no values")
        values = _by_label(start, start.raw_parameters(), data)
    else:
        try:
            values = tuple(start)
        except TypeError:
            values = ()
        if len(values) != 3:
            raise ValueError("start must be 'spectral', 'random', (theta0, a0, b0) or a "
                             f"FitResult, got {type(start).__name__}")
    n, j = data.shape
    out = []
    for name, value, size in zip(("theta0", "a0", "b0"), values, (n, j, j)):
        array = np.asarray(value, dtype=float)
        if array.shape != (size,):
            raise ValueError(f"start: {name} has shape {array.shape}, expected ({size},)")
        out.append(array)
    if (out[1] < 0).any():
        raise ValueError("start: a0 must be >= 0")
    return tuple(out)


def _by_label(result, values, data):
    """A FitResult's ``(theta, a, b)`` for the responses' models and items, matched by label
    where both are labelled (the same answers in another order, read back from a file with
    its labels as text, or a subset of the fit's); by position otherwise."""
    import pandas as pd

    out = list(values)
    for axis, (what, labels, fitted) in enumerate((
            ("models", data.row_labels, getattr(result.theta, "index", None)),
            ("items", data.col_labels, getattr(result.a, "index", None)))):
        if labels is None or fitted is None:
            continue
        ours, theirs = pd.Index(labels).astype(str), pd.Index(fitted).astype(str)
        if ours.equals(theirs):
            continue
        missing = ours.difference(theirs, sort=False)
        if missing.size:
            raise ValueError(f"start: {missing.size} of the responses' {what} are not among "
                             f"the FitResult's (e.g. {list(missing[:3])}): it has no start "
                             "for them")
        order = theirs.get_indexer(ours)   # the responses' own, of the fit's, in their order
        if axis == 0:
            out[0] = np.asarray(out[0], dtype=float)[order]
        else:
            out[1], out[2] = (np.asarray(v, dtype=float)[order] for v in out[1:])
    return tuple(out)


def _check_finite_start(given, data, degenerate):
    """The start of every model and item the fit works on is finite (a set-aside fit's own
    set-aside models and items are NaN or +-inf: degenerate='set_aside' leaves them out)."""
    for name, array, axis in zip(("theta0", "a0", "b0"), given, (0, 1, 1)):
        bad = np.flatnonzero(~np.isfinite(array))
        if bad.size:
            label = data.label_rows(bad[:1]) if axis == 0 else data.label_cols(bad[:1])
            advice = ("" if degenerate == "set_aside" else
                      "; a set-aside model or item of the FitResult? fit with "
                      "degenerate='set_aside', which leaves them out")
            raise ValueError(f"start: {name} has {bad.size} non-finite value(s) (first at "
                             f"{label[0]!r}){advice}")


def _starts(start, given, n_starts, data, seed, init_scale, sigma, penalty):
    """``[(label, (theta0, a0, b0)), ...]``: the first start, then random ones."""
    n, j = data.shape
    if given is not None:
        first = ("given", given)
    elif start == "spectral":
        first = ("spectral", spectral_start(data, sigma=sigma, penalty=penalty))
    else:
        first = ("random", initial_values(n, j, seed=seed, init_scale=init_scale, sigma=sigma))
    return [first] + [(f"random {k}", initial_values(
        n, j, seed=np.random.default_rng([seed, k]), init_scale=init_scale, sigma=sigma))
        for k in range(1, n_starts)]


def _solve_starts(spec, data, starts, settings, options, verbose, penalty) -> SolverOutput:
    """Solve from every start; the output of the lowest objective, with a summary of all.

    ``info["starts"]``: per start its label, objective (loss (3) plus the penalty,
    float64, or the method's ``objective``), status, iterations, seconds and the
    correlation and rank correlation of its theta with the best start's;
    ``info["best_start"]``: the index of the best; ``info["starts_agreeing"]``: the starts
    at the best objective (:data:`AGREE_OBJECTIVE`) with abilities like the best's
    (:data:`AGREE_SE`; a method minimising loss (3): ``theta_difference_se``, the root mean
    square of their difference in the best's standard errors), ``info["starts_distinct"]``:
    those at it with other abilities; ``runtime_s``: the seconds of all starts.
    """
    outs = []
    for k, (label, values) in enumerate(starts):
        if verbose and len(starts) > 1:
            logger.info("%s: start %d of %d (%s)", spec.name, k + 1, len(starts), label)
        outs.append(_solve(spec, data, values, settings, options, verbose))
    if len(outs) == 1:
        return outs[0]
    sigma = settings["sigma"]
    objectives = [spec.objective(out) if spec.objective else _objective(out, data, sigma, penalty)
                  for out in outs]
    best = int(np.nanargmin(objectives)) if np.isfinite(objectives).any() else 0
    summary = []
    for (label, _), out, value in zip(starts, outs, objectives):
        summary.append({"start": label, "objective": value, "status": out.status,
                        "n_iter": int(out.n_iter), "runtime_s": float(out.runtime_s),
                        "correlation": _correlation(out.theta, outs[best].theta),
                        "rank_correlation": _rank_correlation(out.theta, outs[best].theta)})
    if spec.minimises_loss and np.isfinite(objectives[best]):
        se = 1 / np.sqrt(Objective(data, sigma, penalty).curvature(
            outs[best].theta, outs[best].a, outs[best].b)[0])
        for entry, other in zip(summary, outs):
            entry["theta_difference_se"] = _difference_se(other.theta, outs[best].theta, se)
    at_best = [s for s in summary if _agrees(s["objective"], objectives[best])]
    distinct = sum(s.get("theta_difference_se", 0.0) > AGREE_SE for s in at_best)
    out = outs[best]
    out.info = dict(out.info, starts=summary, best_start=best,
                    starts_agreeing=len(at_best) - distinct, starts_distinct=distinct)
    out.runtime_s = float(sum(o.runtime_s for o in outs))
    return out


def _objective(out, data, sigma, penalty) -> float:
    """Loss (3) plus the penalty at an output of :func:`_solve` (well formed, or failed);
    NaN if it failed or holds non-finite values."""
    if out.status.startswith("failed") \
            or not all(np.isfinite(v).all() for v in (out.theta, out.a, out.b)):
        return math.nan
    theta, a, b = (np.asarray(v, dtype=float) for v in (out.theta, out.a, out.b))
    return loss(theta, a, b, data, sigma) + penalty.value(theta, a / sigma, b / sigma)


def _agrees(value, best) -> bool:
    return bool(np.isfinite(value)) and value - best <= max(AGREE_OBJECTIVE, 1e-9 * abs(best))


def _difference_se(theta, best, se) -> float:
    """The root mean square of ``theta - best`` in units of ``se`` (the best's standard
    errors), ``theta`` first put on the best's shift and scale (loss (3) does not fix
    them); NaN if undefined."""
    theta, best = np.asarray(theta, dtype=float), np.asarray(best, dtype=float)
    if not (np.isfinite(theta).all() and np.isfinite(best).all()) or theta.std() == 0:
        return math.nan
    aligned = (theta - theta.mean()) / theta.std() * best.std() + best.mean()
    return float(np.sqrt(np.mean(((aligned - best) / se) ** 2)))


def _correlation(x, y) -> float:
    """Pearson's correlation (unchanged by the abilities' shift and scale); NaN if
    undefined."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or x.size < 2 \
            or x.std() == 0 or y.std() == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def _rank_correlation(x, y) -> float:
    """Spearman's rank correlation, Pearson's of the ranks (no ties in continuous
    estimates); NaN if undefined."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return math.nan
    return _correlation(np.argsort(np.argsort(x)), np.argsort(np.argsort(y)))


def _degenerate_message(n_items, n_models, degenerate, penalty, marginal=False,
                        takes_prior=True) -> str:
    what = f"{n_items} item(s) answered all-correct or all-wrong" + (
        "" if marginal else f" and {n_models} model(s) with all answers correct or wrong")
    if degenerate == "set_aside":
        return (f"{what}: set aside (with any that become so without them); they are listed "
                "under set_aside in the result's info (in fit.json when saved)")
    if marginal:
        return (f"{what}: the items' easiness has no finite optimum and drifts until the "
                "stopping rule (the models' abilities are posterior means, finite); "
                "degenerate='set_aside' leaves them out")
    if penalty.active:
        return f"{what}: the prior alone sets their easiness/ability" + (
            ", short of where their answers put them; as those models enter the abilities' "
            "scale (mean 0, sd 1), the other parameters' intervals can cover less than they "
            "say: degenerate='set_aside' leaves them out, which can also cost coverage where "
            "they are many (docs/trust.md)" if n_models else "")
    # mirt and py-irt take no prior option: the advice names what they take
    remedy = "prior='normal' or " if takes_prior else "method='cbmm' (its prior) or "
    return (f"{what}: their easiness/ability has no finite optimum and drifts until the "
            f"stopping rule; use {remedy}degenerate='set_aside' (they are listed as "
            "degenerate_items and degenerate_models of the result, in fit.json when saved)")


def _finish(out, data, start, method, settings, init_scale, bad_items, bad_models,
            penalty=None, canonical=True) -> FitResult:
    """The FitResult of a solver's raw output: canonical form (unless the solver's scale is
    its population's, ``canonical=False``), float64 loss, stationarity."""
    penalty = penalty or Penalty()
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
    raw = (theta, a, b)
    raw_mean, raw_sd = float(theta.mean()), float(theta.std())
    if canonical:
        theta, a, b = canonicalize(theta, a, b)
    else:
        raw_mean, raw_sd = 0.0, 1.0  # nothing removed: raw_parameters() is the identity
    # loss (3) is invariant: judged at the canonical point; a penalty is not: at the solver's
    point, origin = (raw, start) if penalty.active else ((theta, a, b), canonicalize(*start))
    final_loss, penalty_value, reached, gradient = fit_measures(
        *point, origin, data, settings["sigma"],
        reference=out.info.get("stationarity_reference"), penalty=penalty)
    info = dict(out.info, theta_mean_raw=raw_mean, theta_sd_raw=raw_sd, stationarity=reached,
                scaled_gradient=scaled_gradient(*point, data, settings["sigma"], penalty,
                                                gradient=gradient),
                objective=final_loss + penalty_value, storage=data.storage)
    return FitResult(
        theta=_label(theta, data.row_labels, "theta"), a=_label(a, data.col_labels, "a"),
        b=_label(b, data.col_labels, "b"), loss=final_loss,
        loss_history=list(map(float, out.loss_history)), n_iter=int(out.n_iter),
        status=status, runtime_s=float(out.runtime_s), info=info, **common)


def _judged_status(result, data, penalty, n_starts) -> str:
    """The status of a fit that minimises loss (3), judged the same way for every such method.

    Failed and custom statuses stand; then, in this order: ``unbounded`` (maximum
    likelihood only: items or models separated, :func:`separation`), ``max_iter``,
    ``not_stationary`` (the method's rule stopped it more than
    :data:`STATIONARY_BELOW` standard errors from a stationary point), ``multimodal``
    (of several starts, one alone reached the best objective: nothing confirms that a
    better optimum is not left undiscovered).  The reason is ``info["status_reason"]``.
    """
    status, info = result.status, result.info
    if result.failed or status not in ("converged", "max_iter"):
        return status
    if not penalty.active:
        items, models = separation(data, np.asarray(result.theta), np.asarray(result.a))
        if items.any() or models.any():
            info["separated_items"] = data.label_cols(np.flatnonzero(items))
            info["separated_models"] = data.label_rows(np.flatnonzero(models))
            info["status_reason"] = (
                f"no finite optimum: {int(items.sum())} item(s) whose correct answers all come "
                f"from abler models than their wrong ones (all-correct and all-wrong items "
                f"included) and {int(models.sum())} model(s) answering every discriminating "
                "item alike; their parameters run off to infinity (listed under "
                "separated_items and separated_models in the result's info, in fit.json when "
                "saved)")
            return "unbounded"
    if status == "max_iter":
        return status
    if info["scaled_gradient"] > STATIONARY_BELOW:
        info["status_reason"] = (
            f"the method's rule stopped it {info['scaled_gradient']:.2g} standard errors from a "
            f"stationary point (converged means at most {STATIONARY_BELOW:g})")
        return "not_stationary"
    return _multimodal(info, n_starts) or status


def _multimodal(info, n_starts) -> str | None:
    """``"multimodal"`` (with its ``status_reason``) where starts reached the best
    objective with other abilities than the best's, or of several starts one alone
    reached it, else None."""
    distinct = info.get("starts_distinct", 0)
    if distinct:
        far = max(info["starts"], key=lambda s: s.get("theta_difference_se", 0.0))
        info["status_reason"] = (
            f"{distinct} of {n_starts} starts reached the best objective with abilities unlike "
            f"the best start's ({far['theta_difference_se']:.2g} of its standard errors apart, "
            f"correlation {far['correlation']:.2f}): the answers fit more than one set of "
            "abilities equally well")
        return "multimodal"
    agreeing = info.get("starts_agreeing", n_starts)
    if n_starts > 1 and agreeing < 2:
        info["status_reason"] = (f"only {agreeing} of {n_starts} starts reached the best "
                                 "objective: the best found may not be the global optimum")
        return "multimodal"
    return None


def _disconnected(info, data, spec) -> str | None:
    """Where the observed answers fall into groups that share none (:func:`components`):
    the reason of status ``"disconnected"``, the groups in ``info["components"]``; else
    None."""
    models, items = components(data)
    count = int(models.max()) + 1
    if count == 1:
        return None
    model_counts, item_counts = np.bincount(models), np.bincount(items)
    info["components"] = [
        {"models": int(model_counts[k]), "items": int(item_counts[k]),
         "first_models": data.label_rows(np.flatnonzero(models == k)[:3])}
        for k in range(count)]
    scale = ("the population they are assumed to share" if spec.population_scale
             else "the prior")
    sizes = ", ".join(f"{m} x {i}" for m, i in zip(model_counts[:5], item_counts[:5]))
    return (
        f"the observed answers fall into {count} groups of models and items that share no "
        f"answer (models x items: {sizes}{', ...' if count > 5 else ''}; listed under "
        "components in the result's info, each model's and item's group by "
        f"cbmm.diagnostics.components): abilities in different groups are compared by {scale} "
        "alone, not by answers; compare models within a group, fit each group apart, or "
        "add answers to items (models) that link them")


def _warn_status(result, method) -> None:
    """One warning per status that is not an answer, saying what to do."""
    reason = result.info.get("status_reason", "")
    if result.failed:
        remedy = ("; raise timeout_s, or None for no limit"
                  if result.status.startswith("failed: timeout") else "")
        warn(f"{method}: {result.status}: no estimate (NaN){remedy}", ConvergenceWarning)
    elif result.status == "max_iter":
        warn(f"{method}: {reason} (tol={result.tol:g}); raise max_iter or tol",
             ConvergenceWarning)
    elif result.status == "not_stationary":
        warn(f"{method}: {reason}: the estimates are not an optimum; use "
             "accelerate='auto' (cbmm), a smaller tol or a larger max_iter",
             ConvergenceWarning)
    elif result.status == "multimodal" and result.info.get("starts_distinct"):
        warn(f"{method}: {reason}; the data do not say which: items discriminating the "
             "wrong way (cbmm.item_audit) can make a reversed ranking fit as well",
             ConvergenceWarning)
    elif result.status == "multimodal":
        warn(f"{method}: {reason}; raise n_starts", ConvergenceWarning)
    elif result.status == "disconnected":
        warn(f"{method}: {reason}", DegenerateDataWarning)
    elif result.status == "unbounded" and "runaway_items" in result.info:
        warn(f"{method}: {reason} (listed under runaway_items in the result's info); their "
             "a and b are where EM stopped and have no standard errors; method='cbmm' "
             "(its prior) keeps them finite, or leave them out", DegenerateDataWarning)
    elif result.status == "unbounded":
        remedy = ("prior='normal'" if takes_prior(get_method(method))
                  else "method='cbmm' and its prior")
        warn(f"{method}: {reason}; fit with {remedy} (a finite optimum whatever "
             "the data) or degenerate='set_aside'", DegenerateDataWarning)


def _add_standard_errors(result, data, penalty, spec, options) -> None:
    """``theta_se``, ``a_se``, ``b_se`` of a finished fit (NaN where it has no finite optimum),
    the method's own (``Method.standard_errors``) where it has them."""
    n, j = data.shape
    if spec.standard_errors is not None:   # its own, NaN where a parameter ran away
        try:
            se = spec.standard_errors(data, result, options)
        except np.linalg.LinAlgError as exc:
            result.info["se_problem"] = f"the information is not positive definite ({exc})"
            se = (np.full(n, np.nan), np.full(j, np.nan), np.full(j, np.nan))
    elif result.status == "unbounded":
        se = (np.full(n, np.nan), np.full(j, np.nan), np.full(j, np.nan))
    else:
        point = result.raw_parameters() if penalty.active else (result.theta, result.a, result.b)
        try:
            *se, bias = standard_errors(data, *point, result.sigma, penalty, prior_bias=True)
        except np.linalg.LinAlgError as exc:
            result.info["se_problem"] = str(exc)
            se = (np.full(n, np.nan), np.full(j, np.nan), np.full(j, np.nan))
        else:
            if penalty.active and n > 2:
                result.prior_bias = _label(bias.bound, data.row_labels, "prior_bias")
                result.info["prior_bias"] = prior_biased(
                    bias, data.label_rows, int(np.isfinite(se[0]).sum()))
    if n == 2 and not spec.population_scale and "se_problem" not in result.info:
        # two abilities of mean 0 and sd 1 are -1 and +1 whatever the answers: a zero-width
        # interval that would vouch for their order
        result.info["se_problem"] = ("the 2 models' abilities are -1 and +1 by the scale "
                                     "(mean 0, sd 1), with no standard error; how sure their "
                                     "order is: cbmm.bootstrap's prob_better")
        se = (np.full(n, np.nan), *se[1:])
    result.theta_se = _label(se[0], data.row_labels, "theta_se")
    result.a_se = _label(se[1], data.col_labels, "a_se")
    result.b_se = _label(se[2], data.col_labels, "b_se")


def _with_set_aside(result, data, core, kept) -> FitResult:
    """The core's fit on the whole data: set-aside models at theta = +-inf, set-aside items at
    a = NaN and b = +-inf (the side they were answered on), standard errors NaN."""
    rows, cols = kept
    n, j = data.shape
    out_rows = np.setdiff1d(np.arange(n), rows)
    out_cols = np.setdiff1d(np.arange(j), cols)
    model_side = _side(data.take(out_rows, cols).accuracy(axis=1)) if out_rows.size else []
    item_side = _side(data.take(rows, out_cols).accuracy(axis=0)) if out_cols.size else []

    def spread(values, index, size, fill, at, name, labels):
        if values is None:  # no standard errors
            return None
        full = np.full(size, np.nan)
        full[index] = np.asarray(values, dtype=float)
        full[at] = fill
        return _label(full, labels, name)

    theta = spread(result.theta, rows, n, model_side, out_rows, "theta", data.row_labels)
    a = spread(result.a, cols, j, np.nan, out_cols, "a", data.col_labels)
    b = spread(result.b, cols, j, item_side, out_cols, "b", data.col_labels)
    result.theta, result.a, result.b = theta, a, b
    for name, index, size, at, labels in (("theta_se", rows, n, out_rows, data.row_labels),
                                          ("prior_bias", rows, n, out_rows, data.row_labels),
                                          ("a_se", cols, j, out_cols, data.col_labels),
                                          ("b_se", cols, j, out_cols, data.col_labels)):
        setattr(result, name, spread(getattr(result, name), index, size, np.nan, at, name, labels))
    result.info["set_aside"] = {"models": data.label_rows(out_rows),
                                "items": data.label_cols(out_cols)}
    return result


def _side(accuracy):
    """+inf for all correct, -inf for all wrong (NaN otherwise)."""
    return np.where(accuracy == 1, np.inf, np.where(accuracy == 0, -np.inf, np.nan))


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
        return SolverOutput.failed(message, n, j, runtime_s=time.perf_counter() - wall,
                                   info={"exception": type(exc).__name__})
    if problem:
        return SolverOutput.failed(problem, n, j, runtime_s=time.perf_counter() - wall)
    return out


def _malformed(out, n, j) -> str | None:
    """What is wrong with a solver's output (None: nothing), checked before fit trusts it."""
    if not isinstance(out, SolverOutput):
        return f"the solver returned {type(out).__name__}, not a SolverOutput"
    for name, size in (("theta", n), ("a", j), ("b", j)):
        try:
            values = np.asarray(getattr(out, name))
        except Exception as exc:  # an array-like that cannot become an array
            return f"the solver returned a {name} that is not an array ({type(exc).__name__})"
        if values.dtype.kind not in "iuf":
            return (f"the solver returned {name} of dtype {values.dtype} "
                    "(expected real numbers)")
        if values.shape != (size,):
            return f"the solver returned {name} of shape {values.shape}, expected ({size},)"
    negative = np.flatnonzero(np.asarray(out.a) < 0)
    if negative.size:
        return (f"the solver returned a = {float(np.asarray(out.a)[negative[0]]):g} < 0 for "
                f"item {negative[0]} ({negative.size} item(s)); the model needs a >= 0")
    if not isinstance(out.status, str):
        return f"the solver returned status {out.status!r}, not a string"
    if isinstance(out.n_iter, bool) or not isinstance(out.n_iter, numbers.Integral) \
            or out.n_iter < 0:
        return f"the solver returned n_iter={out.n_iter!r}, not a count of iterations"
    if isinstance(out.runtime_s, bool) or not isinstance(out.runtime_s, numbers.Real) \
            or not (math.isfinite(out.runtime_s) and out.runtime_s >= 0):
        return f"the solver returned runtime_s={out.runtime_s!r}, not a number of seconds"
    if not isinstance(out.loss_history, (list, tuple, np.ndarray)) or not all(
            isinstance(v, numbers.Real) and not isinstance(v, bool) for v in out.loss_history):
        return "the solver returned a loss_history that is not a list of numbers"
    if not isinstance(out.info, dict):
        return f"the solver returned info of type {type(out.info).__name__}, not a dict"
    return None


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
            logger.info("%s: iteration %d, objective %.10g, relative change %.3g, %.2f s",
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
        handler.setFormatter(logging.Formatter("%(message)s"))   # each names its method
        logger.addHandler(handler)
    try:
        yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)


@contextlib.contextmanager
def _progress_lines(verbose):
    """:func:`_progress_logging` around a loop of fits, and its ``report(message, *args)``:
    an INFO line ending in the seconds since the loop began, where ``verbose`` (else
    nothing)."""
    began = time.perf_counter()

    def report(message, *args):
        if verbose:
            logger.info(message + ", %.1f s", *args, time.perf_counter() - began)

    with _progress_logging(verbose):
        yield report


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


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills the worker when the caller dies (no orphaned fits)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the caller died before the request took effect
        os._exit(1)


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


def _worker(connection, task, failure, parent, name):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    _die_with_parent(parent)
    multiprocessing.current_process().name = name  # in the log records it forwards
    sender = _PipeSender(connection)
    _route_logging(sender)
    began = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        try:
            out = task()
        except Exception as exc:  # named, not "exited with status 1" (a MemoryError, say)
            out = failure(f"{type(exc).__name__}: {exc}", time.perf_counter() - began)
    sender.send(("warnings", _transferable_warnings(caught)))
    try:
        sender.send(("result", out))
    except Exception as exc:  # e.g. an info entry that cannot be pickled
        sender.send(("result", failure(
            f"the solver's output could not be sent back ({type(exc).__name__}: {exc})",
            time.perf_counter() - began)))
    connection.close()


#: Longest single wait for the worker (``poll`` refuses timeouts beyond about 24 days).
_WAIT_STEP_S = 3600.0


def _fork_worker(task, failure, name):
    """Fork the worker in a process group of its own; return ``(pid, receiver)``.

    A plain ``os.fork``, not ``multiprocessing.Process``: that refuses to start a child
    inside a daemonic process (the workers of ``multiprocessing.Pool``), and the worker
    is a child that lives exactly as long as this call.  Its own process group lets the
    caller end everything the method started (a grandchild holding the pipe included).
    """
    receiver, sender = multiprocessing.Pipe(duplex=False)
    parent = os.getpid()
    _release_openmp_threads()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the caller's code
        code = 1
        try:
            receiver.close()
            os.setpgid(0, 0)
            _worker(sender, task, failure, parent, name)
            code = 0
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    with contextlib.suppress(OSError):  # also here: killpg must not race the worker's call
        os.setpgid(pid, pid)
    sender.close()
    return pid, receiver


def _watch(pid):
    """A file descriptor that becomes readable when ``pid`` ends (Linux >= 5.3), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _end_group(pid) -> None:
    """SIGKILL the worker's process group: the worker and whatever it started."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_in_worker(task, failure, timeout_s, name):
    """Run ``task()`` in a forked worker under a time limit and return its result.

    ``task`` runs in the child (fork: it needs no pickling; its result does);
    ``failure(reason, seconds)`` builds the result of a worker that dies, hangs past
    ``timeout_s`` (None: no limit) or whose result cannot be sent back.  The child's
    warnings are re-emitted here and its log records handed to this process's loggers.
    Works in daemonic processes (``multiprocessing.Pool`` workers).  The worker and any
    process it started are killed before this returns: a grandchild that inherited the
    pipe cannot keep the caller waiting after the worker ended.
    """
    began = time.perf_counter()
    pid, receiver = _fork_worker(task, failure, name)
    watch = _watch(pid)
    status = None  # the worker's wait status once reaped
    caught, out = [], None

    def reap(block):
        nonlocal status
        if status is None:
            done, code = os.waitpid(pid, 0 if block else os.WNOHANG)
            if done:
                status = code
        return status

    def ended():
        """The worker has ended: the messages it sent are in the pipe; read them."""
        nonlocal out
        _end_group(pid)  # its descendants may hold the pipe open
        while out is None and receiver.poll(0):
            try:
                handle(*receiver.recv())
            except EOFError:
                break
        if out is None:
            out = failure(_death(os.waitstatus_to_exitcode(reap(True))),
                          time.perf_counter() - began)

    def handle(kind, payload):
        nonlocal caught, out
        if kind == "log":
            logging.getLogger(payload.name).handle(payload)
        elif kind == "warnings":
            caught = payload
        else:
            out = payload

    try:
        while out is None:
            left = math.inf if timeout_s is None else began + timeout_s - time.perf_counter()
            if left <= 0:
                out = failure(f"timeout after {timeout_s:g} s", time.perf_counter() - began)
                break
            step = min(left, _WAIT_STEP_S if watch is not None else 0.05)
            ready = multiprocessing.connection.wait(
                [receiver] + ([watch] if watch is not None else []), timeout=step)
            if receiver in ready:
                try:
                    handle(*receiver.recv())
                except EOFError:
                    ended()
            elif watch in ready or (watch is None and reap(False) is not None):
                ended()
    finally:
        _end_group(pid)
        reap(True)
        receiver.close()
        if watch is not None:
            os.close(watch)
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
