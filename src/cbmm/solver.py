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
every step needs only the column sums ``W^T theta``, ``W^T 1`` and the row sums
``W a``, i.e. O(|Omega|) work and no N x J float64 temporaries.  The stopping
rule is the paper's: relative change of the loss between iterations < tol.

Two engines compute the same iteration:

* ``"numpy"``: the plain reference implementation, float64, row blocks;
* ``"fused"`` (default): two fused, multi-threaded passes per iteration over
  the int8 responses (C extension :mod:`cbmm._fused`, POSIX threads started
  per pass, so a process may fork at any time); the loss is
  evaluated in the same pass as ``W`` with a vectorisable exp/log1p (no
  per-entry libm calls).

``accelerate="squarem"`` wraps the MM map in SQUAREM extrapolation
(Varadhan & Roland, 2008) with projection onto ``a >= 0`` and a monotonicity
safeguard (an extrapolated point is kept only if its loss does not exceed that
of the plain MM step), which reaches the optimum in far fewer sweeps.
"""

from __future__ import annotations

import os
import time

import numpy as np
from scipy.special import expit

from .model import row_blocks, softplus
from .result import SolverOutput

__all__ = ["solve_cbmm", "mm_step_numpy", "MMOperator"]


# ---------------------------------------------------------------------------
# Reference engine (plain NumPy)
# ---------------------------------------------------------------------------

def _column_stats_numpy(y, theta, a, b, sigma):
    """Loss at (theta, a, b) and the column statistics of one MM iteration."""
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
        z = -yb * (np.outer(theta[rows], a) + b) / sigma
        total += float(np.sum(softplus(z) * mask))
        w = yb * expit(z)
        t = theta[rows]
        w_theta += t @ w
        w_sum += w.sum(axis=0)
        n_obs += mask.sum(axis=0)
        theta_sum += t @ mask
        theta_sq += (t * t) @ mask
    return total, w_theta, w_sum, n_obs, theta_sum, theta_sq


def _item_update(a, b, w_theta, w_sum, n_obs, theta_sum, theta_sq, sigma):
    """a-step then b-step (exact block minimisers over observed models)."""
    c = 4.0 * sigma
    safe_sq = np.where(theta_sq > 0, theta_sq, 1.0)
    a_new = np.where(theta_sq > 0, np.maximum(0.0, a + c * w_theta / safe_sq), a)
    safe_n = np.maximum(n_obs, 1.0)
    b_new = b + ((a - a_new) * theta_sum + c * w_sum) / safe_n
    return a_new, b_new


def mm_step_numpy(y, theta, a, b, sigma=1.0):
    """One cBMM iteration, plain NumPy reference.

    Returns
    -------
    loss : float
        Loss (3) at the input ``(theta, a, b)``.
    theta, a, b : ndarray
        Parameters after the a-, b- and theta-steps.
    """
    total, *stats = _column_stats_numpy(y, theta, a, b, sigma)
    return (total, *_update_numpy(y, theta, a, b, stats, sigma))


def _update_numpy(y, theta, a, b, stats, sigma):
    a_new, b_new = _item_update(a, b, *stats, sigma)
    c = 4.0 * sigma
    n, j = y.shape
    theta_new = np.empty(n)
    for rows in row_blocks(n, j):
        yb = y[rows].astype(np.float64)
        mask = yb != 0
        z = -yb * (np.outer(theta[rows], a) + b) / sigma
        w = yb * expit(z)
        # sum_j (Y~_ij - b_new_j) a_new_j with Y~ = theta_i a_j + b_j + 4 sigma W_ij
        numer = (theta[rows] * (mask @ (a * a_new)) + mask @ ((b - b_new) * a_new)
                 + c * (w @ a_new))
        denom = mask @ (a_new * a_new)
        theta_new[rows] = np.where(denom > 0, numer / np.where(denom > 0, denom, 1.0),
                                   theta[rows])
    return theta_new, a_new, b_new


# ---------------------------------------------------------------------------
# Fused engine (C extension)
# ---------------------------------------------------------------------------

#: Below this many entries the fused passes run on one thread: for small
#: matrices starting the thread team costs more than it saves.
PARALLEL_MIN_ENTRIES = 1 << 19


class MMOperator:
    """The cBMM map, split into its two passes over the responses.

    :meth:`evaluate` returns the loss at ``(theta, a, b)`` and prepares the
    iteration from there; :meth:`update` then applies the a-, b- and
    theta-steps.  Splitting lets the solver skip the second pass once the
    stopping rule fires.  Work buffers are allocated once; the fused engine
    keeps ``W`` as float32 (4 bytes per entry, 106 MB for 2211 x 12032) so the
    theta-step needs no second exp per entry.
    """

    def __init__(self, y, sigma=1.0, engine="fused", precision="float64", threads=None):
        if engine not in ("fused", "numpy"):
            raise ValueError(f"engine must be 'fused' or 'numpy', got {engine!r}")
        if precision not in ("float64", "float32"):
            raise ValueError(f"precision must be 'float64' or 'float32', got {precision!r}")
        self.y = np.ascontiguousarray(y, dtype=np.int8)
        self.sigma = float(sigma)
        self.engine = engine
        self.precision = precision
        n, j = self.y.shape
        self.fully_observed = bool(np.count_nonzero(self.y) == self.y.size)
        self._point = None
        if engine == "fused":
            from . import _fused

            self._fused = _fused
            self.n_threads = thread_count(self.y.size, n, threads)
            shape = (self.n_threads, j)
            self._acc_wt = np.empty(shape)
            self._acc_w = np.empty(shape)
            stats_shape = (1, 1) if self.fully_observed else shape
            self._acc_n = np.empty(stats_shape)
            self._acc_t = np.empty(stats_shape)
            self._acc_tt = np.empty(stats_shape)
            self._loss_parts = np.empty(self.n_threads)
            self._w = np.empty((n, j), dtype=np.float32)

    def evaluate(self, theta, a, b) -> float:
        """Loss (3) at ``(theta, a, b)``; remembers the point for :meth:`update`."""
        if self.engine == "numpy":
            stats = _column_stats_numpy(self.y, theta, a, b, self.sigma)
            self._point = (theta, a, b, stats[1:])
            return stats[0]
        n, j = self.y.shape
        ft = self.precision
        self._fused.column_pass(self.y, n, j, theta.astype(ft), theta, a.astype(ft),
                                b.astype(ft), 1.0 / self.sigma, self.n_threads,
                                not self.fully_observed, self._acc_wt, self._acc_w, self._acc_n,
                                self._acc_t, self._acc_tt, self._loss_parts, self._w)
        if self.fully_observed:
            stats = (self._acc_wt.sum(axis=0), self._acc_w.sum(axis=0), np.full(j, float(n)),
                     np.full(j, theta.sum()), np.full(j, theta @ theta))
        else:
            stats = (self._acc_wt.sum(axis=0), self._acc_w.sum(axis=0), self._acc_n.sum(axis=0),
                     self._acc_t.sum(axis=0), self._acc_tt.sum(axis=0))
        self._point = (theta, a, b, stats)
        return float(self._loss_parts.sum())

    def update(self):
        """a-, b- and theta-steps from the point of the last :meth:`evaluate`."""
        theta, a, b, stats = self._point
        if self.engine == "numpy":
            return _update_numpy(self.y, theta, a, b, stats, self.sigma)
        a_new, b_new = _item_update(a, b, *stats, self.sigma)
        theta_new = np.empty_like(theta)
        n, j = self.y.shape
        self._fused.row_pass(self.y, n, j, self._w, theta, a, b, a_new, b_new, 4.0 * self.sigma,
                             not self.fully_observed, float(a @ a_new), float((b - b_new) @ a_new),
                             float(a_new @ a_new), theta_new, self.n_threads)
        return theta_new, a_new, b_new

    def step(self, theta, a, b):
        """One MM iteration; returns ``(loss at input, theta, a, b)``."""
        value = self.evaluate(theta, a, b)
        return (value, *self.update())


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


#: With ``precision="auto"`` the float32 kernels are used when tol is at least
#: this large: their loss evaluations carry relative errors of about 1e-7,
#: two orders of magnitude below such a tolerance.
FLOAT32_MIN_TOL = 1e-5


def solve_cbmm(y, theta0, a0, b0, *, sigma=1.0, tol=1e-4, max_iter=1000,
               engine="fused", precision="auto", accelerate="none", record_times=True,
               progress=None, threads=None):
    """Run cBMM from ``(theta0, a0, b0)``.

    Parameters
    ----------
    y : ndarray of int8 (N, J)
        Responses in the +-1/0 coding.
    theta0, a0, b0 : ndarray
        Starting point (``a0 >= 0``).
    sigma : float
        Temperature.
    tol : float
        Stop when the relative change of the loss between iterations is < tol.
    max_iter : int
        Maximum number of MM iterations (MM maps evaluated, also with SQUAREM).
    engine : {"fused", "numpy"}
        Fused kernels or the plain NumPy reference.
    precision : {"auto", "float64", "float32"}
        Arithmetic of the fused engine's per-entry work (exp, log1p, W).
        Parameters and all sums stay float64.  ``"auto"``: float32 when
        ``tol >= 1e-5`` (about 3x faster; its loss evaluations are accurate
        to ~1e-7 relative), float64 otherwise.  The loss reported by
        :func:`cbmm.fit` is always recomputed in float64.
    accelerate : {"none", "squarem"}
        Plain Algorithm 1 (default) or SQUAREM-accelerated MM.
    record_times : bool
        Store the elapsed seconds at each loss evaluation in
        ``info["time_history"]``.
    progress : callable, optional
        Called as ``progress(iteration, loss)`` after every iteration.
    threads : int, optional
        Threads of the fused passes; default :func:`available_cores` (one for
        matrices below :data:`PARALLEL_MIN_ENTRIES` entries).

    Returns
    -------
    SolverOutput
        ``loss_history[k]`` is the loss after k iterations (entry 0: start).
    """
    if accelerate not in (None, "none", "squarem"):
        raise ValueError(f"accelerate must be 'none' or 'squarem', got {accelerate!r}")
    if precision == "auto":
        precision = "float32" if tol >= FLOAT32_MIN_TOL else "float64"
    setup_start = time.perf_counter()
    op = MMOperator(y, sigma=sigma, engine=engine, precision=precision, threads=threads)
    start = time.perf_counter()
    theta = np.array(theta0, dtype=float)
    a = np.maximum(np.array(a0, dtype=float), 0.0)
    b = np.array(b0, dtype=float)
    if accelerate == "squarem":
        out = _squarem(op, theta, a, b, tol, max_iter, start, progress)
    else:
        out = _plain(op, theta, a, b, tol, max_iter, start, progress)
    out.runtime_s = time.perf_counter() - start
    if not record_times:
        out.info.pop("time_history", None)
    out.info.update(setup_s=start - setup_start, engine=engine, accelerate=accelerate or "none",
                    threads=getattr(op, "n_threads", 1),
                    precision=precision if engine == "fused" else "float64")
    return out


def _plain(op, theta, a, b, tol, max_iter, start, progress=None):
    history, times = [], []
    status = "max_iter"
    n_iter = 0
    while True:
        value = op.evaluate(theta, a, b)
        history.append(value)
        times.append(time.perf_counter() - start)
        if progress is not None and n_iter:
            progress(n_iter, value)
        if not np.isfinite(value):
            status = "failed: non-finite loss"
            break
        if len(history) > 1 and _relative_change(history[-2], history[-1]) < tol:
            status = "converged"
            break
        if n_iter >= max_iter:
            break
        theta, a, b = op.update()
        n_iter += 1
    return SolverOutput(theta=theta, a=a, b=b, loss_history=history, n_iter=n_iter,
                        status=status, runtime_s=0.0, info={"time_history": times})


def _squarem(op, theta, a, b, tol, max_iter, start, progress=None):
    """SQUAREM (scheme S3) with step-length adaptation and a monotone safeguard."""
    n, j = op.y.shape

    def pack(t, aa, bb):
        return np.concatenate([t, aa, bb])

    def unpack(p):
        return p[:n], p[n:n + j], p[n + j:]

    p0 = pack(theta, a, b)
    history, times = [], []
    evaluations = 0
    step_max = 1.0
    status = "max_iter"
    value0, *f1 = op.step(*unpack(p0))
    evaluations += 1
    history.append(value0)
    times.append(time.perf_counter() - start)
    while evaluations < max_iter:
        p1 = pack(*f1)
        value1, *f2 = op.step(*unpack(p1))
        evaluations += 1
        p2 = pack(*f2)
        r = p1 - p0
        v = p2 - 2.0 * p1 + p0
        rn, vn = np.linalg.norm(r), np.linalg.norm(v)
        alpha = -rn / vn if vn > 0 else -1.0
        alpha = max(min(alpha, -1.0), -step_max)
        p_ext = p0 - 2.0 * alpha * r + alpha * alpha * v
        p_ext[n:n + j] = np.maximum(p_ext[n:n + j], 0.0)
        value_ext, *f_ext = op.step(*unpack(p_ext))
        evaluations += 1
        if np.isfinite(value_ext) and value_ext <= value1:
            # accepted: continue from the extrapolated point
            p0, value_new, f1 = p_ext, value_ext, f_ext
            if alpha == -step_max:
                step_max *= 4.0
        else:
            # safeguard: fall back to the plain double MM step
            step_max = max(1.0, step_max / 4.0)
            value_new, *f1 = op.step(*unpack(p2))
            evaluations += 1
            p0 = p2
        history.append(value_new)
        times.append(time.perf_counter() - start)
        if progress is not None:
            progress(evaluations, value_new)
        if not np.isfinite(value_new):
            status = "failed: non-finite loss"
            break
        if _relative_change(history[-2], history[-1]) < tol:
            status = "converged"
            break
    theta, a, b = unpack(p0)
    return SolverOutput(theta=theta.copy(), a=a.copy(), b=b.copy(), loss_history=history,
                        n_iter=evaluations, status=status, runtime_s=0.0,
                        info={"time_history": times, "outer_iterations": len(history) - 1})
