"""L-BFGS-B baseline: SciPy's L-BFGS-B on loss (3) with analytic gradients.

The variables are ``x = (theta, a, b)`` with box constraints ``a >= 0``
(theta and b free); every evaluation returns the loss and its gradient from
one fused pass over the observed entries (:class:`~._objective.Objective`).

Stopping rule.  SciPy's ``ftol`` is exactly a relative-reduction test,
``(f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) <= ftol``, i.e. the paper's
``|l_{t+1} - l_t| / |l_t| < tol`` (the loss is far above 1), so
``ftol = tol``.  ``gtol`` (projected-gradient sup-norm) is set to 1e-12 so
that ``ftol`` decides, and ``maxiter = max_iter`` (L-BFGS-B iterations; a
line search may evaluate the objective several times per iteration, the
count is ``info["n_evaluations"]``, capped at ``maxfun``).
"""

from __future__ import annotations

import time

import numpy as np

from ..registry import Option, register_method
from ..result import SolverOutput
from ._objective import Objective

__all__ = ["solve"]

#: Projected-gradient tolerance: tiny, so that the relative-loss test (ftol) decides.
GTOL = 1e-12


OPTIONS = {
    "maxcor": Option("int", 10, minimum=1, doc="stored correction pairs (SciPy's default 10)"),
    "maxfun": Option("int", None, minimum=1, nullable=True,
                     doc="limit on objective evaluations; default max(15000, 20 max_iter)"),
}


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None,
          maxcor=10, maxfun=None):
    """Minimise loss (3) over ``(theta, a, b)`` subject to ``a >= 0`` with L-BFGS-B.

    Parameters
    ----------
    responses : cbmm.Responses
        Validated responses (``responses.y``: +-1/0 coding, 0 = missing).
    theta0, a0, b0 : ndarray
        Shared starting point (``a0`` is clipped at 0).
    sigma, tol, max_iter
        Temperature, relative-loss tolerance (SciPy ``ftol``), iteration limit
        (SciPy ``maxiter``).
    seed : ignored
        L-BFGS-B is deterministic.
    progress : callable, optional
        ``progress(iteration, loss)`` after every iteration.
    maxcor : int
        Number of stored correction pairs (SciPy's default, 10).
    maxfun : int, optional
        Limit on objective evaluations; default ``max(15000, 20 * max_iter)``
        so that ``max_iter`` is the binding limit.

    Returns
    -------
    SolverOutput
        ``loss_history[0]`` is the loss at the start, then one entry per
        iteration; ``info["time_history"]`` holds the matching elapsed
        seconds, ``info["setup_s"]`` the kernel set-up excluded from
        ``runtime_s``.
    """
    from scipy.optimize import Bounds, minimize

    setup = time.perf_counter()
    objective = Objective(responses.y, sigma)
    n, j = objective.shape
    x0 = np.concatenate([theta0, np.maximum(a0, 0.0), b0]).astype(float)
    objective.loss_and_gradient(x0[:n], x0[n:n + j], x0[n + j:])  # compile / load the kernel
    lower = np.full(x0.size, -np.inf)
    lower[n:n + j] = 0.0
    bounds = Bounds(lower, np.inf)
    setup_s = time.perf_counter() - setup

    history, times = [], []
    start = time.perf_counter()

    def value_and_gradient(x):
        value, g_theta, g_a, g_b = objective.loss_and_gradient(x[:n], x[n:n + j], x[n + j:])
        if not history:  # SciPy evaluates x0 first: record the starting loss
            history.append(value)
            times.append(time.perf_counter() - start)
        return value, np.concatenate([g_theta, g_a, g_b])

    def record(intermediate_result):
        history.append(float(intermediate_result.fun))
        times.append(time.perf_counter() - start)
        if progress is not None:
            progress(len(history) - 1, history[-1])

    evaluations_before = objective.evaluations
    res = minimize(value_and_gradient, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                   callback=record,
                   options={"ftol": tol, "gtol": GTOL, "maxiter": max_iter, "maxcor": maxcor,
                            "maxfun": maxfun or max(15000, 20 * max_iter)})
    runtime = time.perf_counter() - start

    message = str(res.message)
    if res.status == 0 and np.isfinite(res.fun):
        status = "converged"
    elif res.status == 1 and np.isfinite(res.fun):
        status = "max_iter"  # iteration or evaluation limit
    else:
        status = f"failed: L-BFGS-B: {message}"
    x = res.x
    return SolverOutput(
        theta=x[:n].copy(), a=x[n:n + j].copy(), b=x[n + j:].copy(),
        loss_history=history, n_iter=int(res.nit), status=status, runtime_s=runtime,
        info={"time_history": times, "setup_s": setup_s, "message": message,
              "n_evaluations": objective.evaluations - evaluations_before,
              "ftol": tol, "gtol": GTOL, "maxcor": maxcor})


register_method("lbfgsb", solve, label="L-BFGS-B", options=OPTIONS, color="#9b2ee6", order=1,
                env="core", seconds_per_million_cells=10.0,
                description="SciPy L-BFGS-B on loss (3) with analytic gradients, a >= 0 bounds")
