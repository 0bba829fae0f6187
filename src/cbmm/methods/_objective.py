"""Loss (3) and its analytic gradient in one fused pass, for the gradient methods.

L-BFGS-B, Manopt and cBMM's quasi-Newton phase (``accelerate="auto"``) need
``(loss, d loss / d(theta, a, b))`` at every trial point.  Here they come from
one multi-threaded pass of the C extension :mod:`cbmm._fused` over the int8
responses, dense or CSR (no N x J float64 temporaries; the same vectorised
exp/log1p as the cBMM passes, in double precision), so that the methods are
timed with a competent objective rather than a slow one.  With
``z_ij = -y_ij x_ij / sigma`` on the observed set Omega:

* loss ``= sum_Omega softplus(z_ij)``;
* ``G_ij = -(y_ij / sigma) expit(z_ij)`` (zero off Omega);
* gradients ``G a``, ``G^T theta`` and ``G^T 1``.
"""

from __future__ import annotations

import numpy as np

from ..model import fused_matrix
from ..solver import thread_count

__all__ = ["Objective"]


class Objective:
    """Loss (3) and gradient on a fixed response matrix, checked once.

    Parameters
    ----------
    responses : Responses or ndarray of int8 (N, J)
        Responses in the +-1/0 coding (0 = missing), dense or sparse (CSR).
    sigma : float
        Temperature.

    Attributes
    ----------
    shape : tuple
        ``(N, J)``.
    y : ndarray of int8 or None
        The dense matrix (None for sparse storage).
    evaluations : int
        Calls of :meth:`loss_and_gradient` so far.

    Notes
    -----
    Threads follow cBMM's policy (:func:`cbmm.solver.thread_count`): below
    :data:`cbmm.solver.PARALLEL_MIN_ENTRIES` stored cells one thread is
    faster, since starting threads costs more than the pass itself.
    """

    def __init__(self, responses, sigma: float = 1.0):
        self.matrix = fused_matrix(responses)
        self.y = getattr(responses, "y", responses if isinstance(responses, np.ndarray) else None)
        self.sigma = float(sigma)
        self.shape = self.matrix.shape
        self._threads = thread_count(self.matrix.stored, self.shape[0])
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
        grads = np.empty(n), np.empty(j), np.empty(j)
        value = self.matrix.loss_gradient(
            *(np.ascontiguousarray(v, dtype=float) for v in (theta, a, b)), 1.0 / self.sigma,
            self._threads, *grads)
        self.evaluations += 1
        return (value, *grads)
