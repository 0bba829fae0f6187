"""Manopt baseline: pymanopt conjugate gradient plus the paper's post-hoc proximal step.

Stage 1 (vanilla Manopt).  Riemannian conjugate gradient (pymanopt's
``ConjugateGradient``: Hestenes-Stiefel rule, adaptive line search, its
defaults) over the product ``Euclidean(N) x Euclidean(J) x Euclidean(J)`` of
``(theta, a, b)`` without the constraint, on loss (3) with the hand-written
Euclidean gradient (numpy backend; loss and gradient come from one fused
pass, cached so the line search's cost call and the following gradient call
at the accepted point share it).  The shared start enters in its balanced
representative (:func:`~._bilinear.balance_scale`: the same ``theta a^T``,
hence the same loss, with ``||theta|| = ||a||``).  Both stages run at sigma = 1 on
``(theta, a / sigma, b / sigma)`` unless ``parametrisation="raw"`` (the registered
solver is :func:`~._bilinear.at_unit_temperature`'s).

Stopping rule.  pymanopt has no relative-cost test, so a subclass adds the
paper's, :class:`cbmm.stopping.RelativeLossRule`: stop when
``|f_k - f_{k-1}| / |f_{k-1}| < tol`` between consecutive CG iterates, counted
once the gradient norm is at most :data:`cbmm.stopping.GRADIENT_SAFEGUARD`
times the start's.  pymanopt's own tests stay active: gradient norm < 1e-6
(stationary: converged), ``max_iterations`` so that at most ``max_iter`` CG
steps are taken; its 1000-second time limit is removed.  A line search that
finds no decrease (step < 1e-10, pymanopt's ``min_step_size``) before the
rule holds is a failure, not convergence.

Orientation.  The unconstrained problem has the exact symmetry
``(theta, a) -> (-theta, -a)``; CG can end at the mirror image of the
constrained solution (most slopes negative), which the proximal step would
project onto ``a = 0``.  The CG solution is therefore replaced by whichever
of the two is closer to ``a >= 0`` (:func:`~._bilinear.orient_sign`;
``info["flipped"]``) before stage 2.

Stage 2 (post-hoc proximal gradient, the paper's appendix).  With theta
fixed at the CG solution, iterate ::

    b <- b - eta * grad_b l
    a <- max(0, a - eta * (grad_a l + lambda))

from the CG solution until the relative change of ``l + lambda * sum(a)``
is < tol (at most ``max_iter`` steps).  Defaults: ``lambda = 0`` (no
sparsity: the constrained maximum-likelihood problem every other method
solves) and ``eta = 1 / L`` with ``L`` the Lipschitz constant of the
``(a, b)``-gradient for fixed theta, which makes every step a descent step:
the loss separates over items and item j's Hessian is bounded by
``(1 / (4 sigma^2)) sum_{i in Omega_j} [theta_i^2, theta_i; theta_i, 1]``, so
``L = max_j`` of that 2 x 2 matrix's largest eigenvalue.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from ..registry import Option, register_method
from ..result import SolverOutput
from ._bilinear import PARAMETRISATION_OPTION, at_unit_temperature, balance_scale, orient_sign
from ..engine import Objective
from ..prior import PRIOR_SD, Penalty
from ._software import require_python_modules
from ..stopping import RelativeLossRule, relative_change
from ._prior import PRIOR_OPTIONS

__all__ = ["availability", "lipschitz_item_block", "proximal_gradient", "solve"]


#: Autodiff frameworks pymanopt imports at its own import when they are installed.  This
#: baseline passes its own NumPy gradient and uses none of them; importing torch alone
#: would add about 0.7 s to every fit job's start-up where py-irt shares the environment.
UNUSED_BACKENDS = ("torch", "tensorflow", "jax")


def availability() -> None:
    """Raise :class:`~cbmm.MethodUnavailableError` if pymanopt is missing; import it
    without the :data:`UNUSED_BACKENDS` that are not loaded already."""
    hidden = [] if "pymanopt" in sys.modules else [
        name for name in UNUSED_BACKENDS if name not in sys.modules]
    sys.modules.update(dict.fromkeys(hidden))  # None: importing them raises ImportError
    try:
        require_python_modules("manopt", ["pymanopt"])
    finally:
        for name in hidden:
            del sys.modules[name]


def lipschitz_item_block(theta, observed, sigma):
    """Lipschitz constant of the ``(a, b)``-gradient of loss (3) at fixed theta.

    Parameters
    ----------
    theta : ndarray (N,)
    observed : ndarray of bool (N, J)
        The observed set Omega.
    sigma : float

    Returns
    -------
    float
        ``max_j lambda_max(M_j) / (4 sigma^2)`` with
        ``M_j = sum_{i in Omega_j} [theta_i^2, theta_i; theta_i, 1]``.
    """
    mask = observed.astype(np.float64)
    s2 = theta ** 2 @ mask
    s1 = theta @ mask
    s0 = mask.sum(axis=0)
    # largest eigenvalue of [[s2, s1], [s1, s0]]
    lam = 0.5 * (s2 + s0) + np.sqrt(0.25 * (s2 - s0) ** 2 + s1 ** 2)
    return float(lam.max()) / (4.0 * sigma ** 2)


def proximal_gradient(objective, theta, a, b, *, step, sparsity, tol, max_iter, start=None):
    """The paper's post-hoc proximal-gradient stage on ``(a, b)`` at fixed theta.

    Parameters
    ----------
    objective : Objective
    theta, a, b : ndarray
        Fixed abilities and the starting item parameters.
    step : float
        Step size eta.
    sparsity : float
        lambda >= 0, the l1 weight on ``a``.
    tol : float
        Stop when the relative change of ``l + lambda * sum(a)`` is < tol.
    max_iter : int
        Maximum number of steps.
    start : float, optional
        ``time.perf_counter()`` origin of the returned step times.

    Returns
    -------
    a, b : ndarray
    history : list of float
        Loss (3) at the start and after each step.
    times : list of float
        Seconds since ``start`` after each step (empty without ``start``).
    n_steps : int
    converged : bool
    """
    value, _, g_a, g_b = objective.loss_and_gradient(theta, a, b)
    history, times = [value], []
    penalised = value + sparsity * a.sum()
    for n_steps in range(1, max_iter + 1):
        b = b - step * g_b
        a = np.maximum(0.0, a - step * (g_a + sparsity))
        value, _, g_a, g_b = objective.loss_and_gradient(theta, a, b)
        history.append(value)
        if start is not None:
            times.append(time.perf_counter() - start)
        previous, penalised = penalised, value + sparsity * a.sum()
        if not np.isfinite(penalised):
            return a, b, history, times, n_steps, False
        if relative_change(previous, penalised) < tol:
            return a, b, history, times, n_steps, True
    return a, b, history, times, max_iter, False


class _CostGradientCache:
    """Loss and gradient at the most recent point, shared by pymanopt's cost and gradient calls."""

    def __init__(self, objective):
        self.objective = objective
        self.point = None
        self.value = None

    def __call__(self, theta, a, b):
        if self.point is None or not all(np.array_equal(u, v) for u, v in
                                         zip(self.point, (theta, a, b), strict=True)):
            self.value = self.objective.loss_and_gradient(theta, a, b)
            self.point = (theta.copy(), a.copy(), b.copy())
        return self.value


def _relative_cost_cg(rule, start, progress=None):
    """pymanopt ConjugateGradient that stops by ``rule`` (:class:`cbmm.stopping.RelativeLossRule`)."""
    from pymanopt.optimizers import ConjugateGradient

    class RelativeCostConjugateGradient(ConjugateGradient):
        # pymanopt logs (iteration, cost) right before testing its stopping
        # criteria at every iteration; both hooks are extended, not replaced.
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.costs, self.times = [], []

        def _add_log_entry(self, *, iteration, point, cost, **kwargs):
            self.costs.append(float(cost))
            self.times.append(time.perf_counter() - start)
            if progress is not None and len(self.costs) > 1:
                progress(len(self.costs) - 1, self.costs[-1])
            super()._add_log_entry(iteration=iteration, point=point, cost=cost, **kwargs)

        def _check_stopping_criterion(self, *, gradient_norm, step_size, **kwargs):
            if not np.isfinite(self.costs[-1]):
                return "failed: non-finite cost"
            if len(self.costs) == 1:
                rule.start(self.costs[0], gradient_norm)
            elif rule.stop(self.costs[-1], gradient_norm):
                return rule.reason
            reason = super()._check_stopping_criterion(gradient_norm=gradient_norm,
                                                       step_size=step_size, **kwargs)
            if reason and "min step_size" in reason:
                # the line search found no decrease although the gradient is not small
                return (f"failed: line search found no decrease at gradient norm "
                        f"{rule.gradient_ratio:.2g} x the start's")
            return reason

    return RelativeCostConjugateGradient


OPTIONS = {
    "step_size": Option("float", None, exclusive_minimum=0, nullable=True,
                        doc="proximal step eta; default 1/L (always a descent step)"),
    "sparsity": Option("float", 0.0, minimum=0, doc="proximal l1 weight lambda on a (default 0)"),
    **PRIOR_OPTIONS,
    **PARAMETRISATION_OPTION,
}


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None,
          step_size=None, sparsity=0.0, prior="none", prior_sd=PRIOR_SD):
    """Conjugate gradient on loss (3), then the post-hoc proximal step enforcing ``a >= 0``.

    Parameters
    ----------
    responses : cbmm.Responses
        Validated responses (``responses.y``: +-1/0 coding, 0 = missing).
    theta0, a0, b0 : ndarray
        Shared starting point.
    sigma, tol, max_iter
        Temperature, relative-cost tolerance, limit on CG iterations (and on
        proximal steps).
    seed : ignored
        Both stages are deterministic.
    progress : callable, optional
        ``progress(iteration, loss)`` after every CG iteration.
    step_size : float, optional
        Proximal step eta; default ``1 / L`` (:func:`lipschitz_item_block`).
    sparsity : float
        Proximal l1 weight lambda on ``a`` (default 0).
    prior, prior_sd
        ``"none"``: loss (3); ``"normal"``: plus the penalty of
        :class:`cbmm.model.Penalty` (MAP), in both stages.

    Returns
    -------
    SolverOutput
        ``n_iter`` counts CG iterations; ``loss_history`` and
        ``info["time_history"]`` cover both stages (the proximal stage's
        entries follow the CG ones; ``info["prox_steps"]`` of them).
    """
    import pymanopt
    from pymanopt.manifolds import Euclidean, Product

    setup = time.perf_counter()
    penalty = Penalty.of(prior, prior_sd)
    objective = Objective(responses.y, sigma, penalty)
    n, j = objective.shape
    theta0, a0 = balance_scale(theta0, a0)
    b0 = np.array(b0, dtype=float)
    objective.loss_and_gradient(theta0, a0, b0)  # compile / load the kernel
    setup_evaluations = objective.evaluations
    manifold = Product([Euclidean(n), Euclidean(j), Euclidean(j)])
    cached = _CostGradientCache(objective)

    @pymanopt.function.numpy(manifold)
    def cost(theta, a, b):
        return cached(theta, a, b)[0]

    @pymanopt.function.numpy(manifold)
    def euclidean_gradient(theta, a, b):
        return cached(theta, a, b)[1:]

    problem = pymanopt.Problem(manifold, cost, euclidean_gradient=euclidean_gradient)
    setup_s = time.perf_counter() - setup

    start = time.perf_counter()
    # pymanopt counts the start as iteration 1: max_iter + 1 allows max_iter CG steps
    rule = RelativeLossRule(tol)
    optimizer = _relative_cost_cg(rule, start, progress)(
        max_iterations=max_iter + 1, max_time=np.inf, verbosity=0, log_verbosity=0)
    result = optimizer.run(problem, initial_point=[theta0, a0, b0])
    theta, a_cg, b_cg = (np.asarray(v, dtype=float) for v in result.point)
    reason = result.stopping_criterion
    history, times = list(optimizer.costs), list(optimizer.times)
    n_cg = result.iterations - 1
    if reason.startswith("failed") or not np.isfinite(result.cost):
        return SolverOutput.failed(
            f"Manopt conjugate gradient: {reason.removeprefix('failed: ')}", n, j,
            runtime_s=time.perf_counter() - start, loss_history=history, n_iter=n_cg,
            info={"time_history": times, "setup_s": setup_s})

    theta, a_cg, flipped = orient_sign(theta, a_cg)
    # the penalty adds its curvature, item_precision / sigma^2, to the item block's
    eta = step_size or 1.0 / (lipschitz_item_block(theta, objective.y != 0, sigma)
                              + penalty.item_precision / sigma ** 2)
    a, b, prox_history, prox_times, prox_steps, prox_converged = proximal_gradient(
        objective, theta, a_cg, b_cg, step=eta, sparsity=sparsity, tol=tol, max_iter=max_iter,
        start=start)
    runtime = time.perf_counter() - start
    history += prox_history[1:]
    times += prox_times
    if not np.isfinite(history[-1]):
        return SolverOutput.failed("Manopt proximal step: non-finite loss", n, j,
                                   runtime_s=runtime, loss_history=history, n_iter=n_cg,
                                   info={"time_history": times, "setup_s": setup_s})
    cg_hit_limit = reason.startswith("Terminated - max iterations")
    status = "max_iter" if cg_hit_limit or not prox_converged else "converged"
    return SolverOutput(
        theta=theta, a=a, b=b, loss_history=history, n_iter=n_cg, status=status,
        runtime_s=runtime,
        info={"time_history": times, "setup_s": setup_s, "stopping_criterion": reason,
              "prox_steps": prox_steps, "prox_step_size": eta, "prox_sparsity": sparsity,
              "negative_a_before_prox": int(np.count_nonzero(a_cg < 0)), "flipped": flipped,
              "n_evaluations": objective.evaluations - setup_evaluations, **rule.info()})


register_method("manopt", at_unit_temperature(solve), label="Manopt", availability=availability,
                options=OPTIONS,
                color="#00897b", order=2, env="core", seconds_per_million_cells=15.0,
                paper_options={"prior": "none", "parametrisation": "raw"}, minimises_loss=True,
                description="pymanopt conjugate gradient + post-hoc proximal step for a >= 0")
