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

Nor are they invariant under the temperature, on which the loss depends only through
``(a / sigma, b / sigma)``: :func:`at_unit_temperature` solves for those, as cBMM does.
"""

from __future__ import annotations

import functools

import numpy as np

from ..registry import Option

__all__ = ["PARAMETRISATION_OPTION", "at_unit_temperature", "balance_scale", "orient_sign"]

#: The gradient baselines' variables: ``scaled`` (default), ``(theta, a / sigma,
#: b / sigma)``, where the problem is the same at every temperature; ``raw``, ``(theta, a,
#: b)`` at temperature sigma, as the paper states loss (3) (its figures' setting:
#: :func:`cbmm.paper_settings`).  In the raw variables the b-gradient is 1 / sigma times
#: the theta-gradient's scale: at sigma = 1e-30 L-BFGS-B stopped at the intercept-only
#: saddle and called it converged, and beyond 1e+-100 both failed (docs/baselines.md).
PARAMETRISATION_OPTION = {
    "parametrisation": Option("str", "scaled", choices=("scaled", "raw"),
                              doc="scaled: solve for (theta, a/sigma, b/sigma), the same "
                                  "problem at every temperature; raw: for (theta, a, b) at "
                                  "temperature sigma, as the paper writes loss (3)"),
}


def at_unit_temperature(solve):
    """A gradient baseline's ``solve`` taking the :data:`PARAMETRISATION_OPTION`: with
    ``parametrisation="scaled"`` it solves the temperature-free problem, from ``(theta0,
    a0 / sigma, b0 / sigma)`` at sigma = 1 (the same losses, penalty included:
    :class:`cbmm.prior.Penalty` is on ``a / sigma`` and ``b / sigma``), and returns ``a``
    and ``b`` times sigma; the solver's ``info`` is the scaled problem's."""

    @functools.wraps(solve)
    def solve_in(responses, theta0, a0, b0, *, sigma, parametrisation="scaled", **options):
        if parametrisation == "raw" or sigma == 1.0:
            return solve(responses, theta0, a0, b0, sigma=sigma, **options)
        out = solve(responses, theta0, np.asarray(a0, dtype=float) / sigma,
                    np.asarray(b0, dtype=float) / sigma, sigma=1.0, **options)
        out.a, out.b = out.a * sigma, out.b * sigma
        return out

    return solve_in


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
