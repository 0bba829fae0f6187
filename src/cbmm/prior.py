"""The normal prior of the methods that minimise loss (3): MAP estimation.

The paper fits by maximum likelihood (``prior="none"``); the library's default is the
MAP estimate under the priors of :class:`Penalty` (``prior="normal"``), which has a
finite optimum whatever the data (docs/trust.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PRIORS", "PRIOR_SD", "Penalty"]

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
