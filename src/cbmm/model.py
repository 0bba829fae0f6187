"""The 2PL model X = theta a^T + 1 b^T with a logistic link of temperature sigma.

``Phi(x) = 1 / (1 + exp(-x / sigma))`` is the probability of a correct answer.
The loss is the paper's equation (3), the binary cross-entropy over the
observed entries Omega; in the +-1 coding each observed term equals
``softplus(-y_ij x_ij / sigma)``.  Everything here is float64 NumPy, evaluated
in row blocks so that no N x J float64 temporary larger than ``block`` rows
exists; every baseline uses these functions so that all methods optimise the
same objective.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

__all__ = ["scores", "probabilities", "softplus", "loss", "loss_and_gradient", "row_blocks",
           "projected_gradient_norm", "stationarity"]


def row_blocks(n_rows: int, n_cols: int, target_cells: int = 1 << 20):
    """Yield row slices whose blocks hold about ``target_cells`` entries."""
    step = max(1, target_cells // max(n_cols, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def scores(theta, a, b) -> np.ndarray:
    """Score matrix ``X = theta a^T + 1 b^T``."""
    return np.outer(theta, a) + b[None, :]


def probabilities(x, sigma: float = 1.0) -> np.ndarray:
    """``Phi(x) = expit(x / sigma)``, the probability of a correct answer."""
    return expit(np.asarray(x) / sigma)


def softplus(z):
    """``log(1 + exp(z))`` without overflow: ``max(z, 0) + log1p(exp(-|z|))``."""
    return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))


def loss(theta, a, b, y, sigma: float = 1.0) -> float:
    """Binary cross-entropy (3) over observed entries.

    Parameters
    ----------
    theta : ndarray (N,)
    a, b : ndarray (J,)
    y : ndarray of int8 (N, J)
        Responses in the +-1/0 coding (0 = missing).
    sigma : float
        Temperature.
    """
    total = 0.0
    for rows in row_blocks(*y.shape):
        yb = y[rows]
        x = np.outer(theta[rows], a) + b
        total += float(np.sum(softplus(-yb * x / sigma) * (yb != 0)))
    return total


def loss_and_gradient(theta, a, b, y, sigma: float = 1.0):
    """Loss (3) and its gradient with respect to (theta, a, b).

    With ``G_ij = dl/dx_ij = -(y_ij / sigma) Phi(-y_ij x_ij)`` on Omega (0
    elsewhere) the gradients are ``G a``, ``G^T theta`` and ``G^T 1``.

    Returns
    -------
    value : float
    grad_theta : ndarray (N,)
    grad_a, grad_b : ndarray (J,)
    """
    n, j = y.shape
    total = 0.0
    grad_theta = np.empty(n)
    grad_a = np.zeros(j)
    grad_b = np.zeros(j)
    for rows in row_blocks(n, j):
        yb = y[rows].astype(np.float64)
        z = -yb * (np.outer(theta[rows], a) + b) / sigma
        total += float(np.sum(softplus(z) * (yb != 0)))
        g = -(yb / sigma) * expit(z)  # zero where y == 0
        grad_theta[rows] = g @ a
        grad_a += theta[rows] @ g
        grad_b += g.sum(axis=0)
    return total, grad_theta, grad_a, grad_b


def projected_gradient_norm(theta, a, b, y, sigma: float = 1.0) -> float:
    """Euclidean norm of the projected gradient of loss (3) over ``(theta, a, b)``.

    The projection is onto the feasible set ``a >= 0``: a component ``a_j = 0``
    whose partial derivative is positive (pushing ``a_j`` below zero) counts
    as zero.  It vanishes exactly at the KKT points of the paper's Theorem 2.
    """
    _, g_theta, g_a, g_b = loss_and_gradient(theta, a, b, y, sigma)
    g_a = np.where((np.asarray(a) <= 0) & (g_a > 0), 0.0, g_a)
    return float(np.sqrt(g_theta @ g_theta + g_a @ g_a + g_b @ g_b))


def stationarity(theta, a, b, start, y, sigma: float = 1.0) -> float:
    """Scale-free stationarity: projected-gradient norm at ``(theta, a, b)`` over the start's.

    Parameters
    ----------
    theta, a, b : ndarray
        The point to assess.
    start : tuple of ndarray
        ``(theta0, a0, b0)``, the reference point (the fit's start).
    y : ndarray of int8 (N, J)
        Responses in the +-1/0 coding.
    sigma : float
        Temperature.

    Returns
    -------
    float
        0 at a stationary point; 1 means no progress from the start.  Both
        points should be in the same parametrisation (e.g. both canonical).
    """
    reference = projected_gradient_norm(*start, y, sigma)
    current = projected_gradient_norm(theta, a, b, y, sigma)
    if reference > 0:
        return current / reference
    return 0.0 if current == 0 else math.inf
