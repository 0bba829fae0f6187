"""Performance metrics of the paper's appendix ("Performance metrics") and the
descriptive real-data summaries (Section 4.4).

Text definitions (used for our figures):

* ``rel_error_x = ||X - X^||_F^2 / ||X||_F^2``;
* ``hellinger_x = (1/NJ) sum_ij d_H^2(Phi(x^_ij), Phi(x_ij))`` with
  ``d_H^2(p, q) = (sqrt p - sqrt q)^2 + (sqrt(1-p) - sqrt(1-q))^2``.

The authors' released code computes these differently; we keep those numbers
too, clearly named, so results can be compared with the published figures:

* ``rel_error_x_unsquared = ||X - X^||_F / ||X||_F``;
* ``hellinger_x_released = sqrt(mean_ij (sqrt p - sqrt q)^2)``.

``rmse_b`` compares b^ with the truth put in the same canonical form as every
estimate (theta standardised over models, see :func:`cbmm.canonicalize`);
``rmse_b_raw`` compares with the raw simulated b.

An estimated discrimination counts as zero when ``a^_j <= zero_tol`` (default
1e-6 on the canonical scale, where theta has sd 1); cBMM and L-BFGS-B produce
exact zeros at the bound, so the threshold only matters for methods without
an active constraint.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import spearmanr

from .model import probabilities
from .result import canonicalize

__all__ = ["simulation_metrics", "descriptive_metrics", "spearman", "SIMULATION_METRICS",
           "ZERO_TOL"]

ZERO_TOL = 1e-6

SIMULATION_METRICS = (
    "spearman_theta", "spearman_a", "spearman_b", "rmse_b", "rmse_b_raw",
    "rel_error_x", "rel_error_x_unsquared", "hellinger_x", "hellinger_x_released",
    "recall_a", "precision_a",
)


def spearman(x, y) -> float:
    """Spearman rank correlation; NaN when either input is constant or non-finite."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if (not np.isfinite(x).all() or not np.isfinite(y).all() or np.ptp(x) == 0
            or np.ptp(y) == 0):
        return math.nan
    return float(spearmanr(x, y).statistic)


def _ratio(numerator, denominator):
    return numerator / denominator if denominator else math.nan


def simulation_metrics(theta_hat, a_hat, b_hat, theta, a, b, sigma=1.0,
                       zero_tol: float = ZERO_TOL) -> dict:
    """All simulation metrics of one fit against the truth.

    Parameters
    ----------
    theta_hat, a_hat, b_hat : array-like
        Estimates (any parametrisation in the same equivalence class; they
        are canonicalised here).
    theta, a, b : array-like
        Truth.
    sigma : float
        Temperature (for the Hellinger distances).
    zero_tol : float
        ``a^_j <= zero_tol`` counts as an estimated zero.

    Returns
    -------
    dict
        Keys :data:`SIMULATION_METRICS`; all NaN when the estimate is not
        finite (a failed fit).
    """
    theta_hat, a_hat, b_hat = (np.asarray(v, dtype=float) for v in (theta_hat, a_hat, b_hat))
    theta, a, b = (np.asarray(v, dtype=float) for v in (theta, a, b))
    if not (np.isfinite(theta_hat).all() and np.isfinite(a_hat).all()
            and np.isfinite(b_hat).all()):
        return {name: math.nan for name in SIMULATION_METRICS}
    theta_hat, a_hat, b_hat = canonicalize(theta_hat, a_hat, b_hat)
    _, _, b_canonical = canonicalize(theta, a, b)

    x_true = np.outer(theta, a) + b
    x_hat = np.outer(theta_hat, a_hat) + b_hat
    diff_sq = float(np.sum((x_hat - x_true) ** 2))
    norm_sq = float(np.sum(x_true ** 2))
    p_hat = probabilities(x_hat, sigma)
    p_true = probabilities(x_true, sigma)
    root_diff_sq = (np.sqrt(p_hat) - np.sqrt(p_true)) ** 2
    hellinger_terms = root_diff_sq + (np.sqrt(1 - p_hat) - np.sqrt(1 - p_true)) ** 2

    estimated_nonzero = a_hat > zero_tol
    true_nonzero = a != 0
    tp = int(np.sum(estimated_nonzero & true_nonzero))
    fn = int(np.sum(~estimated_nonzero & true_nonzero))
    fp = int(np.sum(estimated_nonzero & ~true_nonzero))
    return {
        "spearman_theta": spearman(theta_hat, theta),
        "spearman_a": spearman(a_hat, a),
        "spearman_b": spearman(b_hat, b),
        "rmse_b": float(np.sqrt(np.mean((b_hat - b_canonical) ** 2))),
        "rmse_b_raw": float(np.sqrt(np.mean((b_hat - b) ** 2))),
        "rel_error_x": _ratio(diff_sq, norm_sq),
        "rel_error_x_unsquared": _ratio(math.sqrt(diff_sq), math.sqrt(norm_sq)),
        "hellinger_x": float(np.mean(hellinger_terms)),
        "hellinger_x_released": float(np.sqrt(np.mean(root_diff_sq))),
        "recall_a": _ratio(tp, tp + fn),
        "precision_a": _ratio(tp, tp + fp),
    }


def descriptive_metrics(theta_hat, a_hat, accuracy, top_fraction: float = 0.2) -> dict:
    """Real-data summaries: CV of a^ and Spearman(theta^, mean accuracy).

    Parameters
    ----------
    theta_hat, a_hat : array-like
        cBMM estimates.
    accuracy : array-like
        Mean accuracy of each model over its observed items.
    top_fraction : float
        Share of models (highest accuracy, ``ceil(top_fraction N)`` of them) used
        for ``spearman_top20``.

    Returns
    -------
    dict
        ``cv_a`` (population sd / mean of a^), ``spearman_all``,
        ``spearman_top20``.
    """
    theta_hat = np.asarray(theta_hat, dtype=float)
    a_hat = np.asarray(a_hat, dtype=float)
    accuracy = np.asarray(accuracy, dtype=float)
    n_top = max(2, math.ceil(top_fraction * accuracy.size))
    top = np.argsort(-accuracy, kind="stable")[:n_top]
    mean_a = float(np.mean(a_hat))
    return {
        "cv_a": float(np.std(a_hat)) / mean_a if mean_a > 0 else math.nan,
        "spearman_all": spearman(theta_hat, accuracy),
        "spearman_top20": spearman(theta_hat[top], accuracy[top]),
    }
