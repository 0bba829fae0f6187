"""The C engine's view of the data and the policy of its passes, and the one objective.

Every pass over the responses goes through here: the fused matrix (dense int8 or CSR,
:mod:`cbmm._fused`), how many threads a pass uses, when float32 per-entry arithmetic
is safe, and :class:`Objective`, loss (3) (plus a prior's penalty) with its gradient
and Fisher diagonal, each one multi-threaded pass.  cBMM's MM map
(:class:`cbmm.mm.MMOperator`), its quasi-Newton phase (:mod:`cbmm.hybrid`), the
gradient baselines (L-BFGS-B, Manopt), py-irt's loss history, the final measures of
every fit (:mod:`cbmm.model`, :mod:`cbmm.diagnostics`) all evaluate it this way, so all
optimise and are judged on the same objective.
"""

from __future__ import annotations

import os

import numpy as np

from .prior import Penalty

__all__ = ["FLOAT32_LIMIT", "PARALLEL_MIN_ENTRIES", "Objective", "available_cores",
           "dense_responses", "float32_safe", "fused_matrix", "row_blocks", "thread_count"]

#: Below this many stored cells a pass runs on one thread: starting a thread costs
#: about 20-60 us, more than it saves on a smaller pass.
PARALLEL_MIN_ENTRIES = 1 << 18

#: Largest |theta|, |a|, |b| (at sigma = 1) a float32 pass accepts: products stay below
#: 1e36, inside float32's range (3.4e38).
FLOAT32_LIMIT = 1e18


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


def float32_safe(*arrays) -> bool:
    """Whether every given array (None skipped) is finite with magnitudes at most
    :data:`FLOAT32_LIMIT`."""
    for values in arrays:
        if values is not None and values.size and not np.max(np.abs(values)) <= FLOAT32_LIMIT:
            return False
    return True


def fused_matrix(responses):
    """The C engine's view of a response matrix, checked once.

    Parameters
    ----------
    responses : Responses, ndarray of int8 (N, J) or cbmm._fused.Matrix
        Dense (``y``) or sparse (CSR) responses in the +-1/0 coding.

    Returns
    -------
    cbmm._fused.Matrix
    """
    from . import _fused

    if isinstance(responses, _fused.Matrix):
        return responses
    if getattr(responses, "storage", None) == "sparse":
        return _fused.Matrix(responses.indptr, responses.indices, responses.values,
                             int(responses.n_items))
    y = responses.y if hasattr(responses, "storage") else responses
    if not (isinstance(y, np.ndarray) and y.dtype == np.int8 and y.ndim == 2):
        raise TypeError("responses must be a cbmm.Responses or a 2-D int8 array in the +-1/0 "
                        f"coding, got {type(y).__name__}"
                        + (f" of dtype {y.dtype}" if isinstance(y, np.ndarray) else ""))
    if y is responses and ((y < -1) | (y > 1)).any():  # a Responses was checked when made
        row, column = np.argwhere((y < -1) | (y > 1))[0]
        raise ValueError(f"responses: value {y[row, column]} at row {row}, column {column}; an "
                         "int8 array is read in the +-1/0 coding (1 correct, -1 wrong, 0 "
                         "missing): cbmm.as_responses reads 0/1 answers")
    return _fused.Matrix(np.ascontiguousarray(y))


def dense_responses(responses) -> np.ndarray:
    """The int8 N x J matrix of a Responses (a sparse one is expanded) or an int8 array."""
    if getattr(responses, "storage", None) == "sparse":
        n = responses.indptr.size - 1
        y = np.zeros((n, int(responses.n_items)), dtype=np.int8)
        rows = np.repeat(np.arange(n), np.diff(responses.indptr))
        y[rows, responses.indices] = responses.values
        return y
    y = responses.y if hasattr(responses, "storage") else responses
    return np.asarray(y, dtype=np.int8)


def row_blocks(n_rows: int, n_cols: int, target_cells: int = 1 << 20):
    """Yield row slices whose blocks hold about ``target_cells`` entries."""
    step = max(1, target_cells // max(n_cols, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


class Objective:
    """Loss (3), plus a prior's penalty, on one response matrix (checked once).

    In the raw parametrisation ``(theta, a, b)`` at temperature ``sigma``; the penalty is
    on ``(theta, a / sigma, b / sigma)`` (:class:`cbmm.prior.Penalty`).  With
    ``z_ij = -y_ij x_ij / sigma`` on the observed set Omega: loss ``= sum_Omega
    softplus(z_ij)``, ``G_ij = -(y_ij / sigma) expit(z_ij)`` (zero off Omega), gradients
    ``G a``, ``G^T theta``, ``G^T 1``; each call is one fused float64 pass.

    Parameters
    ----------
    responses : Responses, ndarray of int8 (N, J) or cbmm._fused.Matrix
        Responses in the +-1/0 coding (0 = missing), dense or sparse (CSR).
    sigma : float
        Temperature.
    penalty : cbmm.prior.Penalty, optional
        A prior: MAP.
    threads : int, optional
        Threads of the passes (:func:`thread_count`).

    Attributes
    ----------
    matrix : cbmm._fused.Matrix
    shape : tuple
        ``(N, J)``.
    y : ndarray of int8 or None
        The dense matrix (None for sparse storage or a bare Matrix).
    threads : int
    evaluations : int
        Calls of :meth:`loss_and_gradient` so far.
    """

    def __init__(self, responses, sigma: float = 1.0, penalty: Penalty | None = None,
                 threads=None):
        self.matrix = fused_matrix(responses)
        self.y = getattr(responses, "y", responses if isinstance(responses, np.ndarray) else None)
        self.sigma = float(sigma)
        self.penalty = penalty or Penalty()
        self.shape = self.matrix.shape
        self.threads = thread_count(self.matrix.stored, self.shape[0], threads)
        self.evaluations = 0

    def _scaled(self, theta, a, b):
        return theta, np.asarray(a) / self.sigma, np.asarray(b) / self.sigma

    def value(self, theta, a, b) -> float:
        """Loss (3) plus the penalty at ``(theta, a, b)``."""
        value = self.matrix.loss(*_point(theta, a, b), 1.0 / self.sigma, self.threads)
        return value + self.penalty.value(*self._scaled(theta, a, b))

    def loss_and_gradient(self, theta, a, b):
        """Loss (3) plus the penalty, and its gradient with respect to ``(theta, a, b)``.

        Returns
        -------
        value : float
        grad_theta : ndarray (N,)
        grad_a, grad_b : ndarray (J,)
        """
        n, j = self.shape
        grads = np.empty(n), np.empty(j), np.empty(j)
        value = self.matrix.loss_gradient(*_point(theta, a, b), 1.0 / self.sigma,
                                          self.threads, *grads)
        self.evaluations += 1
        if self.penalty.active:
            s = self.sigma
            scaled = self._scaled(theta, a, b)
            value += self.penalty.value(*scaled)
            g_theta, g_a, g_b = self.penalty.gradient(*scaled)
            grads = (grads[0] + g_theta, grads[1] + g_a / s, grads[2] + g_b / s)
        return (value, *grads)

    def curvature(self, theta, a, b):
        """Diagonal of the Fisher information, plus the penalty's curvature, with respect to
        ``(theta, a / sigma, b / sigma)``: with ``q = Phi (1 - Phi)`` on the observed cells,
        ``q (a / sigma)^2`` summed per row, ``q theta^2`` and ``q`` per column."""
        n, j = self.shape
        out = np.empty(n), np.empty(j), np.empty(j)
        self.matrix.curvature(*_point(*self._scaled(theta, a, b)), 1.0, self.threads, *out)
        theta_precision, item_precision = self.penalty.curvature()
        if self.penalty.active:
            out = (out[0] + theta_precision, out[1] + item_precision, out[2] + item_precision)
        return out


def _point(theta, a, b):
    return tuple(np.ascontiguousarray(v, dtype=float) for v in (theta, a, b))
