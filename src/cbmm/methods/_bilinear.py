"""Exact symmetries of the bilinear score ``X = theta a^T + 1 b^T`` used by the gradient baselines.

Loss (3) depends on ``(theta, a, b)`` only through X, so two transformations
leave every loss value unchanged:

* **scale**: ``(theta, a) -> (s theta, a / s)`` for any ``s > 0``;
* **sign**: ``(theta, a) -> (-theta, -a)`` (outside the constraint ``a >= 0``).

Gradient methods are not invariant under either, so which representative of
the same point they work with matters.  :func:`balance_scale` picks the
representative with ``||theta|| = ||a||`` for the start of L-BFGS-B and
Manopt; :func:`orient_sign` picks, between an unconstrained solution and its
mirror image, the one closer to ``a >= 0`` (Manopt, before its proximal step).
See docs/baselines.md for the measurements behind both.
"""

from __future__ import annotations

import numpy as np

__all__ = ["balance_scale", "orient_sign"]


def balance_scale(theta, a):
    """The representative of ``(theta, a)`` with equal Euclidean norms (same ``theta a^T``).

    Parameters
    ----------
    theta : ndarray (N,)
    a : ndarray (J,)

    Returns
    -------
    theta, a : ndarray
        ``s theta`` and ``a / s`` with ``s = sqrt(||a|| / ||theta||)``;
        unchanged copies when either norm is 0 or not finite.

    Notes
    -----
    The curvature of loss (3) in ``theta_i`` is proportional to
    ``sum_j a_j^2`` and in ``a_j`` to ``sum_i theta_i^2`` (on the observed
    entries), so equal norms give the two blocks curvature of the same size,
    which a method with one step size (conjugate gradient) or an initial
    Hessian ``gamma I`` (L-BFGS-B) needs.  Gradient flow keeps
    ``||theta||^2 - ||a||^2`` constant, so an unbalanced start stays
    unbalanced: the shared start (:func:`cbmm.initial_values`) has
    ``||theta0||^2 = N`` but, after its rescaling to ``|x / sigma| <= 10``,
    ``||a0||^2`` of order ``0.1 J``, and from there both baselines shrink a
    towards 0 faster than theta can align with the data, reaching the saddle
    ``theta a^T = 0`` where the relative-loss rule fires.
    """
    theta = np.array(theta, dtype=float)
    a = np.array(a, dtype=float)
    norm_theta, norm_a = np.linalg.norm(theta), np.linalg.norm(a)
    if not (np.isfinite(norm_theta) and np.isfinite(norm_a) and norm_theta > 0 and norm_a > 0):
        return theta, a
    scale = np.sqrt(norm_a / norm_theta)
    return theta * scale, a / scale


def orient_sign(theta, a):
    """Between ``(theta, a)`` and ``(-theta, -a)``, the one whose ``a`` is closer to ``a >= 0``.

    Returns
    -------
    theta, a : ndarray
        Flipped when the negative part of ``a`` is larger than its positive
        part (``sum min(a, 0)^2 > sum max(a, 0)^2``), i.e. when projecting
        ``-a`` onto ``a >= 0`` moves it less than projecting ``a``.
    flipped : bool
    """
    theta = np.asarray(theta, dtype=float)
    a = np.asarray(a, dtype=float)
    negative = np.sum(np.minimum(a, 0.0) ** 2)
    positive = np.sum(np.maximum(a, 0.0) ** 2)
    if negative > positive:
        return -theta, -a, True
    return theta, a, False
