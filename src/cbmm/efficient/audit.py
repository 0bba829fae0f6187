"""Which items measure nothing, or the wrong thing: :func:`item_audit`.

For each calibrated item, on the models whose responses are given (their abilities the
posterior means given their answers, with the items held; the bank's prior, N(0, 1) or
an ``mml`` fit's population):

``information``
    Its Fisher information ``a^2 p (1 - p) / sigma^2`` averaged over the models'
    abilities: what one answer to it tells about a model of this population.
``not_identified``
    Every model that answered it answered alike (all correct or all wrong), or none did:
    the responses cannot place it; or the calibration fit set it aside
    (``degenerate="set_aside"``), its ``a`` NaN and ``b`` +-inf in the table as in the fit.
``negative_discrimination``
    ``a`` is held at 0 by the constraint ``a >= 0`` (``a / sigma`` below
    :data:`NEGLIGIBLE_SLOPE`) while the weaker models answer it correctly more often
    than the stronger: the score test of a zero slope in the logistic regression of its
    answers on the abilities, ``z = sum_i (theta_i - mean) (y_i - ybar) /
    sqrt(ybar (1 - ybar) sum_i (theta_i - mean)^2)``, is significant at the false
    discovery rate :data:`FALSE_DISCOVERY_RATE` over the items tested (one-sided,
    Benjamini-Hochberg).  A reversed answer key does this: the likely mislabelled items.
``no_information``
    ``a / sigma`` below :data:`NEGLIGIBLE_SLOPE` (its log-odds change by less than 0.1
    per sd of ability) on answers that differ between models, without evidence of the
    reverse (a not identified item's ``a`` comes from the prior alone).
``out_of_range``
    It discriminates (``a / sigma`` at least :data:`NEGLIGIBLE_SLOPE`) but far from every
    model: its fitted probability is below :data:`OUT_OF_RANGE_PROBABILITY` for every
    model or above one minus it for every model (its difficulty ``-b / a`` lies beyond
    the models' abilities by more than 3.7 logits).

``key_checked`` (not a flag)
    Whether the answers could show the item's key wrong: a wrong key reverses the slope,
    so it shows where the answers rise with ability as steeply as a flagged item's fall
    (a slope score at least minus the flag's bound), or where the item is flagged.
    Elsewhere (items every model answered alike, or whose answers barely depend on
    ability) the audit's silence is no evidence that the key is right:
    :func:`key_check_summary` says how many such items there are.  With 43-81 models
    the answers could check 0.43-0.89 of planted reversed keys on the leaderboard's v2
    copies, and the audit found 0.99-1.0 of those (docs/efficiency.md).

``reason`` says in words why an item is flagged (empty when it is not).

"Weaker" and "stronger" are along the fit's one dimension.  Where that dimension is not
what the benchmark's score measures, the flags say little about the items' keys, so the
audit checks it (:func:`ability_agreement`, in the returned table's
``attrs["ability_agreement"]``): the rank correlation of the models' abilities with their
accuracy, against the same on answers drawn from the fit itself.  On MATH-500 they are
0.997 and 0.999; on a near-chance BBH task of the Open LLM Leaderboard (4,030 models,
five-object tracking) 0.54 and 0.95, where halves of its items fitted apart give abilities
that correlate from -0.26 to 0.88.  Short of the fit's by more than
:data:`AGREEMENT_SHORTFALL`, the audit warns (:class:`AbilityAgreementWarning`) and its
negative-discrimination reasons say that they are no evidence of a wrong key.

A wrong key is a fault of one item: reversed, the item is an ordinary one, and its
answers depend on the other items' no more than an ordinary item's do. Items that
discriminate the wrong way together, sharing a skill or a format the fit's ability does
not measure (or a fault common to their keys), depend on one another more. The audit
checks it (:class:`WrongWayDependence`, in ``attrs["wrong_way_dependence"]``): the
largest eigenvalue of the wrong-way items' residual correlations against the same for
:data:`ORDINARY_SETS` random sets of as many of the benchmark's unflagged items. Above
them all (a Monte Carlo p-value of 0.05), the audit warns
(:class:`WrongWayDependenceWarning`), and each wrong-way item is set against the others'
first component: one that goes with them more than the ordinary items of its slope do is
no evidence of a wrong key of its own, one that does not is "possibly a wrong answer
key". Reversing an item flips the sign of its residuals and leaves their correlations
with other reversed items as they were, so reversed keys pass: the reversed items found
among 5 % reversed on 14 real matrices (two seeds each) passed 25 times of 28, and on
data drawn from the 2PL 55 times of 60 (the test's nominal error is 1 in 20), and where
they did not, item by item they mostly do; the wrong-way items of IFEval, BBH and
MMLU-Pro of the v2 leaderboard and of ARC and MMLU of the v1 leaderboard did not
(docs/efficiency.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine import row_blocks
from .._warn import CbmmWarning, warn
from .bank import (ItemBank, Posterior, aligned_answers, grid_moments, log_weights,
                   normalised_weights)

__all__ = ["item_audit", "key_check_summary", "FLAGS", "NEGLIGIBLE_SLOPE",
           "FALSE_DISCOVERY_RATE", "OUT_OF_RANGE_PROBABILITY", "ability_agreement",
           "AbilityAgreement", "AbilityAgreementWarning", "AGREEMENT_SHORTFALL",
           "AGREEMENT_SIMULATIONS", "WrongWayDependence", "WrongWayDependenceWarning",
           "ORDINARY_SETS"]

#: The boolean columns of :func:`item_audit`.
FLAGS = ("not_identified", "no_information", "negative_discrimination", "out_of_range")
#: A slope score below this (one-sided 5 %), if short of the flag's bound, is named in the
#: ``no_information`` reason rather than called no dependence.
NOMINAL_Z = -1.645
#: ``a / sigma`` below this (log-odds per sd of ability) counts as ``a = 0``.
NEGLIGIBLE_SLOPE = 0.1
#: False discovery rate of the negative-discrimination flags: Benjamini and Hochberg's
#: procedure over the one-sided tests of the items whose ``a`` is held at 0.  It bounds the
#: expected share of flagged items whose slope is not negative.  A family-wise bound
#: (Bonferroni) found 0.26-0.36 of 5 % reversed items among 80 models x 500-1,000 items,
#: this 0.60-0.76, at precision 1.0 (docs/efficiency.md).
FALSE_DISCOVERY_RATE = 0.05
#: An item whose probability is below this for every model (or above 1 - this) is out of
#: their range: its information at every model is below a tenth of its peak.
OUT_OF_RANGE_PROBABILITY = 0.025
#: How far the abilities' rank correlation with the models' accuracy may fall below the
#: fit's own before the audit says that the fit's dimension is not the benchmark's score.
#: Measured shortfalls (docs/efficiency.md): 0.002-0.086 on six real matrices, 0.27 on
#: MuSR and 0.41 on a BBH task; 0.14 on a simulated benchmark of two unrelated skills
#: in equal shares.
AGREEMENT_SHORTFALL = 0.1
#: Answer matrices drawn from the fit for the correlation it implies.
AGREEMENT_SIMULATIONS = 20
#: Random sets of unflagged items against which the wrong-way items' dependence is
#: compared: above all of them is a Monte Carlo p-value of 1 / (19 + 1) = 0.05.
ORDINARY_SETS = 19


def __getattr__(name: str):
    # 0.2.0's name, kept so that code written for it still imports; it no longer sets a bound
    if name == "FAMILY_ERROR":
        warn("cbmm.efficient.audit.FAMILY_ERROR is deprecated and has no effect: "
             "the negative-discrimination flags control the false discovery rate "
             "FALSE_DISCOVERY_RATE (Benjamini-Hochberg), not a Bonferroni "
             "family-wise error", DeprecationWarning)
        return FALSE_DISCOVERY_RATE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class AbilityAgreementWarning(CbmmWarning):
    """The fitted abilities rank the models unlike their accuracy, by more than the fit
    itself implies (:func:`ability_agreement`)."""


@dataclass(frozen=True)
class AbilityAgreement:
    """Whether the fit's one dimension ranks the models as their accuracy does.

    Attributes
    ----------
    observed : float
        Spearman's rank correlation of the models' abilities (posterior means, the items
        held) with their accuracy (share correct over the items each answered).
    implied : float
        Its mean over :data:`AGREEMENT_SIMULATIONS` answer matrices drawn from the fit at
        those abilities, each model answering the items it answered: what the 2PL, were
        it true, would give (below 1 where items differ in discrimination or are few).
    n_models : int
        Models that answered an item.
    """

    observed: float
    implied: float
    n_models: int

    @property
    def agrees(self) -> bool:
        """False where ``observed`` falls short of ``implied`` by more than
        :data:`AGREEMENT_SHORTFALL` (True where either is undefined: no evidence)."""
        return not self.observed < self.implied - AGREEMENT_SHORTFALL

    def __str__(self) -> str:
        if np.isnan(self.observed):  # fewer than two models, or all alike
            return (f"the abilities' rank correlation with the accuracy is not measured "
                    f"({self.n_models} model(s) answered an item; it needs two that differ)")
        return (f"the abilities' rank correlation with the accuracy of {self.n_models} "
                f"models is {self.observed:.3f} (answers drawn from the fit: "
                f"{self.implied:.3f})")


class WrongWayDependenceWarning(CbmmWarning):
    """The items that discriminate the wrong way depend on one another more than the
    benchmark's ordinary items do (:class:`WrongWayDependence`)."""


@dataclass(frozen=True)
class WrongWayDependence:
    """Whether the wrong-way items share a dimension of their own, beyond the dependence
    among the benchmark's ordinary items.

    For a set of items: each item's answers are regressed on the models' abilities (a
    logistic regression with its own intercept and slope, of either sign), and the
    residuals, standardised, are correlated between items; the set's dependence is the
    largest eigenvalue of that correlation matrix (1 for independent items, the set's size
    for items that are one).

    Attributes
    ----------
    observed : float
        The dependence of the items flagged ``negative_discrimination`` (a random subset
        of as many as there are ordinary items, where they are more); NaN where fewer
        than two are flagged or fewer than two items are ordinary (no flag at all).
    ordinary : float
        The largest dependence of :data:`ORDINARY_SETS` random sets of as many ordinary
        items (a fixed seed).
    n_items : int
        The size of the sets compared.
    """

    observed: float
    ordinary: float
    n_items: int

    @property
    def shared(self) -> bool:
        """True where the wrong-way items depend on one another more than every random
        set of ordinary items does (False where undefined: no evidence)."""
        return bool(self.observed > self.ordinary)

    def __str__(self) -> str:
        if not np.isfinite(self.observed):
            return ("the wrong-way items' residual dependence is not measured (it needs two "
                    "of them and two ordinary items)")
        return (f"the residual dependence of {self.n_items} wrong-way items is "
                f"{self.observed:.2f} (the largest of {ORDINARY_SETS} random sets of as "
                f"many ordinary items: {self.ordinary:.2f})")


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
        it), ``share_correct``, ``information``, ``slope_z`` (the score test's z of a zero
        slope; NaN where every model answered alike; the flag tests the items whose ``a``
        is held at 0), the boolean :data:`FLAGS`, ``key_checked`` (whether the answers
        could show the key wrong), ``ability_rank_correlation`` and
        ``implied_rank_correlation`` (the benchmark's :class:`AbilityAgreement`, the same
        on every row; the object itself in ``attrs["ability_agreement"]``),
        ``wrong_way_dependence`` and ``ordinary_dependence`` (the benchmark's
        :class:`WrongWayDependence`, likewise; ``attrs["wrong_way_dependence"]``),
        ``shared_z`` and ``shared_bound`` (where the wrong-way items share a dimension,
        for each of them: ``z`` of its residuals' correlation with the others' first
        component, and the largest of the 19 ordinary items nearest its slope; NaN
        elsewhere) and ``reason``; ``attrs["slope_bound"]``, the score at or below which
        an item tested is flagged ``negative_discrimination`` (the false discovery rate's
        bound over the items tested).

    Warns
    -----
    AbilityAgreementWarning
        Where the abilities rank the models unlike their accuracy, by more than the fit
        implies (:attr:`AbilityAgreement.agrees`).
    WrongWayDependenceWarning
        Where the wrong-way items depend on one another more than ordinary items do
        (:attr:`WrongWayDependence.shared`).

    Raises
    ------
    ValueError
        Bad responses or calibration (the message names the cell, item or argument).
    """
    import pandas as pd
    from scipy.special import ndtr, ndtri

    bank = ItemBank.of(result)
    answers = _answering(responses, bank, coding, layout)
    answered = answers != 0
    posterior = Posterior(answers, bank)
    abilities = posterior.mean

    n_models = answered.sum(axis=0)
    n_correct = (answers > 0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = n_correct / n_models
        difficulty = np.where(bank.slope >= NEGLIGIBLE_SLOPE, -bank.b / bank.a, np.nan)
    # over blocks of models: a models x items matrix of probabilities, and another of
    # information, took 2.2 GB beyond the answers on 4800 x 12000
    information = np.zeros(len(bank))
    always_low, always_high = np.ones(len(bank), dtype=bool), np.ones(len(bank), dtype=bool)
    for rows in row_blocks(len(abilities), len(bank), 1 << 22):
        probability = bank.probabilities(abilities[rows])
        always_low &= (probability < OUT_OF_RANGE_PROBABILITY).all(axis=0)
        always_high &= (probability > 1 - OUT_OF_RANGE_PROBABILITY).all(axis=0)
        information += bank.information(abilities[rows]).sum(axis=0)
    information /= len(abilities)

    set_aside = np.zeros(len(bank), dtype=bool)
    set_aside[list(bank.set_aside)] = True  # the fit has no a or b: its stand-ins inform nothing
    not_identified = (n_correct == 0) | (n_correct == n_models) | set_aside
    negligible = bank.slope < NEGLIGIBLE_SLOPE
    slope_z = np.full(len(bank), np.nan)
    slope_z[~not_identified] = _slope_scores(answers[:, ~not_identified],
                                             answered[:, ~not_identified], abilities)
    tested = negligible & ~not_identified
    with np.errstate(invalid="ignore"):
        p_value = ndtr(slope_z)  # one-sided: a negative slope
    threshold = _discovery_threshold(p_value[tested])
    negative = tested & (p_value <= threshold)
    bound = float(ndtri(threshold))
    # a wrong key reverses the slope: it shows where the right key's answers rise as
    # steeply as a flagged item's fall
    key_checked = negative | (slope_z >= -bound)
    out_of_range = ~negligible & (always_low | always_high)
    flags = {"not_identified": not_identified,
             "no_information": negligible & ~negative & ~not_identified,
             "negative_discrimination": negative, "out_of_range": out_of_range}
    table = pd.DataFrame({"a": np.where(set_aside, np.nan, bank.a),  # as the fit gives them
                          "b": np.where(set_aside, np.copysign(np.inf, bank.b), bank.b),
                          "difficulty": difficulty,
                          "n_models": n_models, "share_correct": share,
                          "information": information, "slope_z": slope_z, **flags,
                          "key_checked": key_checked},
                         index=pd.Index(bank.given_labels, name="item"))
    unanswered = int((n_models == 0).sum())
    if unanswered:  # e.g. answers to a subset of the items: the audit sees only those
        warn(f"responses: {unanswered} of the {len(bank)} calibrated items have no answer "
             "in them; the audit judges an item by the answers given, and flags those "
             "not_identified ('no model of the responses answered it'), whatever the "
             "fit made of them",
             CbmmWarning)
    agreement = _agreement(answers, posterior, bank)
    table["ability_rank_correlation"] = agreement.observed
    table["implied_rank_correlation"] = agreement.implied
    if not agreement.agrees:
        warn(f"{agreement}: one dimension does not describe these answers, and "
             "the audit's weaker and stronger models are weaker and stronger on "
             "it, not on the benchmark's score; its negative-discrimination flags "
             "are no evidence of wrong keys (docs/efficiency.md)",
             AbilityAgreementWarning)
    ordinary = ~np.logical_or.reduce([flags[flag] for flag in FLAGS])
    dependence = _wrong_way_dependence(answers, posterior, bank, negative, ordinary)
    table["wrong_way_dependence"] = dependence.observed
    table["ordinary_dependence"] = dependence.ordinary
    # which of them share it: the set's verdict alone would take the words from an
    # independent wrong key among them too
    table["shared_z"] = table["shared_bound"] = np.nan
    if dependence.shared:
        table.loc[negative, "shared_z"], table.loc[negative, "shared_bound"] = \
            _item_shares(answers, posterior, bank, negative, ordinary)
        warn(f"{dependence}: the items that discriminate the wrong way share a "
             "dimension of their own (a skill or a format the fit's ability does "
             "not measure, or a fault common to their keys), so their flags are no "
             "evidence of one item's wrong key; read them together "
             "(docs/efficiency.md)", WrongWayDependenceWarning)
    n_sharing = int((table["shared_z"] > table["shared_bound"]).sum())
    table["reason"] = [_reason(row, abilities, agreement, dependence, n_sharing, bound,
                               int(tested.sum())) for row in table.itertuples()]
    table.attrs["ability_agreement"] = agreement
    table.attrs["wrong_way_dependence"] = dependence
    table.attrs["slope_bound"] = bound
    return table


def key_check_summary(audit) -> str:
    """How many of the items of ``audit`` (an :func:`item_audit` table) the answers could
    check the keys of, in words."""
    checked = int(audit["key_checked"].sum())
    return (f"the answers could show a wrong key on {checked} of {len(audit)} items "
            f"({checked / max(len(audit), 1):.0%}); on the other {len(audit) - checked} "
            f"they do not depend on ability steeply enough, or every model answered alike")


def ability_agreement(result, responses, *, coding: str | None = None,
                      layout: str = "auto") -> AbilityAgreement:
    """Whether the calibration's ability ranks the models as their accuracy does.

    Parameters
    ----------
    result, responses, coding, layout
        As for :func:`item_audit`, which computes the same (its table's
        ``attrs["ability_agreement"]``).

    Returns
    -------
    AbilityAgreement
        The observed rank correlation, the one answers drawn from the fit imply (a fixed
        seed: the same data give the same value), and ``agrees``.
    """
    bank = ItemBank.of(result)
    answers = _answering(responses, bank, coding, layout)
    return _agreement(answers, Posterior(answers, bank), bank)


def _answering(responses, bank, coding, layout) -> np.ndarray:
    """The aligned answers (int8 +-1/0) of the models that answered a calibrated item; a
    ValueError where none did."""
    answers, _ = aligned_answers(responses, bank, coding=coding, layout=layout)
    answers = answers[(answers != 0).any(axis=1)]
    if not len(answers):
        raise ValueError("responses: no model answered any calibrated item")
    if len(answers) < 2:  # every item would be "not identified", every model alike
        raise ValueError("responses: one model answered the calibrated items; the audit "
                         "compares models, and needs the answers of at least 2")
    return answers


def _agreement(answers, posterior: Posterior, bank) -> AbilityAgreement:
    """:func:`ability_agreement` of ``answers`` (int8 +-1/0, every row answering an item)
    and their ``posterior``."""
    from ..metrics import spearman  # with pandas: not at ``import cbmm``

    answered = answers != 0
    count = answered.sum(axis=1)
    abilities = posterior.mean
    observed = spearman(abilities, (answers > 0).sum(axis=1) / count)
    rng = np.random.default_rng(0)
    # a drawn matrix answers the same items: its posterior needs only the sum of the
    # slopes of those it answered correctly (bank.log_weights), its accuracy their number;
    # each block's probabilities serve every draw (memory: a block)
    correct_slope = np.empty((AGREEMENT_SIMULATIONS, len(answers)))
    n_correct = np.empty((AGREEMENT_SIMULATIONS, len(answers)))
    for rows in row_blocks(len(answers), answers.shape[1], 1 << 22):
        probability = bank.probabilities(abilities[rows])
        for draw in range(AGREEMENT_SIMULATIONS):
            correct = (rng.random(probability.shape) < probability) & answered[rows]
            correct_slope[draw, rows], n_correct[draw, rows] = (correct @ bank.slope,
                                                                correct.sum(axis=1))
    implied = [spearman(grid_moments(normalised_weights(
                   log_weights(posterior.answered_log_q, slopes, bank.log_prior)))[0], correct / count)
               for slopes, correct in zip(correct_slope, n_correct)]
    return AbilityAgreement(observed=observed, implied=float(np.mean(implied)),
                            n_models=len(answers))


def _wrong_way_dependence(answers, posterior, bank, wrong_way,
                          ordinary) -> WrongWayDependence:
    """:class:`WrongWayDependence` of the ``wrong_way`` items against random sets of the
    ``ordinary`` ones (boolean masks over the columns of ``answers``) that discriminate
    as much.  Each set's residuals are taken from abilities without its own answers: an
    item that informs the ability leaves less of its noise in its residuals, and a
    wrong-way item, held at ``a = 0``, informs none."""
    wrong_way, ordinary = np.flatnonzero(wrong_way), np.flatnonzero(ordinary)
    size = min(len(wrong_way), len(ordinary))
    if size < 2:
        return WrongWayDependence(observed=np.nan, ordinary=np.nan, n_items=size)
    rng = np.random.default_rng(0)
    chosen = rng.choice(wrong_way, size, replace=False)
    abilities = posterior.mean_without(answers, bank, chosen)
    coef = _logistic_fits(answers[:, chosen], abilities)
    observed = _dependence(answers[:, chosen], abilities, coef)
    sets = []
    for _ in range(ORDINARY_SETS):
        # matched on the slope: the residuals of items that discriminate more share
        # more of the abilities' own error, and reversed keys are found among those
        items = _matched(np.abs(coef[1]), ordinary, bank.slope[ordinary], rng)
        sets.append(_dependence(answers[:, items],
                                posterior.mean_without(answers, bank, items)))
    return WrongWayDependence(observed=observed, ordinary=float(max(sets)), n_items=size)


def _matched(targets, candidates, slopes, rng, pool: int = 5) -> np.ndarray:
    """For each target slope, in random order, one of the ``pool`` candidates not yet
    taken whose ``slopes`` are nearest it, at random."""
    free = np.ones(len(candidates), dtype=bool)
    taken = []
    for target in rng.permutation(targets):
        left = np.flatnonzero(free)
        distance = np.abs(slopes[left] - target)
        nearest = left[np.argpartition(distance, min(pool, len(left)) - 1)[:pool]]
        pick = rng.choice(nearest)
        free[pick] = False
        taken.append(pick)
    return candidates[taken]


def _logistic_fits(answers, abilities, iterations: int = 25) -> np.ndarray:
    """``2 x items``: each column's logistic regression on ``abilities`` (its own intercept
    and slope, of either sign) by Newton's method, over the models that answered, until
    no step moves a coefficient by 1e-10 (at most ``iterations``)."""
    from scipy.special import expit

    answered = answers != 0
    correct = (answers > 0).astype(float)
    theta = abilities[:, None]
    ridge = 1e-6 * answered.sum(axis=0)  # keeps an item that separates the models finite
    coef = np.zeros((2, answers.shape[1]))
    for _ in range(iterations):
        p = expit(coef[0] + theta * coef[1])
        w = np.where(answered, p * (1 - p), 0.0)
        r = np.where(answered, correct - p, 0.0)
        g0, g1 = r.sum(axis=0), (r * theta).sum(axis=0)
        h00, h01 = w.sum(axis=0) + ridge, (w * theta).sum(axis=0)
        h11 = (w * theta ** 2).sum(axis=0) + ridge
        det = h00 * h11 - h01 ** 2
        step = np.array([h11 * g0 - h01 * g1, h00 * g1 - h01 * g0]) / det
        coef = np.clip(coef + step, -30.0, 30.0)
        if np.abs(step).max() < 1e-10:
            break
    return coef


def _residuals(answers, abilities, coef=None) -> np.ndarray:
    """The columns' standardised residuals from their :func:`_logistic_fits` (``coef``,
    computed where not given), centred and scaled to unit length over the models that
    answered (unanswered cells 0): their inner products are correlations."""
    from scipy.special import expit

    coef = _logistic_fits(answers, abilities) if coef is None else coef
    answered = answers != 0
    p = np.clip(expit(coef[0] + abilities[:, None] * coef[1]), 1e-9, 1 - 1e-9)
    residual = np.where(answered, ((answers > 0) - p) / np.sqrt(p * (1 - p)), 0.0)
    residual -= residual.sum(axis=0) / np.maximum(answered.sum(axis=0), 1)
    residual = np.where(answered, residual, 0.0)
    return residual / np.maximum(np.sqrt((residual ** 2).sum(axis=0)), 1e-12)


def _top_component(residual, vector: bool = True):
    """The largest singular value of ``residual`` and, where ``vector``, its right singular
    vector (else None: not computed)."""
    from scipy.sparse.linalg import svds

    if min(residual.shape) <= 500:
        if not vector:
            return np.linalg.svd(residual, compute_uv=False)[0], None
        _, values, vectors = np.linalg.svd(residual, full_matrices=False)
        return values[0], vectors[0]
    if not vector:
        return svds(residual, k=1, return_singular_vectors=False, random_state=0)[0], None
    _, values, vectors = svds(residual, k=1, return_singular_vectors="vh", random_state=0)
    return values[0], vectors[0]


def _dependence(answers, abilities, coef=None) -> float:
    """The largest eigenvalue of the correlations of the columns' :func:`_residuals`."""
    return float(_top_component(_residuals(answers, abilities, coef), vector=False)[0] ** 2)


def _item_shares(answers, posterior, bank, wrong_way, ordinary):
    """Per wrong-way item (boolean masks over the columns of ``answers``), ``z`` of its
    residuals' correlation with the other wrong-way items' first component (their
    residuals weighted by its singular vector, the item's own taken out, as a corrected
    item-total correlation), and the largest ``z`` of the :data:`ORDINARY_SETS` ordinary
    items nearest its slope against the whole component."""
    wrong_way, ordinary = np.flatnonzero(wrong_way), np.flatnonzero(ordinary)
    abilities = posterior.mean_without(answers, bank, wrong_way)
    coef = _logistic_fits(answers[:, wrong_way], abilities)
    residual = _residuals(answers[:, wrong_way], abilities, coef)
    _, weights = _top_component(residual)
    score = residual @ weights
    rest = score[:, None] - residual * weights
    rest -= rest.mean(axis=0)
    count = np.sqrt((answers[:, wrong_way] != 0).sum(axis=0))
    z = np.abs((residual * rest).sum(axis=0)) / np.maximum(
        np.linalg.norm(rest, axis=0), 1e-12) * count
    slopes = bank.slope[ordinary]
    nearest = [np.argpartition(np.abs(slopes - abs(slope)),
                               min(ORDINARY_SETS, len(ordinary)) - 1)[:ORDINARY_SETS]
               for slope in coef[1]]
    pool = np.unique(np.concatenate(nearest))
    reference = _residuals(answers[:, ordinary[pool]], abilities)
    centred = score - score.mean()
    reference_z = np.abs(reference.T @ centred) / max(np.linalg.norm(centred), 1e-12) \
        * np.sqrt((answers[:, ordinary[pool]] != 0).sum(axis=0))
    at = {item: k for k, item in enumerate(pool)}
    bound = np.array([reference_z[[at[item] for item in near]].max() for near in nearest])
    return z, bound


def _slope_scores(answers, answered, abilities):
    """The score statistic z of a zero slope, per column, over the models that answered:
    ``sum (theta - mean) (y - ybar) / sqrt(ybar (1 - ybar) sum (theta - mean)^2)``, by
    products of the abilities with the columns (no models x items temporaries)."""
    count = answered.sum(axis=0)
    correct = answers > 0
    n_correct = correct.sum(axis=0)
    mean = abilities @ answered / count
    share = n_correct / count
    numerator = abilities @ correct - n_correct * mean  # sum (theta - mean) (y - ybar)
    spread = abilities ** 2 @ answered - count * mean ** 2  # sum (theta - mean)^2
    return numerator / np.sqrt(share * (1 - share) * spread)


def _discovery_threshold(p_values) -> float:
    """The p-value at or below which Benjamini and Hochberg's procedure at
    :data:`FALSE_DISCOVERY_RATE` flags a test: ``q k / m`` for the largest ``k`` whose
    ``k``-th smallest of the ``m`` p-values is at most ``q k / m``; the first step's ``q / m``
    where none is (nothing flagged)."""
    m = max(len(p_values), 1)
    steps = FALSE_DISCOVERY_RATE * np.arange(1, len(p_values) + 1) / m
    passed = np.flatnonzero(np.sort(p_values) <= steps)  # NaN sorts last and fails
    return float(steps[passed[-1]]) if len(passed) else FALSE_DISCOVERY_RATE / m


def _reason(row, abilities, agreement: AbilityAgreement, dependence: WrongWayDependence,
            n_sharing: int, bound: float, n_tested: int) -> str:
    reasons = []
    if np.isnan(row.a):
        reasons.append("the calibration fit set it aside: every model it kept answered it "
                       + ("correctly" if row.b > 0 else "wrongly") + " (no estimate of a or b)")
    elif row.not_identified:
        reasons.append("no model of the responses answered it" if row.n_models == 0 else
                       f"every model that answered it ({row.n_models}) answered it "
                       + ("correctly" if row.share_correct == 1 else "wrongly"))
    if row.negative_discrimination:
        if not agreement.agrees:
            why = (f"no evidence of a wrong key here, since the ability ranks the models "
                   f"unlike their accuracy (rank correlation {agreement.observed:.2f}; the "
                   f"fit implies {agreement.implied:.2f})")
        elif dependence.shared and row.shared_z > row.shared_bound:
            why = (f"no evidence of a wrong key of its own here, since it goes with the "
                   f"other wrong-way items (z = {row.shared_z:.1f}; ordinary items of its "
                   f"slope at most {row.shared_bound:.1f}), which depend on one another "
                   f"more than ordinary items do (residual dependence "
                   f"{dependence.observed:.1f}; at most {dependence.ordinary:.1f}): a cause "
                   f"they share, a skill or format the ability does not measure or a fault "
                   f"common to their keys")
        elif dependence.shared:
            why = (f"possibly a wrong answer key: unlike {n_sharing} of the wrong-way "
                   f"items, which share a dimension, it does not go with them detectably "
                   f"(z = {row.shared_z:.1f}; ordinary items of its slope up to "
                   f"{row.shared_bound:.1f})")
        else:
            why = "likely a wrong answer key"
        reasons.append(f"weaker models answer it correctly more often than stronger ones "
                       f"(z = {row.slope_z:.1f}) while a is held at 0: {why}")
    if row.no_information:
        # a score short of the bound is not "no dependence": say how far it went
        reasons.append(f"a = {row.a:.3g}: its answers do not depend on ability" if not
                       row.slope_z < NOMINAL_Z else
                       f"a = {row.a:.3g}: held at 0 while weaker models answer it correctly "
                       f"somewhat more often (z = {row.slope_z:.1f}), short of the "
                       f"flag's bound over the {n_tested} items tested (z = {bound:.1f})")
    if row.out_of_range:
        side = "easier" if row.difficulty < abilities.min() else "harder"
        reasons.append(f"difficulty {row.difficulty:.2f} is far {side} than every model "
                       f"(abilities {abilities.min():.2f} to {abilities.max():.2f})")
    return "; ".join(reasons)
