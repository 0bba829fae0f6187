"""L-BFGS-B baseline: SciPy's L-BFGS-B on loss (3) with analytic gradients.

The variables are ``x = (theta, a, b)`` with box constraints ``a >= 0``
(theta and b free), at sigma = 1 for ``(theta, a / sigma, b / sigma)`` unless
``parametrisation="raw"`` (the registered solver is
:func:`~._bilinear.at_unit_temperature`'s); every evaluation returns the loss and its
gradient from one fused pass over the observed entries (:class:`cbmm.engine.Objective`).
The shared start enters in its balanced representative
(:func:`~._bilinear.balance_scale`: the same ``theta a^T``, hence the same
loss, with ``||theta|| = ||a||``).

Stopping rule.  The decision is taken in the callback after every iteration
by :class:`cbmm.stopping.RelativeLossRule`: the paper's relative loss change
``|l_k - l_{k-1}| / |l_{k-1}| < tol``, counted once the projected-gradient
norm is at most :data:`cbmm.stopping.GRADIENT_SAFEGUARD` times the start's.
SciPy's own one-shot ``ftol`` test is switched off (``ftol = 0``: it would
stop on any single short step), ``gtol = 1e-12`` (a projected gradient that
small is stationary), ``maxiter = max_iter`` (L-BFGS-B iterations; the line
search may evaluate the objective several times per iteration, the count is
``info["n_evaluations"]``, capped at ``maxfun``).  A line search that ends
abnormally is a failure, never convergence.
"""

from __future__ import annotations

import time

import numpy as np

from ..registry import Option, register_method
from ..result import SolverOutput
from ._bilinear import PARAMETRISATION_OPTION, at_unit_temperature, balance_scale
from ..engine import Objective
from ..model import projected_norm
from ..prior import PRIOR_SD, Penalty
from ..stopping import RelativeLossRule
from ._prior import PRIOR_OPTIONS

__all__ = ["solve"]

#: Projected-gradient sup-norm at which SciPy stops by itself (a stationary point).
GTOL = 1e-12


OPTIONS = {
    "maxcor": Option("int", 10, minimum=1, doc="stored correction pairs (SciPy's default 10)"),
    "maxfun": Option("int", None, minimum=1, nullable=True,
                     doc="limit on objective evaluations; default max(15000, 20 max_iter)"),
    **PRIOR_OPTIONS,
    **PARAMETRISATION_OPTION,
}


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None,
          maxcor=10, maxfun=None, prior="none", prior_sd=PRIOR_SD):
    """Minimise loss (3) (plus a prior's penalty) over ``(theta, a, b)`` subject to
    ``a >= 0`` with L-BFGS-B.

    Parameters
    ----------
    responses : cbmm.Responses
        Validated responses (+-1/0 coding, 0 = missing), dense or sparse (CSR).
    theta0, a0, b0 : ndarray
        Shared starting point (``a0`` is clipped at 0).
    sigma, tol, max_iter
        Temperature, relative-loss tolerance (:class:`cbmm.stopping.RelativeLossRule`),
        iteration limit (SciPy ``maxiter``).
    seed : ignored
        L-BFGS-B is deterministic.
    progress : callable, optional
        ``progress(iteration, loss)`` after every iteration.
    maxcor : int
        Number of stored correction pairs (SciPy's default, 10).
    maxfun : int, optional
        Limit on objective evaluations; default ``max(15000, 20 * max_iter)``
        so that ``max_iter`` is the binding limit.
    prior, prior_sd
        ``"none"``: loss (3); ``"normal"``: plus the penalty of
        :class:`cbmm.model.Penalty` (MAP).

    Returns
    -------
    SolverOutput
        ``loss_history[0]`` is the loss at the start, then one entry per
        iteration; ``info["time_history"]`` holds the matching elapsed
        seconds, ``info["setup_s"]`` the kernel set-up excluded from
        ``runtime_s``; ``info["gradient_ratio"]`` and ``info["held_back"]``
        come from the stopping rule.
    """
    from scipy.optimize import Bounds, minimize  # not with the package: see preload below

    setup = time.perf_counter()
    objective = Objective(responses, sigma, Penalty.of(prior, prior_sd))
    n, j = objective.shape
    x0 = np.concatenate([*balance_scale(theta0, np.maximum(a0, 0.0)), b0]).astype(float)
    objective.loss_and_gradient(x0[:n], x0[n:n + j], x0[n + j:])  # compile / load the kernel
    lower = np.full(x0.size, -np.inf)
    lower[n:n + j] = 0.0
    bounds = Bounds(lower, np.inf)
    setup_s = time.perf_counter() - setup

    rule = RelativeLossRule(tol)
    history, times = [], []
    last = {}  # point, value and projected-gradient norm of the latest evaluation
    start = time.perf_counter()

    def value_and_gradient(x):
        value, g_theta, g_a, g_b = objective.loss_and_gradient(x[:n], x[n:n + j], x[n + j:])
        last.update(x=x.copy(), value=value,
                    gradient_norm=projected_norm(x[n:n + j], g_theta, g_a, g_b))
        if not history:  # SciPy evaluates x0 first: record the starting loss
            history.append(value)
            times.append(time.perf_counter() - start)
            rule.start(value, last["gradient_norm"])
        return value, np.concatenate([g_theta, g_a, g_b])

    def decide(intermediate_result):
        history.append(float(intermediate_result.fun))
        times.append(time.perf_counter() - start)
        if progress is not None:
            progress(len(history) - 1, history[-1])
        if not np.array_equal(last["x"], intermediate_result.x):  # never seen: re-evaluate
            value_and_gradient(intermediate_result.x)
        if rule.stop(history[-1], last["gradient_norm"]):
            raise StopIteration

    evaluations_before = objective.evaluations
    res = minimize(value_and_gradient, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                   callback=decide,
                   options={"ftol": 0.0, "gtol": GTOL, "maxiter": max_iter, "maxcor": maxcor,
                            "maxfun": maxfun or max(15000, 20 * max_iter)})
    runtime = time.perf_counter() - start

    message = rule.reason or str(res.message)
    if not np.isfinite(res.fun):
        status = f"failed: L-BFGS-B: non-finite loss ({message})"
    elif rule.stopped or res.status == 0:
        status = "converged"  # the rule fired, or SciPy found the projected gradient ~ 0
    elif res.status == 1:
        status = "max_iter"  # iteration or evaluation limit
    else:
        status = f"failed: L-BFGS-B: {message}"  # e.g. an abnormal line-search termination
    x = res.x
    return SolverOutput(
        theta=x[:n].copy(), a=x[n:n + j].copy(), b=x[n + j:].copy(),
        loss_history=history, n_iter=int(res.nit), status=status, runtime_s=runtime,
        info={"time_history": times, "setup_s": setup_s, "message": message,
              "n_evaluations": objective.evaluations - evaluations_before,
              "gtol": GTOL, "maxcor": maxcor, **rule.info()})


# preload: cbmm.fit imports SciPy's optimizers (0.4 s) in the caller, not in every forked
# worker, and only for this method, so that ``import cbmm`` stays without SciPy
register_method("lbfgsb", at_unit_temperature(solve), label="L-BFGS-B", options=OPTIONS,
                color="#9b2ee6", order=1,
                env="core", seconds_per_million_cells=10.0, reads_sparse=True,
                preload=lambda options: ("scipy.optimize",),
                paper_options={"prior": "none", "parametrisation": "raw"}, minimises_loss=True,
                description="SciPy L-BFGS-B on loss (3) with analytic gradients, a >= 0 bounds")
