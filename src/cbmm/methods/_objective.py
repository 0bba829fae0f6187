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

from ..model import PRIOR_SD, PRIORS, Penalty, fused_matrix
from ..registry import Option
from ..solver import thread_count

__all__ = ["Objective", "PRIOR_OPTIONS", "penalty_of"]

#: The options of every method that minimises loss (3): ML (the paper) or MAP.
PRIOR_OPTIONS = {
    "prior": Option("str", "normal", choices=PRIORS,
                    doc="none: maximum likelihood, loss (3) as in the paper; normal: MAP with "
                        "theta ~ N(0,1), a/sigma ~ N+(0,prior_sd^2), b/sigma ~ N(0,prior_sd^2), "
                        "which has a finite optimum whatever the data"),
    "prior_sd": Option("float", PRIOR_SD, exclusive_minimum=0,
                       doc="prior standard deviation of a/sigma and b/sigma (logits) with "
                           "prior=normal"),
}


def penalty_of(method, options) -> Penalty:
    """The :class:`cbmm.model.Penalty` a method fits with its checked ``options``: none
    unless it declares the shared :data:`PRIOR_OPTIONS`."""
    if method.options.get("prior") is not PRIOR_OPTIONS["prior"]:
        return Penalty()
    return Penalty.of(options["prior"], options["prior_sd"])


class Objective:
    """Loss (3) and gradient on a fixed response matrix, checked once.

    Parameters
    ----------
    responses : Responses or ndarray of int8 (N, J)
        Responses in the +-1/0 coding (0 = missing), dense or sparse (CSR).
    sigma : float
        Temperature.
    penalty : cbmm.model.Penalty, optional
        A prior (on ``theta``, ``a / sigma`` and ``b / sigma``) added to the loss: MAP.

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

    def __init__(self, responses, sigma: float = 1.0, penalty: Penalty | None = None):
        self.matrix = fused_matrix(responses)
        self.penalty = penalty or Penalty()
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
        if self.penalty.active:  # the prior is on a / sigma and b / sigma
            s = self.sigma
            value += self.penalty.value(theta, np.asarray(a) / s, np.asarray(b) / s)
            g_theta, g_a, g_b = self.penalty.gradient(theta, np.asarray(a) / s, np.asarray(b) / s)
            grads = (grads[0] + g_theta, grads[1] + g_a / s, grads[2] + g_b / s)
        return (value, *grads)
