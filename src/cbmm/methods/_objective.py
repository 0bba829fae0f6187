"""Loss (3) and its analytic gradient in one fused pass, for the gradient baselines.

L-BFGS-B and Manopt need ``(loss, d loss / d(theta, a, b))`` at every trial
point.  :func:`cbmm.model.loss_and_gradient` is the float64 NumPy reference;
here the same quantities come from one multi-threaded pass of the C extension
:mod:`cbmm._fused` over the int8 responses (no N x J float64 temporaries; the
same vectorised exp/log1p as the cBMM passes, in double precision), so that
the baselines are timed with a competent objective rather than a slow one.
With ``z_ij = -y_ij x_ij / sigma`` on the observed set Omega:

* loss ``= sum_Omega softplus(z_ij)``;
* ``G_ij = -(y_ij / sigma) expit(z_ij)`` (zero off Omega);
* gradients ``G a``, ``G^T theta`` and ``G^T 1``.
"""

from __future__ import annotations

import numpy as np

from .. import _fused
from ..solver import thread_count

__all__ = ["Objective"]


class Objective:
    """Loss (3) and gradient on a fixed response matrix, with work buffers allocated once.

    Parameters
    ----------
    y : ndarray of int8 (N, J)
        Responses in the +-1/0 coding (0 = missing).
    sigma : float
        Temperature.

    Notes
    -----
    Threads follow cBMM's policy (:data:`cbmm.solver.PARALLEL_MIN_ENTRIES`):
    below that many entries one thread is faster, since starting a thread team
    per evaluation costs more than the pass itself.  ``evaluations`` counts
    the calls of :meth:`loss_and_gradient`.
    """

    def __init__(self, y, sigma: float = 1.0):
        self.y = np.ascontiguousarray(y, dtype=np.int8)
        self.sigma = float(sigma)
        n, j = self.y.shape
        self.shape = (n, j)
        self._chunks = thread_count(self.y.size, n)
        self._work = np.empty((self._chunks, j))
        self._part_a = np.empty((self._chunks, j))
        self._part_b = np.empty((self._chunks, j))
        self._loss_parts = np.empty(self._chunks)
        self.evaluations = 0

    def loss_and_gradient(self, theta, a, b):
        """Loss (3) at ``(theta, a, b)`` and its gradient.

        Returns
        -------
        value : float
        grad_theta : ndarray (N,)
        grad_a, grad_b : ndarray (J,)
        """
        n, j = self.shape
        grad_theta = np.empty(n)
        _fused.loss_gradient(self.y, n, j, np.ascontiguousarray(theta, dtype=float),
                             np.ascontiguousarray(a, dtype=float),
                             np.ascontiguousarray(b, dtype=float), 1.0 / self.sigma,
                             self._chunks, self._work, grad_theta, self._part_a, self._part_b,
                             self._loss_parts)
        self.evaluations += 1
        return (float(self._loss_parts.sum()), grad_theta, self._part_a.sum(axis=0),
                self._part_b.sum(axis=0))
