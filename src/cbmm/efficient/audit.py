"""Which items measure nothing, or the wrong thing: :func:`item_audit`.

For each calibrated item, on the models whose responses are given (their abilities the
posterior means given their answers, with the items held; N(0, 1) prior):

``information``
    Its Fisher information ``a^2 p (1 - p) / sigma^2`` averaged over the models'
    abilities: what one answer to it tells about a model of this population.
``not_identified``
    Every model that answered it answered alike (all correct or all wrong), or none did:
    the responses cannot place it.
``negative_discrimination``
    ``a`` is held at 0 by the constraint ``a >= 0`` (``a / sigma`` below
    :data:`NEGLIGIBLE_SLOPE`) while the weaker models answer it correctly more often
    than the stronger: the score test of a zero slope in the logistic regression of its
    answers on the abilities, ``z = sum_i (theta_i - mean) (y_i - ybar) /
    sqrt(ybar (1 - ybar) sum_i (theta_i - mean)^2)``, is below the one-sided
    Bonferroni bound for :data:`FAMILY_ERROR` over the items tested.  A reversed answer
    key does this: the likely mislabelled items.
``no_information``
    ``a / sigma`` below :data:`NEGLIGIBLE_SLOPE` (its log-odds change by less than 0.1
    per sd of ability) on answers that differ between models, without evidence of the
    reverse (a not identified item's ``a`` comes from the prior alone).
``out_of_range``
    It discriminates (``a / sigma`` at least :data:`NEGLIGIBLE_SLOPE`) but far from every
    model: its fitted probability is below :data:`OUT_OF_RANGE_PROBABILITY` for every
    model or above one minus it for every model (its difficulty ``-b / a`` lies beyond
    the models' abilities by more than 3.7 logits).

``reason`` says in words why an item is flagged (empty when it is not).
"""

from __future__ import annotations

import numpy as np

from .bank import ItemBank, Posterior, aligned_answers

__all__ = ["item_audit", "FLAGS", "NEGLIGIBLE_SLOPE", "FAMILY_ERROR",
           "OUT_OF_RANGE_PROBABILITY"]

#: The boolean columns of :func:`item_audit`.
FLAGS = ("not_identified", "no_information", "negative_discrimination", "out_of_range")
#: ``a / sigma`` below this (log-odds per sd of ability) counts as ``a = 0``.
NEGLIGIBLE_SLOPE = 0.1
#: Family-wise error of the negative-discrimination tests (one-sided, Bonferroni).
FAMILY_ERROR = 0.05
#: An item whose probability is below this for every model (or above 1 - this) is out of
#: their range: its information at every model is below a tenth of its peak.
OUT_OF_RANGE_PROBABILITY = 0.025


def item_audit(result, responses, *, coding: str | None = None, layout: str = "auto"):
    """Flag the calibrated items that are not identified, carry no information, discriminate
    the wrong way or lie outside the models' abilities.

    Parameters
    ----------
    result : FitResult, pandas.DataFrame or path
        The calibration (as for :func:`cbmm.score`; a bare table is read at
        temperature 1, :meth:`~cbmm.efficient.bank.ItemBank.of`).
    responses : array-like, pandas.DataFrame or Responses
        Answers of the models to audit the items on (usually the calibration's own data),
        aligned with the items as for :func:`cbmm.score`.
    coding, layout
        As for :func:`cbmm.as_responses`.

    Returns
    -------
    pandas.DataFrame
        Indexed by item (``item``): ``a``, ``b``, ``difficulty`` (``-b / a``, the ability at
        which p = 1/2; NaN where ``a`` is negligible), ``n_models`` (models that answered
        it), ``share_correct``, ``information``, ``slope_z`` (the score test's z; NaN where
        not computed), the boolean :data:`FLAGS` and ``reason``.

    Raises
    ------
    ValueError
        Bad responses or calibration (the message names the cell, item or argument).
    """
    import pandas as pd
    from scipy.special import ndtri

    bank = ItemBank.of(result)
    answers, _ = aligned_answers(responses, bank, coding=coding, layout=layout)
    answered = answers != 0
    if not answered.any(axis=1).any():
        raise ValueError("responses: no model answered any calibrated item")
    rows = answered.any(axis=1)
    answers, answered = answers[rows], answered[rows]
    abilities = Posterior(answers, bank).mean

    n_models = answered.sum(axis=0)
    n_correct = (answers > 0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = n_correct / n_models
        difficulty = np.where(bank.slope >= NEGLIGIBLE_SLOPE, -bank.b / bank.a, np.nan)
    probability = bank.probabilities(abilities)
    information = bank.information(abilities).mean(axis=0)

    not_identified = (n_correct == 0) | (n_correct == n_models)
    negligible = bank.slope < NEGLIGIBLE_SLOPE
    slope_z = np.full(len(bank), np.nan)
    tested = negligible & ~not_identified
    slope_z[tested] = _slope_scores(answers[:, tested], answered[:, tested], abilities)
    bound = ndtri(FAMILY_ERROR / max(int(tested.sum()), 1))
    negative = tested & (slope_z < bound)
    out_of_range = ~negligible & ((probability < OUT_OF_RANGE_PROBABILITY).all(axis=0)
                                  | (probability > 1 - OUT_OF_RANGE_PROBABILITY).all(axis=0))
    flags = {"not_identified": not_identified,
             "no_information": negligible & ~negative & ~not_identified,
             "negative_discrimination": negative, "out_of_range": out_of_range}
    table = pd.DataFrame({"a": bank.a, "b": bank.b, "difficulty": difficulty,
                          "n_models": n_models, "share_correct": share,
                          "information": information, "slope_z": slope_z, **flags},
                         index=pd.Index(bank.labels, name="item"))
    table["reason"] = [_reason(row, abilities) for row in table.itertuples()]
    return table


def _slope_scores(answers, answered, abilities):
    """The score statistic z of a zero slope, per column, over the models that answered."""
    count = answered.sum(axis=0)
    theta = np.where(answered, abilities[:, None], 0.0)
    centred = np.where(answered, theta - theta.sum(axis=0) / count, 0.0)
    correct = answers > 0
    share = correct.sum(axis=0) / count
    numerator = (centred * (correct - share)).sum(axis=0)
    return numerator / np.sqrt(share * (1 - share) * (centred ** 2).sum(axis=0))


def _reason(row, abilities) -> str:
    reasons = []
    if row.not_identified:
        reasons.append("no model answered it" if row.n_models == 0 else
                       f"every model that answered it ({row.n_models}) answered it "
                       + ("correctly" if row.share_correct == 1 else "wrongly"))
    if row.negative_discrimination:
        reasons.append(f"weaker models answer it correctly more often than stronger ones "
                       f"(z = {row.slope_z:.1f}) while a is held at 0: likely a wrong answer "
                       "key")
    if row.no_information:
        reasons.append(f"a = {row.a:.3g}: its answers do not depend on ability")
    if row.out_of_range:
        side = "easier" if row.difficulty < abilities.min() else "harder"
        reasons.append(f"difficulty {row.difficulty:.2f} is far {side} than every model "
                       f"(abilities {abilities.min():.2f} to {abilities.max():.2f})")
    return "; ".join(reasons)
