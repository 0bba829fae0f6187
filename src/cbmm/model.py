"""The 2PL model X = theta a^T + 1 b^T with a logistic link of temperature sigma.

``Phi(x) = 1 / (1 + exp(-x / sigma))`` is the probability of a correct answer.
The loss is the paper's equation (3), the binary cross-entropy over the
observed entries Omega; in the +-1 coding each observed term equals
``softplus(-y_ij x_ij / sigma)``.  :func:`loss`, :func:`loss_and_gradient` and
:func:`stationarity` evaluate it in float64 with one multi-threaded C pass over
the responses (:mod:`cbmm._fused`, dense or CSR storage, no N x J
temporaries); every method is judged by these functions, so all optimise the
same objective.  The NumPy reference of the same sums is
``cbmm.solver._column_stats_numpy`` (the tests compare the two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PRIORS",
    "PRIOR_SD",
    "Penalty",
    "SIGMA_RANGE",
    "canonical_projected_norm",
    "check_sigma",
    "dense_responses",
    "expit",
    "fit_measures",
    "fused_matrix",
    "loss",
    "loss_and_gradient",
    "loss_and_stationarity",
    "probabilities",
    "projected_gradient_norm",
    "row_blocks",
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
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.integer, np.floating)) \
            or not low <= sigma <= high:
        raise ValueError(f"sigma must be a number in [{low:g}, {high:g}], got {sigma!r}")
    return float(sigma)


#: Values of the ``prior`` option of the methods that minimise loss (3) (cbmm, lbfgsb,
#: manopt): ``"none"`` is the paper's maximum likelihood, ``"normal"`` the MAP estimate
#: under the priors of :class:`Penalty`.
PRIORS = ("none", "normal")

#: Default prior standard deviation of ``a / sigma`` and ``b / sigma`` (logits) under
#: ``prior="normal"``.  Wide next to the parameters of real benchmarks (|b| and a sd(theta)
#: of a few logits); measured on real data, 2, 3 and 5 give the same calibration
#: (docs/uncertainty.md).
PRIOR_SD = 3.0


@dataclass(frozen=True)
class Penalty:
    """The negative log-density of a normal prior, added to loss (3): MAP estimation.

    At sigma = 1 scale (``alpha = a / sigma``, ``beta = b / sigma``) it is
    ``theta_precision / 2 * sum theta_i^2 + item_precision / 2 * (sum alpha_j^2 +
    sum beta_j^2)``.  ``prior="normal"`` is ``theta ~ N(0, 1)``, ``alpha ~ N+(0, sd^2)``
    (half-normal: a >= 0) and ``beta ~ N(0, sd^2)``.  Unlike loss (3) alone, the sum is
    coercive, so it has a finite minimiser whatever the data (items or models answered
    all-correct, items separated perfectly by ability); and the prior on theta fixes the
    scale that loss (3) leaves free.  ``Penalty()`` is no penalty.
    """

    theta_precision: float = 0.0
    item_precision: float = 0.0

    @classmethod
    def of(cls, prior: str = "none", prior_sd: float = PRIOR_SD) -> "Penalty":
        """The penalty of a method's ``prior`` and ``prior_sd`` options."""
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {list(PRIORS)}, got {prior!r}")
        if prior == "none":
            return cls()
        return cls(theta_precision=1.0, item_precision=1.0 / float(prior_sd) ** 2)

    @property
    def active(self) -> bool:
        return self.theta_precision > 0 or self.item_precision > 0

    def value(self, theta, alpha, beta) -> float:
        """The penalty at ``(theta, alpha, beta)`` (sigma = 1 scale)."""
        if not self.active:
            return 0.0
        theta, alpha, beta = (np.asarray(v, dtype=float) for v in (theta, alpha, beta))
        return 0.5 * (self.theta_precision * float(theta @ theta)
                      + self.item_precision * (float(alpha @ alpha) + float(beta @ beta)))

    def gradient(self, theta, alpha, beta):
        """Its gradient with respect to ``(theta, alpha, beta)``."""
        return (self.theta_precision * np.asarray(theta, dtype=float),
                self.item_precision * np.asarray(alpha, dtype=float),
                self.item_precision * np.asarray(beta, dtype=float))

    def curvature(self):
        """Its (constant) second derivatives: ``(theta_precision, item_precision)``."""
        return self.theta_precision, self.item_precision

    def gauge(self, theta, alpha, beta):
        """The shift and scale along which loss (3) is flat that minimise the penalty.

        ``theta' = c (theta + e)``, ``alpha' = alpha / c``, ``beta' = beta - alpha e``
        leave ``X`` (hence loss (3)) unchanged for any ``c > 0`` and ``e``.  The penalty
        along that orbit is ``c^2 T A(e) / 2 + I S / (2 c^2) + I sum (beta - alpha e)^2 / 2``
        with ``A(e) = sum (theta + e)^2``, ``S = sum alpha^2``, ``T``, ``I`` the precisions:
        for given ``e`` the best ``c^2`` is ``sqrt(I S / (T A(e)))``, and what is left,
        ``sqrt(T I S A(e)) + I sum (beta - alpha e)^2 / 2``, is convex in ``e`` (a norm
        plus a quadratic): its derivative is found to zero by bisection.  A quasi-Newton
        method or MM crawls along this nearly flat direction; setting it exactly makes
        MAP fits as fast as maximum likelihood ones.

        Returns
        -------
        c, e : float
            ``(1, 0)`` without a penalty on both theta and the items, or when ``alpha`` is 0.
        """
        theta, alpha, beta = (np.asarray(v, dtype=float) for v in (theta, alpha, beta))
        t_prec, i_prec = self.theta_precision, self.item_precision
        s = float(alpha @ alpha)
        if t_prec <= 0 or i_prec <= 0 or s <= 0:
            return 1.0, 0.0
        n, t1, t2 = theta.size, float(theta.sum()), float(theta @ theta)
        ab = float(alpha @ beta)
        k = t_prec * i_prec * s

        def slope(e):  # derivative of sqrt(k A(e)) + i_prec sum (beta - alpha e)^2 / 2
            area = max(t2 + 2 * e * t1 + n * e * e, np.finfo(float).tiny)
            return k * (t1 + n * e) / np.sqrt(k * area) - i_prec * (ab - s * e)

        low, high = -1.0, 1.0
        while slope(low) > 0:
            low *= 2
        while slope(high) < 0:
            high *= 2
        for _ in range(100):
            middle = 0.5 * (low + high)
            if slope(middle) > 0:
                high = middle
            else:
                low = middle
            if high - low <= 1e-15 * max(1.0, abs(middle)):
                break
        e = 0.5 * (low + high)
        area = t2 + 2 * e * t1 + n * e * e
        return float((i_prec * s / (t_prec * area)) ** 0.25), e


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


def _threads(matrix) -> int:
    from .solver import thread_count

    return thread_count(matrix.stored, matrix.shape[0])


def row_blocks(n_rows: int, n_cols: int, target_cells: int = 1 << 20):
    """Yield row slices whose blocks hold about ``target_cells`` entries."""
    step = max(1, target_cells // max(n_cols, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


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
        Responses in the +-1/0 coding (0 = missing), dense or sparse.
    sigma : float
        Temperature.
    """
    matrix = fused_matrix(responses)
    return matrix.loss(*_point(theta, a, b), 1.0 / sigma, _threads(matrix))


def _point(theta, a, b):
    return tuple(np.ascontiguousarray(v, dtype=float) for v in (theta, a, b))


def loss_and_gradient(theta, a, b, responses, sigma: float = 1.0):
    """Loss (3) and its gradient with respect to (theta, a, b), in float64.

    With ``G_ij = dl/dx_ij = -(y_ij / sigma) Phi(-y_ij x_ij)`` on Omega (0
    elsewhere) the gradients are ``G a``, ``G^T theta`` and ``G^T 1``.

    Returns
    -------
    value : float
    grad_theta : ndarray (N,)
    grad_a, grad_b : ndarray (J,)
    """
    matrix = fused_matrix(responses)
    n, j = matrix.shape
    grads = np.empty(n), np.empty(j), np.empty(j)
    value = matrix.loss_gradient(*_point(theta, a, b), 1.0 / sigma, _threads(matrix), *grads)
    return (value, *grads)


def _projected_norm(a, g_theta, g_a, g_b) -> float:
    """Norm of a gradient projected onto the feasible set ``a >= 0``."""
    g_a = np.where((np.asarray(a) <= 0) & (g_a > 0), 0.0, g_a)
    return float(np.sqrt(g_theta @ g_theta + g_a @ g_a + g_b @ g_b))


def canonical_projected_norm(theta, a, g_theta, g_a, g_b) -> float:
    """:func:`_projected_norm` in the canonical parametrisation, from the raw one.

    ``(theta, a)`` and the gradient ``(g_theta, g_a, g_b)`` are in any
    parametrisation (sigma = 1 scale); with theta's mean m and sd s, the
    canonical point (:func:`cbmm.result.canonicalize`) has the same X and the
    gradient ``(s g_theta, (g_a - m g_b) / s, g_b)``, and ``a s`` for a.
    """
    theta = np.asarray(theta)
    m, s = float(theta.mean()), float(theta.std())
    if not (s > 0 and math.isfinite(s)):  # canonicalize only centres a constant theta
        s = 1.0
    return _projected_norm(np.asarray(a) * s, s * np.asarray(g_theta),
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
    return _projected_norm(a, g_theta, g_a * sigma, g_b * sigma)


def _start_gradient_norm(matrix, theta, a, b, sigma) -> float:
    """:func:`projected_gradient_norm` from the engine's evaluation pass, in
    float32 where the magnitudes allow (relative error < 1e-6: ample for a
    reference point far from stationarity, and half the cost of float64)."""
    from .solver import _float32_safe

    theta, a1, b1 = _point(theta, np.asarray(a) / sigma, np.asarray(b) / sigma)
    n, j = matrix.shape
    stats, w_a = np.empty((4, j)), np.empty(n)
    matrix.evaluate(theta, a1, b1, stats, _float32_safe(theta, a1, b1), _threads(matrix), w_a)
    return _projected_norm(a, -w_a, -stats[0], -stats[1])


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
    current = _projected_norm(a, *gradient)
    if reference is None:
        if penalty.active:
            reference = _projected_norm(start[1], *_objective_gradient(matrix, *start, sigma,
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
