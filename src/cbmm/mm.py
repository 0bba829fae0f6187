"""The cBMM map (the paper's Algorithm 1, one iteration) and its SQUAREM acceleration.

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
needs the row sums ``W a_new`` at the old point.  The driver with the stopping
rules is :mod:`cbmm.solver`.

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

import numpy as np

from .engine import Objective, dense_responses, float32_safe, row_blocks
from .model import expit, softplus
from .prior import Penalty

__all__ = ["MMOperator", "mm_step_numpy", "squarem_cycles"]

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
        inputs exceed :data:`cbmm.engine.FLOAT32_LIMIT` or whose loss is not finite is
        redone in float64, and the operator stays in float64
        (``switched_to_float64`` records the update count).
    threads : int, optional
        Threads of the fused passes (see :func:`cbmm.engine.thread_count`).
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
            # loss, gradient and curvature of the quasi-Newton phase and the final measures
            self.objective = Objective(responses, 1.0, self.penalty, threads)
            self.matrix = self.objective.matrix
            self.shape = self.matrix.shape
            self.n_threads = self.objective.threads
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
        """Loss (3) plus the penalty at sigma = 1 and its gradient, float64, one pass (the
        point is not kept; :meth:`cbmm.engine.Objective.loss_and_gradient`)."""
        if self.engine == "fused":
            return self.objective.loss_and_gradient(theta, a, b)
        value, *grads = _gradient_numpy(self.y, theta, a, b)
        if self.penalty.active:
            value += self.penalty.value(theta, a, b)
            grads = [g + p for g, p in zip(grads, self.penalty.gradient(theta, a, b))]
        return (value, *grads)

    def curvature(self, theta, a, b):
        """Diagonal of the Fisher information at sigma = 1, plus the penalty's curvature
        (:meth:`cbmm.engine.Objective.curvature`; NumPy: :func:`_curvature_numpy`)."""
        if self.engine == "fused":
            return self.objective.curvature(theta, a, b)
        out = _curvature_numpy(self.y, theta, a, b)
        theta_precision, item_precision = self.penalty.curvature()
        return out[0] + theta_precision, out[1] + item_precision, out[2] + item_precision

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
        if self.single and not float32_safe(theta, a, b, a_new, b_new):
            self._switch()
        for _ in range(2):
            if a_new is None:
                value = self.matrix.evaluate(theta, a, b, self._stats, self.single,
                                             self.n_threads, row_sums)
            else:
                value = self.matrix.mm_step(theta, a, b, a_new, b_new, theta_new, self._stats,
                                            self.single, self.n_threads,
                                            4.0 * self.penalty.theta_precision, row_sums)
            if not self.single or (np.isfinite(value) and float32_safe(theta_new)):
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


def squarem_cycles(op, theta, a, b, gradient=False, evaluated=False, max_updates=None):
    """SQUAREM (scheme S3) with step-length adaptation and a monotone safeguard.

    Yields the loss at ``(theta, a, b)`` and then after every cycle; the
    operator's current point is then the cycle's result.  ``F`` is the MM map.
    From ``p0``: ``p1 = F(p0)``, ``p2 = F(p1)``, the extrapolation ``p_ext``
    from ``r = p1 - p0`` and ``v = p2 - 2 p1 + p0``, projected onto ``a >= 0``;
    ``p_ext`` is kept when its loss does not exceed ``loss(p1)``, otherwise the
    cycle ends at ``p2``.  A cycle applies 2 MM maps (``op.updates``) and one
    pass that evaluates ``p_ext``.  ``gradient``: the first pass also leaves the
    gradient at the start in ``op.gradient``; ``evaluated``: the operator stands at
    ``(theta, a, b)`` already (no first pass); ``max_updates``: where one MM map is left
    of them, a plain MM step instead of a cycle (a fit's ``max_iter`` counts MM maps).
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
        if max_updates is not None and op.updates + 2 > max_updates:
            value = op.update()                   # the last map the budget allows
            p0 = pack(*op.point)
            yield value
            continue
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
