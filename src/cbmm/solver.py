"""cBMM: constrained block majorization-minimization (the paper's Algorithm 1).

One MM iteration at ``X~ = theta a^T + 1 b^T`` forms the working response
``Y~ = X~ + 4 sigma Y o Phi(-Y o X~)`` on the observed set Omega and then
minimises the quadratic surrogate ``||theta a^T + 1 b^T - Y~||^2_F(Omega)``
exactly, one block at a time:

* a-step, per item j over its observed models (entrywise NNLS, closed form):
  ``a_j <- max(0, sum_i theta_i (Y~_ij - b_j) / sum_i theta_i^2)``;
* b-step, per item over its observed models:
  ``b_j <- mean_i (Y~_ij - theta_i a_j)``;
* theta-step, per model over its observed items:
  ``theta_i <- sum_j (Y~_ij - b_j) a_j / sum_j a_j^2``.

Writing ``W = Y o Phi(-Y o X~)`` (zero off Omega) so that ``Y~ = X~ + 4 sigma W``,
the a- and b-steps need only the column statistics ``W^T theta``, ``W^T 1``
and, with missing cells, ``n_j``, ``sum theta_i`` and ``sum theta_i^2`` over
each column's observed rows: O(J) work once those are known.  The theta-step
needs the row sums ``W a_new`` at the old point.  The stopping rule is the
paper's: relative change of the loss between iterations < tol.

**Scale.** cBMM is exactly equivariant under ``(theta, a, b, sigma) ->
(theta, a / sigma, b / sigma, 1)`` (same iterates, same loss), so every engine
runs on ``(theta, a / sigma, b / sigma)`` at sigma = 1 and scales back at the
end: no sigma can overflow or underflow the per-entry arithmetic.

Two engines compute the same iteration:

* ``"numpy"``: the plain reference implementation (the specification),
  float64, dense row blocks (a sparse matrix is densified for it);
* ``"fused"`` (default): one multi-threaded pass per iteration over the int8
  responses, dense or CSR (C extension :mod:`cbmm._fused`, POSIX threads
  started per pass, so a process may fork at any time).  With the column
  statistics at the current point the a- and b-steps are O(J); then each row
  recomputes its ``w_ij`` at the old point (one exp per cell) for its
  theta-step and evaluates the new point (a second exp): the loss and the next
  column statistics come out of the same pass.  No N x J buffer exists.

``accelerate="squarem"`` wraps the MM map in SQUAREM extrapolation
(Varadhan & Roland, 2008) with projection onto ``a >= 0`` and a monotonicity
safeguard (an extrapolated point is kept only if its loss does not exceed that
of the plain MM step), which reaches the optimum in far fewer sweeps.
``accelerate="auto"`` runs MM until its rate slows and then a projected
quasi-Newton phase on the same objective (:mod:`cbmm.hybrid`).
"""

from __future__ import annotations

import os
import time

import numpy as np

from .model import (
    Penalty,
    canonical_projected_norm,
    check_sigma,
    dense_responses,
    expit,
    fused_matrix,
    row_blocks,
    softplus,
)
from .result import SolverOutput

__all__ = ["MMOperator", "available_cores", "mm_step_numpy", "solve_cbmm", "thread_count"]


# ---------------------------------------------------------------------------
# Reference engine (plain NumPy, sigma = 1)
# ---------------------------------------------------------------------------

def _column_stats_numpy(y, theta, a, b):
    """Loss at (theta, a, b) (sigma = 1) and the column statistics of one MM iteration:
    ``W^T theta``, ``W^T 1``, ``n_j``, ``sum theta_i`` and ``sum theta_i^2`` over
    each column's observed rows."""
    n, j = y.shape
    total = 0.0
    w_theta = np.zeros(j)
    w_sum = np.zeros(j)
    n_obs = np.zeros(j)
    theta_sum = np.zeros(j)
    theta_sq = np.zeros(j)
    for rows in row_blocks(n, j):
        yb = y[rows].astype(np.float64)
        mask = yb != 0
        z = -yb * (np.outer(theta[rows], a) + b)
        total += float(np.sum(softplus(z) * mask))
        w = yb * expit(z)
        t = theta[rows]
        w_theta += t @ w
        w_sum += w.sum(axis=0)
        n_obs += mask.sum(axis=0)
        theta_sum += t @ mask
        theta_sq += (t * t) @ mask
    return total, w_theta, w_sum, n_obs, theta_sum, theta_sq


def _gradient_numpy(y, theta, a, b):
    """Loss (3) at sigma = 1 and its gradient ``(-W a, -W^T theta, -W^T 1)``."""
    n, j = y.shape
    total, g_theta, g_a, g_b = 0.0, np.empty(n), np.zeros(j), np.zeros(j)
    for rows in row_blocks(n, j):
        yb = y[rows].astype(np.float64)
        z = -yb * (np.outer(theta[rows], a) + b)
        total += float(np.sum(softplus(z) * (yb != 0)))
        w = yb * expit(z)
        g_theta[rows] = -(w @ a)
        g_a -= theta[rows] @ w
        g_b -= w.sum(axis=0)
    return total, g_theta, g_a, g_b


def _curvature_numpy(y, theta, a, b):
    """Diagonal of the Fisher information at sigma = 1: with ``q = Phi (1 - Phi)``
    on the observed cells, ``q a^2`` summed per row, ``q theta^2`` and ``q`` per column."""
    n, j = y.shape
    d_theta, d_a, d_b = np.empty(n), np.zeros(j), np.zeros(j)
    for rows in row_blocks(n, j):
        p = expit(np.outer(theta[rows], a) + b)
        q = p * (1.0 - p) * (y[rows] != 0)
        d_theta[rows] = q @ (a * a)
        d_a += (theta[rows] ** 2) @ q
        d_b += q.sum(axis=0)
    return d_theta, d_a, d_b


def _item_update(a, b, w_theta, w_sum, n_obs, theta_sum, theta_sq, precision=0.0):
    """a-step then b-step (exact block minimisers over observed models, sigma = 1).

    ``precision``: the prior precision of a and b (:class:`cbmm.model.Penalty`), added
    as ``4 precision`` to both denominators (the surrogate's curvature is 1/4).
    """
    if precision == 0:
        safe_sq = np.where(theta_sq > 0, theta_sq, 1.0)
        a_new = np.where(theta_sq > 0, np.maximum(0.0, a + 4.0 * w_theta / safe_sq), a)
        safe_n = np.maximum(n_obs, 1.0)
        b_new = b + ((a - a_new) * theta_sum + 4.0 * w_sum) / safe_n
        return a_new, b_new
    ridge = 4.0 * precision
    a_new = np.maximum(0.0, (a * theta_sq + 4.0 * w_theta) / (theta_sq + ridge))
    b_new = (b * n_obs + (a - a_new) * theta_sum + 4.0 * w_sum) / (n_obs + ridge)
    return a_new, b_new


def _theta_update_numpy(y, theta, a, b, a_new, b_new, ridge=0.0):
    """theta-step given the new items (sigma = 1); ``ridge`` is added to its denominator."""
    n, j = y.shape
    theta_new = np.empty(n)
    for rows in row_blocks(n, j):
        yb = y[rows].astype(np.float64)
        mask = yb != 0
        w = yb * expit(-yb * (np.outer(theta[rows], a) + b))
        # sum_j (Y~_ij - b_new_j) a_new_j with Y~ = theta_i a_j + b_j + 4 W_ij
        numer = (theta[rows] * (mask @ (a * a_new)) + mask @ ((b - b_new) * a_new)
                 + 4.0 * (w @ a_new))
        denom = mask @ (a_new * a_new) + ridge
        theta_new[rows] = np.where(denom > 0, numer / np.where(denom > 0, denom, 1.0),
                                   theta[rows])
    return theta_new


def mm_step_numpy(y, theta, a, b, sigma=1.0):
    """One cBMM iteration, plain NumPy reference, at any ``sigma`` (computed at
    sigma = 1 on ``a / sigma``, ``b / sigma``).

    Returns
    -------
    loss : float
        Loss (3) at the input ``(theta, a, b)``.
    theta, a, b : ndarray
        Parameters after the a-, b- and theta-steps.
    """
    a, b = np.asarray(a) / sigma, np.asarray(b) / sigma
    total, *stats = _column_stats_numpy(y, theta, a, b)
    a_new, b_new = _item_update(a, b, *stats)
    theta_new = _theta_update_numpy(y, theta, a, b, a_new, b_new)
    return total, theta_new, a_new * sigma, b_new * sigma


# ---------------------------------------------------------------------------
# The MM map on either engine
# ---------------------------------------------------------------------------

#: Below this many stored cells the fused passes run on one thread: starting
#: a thread costs about 20-60 us, more than it saves on a smaller pass.
PARALLEL_MIN_ENTRIES = 1 << 18

#: Largest |theta|, |a|, |b| (at sigma = 1) a float32 pass accepts: products
#: stay below 1e36, inside float32's range (3.4e38).
FLOAT32_LIMIT = 1e18


class MMOperator:
    """The cBMM map at sigma = 1 on one response matrix.

    :meth:`evaluate` computes the loss and the column statistics at a point;
    :meth:`update` applies one MM iteration from the current point and returns
    the loss at the new one (one pass over the responses on the fused engine).

    Parameters
    ----------
    responses : Responses or ndarray of int8 (N, J)
        Dense (``y``) or sparse (CSR) responses in the +-1/0 coding.
    engine : {"fused", "numpy"}
    precision : {"float64", "float32"}
        Per-entry arithmetic of the fused engine.  A float32 pass whose
        inputs exceed :data:`FLOAT32_LIMIT` or whose loss is not finite is
        redone in float64, and the operator stays in float64
        (``switched_to_float64`` records the update count).
    threads : int, optional
        Threads of the fused passes (see :func:`thread_count`).
    penalty : Penalty, optional
        A prior (MAP): its value is part of every loss the operator returns, its
        gradient of :attr:`gradient` and :meth:`loss_gradient`, its curvature of
        :meth:`curvature`, and the block updates minimise the surrogate plus the
        penalty exactly.
    track_gradient : bool
        Every pass also sums ``W a`` per row, so that :meth:`current_gradient` gives the
        gradient at the current point without another pass (the column sums are the
        statistics already).
    """

    def __init__(self, responses, engine="fused", precision="float64", threads=None,
                 penalty=None, track_gradient=False):
        if engine not in ("fused", "numpy"):
            raise ValueError(f"engine must be 'fused' or 'numpy', got {engine!r}")
        if precision not in ("float64", "float32"):
            raise ValueError(f"precision must be 'float64' or 'float32', got {precision!r}")
        self.engine = engine
        self.responses = responses
        self.penalty = penalty or Penalty()
        self.track = track_gradient
        self.w_a = None
        self.single = precision == "float32" and engine == "fused"
        self.switched_to_float64 = None
        self.updates = 0
        if engine == "numpy":
            self.y = dense_responses(responses)
            self.shape = self.y.shape
            self.n_threads = 1
        else:
            self.matrix = fused_matrix(responses)
            self.shape = self.matrix.shape
            self.n_threads = thread_count(self.matrix.stored, self.shape[0], threads)
            self.counts = np.empty(self.shape[1])
            self.matrix.counts(self.counts, self.n_threads)
            self._stats = np.empty((4, self.shape[1]))
        self.point = None
        self.value = None
        self.gradient = None

    @property
    def precision(self):
        return "float32" if self.single else "float64"

    def evaluate(self, theta, a, b, gradient=False) -> float:
        """Loss (3) at ``(theta, a, b)`` (sigma = 1); makes it the current point.

        With ``gradient``, the same pass also leaves the loss's gradient there
        in :attr:`gradient` (``-W a, -W^T theta, -W^T 1``, in the pass's precision).
        """
        theta, a, b = (np.ascontiguousarray(v, dtype=float) for v in (theta, a, b))
        if self.engine == "numpy":
            self.value, *stats = _column_stats_numpy(self.y, theta, a, b)
            if gradient:
                self.gradient = _gradient_numpy(self.y, theta, a, b)[1:]
        else:
            w_a = np.empty(theta.size) if gradient or self.track else None
            self.value = self._fused_pass(theta, a, b, row_sums=w_a)
            stats = self._fused_stats()
            if gradient:
                self.gradient = (-w_a, -stats[0], -stats[1])
        if self.track:
            self.w_a = w_a if self.engine == "fused" else -_gradient_numpy(self.y, theta, a, b)[1]
        if self.penalty.active:
            self.value += self.penalty.value(theta, a, b)
            if gradient:
                self.gradient = tuple(g + p for g, p in
                                      zip(self.gradient, self.penalty.gradient(theta, a, b)))
        self.point, self.stats = (theta, a, b), stats
        return self.value

    def loss_gradient(self, theta, a, b):
        """Loss (3) at sigma = 1 and its gradient, float64, one pass (the point is not kept)."""
        if self.engine == "numpy":
            value, *grads = _gradient_numpy(self.y, theta, a, b)
        else:
            n, j = self.shape
            grads = np.empty(n), np.empty(j), np.empty(j)
            value = self.matrix.loss_gradient(theta, a, b, 1.0, self.n_threads, *grads)
        if self.penalty.active:
            value += self.penalty.value(theta, a, b)
            grads = [g + p for g, p in zip(grads, self.penalty.gradient(theta, a, b))]
        return (value, *grads)

    def curvature(self, theta, a, b):
        """Diagonal of the Fisher information at sigma = 1 (see :func:`_curvature_numpy`),
        plus the penalty's curvature."""
        if self.engine == "numpy":
            out = _curvature_numpy(self.y, theta, a, b)
        else:
            n, j = self.shape
            out = np.empty(n), np.empty(j), np.empty(j)
            self.matrix.curvature(theta, a, b, 1.0, self.n_threads, *out)
        if self.penalty.active:
            theta_precision, item_precision = self.penalty.curvature()
            out = (out[0] + theta_precision, out[1] + item_precision, out[2] + item_precision)
        return out

    def update(self) -> float:
        """One MM iteration from the current point; returns the loss at the new point."""
        theta, a, b = self.point
        theta_precision, item_precision = self.penalty.curvature()
        a_new, b_new = _item_update(a, b, *self.stats, precision=item_precision)
        w_a = None
        if self.engine == "numpy":
            theta_new = _theta_update_numpy(self.y, theta, a, b, a_new, b_new,
                                            ridge=4.0 * theta_precision)
            self.value, *stats = _column_stats_numpy(self.y, theta_new, a_new, b_new)
            if self.track:
                w_a = -_gradient_numpy(self.y, theta_new, a_new, b_new)[1]
        else:
            theta_new = np.empty_like(theta)
            w_a = np.empty(theta.size) if self.track else None
            self.value = self._fused_pass(theta, a, b, a_new, b_new, theta_new, row_sums=w_a)
            stats = self._fused_stats()
        if self.penalty.active:
            (theta_new, a_new, b_new), stats, w_a = _balanced(self.penalty, theta_new, a_new,
                                                              b_new, stats, w_a)
            self.value += self.penalty.value(theta_new, a_new, b_new)
        self.w_a = w_a
        self.point, self.stats = (theta_new, a_new, b_new), stats
        self.updates += 1
        return self.value

    def state(self):
        """The current point, its loss and statistics (for :meth:`restore`)."""
        return self.point, self.value, self.stats, self.w_a

    def restore(self, state):
        self.point, self.value, self.stats, self.w_a = state

    def current_gradient(self):
        """The gradient of the loss (plus the penalty) at the current point, from the last
        pass (``track_gradient``): ``(-W a, -W^T theta, -W^T 1)``, in the pass's precision."""
        gradient = (-self.w_a, -self.stats[0], -self.stats[1])
        if self.penalty.active:
            gradient = tuple(g + p for g, p in zip(gradient, self.penalty.gradient(*self.point)))
        return gradient

    def _fused_pass(self, theta, a, b, a_new=None, b_new=None, theta_new=None, row_sums=None):
        if self.single and not _float32_safe(theta, a, b, a_new, b_new):
            self._switch()
        for _ in range(2):
            if a_new is None:
                value = self.matrix.evaluate(theta, a, b, self._stats, self.single,
                                             self.n_threads, row_sums)
            else:
                value = self.matrix.mm_step(theta, a, b, a_new, b_new, theta_new, self._stats,
                                            self.single, self.n_threads,
                                            4.0 * self.penalty.theta_precision, row_sums)
            if not self.single or (np.isfinite(value) and _float32_safe(theta_new)):
                return value
            self._switch()
        return value

    def _switch(self):
        self.single = False
        self.switched_to_float64 = self.updates

    def _fused_stats(self):
        s = self._stats
        return s[0].copy(), s[1].copy(), self.counts, s[2].copy(), s[3].copy()


def _balanced(penalty, theta, a, b, stats, w_a=None):
    """The point on the gauge orbit of ``(theta, a, b)`` with the lowest penalty
    (:meth:`cbmm.model.Penalty.gauge`: X and loss (3) unchanged), its column statistics
    and row sums ``W a``: with ``theta' = c (theta + e)`` and ``a' = a / c``,
    ``W^T theta' = c (W^T theta + e W^T 1)``, the observed-set sums of theta and theta^2
    follow the same way, and ``W a' = W a / c`` (W is unchanged)."""
    c, e = penalty.gauge(theta, a, b)
    if c == 1.0 and e == 0.0:
        return (theta, a, b), stats, w_a
    w_theta, w_sum, n_obs, theta_sum, theta_sq = stats
    stats = (c * (w_theta + e * w_sum), w_sum, n_obs, c * (theta_sum + e * n_obs),
             c * c * (theta_sq + 2 * e * theta_sum + e * e * n_obs))
    return (c * (theta + e), a / c, b - a * e), stats, None if w_a is None else w_a / c


def _float32_safe(*arrays):
    """Whether every given array is finite with magnitudes <= :data:`FLOAT32_LIMIT`."""
    for values in arrays:
        if values is not None and values.size and not np.max(np.abs(values)) <= FLOAT32_LIMIT:
            return False
    return True


def available_cores() -> int:
    """Cores the fused passes may use: the CPUs this process may run on
    (affinity, e.g. set by SLURM), capped by ``CBMM_NUM_THREADS`` when set, or
    else by ``OMP_NUM_THREADS`` (the workflow sets it to a job's ``threads``)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    for name in ("CBMM_NUM_THREADS", "OMP_NUM_THREADS"):
        limit = os.environ.get(name, "").strip()
        if limit.isdigit() and int(limit) > 0:
            return max(1, min(cores, int(limit)))
    return max(1, cores)


def thread_count(entries, rows, threads=None):
    """Threads for a pass over ``entries`` cells in ``rows`` rows: ``threads``
    when given, else :func:`available_cores` (one below
    :data:`PARALLEL_MIN_ENTRIES`); never more than ``rows``."""
    if threads is None:
        threads = available_cores() if entries >= PARALLEL_MIN_ENTRIES else 1
    return max(1, min(int(threads), rows))


def _relative_change(previous, current):
    return abs(current - previous) / max(abs(previous), np.finfo(float).tiny)


def _stop_status(history, updates, tol, max_iter):
    """Why the paper's rule ends an MM fit after the losses ``history`` and ``updates``
    MM maps: a non-finite loss, a relative change below ``tol`` or ``max_iter``
    maps; None while it goes on."""
    if not np.isfinite(history[-1]):
        return "failed: non-finite loss"
    if len(history) > 1 and _relative_change(history[-2], history[-1]) < tol:
        return "converged"
    if updates >= max_iter:
        return "max_iter"
    return None


#: With ``precision="auto"`` the float32 kernels are used when tol is at least
#: this large: their loss evaluations carry relative errors of about 1e-7,
#: two orders of magnitude below such a tolerance.
FLOAT32_MIN_TOL = 1e-5


def solve_cbmm(responses, theta0, a0, b0, *, sigma=1.0, tol=1e-4, max_iter=1000,
               engine="fused", precision="auto", accelerate="none", record_times=True,
               progress=None, threads=None, penalty=None, stop_se=None):
    """Run cBMM from ``(theta0, a0, b0)``.

    Parameters
    ----------
    responses : Responses or ndarray of int8 (N, J)
        Responses in the +-1/0 coding, dense or sparse (CSR).
    theta0, a0, b0 : ndarray
        Starting point (``a0 >= 0``).
    sigma : float
        Temperature.  Every engine runs at sigma = 1 on ``a / sigma`` and
        ``b / sigma`` (cBMM is equivariant under that) and scales back.
    tol : float
        Stop when the relative change of the loss between iterations is < tol
        (``accelerate="auto"``: see :func:`cbmm.hybrid.solve_auto`).
    max_iter : int
        Maximum number of MM iterations (MM maps evaluated, also with SQUAREM).
    engine : {"fused", "numpy"}
        Fused kernels or the plain NumPy reference.
    precision : {"auto", "float64", "float32"}
        Arithmetic of the fused engine's per-entry work (exp, log1p).
        Parameters and all sums stay float64.  ``"auto"``: float32 when
        ``tol >= 1e-5`` (about 2x faster; its loss evaluations are accurate
        to ~1e-7 relative), float64 otherwise.  A float32 pass whose inputs
        leave float32's safe range is redone in float64 and the fit continues
        in float64 (``info["precision"]`` then reads ``"float32->float64"``).
        The loss reported by :func:`cbmm.fit` is always computed in float64.
    accelerate : {"none", "squarem", "auto"}
        Plain Algorithm 1 (default), SQUAREM-accelerated MM, or MM followed by
        a projected quasi-Newton phase (:mod:`cbmm.hybrid`).
    record_times : bool
        Store the elapsed seconds at each loss evaluation in
        ``info["time_history"]``.
    progress : callable, optional
        Called as ``progress(iteration, loss)`` after every iteration.
    threads : int, optional
        Threads of the fused passes; default :func:`available_cores` (one for
        matrices below :data:`PARALLEL_MIN_ENTRIES` stored cells).
    penalty : cbmm.model.Penalty, optional
        A prior: the fit minimises loss (3) plus the penalty (MAP), and every
        loss in ``loss_history`` includes it.
    stop_se : float, optional
        ``accelerate="auto"``: also stop once the scaled gradient is at most this
        (see :func:`cbmm.hybrid.solve_auto`).

    Returns
    -------
    SolverOutput
        ``loss_history[k]`` is the loss after k iterations (entry 0: start).
        ``info["stationarity_reference"]``: the projected-gradient norm at
        the start in the canonical parametrisation (sigma = 1 scale), from the
        first pass, for :func:`cbmm.model.loss_and_stationarity`.
    """
    if accelerate not in (None, "none", "squarem", "auto"):
        raise ValueError(f"accelerate must be 'none', 'squarem' or 'auto', got {accelerate!r}")
    sigma = check_sigma(sigma)
    if precision == "auto":  # auto's MM phase only warms up its float64 quasi-Newton phase
        precision = "float32" if tol >= FLOAT32_MIN_TOL or accelerate == "auto" else "float64"
    setup_start = time.perf_counter()
    op = MMOperator(responses, engine=engine, precision=precision, threads=threads,
                    penalty=penalty, track_gradient=accelerate == "auto" and stop_se is not None)
    start = time.perf_counter()
    theta = np.array(theta0, dtype=float)
    a = np.maximum(np.array(a0, dtype=float), 0.0) / sigma
    b = np.array(b0, dtype=float) / sigma
    if accelerate == "squarem":
        out = _squarem(op, theta, a, b, tol, max_iter, start, progress)
    elif accelerate == "auto":
        from .hybrid import solve_auto

        out = solve_auto(op, theta, a, b, tol=tol, max_iter=max_iter, start=start,
                         progress=progress, stop_se=stop_se)
    else:
        out = _plain(op, theta, a, b, tol, max_iter, start, progress)
    out.runtime_s = time.perf_counter() - start
    if op.gradient is not None:  # from the first pass: the reference of info["stationarity"]
        out.info["stationarity_reference"] = canonical_projected_norm(theta, a, *op.gradient)
    out.a = out.a * sigma
    out.b = out.b * sigma
    if not record_times:
        out.info.pop("time_history", None)
    used = precision if op.switched_to_float64 is None else "float32->float64"
    out.info.update(setup_s=start - setup_start, engine=engine, accelerate=accelerate or "none",
                    threads=op.n_threads, precision=used if engine == "fused" else "float64")
    if op.switched_to_float64 is not None:
        out.info["float64_from_iteration"] = op.switched_to_float64
    return out


def _plain(op, theta, a, b, tol, max_iter, start, progress=None):
    value = op.evaluate(theta, a, b, gradient=True)
    history, times = [value], [time.perf_counter() - start]
    while (status := _stop_status(history, op.updates, tol, max_iter)) is None:
        value = op.update()
        history.append(value)
        times.append(time.perf_counter() - start)
        if progress is not None:
            progress(op.updates, value)
    theta, a, b = op.point
    return SolverOutput(theta=theta, a=a, b=b, loss_history=history, n_iter=op.updates,
                        status=status, runtime_s=0.0, info={"time_history": times})


def _squarem(op, theta, a, b, tol, max_iter, start, progress=None):
    """SQUAREM-accelerated MM (:func:`squarem_cycles`) with the relative-loss rule."""
    history, times = [], []
    status = "max_iter"
    for value in squarem_cycles(op, theta, a, b, gradient=True):
        history.append(value)
        times.append(time.perf_counter() - start)
        if progress is not None and len(history) > 1:
            progress(op.updates, value)
        stop = _stop_status(history, op.updates, tol, max_iter)
        if stop is not None:
            status = stop
            break
    theta, a, b = op.point
    return SolverOutput(theta=theta.copy(), a=a.copy(), b=b.copy(), loss_history=history,
                        n_iter=op.updates, status=status, runtime_s=0.0,
                        info={"time_history": times, "outer_iterations": len(history) - 1})


def squarem_cycles(op, theta, a, b, gradient=False, evaluated=False):
    """SQUAREM (scheme S3) with step-length adaptation and a monotone safeguard.

    Yields the loss at ``(theta, a, b)`` and then after every cycle; the
    operator's current point is then the cycle's result.  ``F`` is the MM map.
    From ``p0``: ``p1 = F(p0)``, ``p2 = F(p1)``, the extrapolation ``p_ext``
    from ``r = p1 - p0`` and ``v = p2 - 2 p1 + p0``, projected onto ``a >= 0``;
    ``p_ext`` is kept when its loss does not exceed ``loss(p1)``, otherwise the
    cycle ends at ``p2``.  A cycle applies 2 MM maps (``op.updates``) and one
    pass that evaluates ``p_ext``.  ``gradient``: the first pass also leaves the
    gradient at the start in ``op.gradient``; ``evaluated``: the operator stands at
    ``(theta, a, b)`` already (no first pass).
    """
    n, j = op.shape

    def pack(t, aa, bb):
        return np.concatenate([t, aa, bb])

    def unpack(p):
        return p[:n], p[n:n + j], p[n + j:]

    yield op.value if evaluated else op.evaluate(theta, a, b, gradient=gradient)
    p0 = pack(*op.point)
    step_max = 1.0
    while True:
        value1 = op.update()                      # p1 = F(p0)
        p1 = pack(*op.point)
        op.update()                               # p2 = F(p1)
        at_p2 = op.state()
        p2 = pack(*op.point)
        r = p1 - p0
        v = p2 - 2.0 * p1 + p0
        rn, vn = np.linalg.norm(r), np.linalg.norm(v)
        alpha = -rn / vn if vn > 0 else -1.0
        alpha = max(min(alpha, -1.0), -step_max)
        p_ext = p0 - 2.0 * alpha * r + alpha * alpha * v
        p_ext[n:n + j] = np.maximum(p_ext[n:n + j], 0.0)
        value_ext = op.evaluate(*unpack(p_ext))
        if np.isfinite(value_ext) and value_ext <= value1:
            # accepted: continue from the extrapolated point
            p0, value = p_ext, value_ext
            if alpha == -step_max:
                step_max *= 4.0
        else:
            # safeguard: fall back to the plain double MM step
            step_max = max(1.0, step_max / 4.0)
            op.restore(at_p2)
            p0, value = p2, at_p2[1]
        yield value
