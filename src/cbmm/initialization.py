"""Starting points shared by every method.

:func:`spectral_start` is the library's default: deterministic and data-driven, from
the leading singular vectors of the centred response matrix.  :func:`initial_values`
is the paper's random start (its appendix, "Hyperparameters"):
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

from .model import check_sigma

__all__ = ["initial_values", "spectral_start", "MAX_START_LOGIT", "START_SCALES"]

#: Largest |x_ij / sigma| allowed at the start (logit units).
MAX_START_LOGIT = 10.0

#: Multipliers of the spectral start's discriminations tried by :func:`spectral_start`
#: (the linearisation ``E[y] ~ x / 2`` underestimates large logits).
START_SCALES = (0.5, 1.0, 1.5, 2.0, 3.0)


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
    sigma = check_sigma(sigma)
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


def spectral_start(responses, *, sigma: float = 1.0, penalty=None):
    """A deterministic, data-driven start from the leading singular vectors of the data.

    With ``y`` in the +-1 coding (0 missing) and ``ybar_j`` item j's mean over its
    observed models, the centred matrix ``Z = M o (Y - 1 ybar^T) / p`` (``M`` the
    observed mask, ``p`` the observed share) has ``E[Z] ~ 2 tanh`` of the logits minus
    their item means, about ``(theta a^T) / 2`` for moderate logits.  Its leading
    singular triplet ``(s, u, v)``, found by randomised subspace iteration (passes over
    the data in blocks, float32, no dense float copy), gives

    * ``theta0``: ``u`` standardised (mean 0, sd 1);
    * its sign: the one whose ``v`` puts the larger share of its energy on positive
      entries, since ``a >= 0`` keeps only those (on data whose items all discriminate
      the right way this is also the sign under which ``theta0`` rises with accuracy;
      where many items discriminate the wrong way, it picks the side with more signal);
    * ``a0 = c max(0, 2 s sd(u) v / sigma) sigma`` and ``b0 = sigma logit(p_j)``, ``p_j``
      item j's share correct with half a success and half a failure added, and ``c``
      the multiplier in :data:`START_SCALES` with the lowest loss (3) plus ``penalty``.

    Parameters
    ----------
    responses : Responses
        Dense or sparse (CSR) responses.
    sigma : float
        Temperature.
    penalty : cbmm.model.Penalty, optional
        The prior of the fit (for the choice of ``c``).

    Returns
    -------
    theta0 : ndarray (N,)
    a0, b0 : ndarray (J,)
    """
    from .model import loss
    from .prior import Penalty

    penalty = penalty or Penalty()
    n, j = responses.shape
    counts = responses._counts()
    seen = counts.col_obs.astype(float)
    correct = counts.col_cor.astype(float)
    ybar = np.where(seen > 0, (2.0 * correct - seen) / np.maximum(seen, 1.0), 0.0)
    product = _centred_products(responses, ybar, counts.row_obs.sum() / (n * j))
    u, v, s = _leading_triplet(product, n, j)
    if np.sum(np.maximum(-v, 0.0) ** 2) > np.sum(np.maximum(v, 0.0) ** 2):
        u, v = -u, -v
    spread = u.std()
    theta0 = (u - u.mean()) / spread if spread > 0 else np.zeros(n)
    slope = np.maximum(0.0, 2.0 * s * spread * v)
    share = (correct + 0.5) / (seen + 1.0)
    b0 = sigma * np.log(share / (1.0 - share))

    def objective(c):
        return loss(theta0, c * sigma * slope, b0, responses, sigma) \
            + penalty.value(theta0, c * slope, b0 / sigma)

    best = min(START_SCALES, key=objective)
    return theta0, best * sigma * slope, b0


def _centred_products(responses, ybar, observed_share):
    """``(Z @ V, Z.T @ U)`` for the centred, rescaled matrix of :func:`spectral_start`."""
    from .engine import row_blocks

    n, j = responses.shape
    full = observed_share == 1.0
    if responses.storage == "sparse":
        import scipy.sparse

        y = scipy.sparse.csr_array((responses.values.astype(np.float32), responses.indices,
                                    responses.indptr), shape=(n, j))
        mask = abs(y)

        def times(v):
            return (y @ v - mask @ (ybar[:, None] * v)) / observed_share

        def times_t(u):
            return (y.T @ u - ybar[:, None] * (mask.T @ u)) / observed_share

        return times, times_t

    dense = responses.y

    def times(v):
        out = np.empty((n, v.shape[1]))
        v32 = v.astype(np.float32)
        centre = (ybar[:, None] * v).astype(np.float32)
        for rows in row_blocks(n, j):
            block = dense[rows].astype(np.float32)
            out[rows] = block @ v32 - (centre.sum(axis=0) if full else np.abs(block) @ centre)
        return out / observed_share

    def times_t(u):
        out = np.zeros((j, u.shape[1]))
        for rows in row_blocks(n, j):
            block = dense[rows].astype(np.float32)
            part = u[rows].astype(np.float32)
            out += block.T @ part
            out -= ybar[:, None] * (part.sum(axis=0)[None, :] if full else np.abs(block).T @ part)
        return out / observed_share

    return times, times_t


def _leading_triplet(product, n, j, width=6, power=4):
    """Leading singular triplet ``(u, v, s)`` of ``Z`` by randomised subspace iteration
    (Halko, Martinsson & Tropp 2011, algorithm 4.4) from a fixed seed."""
    times, times_t = product
    q = np.linalg.qr(times(np.random.default_rng(0).standard_normal((j, min(width, j)))))[0]
    for _ in range(power):
        q = np.linalg.qr(times_t(q))[0]
        q = np.linalg.qr(times(q))[0]
    left, singular, right = np.linalg.svd(times_t(q).T, full_matrices=False)
    return q @ left[:, 0], right[0], singular[0]
