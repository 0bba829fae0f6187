"""cBMM's ``accelerate="auto"``: accelerated MM, then projected quasi-Newton.

Plain MM (Algorithm 1) makes large gains in its first iterations and then
crawls wherever theta and a are strongly coupled (real data, weak signal:
15 754 iterations on MATH-500 to come within 1e-6 of the best loss).  A
quasi-Newton method on the same objective handles the coupling but wastes its
first iterations far from the optimum.  ``auto`` uses each where it is good:

1. **MM phase.**  SQUAREM cycles of the MM map (:func:`cbmm.mm.squarem_cycles`;
   monotone, ``a >= 0``), in float32 per-entry arithmetic unless float64 is
   requested.  The first pass also gives the gradient at the start, the
   reference of the stationarity measure.  The phase ends when MM's rate
   slows: a cycle gains more than :data:`SWITCH_RATIO` times the previous
   cycle's gain (after :data:`MIN_CYCLES` cycles), or a cycle gains nothing
   (float32's resolution reached), or after :data:`MAX_MM_MAPS` MM maps.
2. **Quasi-Newton phase.**  SciPy's L-BFGS-B on loss (3) at sigma = 1 with
   the fused float64 loss-and-gradient pass, bounds ``a >= 0``, in variables
   scaled by ``1 / sqrt(D)``, ``D`` the diagonal of the Fisher information at
   the switch point (``sum_j a_j^2 q_ij`` for theta_i, ``sum_i theta_i^2 q_ij``
   for a_j, ``sum_i q_ij`` for b_j, ``q = Phi (1 - Phi)`` on observed cells):
   one extra pass, and the scaled problem is far better conditioned
   (MATH-500: 332 instead of 1679 iterations to the same loss).

**tol.**  ``auto`` stops when either (a) over the last :data:`WINDOW`
quasi-Newton iterations the loss fell by less than ``tol`` relative, or (b)
the fit is stationary to within ``tol``: the projected-gradient norm in the
canonical parametrisation, relative to the start's, is at most ``tol`` -- the
measure :func:`cbmm.fit` reports as ``info["stationarity"]``.  It also stops
when L-BFGS-B can no longer lower the loss in float64 (relative reduction
below ``10 eps``, or a failed line search), or after ``max_iter`` iterations
(MM maps plus quasi-Newton iterations).  Why both: the paper's one-step
relative-loss rule stops a quasi-Newton method on its first short step
(measured: at tol 1e-4 it ended 6e-5 above L-BFGS-B on a 150 x 80 MCAR
case), hence the window; and where the optimum is not attained (items or
models separated perfectly, parameters running off to infinity) the gradient
need not vanish along the way (measured on a 120 x 60 MNAR design: 3000
iterations at stationarity 0.09 while the loss fell by 1e-9 per iteration),
so stationarity alone would never stop.  On well-posed data (b) usually ends
the fit first, far tighter than the paper's rule at the same tol.  A
quasi-Newton run that stalls after making progress is followed by a fresh
run with the curvature at its end point (drifting parameters make the switch
point's curvature stale); one that stalls within its first window ends the fit.

Each history entry is the loss after an MM cycle or a quasi-Newton iteration;
entries of a float32 MM phase carry float32 rounding (about 1e-7 relative).
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
# Imported with this module, which cbmm.fit imports in the caller for accelerate="auto"
# (Method.preload), so that the forked workers do not import them again on every fit.
from scipy.optimize import Bounds, minimize

try:
    from threadpoolctl import threadpool_limits
except ImportError:
    threadpool_limits = None

from .mm import squarem_cycles
from .model import canonical_projected_norm
from .result import SolverOutput

__all__ = ["ABILITY_STEPS", "MAX_MM_MAPS", "MIN_CYCLES", "SWITCH_RATIO", "WINDOW", "solve_auto"]

#: The MM phase ends once a cycle gains more than this share of the previous
#: cycle's gain (its rate has slowed).  Measured on MATH-500, the MNAR design
#: and simulated 2211 x J: 0.3, 0.5 and 0.7 switch at the same cycle there.
SWITCH_RATIO = 0.5
#: SQUAREM cycles before the rate is judged.
MIN_CYCLES = 2
#: Upper bound on the MM maps of the MM phase.
MAX_MM_MAPS = 50
#: Quasi-Newton iterations over which the relative loss decrease is compared with tol.
WINDOW = 10
#: Newton steps for the abilities alone that open the MM phase when ``stop_se`` is set.
ABILITY_STEPS = 2
#: L-BFGS-B's stored correction pairs (20 was not faster than 10).
MAXCOR = 10
#: L-BFGS-B's own relative-reduction test: float64's floor (``factr = 10``).
FTOL = 10 * np.finfo(float).eps


class _Stationary(Exception):
    """The quasi-Newton phase's start already meets the tolerance."""


def solve_auto(op, theta, a, b, *, tol, max_iter, start, progress=None, stop_se=None):
    """MM then projected quasi-Newton from ``(theta, a, b)`` at sigma = 1.

    Parameters
    ----------
    op : cbmm.mm.MMOperator
        The MM map on the responses (sigma = 1; either engine).
    theta, a, b : ndarray
        Start, ``a >= 0``.
    tol : float
        Stopping tolerance (see the module docstring).
    max_iter : int
        Limit on MM maps plus quasi-Newton iterations.
    start : float
        ``time.perf_counter()`` at the start of the fit (for ``time_history``).
    progress : callable, optional
        ``progress(iteration, loss)`` after every history entry.
    stop_se : float, optional
        Also stop once every component of the (projected) gradient, in units of its
        parameter's standard error (scaled by the quasi-Newton phase's curvature),
        is at most ``stop_se``: the scaled gradient of :mod:`cbmm.diagnostics`.
        Unlike the relative rules, this does not loosen as the loss grows with the
        data.

    Returns
    -------
    SolverOutput
        ``info``: ``time_history``, ``mm_iterations`` (MM maps),
        ``qn_iterations``, ``qn_evaluations``, ``qn_runs`` (quasi-Newton
        starts, see :func:`_quasi_newton`), ``qn_message`` (why the last ended).
    """
    history, times = [], []

    def record(value):
        history.append(value)
        times.append(time.perf_counter() - start)
        if progress is not None and len(history) > 1:
            progress(len(history) - 1, value)

    status, reference = _mm_phase(op, theta, a, b, max_iter, record, stop_se)
    info = {"mm_iterations": op.updates, "qn_iterations": 0, "qn_evaluations": 0, "qn_runs": 0}
    if status == "converged":
        info["qn_message"] = "scaled gradient <= stop_se in the MM phase"
    theta, a, b = op.point
    while status is None:
        left = max_iter - op.updates - info["qn_iterations"]
        if left <= 0:
            status = "max_iter"
            break
        before = info["qn_iterations"]
        c, e = op.penalty.gauge(theta, a, b)  # the prior's best scale: see Penalty.gauge
        theta, a, b = c * (theta + e), a / c, b - a * e
        theta, a, b, status, stalled = _quasi_newton(op, theta, a, b, tol=tol,
                                                     target=tol * reference, max_iter=left,
                                                     record=record, info=info, stop_se=stop_se)
        info["qn_runs"] += 1
        if stalled and info["qn_iterations"] - before > WINDOW:
            # progress, then a stall: where parameters drift (an optimum not
            # attained) the switch point's curvature goes stale; start afresh
            status = None
    info["time_history"] = times
    return SolverOutput(theta=theta, a=a, b=b, loss_history=history,
                        n_iter=info["mm_iterations"] + info["qn_iterations"], status=status,
                        runtime_s=0.0, info=info)


def _mm_phase(op, theta, a, b, max_iter, record, stop_se=None):
    """SQUAREM cycles until MM's rate slows.

    With ``stop_se``, the phase ends the fit once every gradient component, in units of
    its standard error at the start (``op.current_gradient``, free with each pass), is at
    most ``stop_se``; and hands over to the quasi-Newton phase once a cycle gains less
    than :func:`_stationary_gain` (from a warm start the loss settles within a few cycles
    while a few parameters still lag behind).

    Returns
    -------
    status : str or None
        ``None`` to go on with the quasi-Newton phase, else the fit's status.
    reference : float
        Canonical projected-gradient norm at the start.
    """
    scale = None
    if stop_se is not None:
        # the start's curvature scales the gradient for the stop_se test (one pass), and
        # first moves the abilities to their optimum given the start's items
        curvature = op.curvature(theta, a, b)
        scale = _inverse_sqrt(np.concatenate(curvature))
        theta = _abilities_given_items(op, theta, a, b, curvature[0])
        op.gradient = op.current_gradient()  # the operator stands at theta: no pass again
    cycles = squarem_cycles(op, theta, a, b, gradient=True, evaluated=stop_se is not None,
                            max_updates=max_iter)
    previous = next(cycles)
    record(previous)
    reference = canonical_projected_norm(theta, a, *op.gradient)
    if not np.isfinite(previous):
        return "failed: non-finite loss", reference
    previous_gain = None
    for count, value in enumerate(cycles, start=1):
        record(value)
        if not np.isfinite(value):
            return "failed: non-finite loss", reference
        gain = previous - value
        if gain <= 0 or op.updates >= min(MAX_MM_MAPS, max_iter):
            break  # float32's resolution reached, or enough MM
        if scale is not None:
            if _within(np.concatenate(op.point), op.current_gradient(), scale, stop_se,
                       *op.shape):
                return "converged", reference
            if gain <= _stationary_gain(stop_se, scale.size):
                break  # the loss has settled: what is left is for the quasi-Newton phase
        if (previous_gain is not None and count >= MIN_CYCLES
                and gain > SWITCH_RATIO * previous_gain):
            break  # MM's rate has slowed
        previous, previous_gain = value, gain
    return ("max_iter" if op.updates >= max_iter else None), reference


def _abilities_given_items(op, theta, a, b, bend, steps=ABILITY_STEPS):
    """Newton steps for every theta_i with the items held, from float32 evaluation passes
    (``op.track``: the gradient comes with the pass) and the start's curvature ``bend``,
    each capped at one unit of theta and kept only while the loss falls; the operator is
    left at the returned point.  From a warm
    start whose items were resampled (the bootstrap) the abilities move most: measured at
    2211 x 5761, 4 MM maps are left to do instead of 6 and a quasi-Newton iteration."""
    value = op.evaluate(theta, a, b)
    for _ in range(steps):
        kept = op.state()
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(bend > 0, op.current_gradient()[0] / bend, 0.0)
        trial = theta - np.clip(step, -1.0, 1.0)
        trial_value = op.evaluate(trial, a, b)
        if not trial_value < value:
            op.restore(kept)
            break
        theta, value = trial, trial_value
    return theta


def _quasi_newton(op, theta, a, b, *, tol, target, max_iter, record, info, stop_se=None):
    """One preconditioned L-BFGS-B run from ``(theta, a, b)``.

    It ends when the loss falls by less than ``tol`` relative over
    :data:`WINDOW` iterations (a stall; with ``stop_se``, see :func:`_stall`), when the
    scaled gradient is at most ``stop_se``, when the canonical projected-gradient
    norm is at most ``target``, at float64's floor, or after ``max_iter``
    iterations.  A run that stalls after making progress is followed by a new
    run with the curvature at its end point (:func:`solve_auto`); one that
    stalls within its first window ends the fit.

    Returns
    -------
    theta, a, b : ndarray
    status : str
    stalled : bool
        Whether the run ended by the window rule.
    """
    n, j = op.shape
    x0 = np.concatenate([theta, a, b])
    scale = _inverse_sqrt(np.concatenate(op.curvature(theta, a, b)))
    last = {}
    losses = []  # float64 losses: the run's start, then each iteration
    ended = {"stalled": False}

    def split(x):
        return x[:n], x[n:n + j], x[n + j:]

    def fun(u):
        x = u * scale
        value, *grads = op.loss_gradient(*split(x))
        info["qn_evaluations"] += 1
        last.update(x=x, grads=grads)
        if not losses:
            losses.append(value)
            if _norm(x, grads, n, j) <= target or _within(x, grads, scale, stop_se, n, j):
                raise _Stationary
        return value, np.concatenate(grads) * scale

    def callback(intermediate_result):
        value = float(intermediate_result.fun)
        record(value)
        losses.append(value)
        info["qn_iterations"] += 1
        if len(losses) > WINDOW and losses[-1 - WINDOW] - value <= _stall(tol, value, stop_se,
                                                                           x0.size):
            info["qn_message"] = f"loss fell by < tol (relative) over {WINDOW} iterations"
            ended["stalled"] = True
            raise StopIteration
        x = intermediate_result.x * scale
        grads = last["grads"] if np.array_equal(last["x"], x) else op.loss_gradient(*split(x))[1:]
        if _norm(x, grads, n, j) <= target:
            info["qn_message"] = "stationarity <= tol"
            raise StopIteration
        if _within(x, grads, scale, stop_se, n, j):
            info["qn_message"] = "scaled gradient <= stop_se"
            raise StopIteration

    lower = np.full(x0.size, -np.inf)
    lower[n:n + j] = 0.0
    try:
        with _blas_single_thread():
            res = minimize(fun, x0 / scale, jac=True, method="L-BFGS-B",
                           bounds=Bounds(lower, np.inf), callback=callback,
                           options={"ftol": FTOL, "gtol": 0.0, "maxiter": max_iter,
                                    "maxcor": MAXCOR, "maxfun": max(15000, 20 * max_iter)})
    except _Stationary:
        info["qn_message"] = "stationarity <= tol"
        return theta, a, b, "converged", False
    if "qn_message" not in info or not (ended["stalled"]
                                        or info["qn_message"].startswith(("stat", "scaled"))):
        info["qn_message"] = f"L-BFGS-B: {res.message}"
    x = res.x * scale
    if not np.isfinite(res.fun):
        status = "failed: non-finite loss"
    elif res.status == 1:
        status = "max_iter"  # iteration or evaluation limit
    else:  # stall, stationarity, float64's floor, or no descent left along L-BFGS-B's direction
        status = "converged"
    theta, a, b = split(x)
    return theta.copy(), np.maximum(a, 0.0), b.copy(), status, ended["stalled"]


def _blas_single_thread():
    """SciPy's L-BFGS-B runs BLAS on vectors of N + 2J numbers: threads only
    contend there (measured: 22 ms instead of 2.2 ms per iteration on MATH-500
    on a loaded 2-core machine).  Uses threadpoolctl when it is installed."""
    if threadpool_limits is None:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _norm(x, grads, n, j):
    return canonical_projected_norm(x[:n], x[n:n + j], *grads)


def _inverse_sqrt(curvature):
    """``1 / sqrt(curvature)``, with a floor: a parameter without curvature (e.g. theta_i
    with every a_j = 0) keeps a finite scale."""
    floor = 1e-12 * max(float(curvature.max()), np.finfo(float).tiny)
    return 1.0 / np.sqrt(np.maximum(curvature, floor))


def _stall(tol, value, stop_se, size) -> float:
    """The loss decrease over :data:`WINDOW` iterations below which a run has stalled:
    ``tol`` relative, and with ``stop_se`` at most :func:`_stationary_gain` (the relative
    rule alone loosens as the loss grows with the data)."""
    floor = tol * abs(value)
    return floor if stop_se is None else min(floor, _stationary_gain(stop_se, size))


def _stationary_gain(stop_se, size) -> float:
    """``size stop_se^2 / 2``: about what a Newton step still gains from a point of ``size``
    parameters whose scaled gradient components are all ``stop_se``."""
    return 0.5 * size * stop_se ** 2


def _within(x, grads, scale, stop_se, n, j) -> bool:
    """Whether every projected gradient component is at most ``stop_se`` standard errors
    (``scale`` = 1 / sqrt(curvature)); False without ``stop_se``."""
    if stop_se is None:
        return False
    g = np.concatenate(grads) * scale
    g[n:n + j] = np.where((x[n:n + j] <= 0) & (g[n:n + j] > 0), 0.0, g[n:n + j])
    return float(np.max(np.abs(g))) <= stop_se
