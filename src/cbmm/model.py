"""The 2PL model X = theta a^T + 1 b^T with a logistic link of temperature sigma.

``Phi(x) = 1 / (1 + exp(-x / sigma))`` is the probability of a correct answer.
The loss is the paper's equation (3), the binary cross-entropy over the
observed entries Omega; in the +-1 coding each observed term equals
``softplus(-y_ij x_ij / sigma)``.  :func:`loss`, :func:`loss_and_gradient` and
:func:`stationarity` evaluate it in float64 with one multi-threaded C pass over
the responses (:mod:`cbmm._fused`, dense or CSR storage, no N x J
temporaries); every method is judged by these functions, so all optimise the
same objective.  The NumPy reference of the same sums is
``cbmm.mm._column_stats_numpy`` (the tests compare the two).  The engine behind them
is :mod:`cbmm.engine`; the prior's penalty (MAP) is :class:`cbmm.prior.Penalty`.
"""

from __future__ import annotations

import math

import numpy as np

from .engine import Objective, float32_safe, fused_matrix, thread_count
from .prior import Penalty

__all__ = [
    "SIGMA_RANGE",
    "canonical_projected_norm",
    "check_sigma",
    "expit",
    "fit_measures",
    "loss",
    "loss_and_gradient",
    "loss_and_stationarity",
    "log_pq",
    "probabilities",
    "projected_gradient_norm",
    "projected_norm",
    "scores",
    "softplus",
    "stationarity",
]

#: Temperatures the library fits.  The engines run at sigma = 1 on a / sigma
#: and b / sigma, so sigma never reaches their per-entry arithmetic, but the
#: parameters a, b ~ sigma x (logits) and the loss's 1 / sigma must stay
#: normal float64 numbers; measured: fits agree from 1e-300 to 1e307, and
#: break at 1e-308 (1 / sigma overflows) and 1e308.
SIGMA_RANGE = (1e-300, 1e300)


def check_sigma(sigma) -> float:
    """``sigma`` as a float; ``ValueError`` unless it is a number in :data:`SIGMA_RANGE`."""
    low, high = SIGMA_RANGE
    # compared as float64: a float32's comparison with the range's ends overflowed
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.integer, np.floating)) \
            or not low <= float(sigma) <= high:
        raise ValueError(f"sigma must be a number in [{low:g}, {high:g}], got {sigma!r}")
    return float(sigma)


def scores(theta, a, b) -> np.ndarray:
    """Score matrix ``X = theta a^T + 1 b^T``."""
    return np.outer(theta, a) + b[None, :]


def expit(x):
    """The logistic function ``1 / (1 + exp(-x))``, elementwise.

    SciPy's ``scipy.special.expit`` by the same formula, in NumPy: it agrees
    with SciPy to 1 ulp (NumPy's and the C library's ``exp`` may round
    differently), is faster on arrays, and keeps SciPy (0.4 s to import) out
    of ``import cbmm``.  Below x = -709.78 ``exp(-x)`` overflows to inf and
    the result is 0, as in SciPy (the exact value is below the smallest
    normal float).  The tanh form ``(1 + tanh(x / 2)) / 2`` would lose the
    relative precision of small probabilities.
    """
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def probabilities(x, sigma: float = 1.0) -> np.ndarray:
    """``Phi(x) = expit(x / sigma)``, the probability of a correct answer."""
    return expit(np.asarray(x) / sigma)


def log_pq(margin):
    """``log(p (1 - p))`` at a logit of absolute value ``margin`` (``p = expit(x)``,
    ``margin = |x|``), without overflow: ``-margin - 2 log1p(exp(-margin))``; ``-inf`` at an
    infinite margin, where ``p (1 - p)`` would be 0 times an overflow."""
    return -margin - 2.0 * np.log1p(np.exp(-margin))


def softplus(z):
    """``log(1 + exp(z))`` without overflow: ``max(z, 0) + log1p(exp(-|z|))``."""
    return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))


def loss(theta, a, b, responses, sigma: float = 1.0) -> float:
    """Binary cross-entropy (3) over observed entries, in float64.

    Parameters
    ----------
    theta : ndarray (N,)
    a, b : ndarray (J,)
    responses : Responses or ndarray of int8 (N, J)
        Responses in the +-1/0 coding (1 correct, -1 wrong, 0 missing), dense or sparse;
        :func:`cbmm.as_responses` reads other codings (0/1 answers, NaN missing).
    sigma : float
        Temperature, in :data:`SIGMA_RANGE`.

    A NaN parameter gives NaN (the fused pass alone would drop its terms).
    """
    objective = Objective(responses, check_sigma(sigma))
    return float("nan") if _has_nan(theta, a, b) else objective.value(theta, a, b)


def loss_and_gradient(theta, a, b, responses, sigma: float = 1.0):
    """Loss (3) and its gradient with respect to (theta, a, b), in float64.

    With ``G_ij = dl/dx_ij = -(y_ij / sigma) Phi(-y_ij x_ij)`` on Omega (0
    elsewhere) the gradients are ``G a``, ``G^T theta`` and ``G^T 1``.

    Returns
    -------
    value : float
    grad_theta : ndarray (N,)
    grad_a, grad_b : ndarray (J,)

    A NaN parameter gives NaN for the value and every gradient entry.
    """
    objective = Objective(responses, check_sigma(sigma))
    if _has_nan(theta, a, b):
        n, j = objective.shape
        return float("nan"), np.full(n, np.nan), np.full(j, np.nan), np.full(j, np.nan)
    return objective.loss_and_gradient(theta, a, b)


def _has_nan(*values) -> bool:
    """Whether a parameter is NaN: the fused pass clips a logit to its range, NaN included."""
    return any(np.isnan(np.asarray(v, dtype=float)).any() for v in values)


def projected_norm(a, g_theta, g_a, g_b) -> float:
    """Norm of a gradient projected onto the feasible set ``a >= 0``."""
    g_a = np.where((np.asarray(a) <= 0) & (g_a > 0), 0.0, g_a)
    return float(np.sqrt(g_theta @ g_theta + g_a @ g_a + g_b @ g_b))


def canonical_projected_norm(theta, a, g_theta, g_a, g_b) -> float:
    """:func:`projected_norm` in the canonical parametrisation, from the raw one.

    ``(theta, a)`` and the gradient ``(g_theta, g_a, g_b)`` are in any
    parametrisation (sigma = 1 scale); with theta's mean m and sd s, the
    canonical point (:func:`cbmm.result.canonicalize`) has the same X and the
    gradient ``(s g_theta, (g_a - m g_b) / s, g_b)``, and ``a s`` for a.
    """
    theta = np.asarray(theta)
    m, s = float(theta.mean()), float(theta.std())
    if not (s > 0 and math.isfinite(s)):  # canonicalize only centres a constant theta
        s = 1.0
    return projected_norm(np.asarray(a) * s, s * np.asarray(g_theta),
                           (np.asarray(g_a) - m * np.asarray(g_b)) / s, np.asarray(g_b))


def projected_gradient_norm(theta, a, b, responses, sigma: float = 1.0) -> float:
    """Euclidean norm of the projected gradient of loss (3), at sigma = 1 scale.

    The gradient is taken with respect to ``(theta, a / sigma, b / sigma)``,
    the parametrisation in which the loss depends on sigma only through the
    data (so the measure does not change with sigma); the projection is onto
    the feasible set ``a >= 0``: a component ``a_j = 0`` whose partial
    derivative is positive (pushing ``a_j`` below zero) counts as zero.  It
    vanishes exactly at the KKT points of the paper's Theorem 2.  float64.
    """
    _, g_theta, g_a, g_b = loss_and_gradient(theta, a, b, responses, sigma)
    return projected_norm(a, g_theta, g_a * sigma, g_b * sigma)


def _start_gradient_norm(matrix, theta, a, b, sigma) -> float:
    """:func:`projected_gradient_norm` from the engine's evaluation pass, in
    float32 where the magnitudes allow (relative error < 1e-6: ample for a
    reference point far from stationarity, and half the cost of float64)."""
    theta, a1, b1 = (np.ascontiguousarray(v, dtype=float)
                     for v in (theta, np.asarray(a) / sigma, np.asarray(b) / sigma))
    n, j = matrix.shape
    stats, w_a = np.empty((4, j)), np.empty(n)
    matrix.evaluate(theta, a1, b1, stats, float32_safe(theta, a1, b1),
                    thread_count(matrix.stored, n), w_a)
    return projected_norm(a, -w_a, -stats[0], -stats[1])


def loss_and_stationarity(theta, a, b, start, responses, sigma: float = 1.0, reference=None):
    """Loss (3) at ``(theta, a, b)`` and :func:`stationarity` there.

    One float64 loss-and-gradient pass at the point, and one evaluation pass
    at the start unless ``reference`` (the start's canonical projected-gradient
    norm, e.g. ``info["stationarity_reference"]`` of a cBMM fit, which its
    first pass computes anyway) is given: what :func:`cbmm.fit` needs at the
    end of every fit, at the cost of one or 1.5 passes over the data.

    Returns
    -------
    loss : float
    stationarity : float
    """
    value, _, reached, _ = fit_measures(theta, a, b, start, responses, sigma, reference)
    return value, reached


def fit_measures(theta, a, b, start, responses, sigma: float = 1.0, reference=None,
                 penalty: Penalty | None = None):
    """What :func:`cbmm.fit` measures at the end of a fit, from one gradient pass.

    Parameters
    ----------
    theta, a, b : ndarray
        The point (the canonical form without a penalty; the solver's own
        parametrisation with one, which the penalty is not invariant to).
    start : tuple of ndarray
        The fit's start, in the same parametrisation.
    responses : Responses or ndarray of int8
    sigma : float
    reference : float, optional
        The start's projected-gradient norm, if known (see :func:`loss_and_stationarity`).
    penalty : Penalty, optional
        The prior of a MAP fit.

    Returns
    -------
    loss : float
        Loss (3), float64.
    penalty_value : float
        The penalty at the point (0 without one).
    stationarity : float
        Projected-gradient norm of loss (3) plus the penalty over the start's.
    gradient : tuple of ndarray
        That gradient with respect to ``(theta, a / sigma, b / sigma)`` (not projected).
    """
    penalty = penalty or Penalty()
    matrix = fused_matrix(responses)
    value, penalty_value, gradient = _objective_gradient(matrix, theta, a, b, sigma, penalty)
    current = projected_norm(a, *gradient)
    if reference is None:
        if penalty.active:
            reference = projected_norm(start[1], *_objective_gradient(matrix, *start, sigma,
                                                                      penalty)[2])
        else:
            reference = _start_gradient_norm(matrix, *start, sigma)
    if reference > 0:
        reached = current / reference
    else:
        reached = 0.0 if current == 0 else math.inf
    return value, penalty_value, reached, gradient


def _objective_gradient(matrix, theta, a, b, sigma, penalty):
    """Loss (3), the penalty, and the gradient of their sum at sigma = 1 scale."""
    value, g_theta, g_a, g_b = loss_and_gradient(theta, a, b, matrix, sigma)
    gradient = (g_theta, g_a * sigma, g_b * sigma)
    if not penalty.active:
        return value, 0.0, gradient
    scaled = (theta, np.asarray(a) / sigma, np.asarray(b) / sigma)
    return (value, penalty.value(*scaled),
            tuple(g + p for g, p in zip(gradient, penalty.gradient(*scaled))))


def stationarity(theta, a, b, start, responses, sigma: float = 1.0) -> float:
    """Scale-free stationarity: projected-gradient norm at ``(theta, a, b)`` over the start's.

    Parameters
    ----------
    theta, a, b : ndarray
        The point to assess.
    start : tuple of ndarray
        ``(theta0, a0, b0)``, the reference point (the fit's start).
    responses : Responses or ndarray of int8 (N, J)
        Responses in the +-1/0 coding, dense or sparse.
    sigma : float
        Temperature.

    Returns
    -------
    float
        0 at a stationary point; 1 means no progress from the start.  Both
        points should be in the same parametrisation (e.g. both canonical).
        The norms are those of :func:`projected_gradient_norm` (sigma = 1
        scale), the point's in float64; see :func:`loss_and_stationarity`.
    """
    return loss_and_stationarity(theta, a, b, start, responses, sigma)[1]
