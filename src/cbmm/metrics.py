"""Performance metrics of the paper's appendix ("Performance metrics") and the
descriptive real-data summaries (Section 4.4).

Three metrics exist in two definitions each: the paper's text and the code
that produced the published figures (the authors' released
``IRToptimizer/utils.py``).  Both are computed for every fit and kept as
separate columns; :data:`METRIC_DEFINITIONS` says which column implements
which definition, and the figures draw the published one by default.

* Relative error of X: ``rel_error_x = ||X^ - X||_F^2 / ||X||_F^2`` (text),
  ``rel_error_x_published = ||X^ - X||_F / ||X||_F`` (released code).
* Hellinger distance of Phi(X): ``hellinger_x = (1/NJ) sum_ij d_H^2(p^_ij, p_ij)``
  with ``d_H^2(p, q) = (sqrt p - sqrt q)^2 + (sqrt(1-p) - sqrt(1-q))^2`` (text),
  ``hellinger_x_published = sqrt(mean_ij (sqrt p^ - sqrt p)^2)`` with both
  probabilities clipped to ``[1e-12, 1 - 1e-12]`` (released code).
* RMSE of b: ``rmse_b`` compares b^ with the truth, both in the canonical
  form (theta standardised over models, see :func:`cbmm.canonicalize`): the
  scale-free comparison.  ``rmse_b_published`` compares the method's *raw*
  b^ (the parametrisation its solver returned) with the simulated b, as the
  released code does; it depends on where the solver left theta's location
  and scale, which the model does not identify.

An estimated discrimination counts as zero when ``a^_j <= zero_tol`` (default
1e-6 on the canonical scale, where theta has sd 1); cBMM and L-BFGS-B produce
exact zeros at the bound, so the threshold only matters for methods without
an active constraint.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .model import probabilities
from .result import canonicalize

__all__ = ["simulation_metrics", "fit_metrics", "descriptive_metrics", "spearman",
           "relative_error", "hellinger", "SIMULATION_METRICS", "METRIC_DEFINITIONS",
           "ZERO_TOL", "HELLINGER_CLIP"]

ZERO_TOL = 1e-6

#: Probabilities are clipped to [HELLINGER_CLIP, 1 - HELLINGER_CLIP] in the published Hellinger.
HELLINGER_CLIP = 1e-12

SIMULATION_METRICS = (
    "spearman_theta", "spearman_a", "spearman_b", "rmse_b", "rmse_b_published",
    "rel_error_x", "rel_error_x_published", "hellinger_x", "hellinger_x_published",
    "recall_a", "precision_a",
)

#: For each metric with two definitions, the column that implements each one.
METRIC_DEFINITIONS = {
    "published": {"rmse_b": "rmse_b_published", "rel_error_x": "rel_error_x_published",
                  "hellinger_x": "hellinger_x_published"},
    "text": {"rmse_b": "rmse_b", "rel_error_x": "rel_error_x", "hellinger_x": "hellinger_x"},
}


def spearman(x, y) -> float:
    """Spearman rank correlation; NaN when either input is constant or non-finite."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if (not np.isfinite(x).all() or not np.isfinite(y).all() or np.ptp(x) == 0
            or np.ptp(y) == 0):
        return math.nan
    # Pearson correlation of the average ranks (= scipy.stats.spearmanr), without
    # importing scipy.stats: 0.3-0.6 s of start-up in every workflow job.
    rx = pd.Series(x).rank(method="average").to_numpy()
    ry = pd.Series(y).rank(method="average").to_numpy()
    return float(np.corrcoef(rx, ry)[0, 1])


def _ratio(numerator, denominator):
    return numerator / denominator if denominator else math.nan


def relative_error(x_hat, x, definition: str = "published") -> float:
    """Relative error of a score matrix.

    ``"published"``: ``||x_hat - x||_F / ||x||_F``; ``"text"``: its square.
    """
    x_hat = np.asarray(x_hat, dtype=float)
    x = np.asarray(x, dtype=float)
    ratio_sq = _ratio(float(np.sum((x_hat - x) ** 2)), float(np.sum(x ** 2)))
    if definition == "text":
        return ratio_sq
    if definition == "published":
        return math.sqrt(ratio_sq) if not math.isnan(ratio_sq) else ratio_sq
    raise ValueError(f"definition must be one of {list(METRIC_DEFINITIONS)}, got {definition!r}")


def hellinger(p_hat, p, definition: str = "published") -> float:
    """Hellinger distance between two matrices of Bernoulli probabilities.

    ``"published"``: ``sqrt(mean((sqrt p_hat - sqrt p)^2))`` after clipping both
    to ``[HELLINGER_CLIP, 1 - HELLINGER_CLIP]``; ``"text"``: the mean over
    entries of ``d_H^2(p_hat, p) = (sqrt p_hat - sqrt p)^2 + (sqrt(1-p_hat) -
    sqrt(1-p))^2``.
    """
    p_hat = np.asarray(p_hat, dtype=float)
    p = np.asarray(p, dtype=float)
    if definition == "published":
        p_hat = np.clip(p_hat, HELLINGER_CLIP, 1 - HELLINGER_CLIP)
        p = np.clip(p, HELLINGER_CLIP, 1 - HELLINGER_CLIP)
        return float(np.sqrt(np.mean((np.sqrt(p_hat) - np.sqrt(p)) ** 2)))
    if definition == "text":
        return float(np.mean((np.sqrt(p_hat) - np.sqrt(p)) ** 2
                             + (np.sqrt(1 - p_hat) - np.sqrt(1 - p)) ** 2))
    raise ValueError(f"definition must be one of {list(METRIC_DEFINITIONS)}, got {definition!r}")


def simulation_metrics(theta_hat, a_hat, b_hat, theta, a, b, sigma=1.0,
                       zero_tol: float = ZERO_TOL, raw_scale=None) -> dict:
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
    raw_scale : (float, float), optional
        Mean and sd over models of the method's raw theta^ when the estimates
        given are canonical (:func:`cbmm.fit` records them as
        ``info["theta_mean_raw"]`` and ``info["theta_sd_raw"]``).  ``None``
        means the estimates given are the method's raw output.  Only
        ``rmse_b_published`` depends on it.

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
    if raw_scale is None:
        b_raw = b_hat
    else:
        # undo canonicalize: raw b = b - a * mean / sd (a, b canonical)
        mean, sd = (float(v) for v in raw_scale)
        _, a_canonical, b_canonical = canonicalize(theta_hat, a_hat, b_hat)
        b_raw = b_canonical - a_canonical * mean / (sd if sd > 0 else 1.0)
    theta_hat, a_hat, b_hat = canonicalize(theta_hat, a_hat, b_hat)
    _, _, b_truth_canonical = canonicalize(theta, a, b)

    x_true = np.outer(theta, a) + b
    x_hat = np.outer(theta_hat, a_hat) + b_hat
    p_hat = probabilities(x_hat, sigma)
    p_true = probabilities(x_true, sigma)

    estimated_nonzero = a_hat > zero_tol
    true_nonzero = a != 0
    tp = int(np.sum(estimated_nonzero & true_nonzero))
    fn = int(np.sum(~estimated_nonzero & true_nonzero))
    fp = int(np.sum(estimated_nonzero & ~true_nonzero))
    return {
        "spearman_theta": spearman(theta_hat, theta),
        "spearman_a": spearman(a_hat, a),
        "spearman_b": spearman(b_hat, b),
        "rmse_b": float(np.sqrt(np.mean((b_hat - b_truth_canonical) ** 2))),
        "rmse_b_published": float(np.sqrt(np.mean((b_raw - b) ** 2))),
        "rel_error_x": relative_error(x_hat, x_true, "text"),
        "rel_error_x_published": relative_error(x_hat, x_true, "published"),
        "hellinger_x": hellinger(p_hat, p_true, "text"),
        "hellinger_x_published": hellinger(p_hat, p_true, "published"),
        "recall_a": _ratio(tp, tp + fn),
        "precision_a": _ratio(tp, tp + fp),
    }


def fit_metrics(result, simulation, zero_tol: float = ZERO_TOL) -> dict:
    """:func:`simulation_metrics` of a :class:`cbmm.FitResult` against its
    :class:`cbmm.simulate.Simulation` (raw scale read from ``result.info``)."""
    info = result.info or {}
    raw_scale = ((info["theta_mean_raw"], info["theta_sd_raw"])
                 if "theta_mean_raw" in info and "theta_sd_raw" in info else None)
    if raw_scale is None and not result.failed:
        raise ValueError("fit_metrics: the fit records no raw scale (info['theta_mean_raw'], "
                         "info['theta_sd_raw']); refit with this version of cbmm.fit")
    return simulation_metrics(result.theta, result.a, result.b, simulation.theta, simulation.a,
                              simulation.b, simulation.sigma, zero_tol=zero_tol,
                              raw_scale=raw_scale)


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
