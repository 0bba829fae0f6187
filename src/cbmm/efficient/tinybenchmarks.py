"""tinyBenchmarks' estimators (Polo et al. 2024), the field's reference for predicting a
benchmark's accuracy from 100 items, as a baseline of the efficiency study: our
reimplementation from its paper and repository, run as its tutorials run it.

* **anchor points**: the items clustered into k groups by k-means, either on their
  correctness over the calibration models (``correctness``: an item's answers as its
  features, a missing answer counted as the item's mean) or on their fitted slope and
  intercept (``irt``); the item nearest each centre is an anchor, weighted by its
  cluster's share of the items;
* **anchor**: the weighted mean of a model's answers to the anchors;
* **p-IRT**: its answers to the anchors plus the 2PL probabilities of the other items at
  its maximum-likelihood ability;
* **gp-IRT**: ``lambda * anchor + (1 - lambda) * p-IRT``.

:func:`tinybenchmarks_predictions` chooses the clustering and ``lambda`` as the tutorials
choose ``lambda``: on a fifth of the calibration models, held out from a refit on the
others, the pair of least error; then anchors on all the calibration models.  k-means is
SciPy's ``kmeans2`` (10 iterations from a k-means++ start, both run here by matrix
products: the same centres and assignments up to ties; on MATH-500 50 and 300 iterations
gave the same errors) where tinyBenchmarks uses scikit-learn's; a cluster left empty (items with
identical features) gives no anchor, so fewer than k items may be asked.  The anchors
depend on k-means' random start: on MATH-500 at k = 100 gp-IRT's MAE ranged over
0.0225-0.0275 across four seeds of the same splits (docs/efficiency.md).
"""

from __future__ import annotations

import numpy as np

from .bank import ItemBank
from .refit import quiet_fit, refitted_bank

__all__ = ["anchor_points", "tinybenchmarks_estimates", "tinybenchmarks_predictions",
           "CLUSTERINGS", "LAMBDAS", "MIN_CALIBRATION_MODELS"]

#: The features k-means clusters the items by.
CLUSTERINGS = ("correctness", "irt")
#: The values of gp-IRT's ``lambda`` chosen among.
LAMBDAS = np.linspace(0.0, 1.0, 101)
#: Abilities (canonical scale) among which p-IRT's maximum-likelihood ability is found.
_MLE_GRID = np.linspace(-6.0, 6.0, 1201)
#: Share of the calibration models on which the clustering and lambda are chosen.
_VALIDATION_SHARE = 0.2
#: Calibration models the estimators need: one to validate on, and two to refit.
MIN_CALIBRATION_MODELS = 3


def anchor_points(values: np.ndarray, bank: ItemBank, k: int, clustering: str, seed):
    """The anchor items and their weights.

    Parameters
    ----------
    values : ndarray
        Calibration models x items, 1 / 0 / NaN (read by ``correctness`` only).
    bank : ItemBank
        The calibration (read by ``irt`` only).
    k : int
        Clusters.
    clustering : {"correctness", "irt"}
    seed : int or numpy.random.Generator
        The k-means++ start.

    Returns
    -------
    anchors : ndarray of int
        Item positions, one per non-empty cluster.
    weights : ndarray
        Each anchor's cluster's share of the items (summing to 1).
    """
    if clustering == "correctness":
        # one row per item, contiguous: k-means' sparse sums copied a transposed one per use
        features = np.ascontiguousarray(
            np.where(np.isnan(values), np.nanmean(values, axis=0), values).T)
    elif clustering == "irt":
        features = np.column_stack([bank.slope, bank.intercept])
    else:
        raise ValueError(f"clustering must be one of {list(CLUSTERINGS)}, got {clustering!r}")
    anchors, cluster, _ = cluster_representatives(features, k, seed)
    return anchors, np.bincount(cluster)[np.unique(cluster)] / len(features)


def cluster_representatives(features: np.ndarray, k: int, seed):
    """k-means clusters of the rows and the row nearest each cluster's centre.

    Parameters
    ----------
    features : ndarray
        One row per item.
    k : int
        Clusters.
    seed : int or numpy.random.Generator
        The k-means++ start.

    Returns
    -------
    representatives : ndarray of int
        Per non-empty cluster, in the clusters' order, the row nearest its centre.
    cluster : ndarray of int
        Each row's cluster.
    distance : ndarray
        Each row's squared distance to its cluster's centre.
    """
    centres, cluster = _kmeans(features, k, seed)
    distance = ((features - centres[cluster]) ** 2).sum(axis=1)
    representatives = [members[np.argmin(distance[members])]
                       for members in (np.flatnonzero(cluster == c) for c in np.unique(cluster))]
    return np.array(representatives), cluster, distance


def _kmeans(features, k, seed):
    """k-means (SciPy's ``kmeans2``, :func:`_lloyd`) from a k-means++ start (Arthur and Vassilvitskii
    2007), drawn here: SciPy's recomputes every distance to every centre chosen, O(k^2)
    passes over the items, 10 minutes for 200 centres among 12,032 items; keeping each
    item's distance to its nearest centre makes it k passes, each one matrix-vector
    product (``|x - c|^2 = |x|^2 - 2 x'c + |c|^2``; 2 ms against 45 ms for the
    differences squared on 5,761 items x 1,768 models).  From the same generator it draws
    the same centres as ``kmeans2(minit="++")``, and :func:`_lloyd` runs its iterations."""
    rng = np.random.default_rng(seed)
    squares = np.einsum("ij,ij->i", features, features)

    def distances(centre):  # rounding can leave an item's distance to itself below 0
        return np.maximum(squares - 2.0 * (features @ centre) + centre @ centre, 0.0)

    centres = np.empty((k, features.shape[1]))
    centres[0] = features[rng.integers(len(features))]
    nearest = distances(centres[0])
    for i in range(1, k):
        total = nearest.sum()
        chosen = rng.choice(len(features), p=nearest / total) if total > 0 \
            else rng.integers(len(features))  # fewer distinct items than centres
        centres[i] = features[chosen]
        nearest = np.minimum(nearest, distances(centres[i]))
    return _lloyd(features, squares, centres)


def _lloyd(features, squares, centres, iterations: int = 10):
    """``kmeans2(features, centres, iter=10, minit="matrix")``'s iterations, its distances
    from one matrix product each (``squares``: the rows' squared norms): each row to its
    nearest centre, each centre to its rows' mean, a centre left without rows kept where
    it was (it gives no anchor).  SciPy's ``vq`` took 0.7 s of the 0.8 s each k-means took
    on 5,761 items x 1,768 models (the mean over k = 10-200).  Returns the centres and the rows'
    assignment before the last update, as ``kmeans2`` does."""
    from scipy import sparse

    rows = np.arange(len(features))
    for _ in range(iterations):
        distance = squares[:, None] - 2.0 * (features @ centres.T) \
            + np.einsum("ij,ij->i", centres, centres)
        label = np.argmin(distance, axis=1)
        members = sparse.csr_matrix((np.ones(len(features)), (label, rows)),
                                    shape=(len(centres), len(features)))
        counts = np.asarray(members.sum(axis=1)).ravel()
        filled = counts > 0
        centres = centres.copy()
        centres[filled] = (members @ features)[filled] / counts[filled, None]
    return centres, label


def tinybenchmarks_estimates(values: np.ndarray, bank: ItemBank, anchors, weights):
    """The ``anchor`` and ``p-IRT`` accuracies of the models of ``values`` (models x all
    items, 1 / 0 / NaN) from their answers to ``anchors``."""
    seen = values[:, anchors]
    answered = ~np.isnan(seen)
    with np.errstate(invalid="ignore"):  # a model that answered no anchor: NaN
        anchor = np.nansum(seen * weights, axis=1) / (answered * weights).sum(axis=1)
    logit = np.multiply.outer(_MLE_GRID, bank.slope[anchors]) + bank.intercept[anchors]
    correct = np.nan_to_num(seen)
    likelihood = (correct @ -np.logaddexp(0, -logit).T
                  + (answered - correct) @ -np.logaddexp(0, logit).T)
    p = bank.probabilities(_MLE_GRID[likelihood.argmax(axis=1)])
    unseen = np.ones(len(bank), dtype=bool)
    unseen[anchors] = False
    p_irt = (correct.sum(axis=1) + p[:, unseen].sum(axis=1)) / (answered.sum(axis=1)
                                                                + unseen.sum())
    return anchor, p_irt


def tinybenchmarks_predictions(values: np.ndarray, calibration, held, bank: ItemBank, ks,
                               *, seed: int = 0, refit=None):
    """tinyBenchmarks' predictions of the accuracy of the ``held`` rows of ``values`` from
    k anchors chosen on the ``calibration`` rows, for each k of ``ks``.

    Parameters
    ----------
    values : ndarray
        Models x items, 1 / 0 / NaN.
    calibration, held : ndarray of int
        Rows: the calibration models (``bank`` is their fit) and the models predicted.
    bank : ItemBank
        The calibration models' fit.
    ks : list of int
    seed : int
        Seeds the split of the calibration models and k-means.
    refit : callable, optional
        How the calibration was fitted, for its refit on the calibration models outside
        the validation fifth (:func:`~cbmm.efficient.refit.refitted_bank`: a
        :class:`~cbmm.efficient.refit.QuietFit` starts from the calibration); default
        :func:`cbmm.fit`'s defaults.

    Yields
    ------
    k, dict
        For each k: estimator name -> predicted accuracy of the ``held`` rows: ``anchor``,
        ``p-IRT`` and ``gp-IRT`` for each clustering (``gp-IRT (irt)``, ...), with
        ``lambda`` of least error on the validation fifth; and ``gp-IRT``: the clustering
        and ``lambda`` of least error there.
    """
    if len(calibration) < MIN_CALIBRATION_MODELS:
        raise ValueError(f"tinyBenchmarks' estimators choose their clustering and lambda on a "
                         f"fifth of the calibration models and refit on the rest: at least "
                         f"{MIN_CALIBRATION_MODELS} are needed, got {len(calibration)}")
    order = np.random.default_rng([seed, 0x7b]).permutation(calibration)
    cut = max(1, int(len(order) * _VALIDATION_SHARE))
    validation, training = order[:cut], order[cut:]
    training_bank = refitted_bank(quiet_fit() if refit is None else refit,
                                  values[training], bank)
    truth = np.nanmean(values[validation], axis=1)
    for k in ks:
        out, best = {}, None
        for clustering in CLUSTERINGS:
            anchors, weights = anchor_points(values[training], training_bank, k, clustering,
                                             seed)
            anchor, p_irt = tinybenchmarks_estimates(values[validation], training_bank,
                                                     anchors, weights)
            errors = np.nanmean(np.abs(np.outer(LAMBDAS, anchor)
                                       + np.outer(1 - LAMBDAS, p_irt) - truth), axis=1)
            chosen = LAMBDAS[np.argmin(errors)]
            anchors, weights = anchor_points(values[calibration], bank, k, clustering, seed)
            anchor, p_irt = tinybenchmarks_estimates(values[held], bank, anchors, weights)
            out[f"anchor ({clustering})"] = anchor
            out[f"p-IRT ({clustering})"] = p_irt
            out[f"gp-IRT ({clustering})"] = chosen * anchor + (1 - chosen) * p_irt
            if best is None or errors.min() < best[0]:
                best = (errors.min(), out[f"gp-IRT ({clustering})"])
        out["gp-IRT"] = best[1]
        yield k, out
