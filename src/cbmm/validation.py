"""Held-out validation: does the fitted model predict answers it did not see?

:func:`cross_validate` splits the observed cells into folds at random, fits each
fold's complement with :func:`cbmm.fit` and scores the fold's cells with the fitted
probabilities ``Phi(theta_i a_j + b_j)``, beside three baselines fitted on the same
training cells: the item means (each item's share correct), the model means (each
model's share correct) and the additive (Rasch) model ``logit p_ij = u_i + v_j``.  This is
REEval's check, applied to every registered method through the one ``fit`` interface.
When the fit predicts the held-out answers worse than a baseline, a
:class:`HeldOutWarning` says so (small or very sparse data: too few answers per item for
the 2PL's two parameters).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ._warn import CbmmWarning, warn

__all__ = ["PROBABILITY_FLOOR", "BASELINES", "ADDITIVE_RIDGE", "HeldOutWarning", "additive_effects",
           "best_baseline", "cross_validate", "held_out_scores", "predicted_probabilities"]

#: Predicted probabilities are clipped to [PROBABILITY_FLOOR, 1 - PROBABILITY_FLOOR] in the
#: log loss, so that a model predicted certain to fail (set aside at theta = -inf) costs a
#: finite 34.5 nats per correct answer.
PROBABILITY_FLOOR = 1e-15

#: The baselines scored beside the fit, by their column prefix in :func:`cross_validate`'s
#: table, with the words that name them.
BASELINES = {"item_mean": "item-mean", "model_mean": "model-mean", "additive": "additive (Rasch)"}

#: Ridge of the additive baseline: its penalised log likelihood subtracts
#: ``ADDITIVE_RIDGE / 2 * (sum u_i^2 + sum v_j^2)``, a N(0, 1) prior on every effect in
#: logits, so that all-correct and all-wrong models and items get finite effects (with
#: n answers all correct, about ``log(n)`` rather than +inf) and the split of the
#: overall level between ``u`` and ``v`` is defined.
ADDITIVE_RIDGE = 1.0


class HeldOutWarning(CbmmWarning):
    """The fit predicts held-out answers worse than a simpler baseline."""


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
        Passed to :func:`cbmm.fit`; with ``verbose=N`` each fold's fit logs its progress
        and, once done, its status and the seconds so far (the ``cbmm`` logger, to stderr).

    Returns
    -------
    pandas.DataFrame
        One row per fold: ``fold``, ``method``, ``status`` (of the fold's fit),
        ``n_cells`` (held out), ``log_loss`` (mean, nats), ``brier`` (mean squared
        error of the probability), ``auc`` (area under the ROC curve), and the same
        three for each baseline, fitted on the fold's training cells: the item means
        (``item_mean_log_loss``, ``item_mean_brier``, ``item_mean_auc``), the model
        means (``model_mean_*``) and the additive model ``logit p_ij = u_i + v_j``
        (``additive_*``; ridge :data:`ADDITIVE_RIDGE`).  A failed fit gives NaN scores.

    Warns
    -----
    ConvergenceWarning
        When some folds' fits are not answers (status other than ``converged``),
        counted by status.
    HeldOutWarning
        When the fit's mean held-out log loss is above a baseline's
        (:func:`best_baseline`).
    """
    import pandas as pd

    from ._checks import check_integer
    from .api import _progress_lines
    from .responses import as_responses, no_information

    folds = check_integer("folds", folds, minimum=2)
    seed = check_integer("seed", seed, minimum=0)
    data = as_responses(responses, coding=fit_kwargs.pop("coding", None),
                        layout=fit_kwargs.pop("layout", "auto"), storage="auto")
    rows, cols, values = _observed_cells(data)
    # the cells in their labels' order: one seed, the same folds (and the same cells kept
    # for training by _held_out), whatever the order of the rows and columns
    order = cells_in_label_order(data, rows, cols)
    rows, cols, values = rows[order], cols[order], values[order]
    if folds > rows.size:  # a fold without a cell scores nothing
        raise ValueError(f"folds={folds}: more than the {rows.size} observed cells")
    assignment = np.random.default_rng([seed, 0xcf]).permutation(rows.size) % folds
    helds = [_held_out(assignment == fold, rows, cols, data.shape) for fold in range(folds)]
    empty = [fold for fold, held in enumerate(helds) if not held.any()]
    if empty:  # its cells are every model's or item's last training answer
        per_model = np.bincount(rows, minlength=data.shape[0])[rows]
        per_item = np.bincount(cols, minlength=data.shape[1])[cols]
        if not ((per_model > 1) & (per_item > 1)).any():  # no number of folds helps
            raise ValueError(f"no cell can be held out: each of the {rows.size} observed "
                             "answers is its model's only answer or its item's (data of "
                             f"{data.shape[0]} model(s) x {data.shape[1]} item(s)); "
                             "cross-validation needs models with two answers or more to "
                             "items answered by two models or more")
        raise ValueError(f"folds={folds}: fold(s) {empty} hold no cell once each model and "
                         "item keeps a training answer (too sparse for so many folds)"
                         + ("; use fewer folds" if folds > 2 else ""))
    table = []
    contradicted = 0  # held-out answers a certain prediction (p = 0 or 1) got wrong
    with _progress_lines(fit_kwargs.get("verbose", 0)) as report:  # checked by fit
        for fold, held in enumerate(helds):
            train = data.without(rows[held], cols[held])
            # a fold whose training answers are all alike (tiny data) has no fit: a failed
            # fold, not an error about the user's answers
            reason = no_information(train)
            result = None if reason else _quiet_fit(train, method, seed, fit_kwargs)
            status = f"failed: its training answers: {reason}" if reason else result.status
            report("cross_validate: fold %d of %d fitted (%s)", fold + 1, folds, status)
            truth = values[held] > 0
            if status.startswith("failed"):
                scores = dict.fromkeys(("log_loss", "brier", "auc"), math.nan)
            else:
                probability = predicted_probabilities(result, rows[held], cols[held])
                contradicted += int(np.count_nonzero(np.where(truth, probability <= 0,
                                                              probability >= 1)))
                scores = held_out_scores(truth, probability)
            row = {"fold": fold, "method": method, "status": status,
                   "n_cells": int(held.sum()), **scores}
            for name, p in _baseline_probabilities(train, rows[~held], cols[~held], values[~held],
                                                   rows[held], cols[held]).items():
                row.update({f"{name}_{k}": v for k, v in held_out_scores(truth, p).items()})
            table.append(row)
    table = pd.DataFrame(table)
    _warn_statuses(table)
    _warn_baseline(table, method, rows.size / data.shape[1], rows.size / data.shape[0],
                   contradicted)
    return table


def best_baseline(table):
    """The baseline with the lowest mean held-out log loss in a :func:`cross_validate` table.

    Means are over the folds whose fit has scores (all folds when none has), so that the
    fit and its baselines are compared on the same cells.  Returns ``(name, means)``:
    ``name`` a key of :data:`BASELINES` and ``means`` its mean ``log_loss``, ``brier`` and
    ``auc`` (a dict).
    """
    scored = table[table["log_loss"].notna()]
    if scored.empty:
        scored = table
    losses = {name: scored[f"{name}_log_loss"].mean() for name in BASELINES}
    name = min(losses, key=lambda k: (math.inf if math.isnan(losses[k]) else losses[k]))
    return name, {k: float(scored[f"{name}_{k}"].mean()) for k in ("log_loss", "brier", "auc")}


def _warn_statuses(table) -> None:
    """A ConvergenceWarning counting the folds whose fit is not an answer, by status."""
    from .api import ConvergenceWarning

    status = table["status"].where(~table["status"].str.startswith("failed"), "failed")
    counts = status[status != "converged"].value_counts()
    if not counts.sum():
        return
    meaning = []
    if "failed" in counts:
        meaning.append("a failed fold scores NaN")
    if counts.drop("failed", errors="ignore").sum():
        meaning.append("a fold whose fit stopped short of an answer scores the fit where it stopped")
    warn(f"{counts.sum()} of {len(table)} folds' fits are not answers ("
         + ", ".join(f"{n} {s}" for s, n in counts.items()) + "): " + "; ".join(meaning),
         ConvergenceWarning)


def _warn_baseline(table, method, per_item, per_model, contradicted) -> None:
    """A HeldOutWarning when the fit's mean held-out log loss is above a baseline's
    (``per_item``, ``per_model``: the answers per item and per model, on average;
    ``contradicted``: held-out answers against a prediction of 0 or 1)."""
    scored = table[table["log_loss"].notna()]
    if scored.empty:
        return
    name, means = best_baseline(table)
    fit_loss = scored["log_loss"].mean()
    if fit_loss > means["log_loss"]:
        if contradicted:
            # degenerate="set_aside": a model or item whose training answers were all alike
            # is certain to answer alike (on AIME 2024, 27 such cells cost 0.2 nats a cell)
            why = (f"{contradicted} held-out answer(s) contradict a certain prediction (p = 0 "
                   "or 1) of a model or item set aside (degenerate='set_aside': its training "
                   f"answers all alike), each scored at the floor, {-math.log(PROBABILITY_FLOOR):.1f} "
                   "nats; degenerate='keep' (the default) gives them finite parameters")
        elif (scored["status"] == "converged").all():
            why = (f"too few answers per item or per model for the 2PL ({per_item:.3g} per "
                   f"item, {per_model:.3g} per model on average)? Its item parameters or "
                   "abilities are then mostly noise")
        else:
            why = "some folds' fits are not answers (see the status column)"
        warn(f"the {method} fit predicts held-out answers worse than the "
             f"{BASELINES[name]} baseline (log loss {fit_loss:.4f} vs "
             f"{means['log_loss']:.4f}): {why}", HeldOutWarning)


def predicted_probabilities(result, rows, cols) -> np.ndarray:
    """``Phi((theta_i a_j + b_j) / sigma)`` of a FitResult at the cells ``(rows, cols)``.

    A set-aside item (``a`` NaN, ``b`` +-inf) predicts its side (1 or 0) for every model;
    an item with ``a = 0`` predicts ``b`` for every model, a set-aside one (``theta``
    +-inf) included, whose product would be NaN.
    """
    from .model import expit

    theta = np.asarray(result.theta, dtype=float)[rows]
    a = np.asarray(result.a, dtype=float)[cols]
    b = np.asarray(result.b, dtype=float)[cols]
    with np.errstate(invalid="ignore"):
        x = np.where(np.isnan(a) | (a == 0), b, theta * a + b)
    return expit(x / result.sigma)


def _quiet_fit(train, method, seed, fit_kwargs):
    """A fold's fit, its warnings left to the table's statuses (:func:`_warn_statuses`)."""
    from .api import fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(train, method, seed=seed, **fit_kwargs)


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
    """Rows, columns (int32: 4 bytes a cell, where intp took 8) and +-1 values of the
    observed cells, row-major."""
    sparse = data.to_sparse()
    rows = np.repeat(np.arange(data.shape[0], dtype=np.int32), np.diff(sparse.indptr))
    return rows, sparse.indices.astype(np.int32, copy=False), sparse.values


def cells_in_label_order(data, rows, cols) -> np.ndarray:
    """The order of the cells ``(rows, cols)`` by their model's label, then their item's,
    as text (:meth:`Responses.label_order`)."""
    rank = []
    for axis in (0, 1):
        order = data.label_order(axis)
        position = np.empty(order.size, dtype=np.int32)
        position[order] = np.arange(order.size, dtype=np.int32)
        rank.append(position)
    return np.lexsort((rank[1][cols], rank[0][rows]))


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


def _baseline_probabilities(train, rows, cols, values, held_rows, held_cols) -> dict:
    """Each baseline's probabilities at the held-out cells, from the training cells
    ``(rows, cols, values)`` of ``train``."""
    counts = train._counts()
    u, v = additive_effects(rows, cols, values > 0, train.shape)
    return {"item_mean": _smoothed_share(counts.col_cor, counts.col_obs)[held_cols],
            "model_mean": _smoothed_share(counts.row_cor, counts.row_obs)[held_rows],
            "additive": _expit(u[held_rows] + v[held_cols])}


def _smoothed_share(correct, seen):
    """The share correct with half an answer of each kind added (the spectral start's
    smoothing), so that no probability is 0 or 1."""
    return (correct + 0.5) / (seen + 1.0)


def _expit(x):
    from .model import expit

    return expit(np.asarray(x, dtype=float))


def additive_effects(rows, cols, correct, shape, ridge: float = ADDITIVE_RIDGE, tol: float = 1e-8,
                     max_sweeps: int = 500):
    """Effects ``(u, v)`` of the additive (Rasch) model ``logit P(correct_ij) = u_i + v_j``.

    Maximises ``sum log P(answer) - ridge / 2 * (|u|^2 + |v|^2)`` over the answered cells
    ``(rows[k], cols[k])`` with answers ``correct[k]`` (bool).  The objective is strictly
    concave; it is climbed by alternating Newton steps, every model's ``u_i`` at once
    (the Hessian of the ``u`` block is diagonal), then every item's ``v_j``, then the exact
    optimum along ``(u + c, v - c)`` (which only the ridge sees), until no effect moves
    by more than ``tol``.  Vectorised over the cells: each sweep is a few passes over them.
    A model or item without a cell gets 0 (the ridge alone).
    """
    n, j = shape
    correct = np.asarray(correct, dtype=float)
    u, v = np.zeros(n), np.zeros(j)
    for _ in range(max_sweeps):
        moved = 0.0
        for index, size, effect, other, other_index in ((rows, n, u, v, cols),
                                                        (cols, j, v, u, rows)):
            p = _expit(effect[index] + other[other_index])
            gradient = np.bincount(index, correct - p, minlength=size) - ridge * effect
            curvature = np.bincount(index, p * (1.0 - p), minlength=size) + ridge
            # a 1-D Newton step per effect, at most 4 logits (the logistic's curvature
            # vanishes far out, where a full step would overshoot)
            step = np.clip(gradient / curvature, -4.0, 4.0)
            effect += step
            moved = max(moved, float(np.abs(step).max(initial=0.0)))
        shift = (v.sum() - u.sum()) / (n + j)  # argmin_c |u + c|^2 + |v - c|^2
        u += shift
        v -= shift
        if moved <= tol:
            break
    return u, v
