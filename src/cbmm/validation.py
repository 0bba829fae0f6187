"""Held-out validation: does the fitted model predict answers it did not see?

:func:`cross_validate` splits the observed cells into folds at random, fits each
fold's complement with :func:`cbmm.fit` and scores the fold's cells with the fitted
probabilities ``Phi(theta_i a_j + b_j)``, beside the item-mean baseline (each item's
share correct in the training cells).  This is REEval's check, applied to every
registered method through the one ``fit`` interface.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["PROBABILITY_FLOOR", "cross_validate", "held_out_scores", "predicted_probabilities"]

#: Predicted probabilities are clipped to [PROBABILITY_FLOOR, 1 - PROBABILITY_FLOOR] in the
#: log loss, so that a model predicted certain to fail (set aside at theta = -inf) costs a
#: finite 34.5 nats per correct answer.
PROBABILITY_FLOOR = 1e-15


def cross_validate(responses, method: str = "cbmm", folds: int = 5, seed: int = 0,
                   **fit_kwargs):
    """K-fold cross-validation of a fit over the observed cells.

    Parameters
    ----------
    responses
        As for :func:`cbmm.fit` (a ``coding`` keyword is passed on to the reader).
    method : str
        Any registered method.
    folds : int
        Folds, >= 2.  Each observed cell is held out once; a cell that is the last
        training answer of its model or item stays in training (it is counted in no
        fold's ``n_cells``), so every fit sees every model and item.
    seed : int
        Seed of the assignment of cells to folds, and the fits' ``seed``.
    **fit_kwargs
        Passed to :func:`cbmm.fit`.

    Returns
    -------
    pandas.DataFrame
        One row per fold: ``fold``, ``method``, ``status`` (of the fold's fit),
        ``n_cells`` (held out), ``log_loss`` (mean, nats), ``brier`` (mean squared
        error of the probability), ``auc`` (area under the ROC curve), and the same
        three for the item-mean baseline: ``item_mean_log_loss``, ``item_mean_brier``,
        ``item_mean_auc``.  A failed fit gives NaN scores.
    """
    import pandas as pd

    from ._checks import check_integer
    from .api import fit
    from .responses import as_responses

    folds = check_integer("folds", folds, minimum=2)
    seed = check_integer("seed", seed, minimum=0)
    data = as_responses(responses, coding=fit_kwargs.pop("coding", None), storage="auto")
    rows, cols, values = _observed_cells(data)
    if folds > rows.size:  # a fold without a cell scores nothing
        raise ValueError(f"folds={folds}: more than the {rows.size} observed cells")
    assignment = np.random.default_rng([seed, 0xcf]).permutation(rows.size) % folds
    table = []
    for fold in range(folds):
        held = _held_out(assignment == fold, rows, cols, data.shape)
        train = data.without(rows[held], cols[held])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fit(train, method, seed=seed, **fit_kwargs)
        truth = values[held] > 0
        baseline = _item_means(train)[cols[held]]
        if result.failed:
            scores = dict.fromkeys(("log_loss", "brier", "auc"), math.nan)
        else:
            scores = held_out_scores(truth, predicted_probabilities(result, rows[held], cols[held]))
        table.append({"fold": fold, "method": method, "status": result.status,
                      "n_cells": int(held.sum()), **scores,
                      **{f"item_mean_{k}": v for k, v in held_out_scores(truth, baseline).items()}})
    return pd.DataFrame(table)


def predicted_probabilities(result, rows, cols) -> np.ndarray:
    """``Phi((theta_i a_j + b_j) / sigma)`` of a FitResult at the cells ``(rows, cols)``.

    A set-aside item (``a`` NaN, ``b`` +-inf) predicts its side (1 or 0) for every model.
    """
    from .model import expit

    theta = np.asarray(result.theta, dtype=float)[rows]
    a = np.asarray(result.a, dtype=float)[cols]
    b = np.asarray(result.b, dtype=float)[cols]
    with np.errstate(invalid="ignore"):
        x = np.where(np.isnan(a), b, theta * a + b)
    return expit(x / result.sigma)


def held_out_scores(truth, probability) -> dict:
    """``log_loss``, ``brier`` and ``auc`` of predicted probabilities of correct answers."""
    truth = np.asarray(truth, dtype=bool)
    p = np.clip(np.asarray(probability, dtype=float), PROBABILITY_FLOOR, 1 - PROBABILITY_FLOOR)
    if truth.size == 0:
        return {"log_loss": math.nan, "brier": math.nan, "auc": math.nan}
    log_loss = -float(np.mean(np.where(truth, np.log(p), np.log1p(-p))))
    brier = float(np.mean((np.asarray(probability, dtype=float) - truth) ** 2))
    return {"log_loss": log_loss, "brier": brier, "auc": _auc(truth, probability)}


def _auc(truth, score) -> float:
    """Mann-Whitney area under the ROC curve (ties count half); NaN with one class."""
    from scipy.stats import rankdata

    positives = int(truth.sum())
    negatives = truth.size - positives
    if positives == 0 or negatives == 0:
        return math.nan
    ranks = rankdata(score)
    return float((ranks[truth].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def _observed_cells(data):
    """Rows, columns and +-1 values of the observed cells, row-major."""
    sparse = data.to_sparse()
    rows = np.repeat(np.arange(data.shape[0]), np.diff(sparse.indptr))
    return rows, sparse.indices.astype(np.intp), sparse.values


def _held_out(fold, rows, cols, shape):
    """The fold's cells, minus one per model or item that would have no training answer."""
    n, j = shape
    held = fold.copy()
    for index, size in ((rows, n), (cols, j)):
        training = np.bincount(index[~held], minlength=size)
        starved = np.flatnonzero(training == 0)
        if starved.size:
            # return each starved model's (item's) first held-out cell to training
            candidates = np.flatnonzero(held & np.isin(index, starved))
            _, first = np.unique(index[candidates], return_index=True)
            held[candidates[first]] = False
    return held


def _item_means(train):
    """Each item's share correct in the training cells, with half an answer of each kind
    added (the spectral start's smoothing), so that no probability is 0 or 1."""
    counts = train._counts()
    return (counts.col_cor + 0.5) / (counts.col_obs + 1.0)
