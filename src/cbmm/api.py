"""The one public entry point: :func:`fit`."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pandas as pd

from .initialization import initial_values
from .model import check_sigma, loss_and_stationarity
from .registry import get_method
from .responses import as_responses
from .result import FitResult, SolverOutput, canonicalize

__all__ = ["fit", "DegenerateDataWarning"]


class DegenerateDataWarning(UserWarning):
    """Items or models answered all-correct / all-wrong: no finite optimum for them."""


def _check_positive(name, value):
    if not (isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)
            and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def fit(responses, method: str = "cbmm", *, sigma: float = 1.0, tol: float = 1e-4,
        max_iter: int = 1000, seed=0, init_scale: float = 1.0, coding: str | None = None,
        **method_options) -> FitResult:
    """Fit the 2PL model ``X = theta a^T + 1 b^T`` (``a >= 0``) to a response matrix.

    Parameters
    ----------
    responses : array-like, pandas.DataFrame or Responses
        ``N x J`` matrix (models x items): 1 correct, 0 incorrect, NaN missing
        (or the paper's -1/+1 coding with 0/NaN missing).  DataFrame labels are
        kept on the returned parameters.
    method : str
        A registered method: ``"cbmm"`` (default), and the baselines
        ``"lbfgsb"``, ``"manopt"``, ``"pyirt"``, ``"mirt"`` when installed.
    sigma : float
        Known temperature of the logistic link, > 0.
    tol : float
        Relative-loss-change tolerance, > 0 (each method maps it to its own
        stopping rule; see the README).
    max_iter : int
        Maximum iterations / epochs / EM cycles.
    seed : int
        Seed of the shared initial values (and of any method randomness).
    init_scale : float
        Variance ``s^2`` of ``log a`` and ``b`` at the start.
    coding : {None, "binary", "signed"}
        How to read ``responses`` (see :func:`cbmm.as_responses`); None infers it and refuses a
        matrix holding both -1 and 0.
    **method_options
        Passed to the method's solver (e.g. ``engine``, ``accelerate`` for
        cbmm).

    Returns
    -------
    FitResult
        Parameters in the canonical form (theta mean 0, sd 1).  A failure
        inside a method gives ``status="failed: <reason>"`` with NaN
        parameters instead of an exception.

    Raises
    ------
    ValueError
        Bad input (the message names the offending rows/columns/arguments) or
        an unknown method.
    cbmm.MethodUnavailableError
        The method's software is not installed (the message says what to run).
    """
    check_sigma(sigma)
    _check_positive("tol", tol)
    _check_positive("init_scale", init_scale)
    if not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    spec = get_method(method)
    options = spec.check_options(method_options)
    data = as_responses(responses, coding=coding, storage="dense")  # solvers read y (dense)
    spec.availability()

    bad_items = data.degenerate_items()
    bad_models = data.degenerate_models()
    if bad_items.size or bad_models.size:
        warnings.warn(
            f"{bad_items.size} item(s) answered all-correct or all-wrong and "
            f"{bad_models.size} model(s) with all answers correct or wrong: their "
            "easiness/ability has no finite optimum and drifts until the stopping rule; "
            "see FitResult.degenerate_items / degenerate_models",
            DegenerateDataWarning, stacklevel=2)

    n, j = data.shape
    theta0, a0, b0 = initial_values(n, j, seed=seed, init_scale=init_scale, sigma=sigma)
    wall = time.perf_counter()
    try:
        out = spec.solve(data, theta0, a0, b0, sigma=float(sigma), tol=float(tol),
                         max_iter=int(max_iter), seed=seed, progress=None, **options)
    except Exception as exc:  # a library failure is a result (the paper's NA)
        out = _failed_output(exc, wall, n, j)

    theta, a, b = (np.asarray(v, dtype=float) for v in (out.theta, out.a, out.b))
    finite = np.isfinite(theta).all() and np.isfinite(a).all() and np.isfinite(b).all()
    status = out.status
    if not status.startswith("failed") and not finite:
        status = "failed: non-finite parameters"
    if status.startswith("failed"):
        theta, a, b = np.full(n, np.nan), np.full(j, np.nan), np.full(j, np.nan)
        final_loss = math.nan
    else:
        raw_mean, raw_sd = float(theta.mean()), float(theta.std())
        theta, a, b = canonicalize(theta, a, b)
        final_loss, reached = loss_and_stationarity(
            theta, a, b, canonicalize(theta0, a0, b0), data, sigma,
            reference=out.info.get("stationarity_reference"))
        out.info.update(theta_mean_raw=raw_mean, theta_sd_raw=raw_sd, stationarity=reached)
    return FitResult(
        theta=_label(theta, data.row_labels, "theta"),
        a=_label(a, data.col_labels, "a"),
        b=_label(b, data.col_labels, "b"),
        loss=final_loss, loss_history=list(map(float, out.loss_history)),
        n_iter=int(out.n_iter), status=status, runtime_s=float(out.runtime_s),
        method=method, sigma=float(sigma), tol=float(tol), max_iter=int(max_iter),
        seed=seed, init_scale=float(init_scale),
        degenerate_items=data.label_cols(bad_items),
        degenerate_models=data.label_rows(bad_models),
        info=dict(out.info),
    )


def _failed_output(exc, wall_start, n, j):
    message = " ".join(str(exc).split()) or type(exc).__name__
    return SolverOutput(theta=np.full(n, np.nan), a=np.full(j, np.nan), b=np.full(j, np.nan),
                        loss_history=[], n_iter=0, status=f"failed: {message}",
                        runtime_s=time.perf_counter() - wall_start,
                        info={"exception": type(exc).__name__})


def _label(values, labels, name):
    if labels is None:
        return values
    return pd.Series(values, index=labels, name=name)
