"""Initial values shared by every method (the paper's appendix, "Hyperparameters").

``theta_i ~ N(0, 1)``, ``log a_j ~ N(0, s^2)``, ``b_j ~ N(0, s^2)`` drawn in
that order from ``numpy.random.default_rng(seed)``; ``s^2`` is ``init_scale``
(1 by default, 1..5 in the stability study).

With ``s^2 = 5`` some ``a_j`` are e^7 or more, so the start saturates the
logistic link (|x/sigma| in the hundreds).  There the MM majorizer is very
loose and every method wastes many iterations crawling out.  We therefore
shrink ``a`` and ``b`` together by one factor ``c = MAX_START_LOGIT /
max|X0/sigma|`` whenever ``max|X0/sigma|`` exceeds ``MAX_START_LOGIT`` (= 10).
This leaves the rank order of theta, a and b untouched (the paper's
equivalence class) and is applied to the initial values of every method alike.
"""

from __future__ import annotations

import numpy as np

__all__ = ["initial_values", "MAX_START_LOGIT"]

#: Largest |x_ij / sigma| allowed at the start (logit units).
MAX_START_LOGIT = 10.0


def initial_values(n_models: int, n_items: int, *, seed=0, init_scale: float = 1.0,
                   sigma: float = 1.0):
    """Draw the shared starting point ``(theta0, a0, b0)``.

    Parameters
    ----------
    n_models, n_items : int
        N and J.
    seed : int or numpy.random.Generator
        Seed of the draw; the same seed gives the same start for every method.
    init_scale : float
        Variance ``s^2`` of ``log a`` and ``b``.
    sigma : float
        Temperature, used for the rescaling to ``max|X0/sigma| <= 10``.

    Returns
    -------
    theta0 : ndarray (N,)
    a0, b0 : ndarray (J,)
    """
    if init_scale <= 0:
        raise ValueError(f"init_scale must be > 0, got {init_scale}")
    rng = np.random.default_rng(seed)
    theta0 = rng.standard_normal(n_models)
    sd = np.sqrt(init_scale)
    a0 = np.exp(sd * rng.standard_normal(n_items))
    b0 = sd * rng.standard_normal(n_items)
    # X is linear in theta, so max_ij |x_ij| is reached at theta's extremes.
    extreme = np.maximum(np.abs(theta0.max() * a0 + b0), np.abs(theta0.min() * a0 + b0))
    largest = extreme.max() / sigma
    if largest > MAX_START_LOGIT:
        shrink = MAX_START_LOGIT / largest
        a0 *= shrink
        b0 *= shrink
    return theta0, a0, b0
