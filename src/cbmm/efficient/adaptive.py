"""Adaptive testing against a calibrated item bank: :func:`adaptive_test`.

One item at a time: the ability's posterior on :data:`~cbmm.efficient.bank.GRID`
(N(0, 1) prior on the calibration's canonical scale, or an ``mml`` fit's estimated
population) is updated with each answer; the
next item is drawn at random among the ``candidates`` items of highest score (the
*randomesque* rule: no item is given to every model of the same ability); the test
stops once the posterior sd is at most ``se_target`` (after ``min_items``), at
``max_items``, at its share of an exposure control's bank, or when no item is left.

An item's score is its Fisher information averaged over the ability's posterior
(van der Linden 1998: early in a test, when the posterior is wide, the information at
one point misleads), mixed with a random number by the *progressive* method (Revuelta
and Ponsoda 1998): ``(1 - w) U + w I`` with ``U`` uniform on [0, the largest ``I``] and
``w`` rising from 0 at the first item to 1 after ``progressive`` items.  The first
items are then a random sample of the bank and the last the most informative: on real
matrices a model's departure from the 2PL biases an ability measured on the most
informative items alone, and random early items spread the bank's use, so an exposure
cap binds later.

Content balancing (Kingsbury and Zara 1989): with ``content`` (each item's content area,
e.g. a benchmark's subjects), each next item comes from the area furthest below its share
of the bank, ``share * (items given + 1) - items given from it`` the largest among the
areas with items left, so that after ``n`` items no area has ``share * n + 1`` or more.
A test of the most informative items drifts to the areas that measure a model best; a
balanced one covers the benchmark's areas in its own proportions.  Whether its ability
is then closer to that from all the model's answers depends on the data
(docs/efficiency.md): on MATH-500 by subject under a 10 % exposure cap, 0.154 -> 0.150
(36 -> 34 items, 18 splits of the models), on LaRT's matrix of the same items (five
splits) 0.159 -> 0.161.

The predicted accuracy's interval is :func:`cbmm.predict_accuracy`'s of the test's answers,
by the 2PL: where models depart from it the items most informative for a model are no
sample of the bank, and on held-out models of the real MATH-500 its 95 % intervals
covered 0.86-0.94 (SE targets 0.1-0.3, with and without an exposure cap; 0.98-0.99
where the 2PL holds).  :func:`adaptive_interval_scale`
measures what it misses on models of known accuracy, the calibration models as a rule:
each fifth of them takes the same tests, replayed from its answers, against the
calibration refitted without it, and the scale is the ``level`` quantile of their
errors over their predicted sds (the normalised score of conformal prediction; Lei et
al. 2018), over the normal quantile; passed to :func:`adaptive_test` as
``interval_scale``, it multiplies the interval's half-width (MATH-500: 0.93-0.97;
LaRT's MATH-500: 0.94-0.96; 0.93-0.95, narrower, where the 2PL holds;
docs/efficiency.md).

Exposure control across tests: an :class:`ItemExposure` passed to several tests counts
how often each item was given and withholds an item once it has been given in
``max_rate`` of the tests (planned, or run so far), and a test of a planned series
gives at most its share of the uses left to the tests still to come, so the tests run
last are not left without items.  Without it, each test is independent.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from .._checks import check_integer, check_level, check_positive
from .bank import GRID, ItemBank, grid_moments
from .prediction import (Reference, _normalised, predicted_accuracy, reconstruct,
                         reference_answers)
from .refit import refit_like

if TYPE_CHECKING:  # imported where used, so that ``import cbmm`` does not load pandas
    import pandas as pd

__all__ = ["adaptive_test", "adaptive_interval_scale", "AdaptiveTest", "ItemExposure", "STOPS",
           "ADAPTIVE_DEFAULTS", "item_list", "item_list_text", "tight_exposure"]

#: Grid weights below this share of the largest are left out of posterior averages of
#: the information (their total is below 1e-9 of the whole).
_NEGLIGIBLE_WEIGHT = 1e-12
#: Why a test stopped.
STOPS = ("se_target", "max_items", "exposure share", "no item left")
#: Defaults of :func:`adaptive_test` (and ``cbmm adaptive``; docs/efficiency.md measures
#: them on held-out models of MATH-500 and LaRT's MATH-500).
ADAPTIVE_DEFAULTS = {"se_target": 0.1, "max_items": 50, "min_items": 5, "candidates": 5,
                     "progressive": 40}
#: :func:`adaptive_interval_scale` tests this many reference models at most (a random
#: subset of more): the 95 % quantile of 1,000 scores is the 951st, and the tests take
#: 10-20 ms each.
INTERVAL_SCALE_TESTS = 1000


@dataclass(eq=False)
class AdaptiveTest:
    """The outcome of one adaptive test.

    Attributes
    ----------
    theta, se : float
        Posterior mean and sd of the ability (the calibration's canonical scale), the
        items held at their calibrated values: their error is not in ``se`` (on a
        400-model simulated calibration ``theta -+ 1.96 se`` held the truth 0.93 of the
        time, 0.95 with the true items).
    items : list
        The items given, in order (their labels as the calibration gives them).
    answers : list of int
        The answers, 1 correct and 0 wrong, in the same order.
    accuracy, lower, upper : float
        Predicted accuracy over the whole bank and its interval
        (:func:`cbmm.predict_accuracy` of these answers, without a reference), its
        half-width times ``interval_scale``.  At the 2PL's own width (scale 1) it can
        fall short where models depart from the 2PL (95 % intervals covered 0.86-0.94
        of held-out models of the real MATH-500) and is wide where they do not (0.99):
        :func:`adaptive_interval_scale` measures the scale that makes it hold.
    stop : str
        One of :data:`STOPS`.
    trace : pandas.DataFrame
        After each item: ``item``, ``answer``, ``theta``, ``se``.
    """

    theta: float
    se: float
    items: list
    answers: list
    accuracy: float
    lower: float
    upper: float
    stop: str
    trace: pd.DataFrame = field(repr=False)


class ItemExposure:
    """How often each item was given across adaptive tests, keeping each item's share of
    the tests at most ``max_rate`` (pass the same instance to each :func:`adaptive_test`).

    An item may be given ``floor(max_rate * max(planned_tests, t))`` times (at least once)
    over the first ``t`` tests: with ``planned_tests`` the number of tests to come, the
    limit holds at the end of them without holding back the early tests; with the default
    1 it holds after every test (and each item is given at most once in the first
    ``1 / max_rate`` tests).

    One instance counts the tests of one bank: tests of another bank passed to it count
    in the share of the tests (``max_rate``) as if they had not given the item.

    The cap bounds the tests' mean length: J items allow about ``max_rate * J`` items
    per test (on a 102-item bank, a 10 % cap leaves 10). So that tests that would need
    more do not use the bank up for those run after them, a test of a planned series
    gives at most its :meth:`share` (``stop`` = ``"exposure share"``).

    Parameters
    ----------
    max_rate : float
        Largest share of the tests that may give an item, in (0, 1].
    planned_tests : int
        Tests planned (>= 1).
    items : list of labels, optional
        The items the planned tests draw from, where that is not the whole bank (e.g.
        the 100 anchor items a file of answers holds, of a 500-item calibration): each
        test's share is of theirs.  Default: each test's bank.  Shared over the bank, 10
        tests of such a file under a 10 % cap would take 50 items each, and the other 30
        none.
    """

    def __init__(self, max_rate: float = 0.1, planned_tests: int = 1, items=None):
        if isinstance(max_rate, bool) or not isinstance(max_rate, numbers.Real) \
                or not (math.isfinite(max_rate) and 0 < max_rate <= 1):
            raise ValueError(f"max_rate must be a number in (0, 1], got {max_rate!r}")
        self.max_rate = float(max_rate)
        self.planned_tests = check_integer("planned_tests", planned_tests, minimum=1)
        if isinstance(items, str):  # its characters are no items
            raise ValueError(f"items must be a list of item labels, got the text {items!r}")
        self.items = None if items is None else [str(label) for label in items]
        self.tests = 0
        self.uses: dict = {}

    def allowed(self, labels) -> np.ndarray:
        """Which of ``labels`` the next test may give."""
        return self._allowance(labels)[0]

    def share(self, labels) -> int:
        """The most items the next test may give from the bank of ``labels`` (or of the
        exposure's ``items``, where it was given them): the uses
        left on them at the end of the planned tests, shared equally among the planned
        tests not yet run, this one included (at least 1). Once every planned test has
        run (always, with the default ``planned_tests=1``), every use left. A test that
        gives at most its share leaves the next one at least as large a share."""
        return self._allowance(labels)[1]

    def _allowance(self, labels):
        """:meth:`allowed` and :meth:`share` from one count of the labels' uses (and one of
        ``items``', where given)."""
        horizon = max(self.planned_tests, self.tests + 1)
        limit = max(1, math.floor(self.max_rate * horizon + 1e-9))
        used = self._uses_of(labels)
        shared = used if self.items is None else self._uses_of(self.items)
        left = int(np.maximum(limit - shared, 0).sum())
        return used < limit, max(1, left // (horizon - self.tests))

    def _uses_of(self, labels) -> np.ndarray:
        return np.array([self.uses.get(label, 0) for label in labels], dtype=np.int64)

    def record(self, items) -> None:
        """Count one finished test that gave ``items``."""
        self.tests += 1
        for label in items:
            self.uses[label] = self.uses.get(label, 0) + 1

    def rates(self):
        """Share of the tests that gave each item (pandas.Series; items never given are
        left out)."""
        import pandas as pd

        return pd.Series({label: count / self.tests for label, count in self.uses.items()},
                         name="exposure", dtype=float)


def adaptive_test(respond: Callable, result, *, pool=None,
                  se_target: float = ADAPTIVE_DEFAULTS["se_target"],
                  max_items: int = ADAPTIVE_DEFAULTS["max_items"],
                  min_items: int = ADAPTIVE_DEFAULTS["min_items"],
                  candidates: int = ADAPTIVE_DEFAULTS["candidates"],
                  progressive: int = ADAPTIVE_DEFAULTS["progressive"],
                  exposure: ItemExposure | None = None, content=None,
                  level: float = 0.95, interval_scale: float = 1.0,
                  seed=0) -> AdaptiveTest:
    """Test one model adaptively: ask ``respond(item)`` for one item at a time.

    Parameters
    ----------
    respond : callable
        ``respond(label) -> 1 | 0`` (or True / False): the model's answer to the item
        with that label (correct or not): the label as the calibration gives it (a
        FitResult's or a DataFrame's own, a file's text).
    result : FitResult, pandas.DataFrame, path or ItemBank
        The calibrated items (as for :func:`cbmm.score`; a bare table is read at
        temperature 1, :meth:`~cbmm.efficient.bank.ItemBank.of`); an
        :class:`~cbmm.efficient.bank.ItemBank` keeps what it computes between tests (for
        many tests against a large bank).
    pool : list of labels, optional
        The items that may be given (e.g. those a file holds answers to); default all.
    se_target : float
        Stop once the ability's posterior sd is at most this (> 0).
    max_items : int
        Items at most (>= 1; a bank or ``pool`` of fewer gives at most all of them, and
        then stops with ``"no item left"``).
    min_items : int
        Items at least before the ``se_target`` stop (>= 1; from ``max_items`` up, every
        test gives ``max_items``).
    candidates : int
        The next item is drawn at random among this many of the highest score (>= 1;
        1: the highest).
    progressive : int
        Items over which the score moves from random to the posterior-averaged
        information (>= 0; 0: information from the first item).
    exposure : ItemExposure, optional
        Exposure control across tests (see :class:`ItemExposure`): this test gives only
        items it allows, at most its :meth:`~ItemExposure.share` (of the exposure's
        ``items``, default the bank), and is counted in it.
    content : mapping or pandas.Series, optional
        Each calibrated item's content area (label -> area; labels matched as text;
        labels of other items are ignored): balance the test over the areas in
        their shares of the bank (see the module's notes).  Default: no balancing.
    level : float
        Coverage of the accuracy's interval.
    interval_scale : float
        Multiplies the half-width of the accuracy's interval (>= 0): the
        :func:`adaptive_interval_scale` of these options and ``level``, measured on the
        calibration models; 1, the 2PL's own width.
    seed : int or numpy.random.Generator
        The random draws (the progressive start's and among the candidates): an int
        seeds them for this test alone (tests of models that answer alike then give the
        same items); pass one Generator to a series of tests so that each draws anew, as
        ``cbmm adaptive`` does for the models of a file.

    Returns
    -------
    AdaptiveTest

    Raises
    ------
    ValueError
        Bad arguments or calibration, or an answer that is not 0/1 (naming the item).
    """
    if not callable(respond):
        shown = repr(respond)
        shown = shown if len(shown) <= 80 and "\n" not in shown else type(respond).__name__
        hint = (" (answers by item? respond=answers.get)"
                if hasattr(respond, "get") and getattr(respond, "ndim", 1) == 1 else "")
        raise ValueError(f"respond must be a function of an item label, got {shown}{hint}")
    check_positive("se_target", se_target)
    if exposure is not None and not isinstance(exposure, ItemExposure):
        raise ValueError(f"exposure must be an ItemExposure or None, got {exposure!r}")
    level = check_level(level)
    if isinstance(interval_scale, bool) or not isinstance(interval_scale, numbers.Real) \
            or not (math.isfinite(interval_scale) and interval_scale >= 0):
        raise ValueError(f"interval_scale must be a finite number >= 0, got "
                         f"{interval_scale!r}")
    bank = ItemBank.of(result)
    max_items = check_integer("max_items", max_items, minimum=1)
    min_items = check_integer("min_items", min_items, minimum=1)
    candidates = check_integer("candidates", candidates, minimum=1)
    progressive = check_integer("progressive", progressive, minimum=0)
    rng = seed if isinstance(seed, np.random.Generator) \
        else np.random.default_rng(check_integer("seed", seed, minimum=0))

    free = _pool(bank, pool)
    areas = None if content is None else _areas(bank, content)
    if areas is not None:
        shares = np.bincount(areas) / len(bank)
        counts = np.zeros(shares.size)
    length, stop = max_items, "max_items"
    if exposure is not None:
        allowed, share = exposure._allowance(bank.given_labels)
        free &= allowed
        if share < max_items:
            length, stop = share, "exposure share"
    log_weights = bank.log_prior.copy()
    given, answers, trace = [], [], []
    weights, theta, se = _posterior(log_weights)
    while len(given) < length:
        if not free.any():
            stop = "no item left"
            break
        weight = 1.0 if len(given) >= progressive else len(given) / progressive
        eligible = free
        if areas is not None:  # the area furthest below its share, of those with items left
            deficit = shares * (len(given) + 1) - counts
            deficit[np.bincount(areas[free], minlength=shares.size) == 0] = -np.inf
            eligible = free & (areas == np.argmax(deficit))
        j = _next_item(bank, weights, eligible, candidates, weight, rng)
        if areas is not None:
            counts[areas[j]] += 1
        answer = _answer(respond, bank.given_labels[j])
        free[j] = False
        given.append(j)
        answers.append(answer)
        x = GRID * bank.slope[j] + bank.intercept[j]
        log_weights = log_weights - np.logaddexp(0.0, -x if answer else x)
        weights, theta, se = _posterior(log_weights)
        trace.append((bank.given_labels[j], answer, theta, se))
        if len(given) >= min_items and se <= se_target:
            stop = "se_target"
            break
    items = bank.given_labels[given].tolist()
    if exposure is not None:
        exposure.record(items)
    predicted = reconstruct(_coded(len(bank), given, answers), bank, level, interval_scale)
    return AdaptiveTest(theta=theta, se=se, items=items, answers=answers,
                        accuracy=float(predicted["accuracy"][0]),
                        lower=float(predicted["lower"][0]), upper=float(predicted["upper"][0]),
                        stop=stop, trace=_trace_table(trace))


def _coded(n_items: int, given, answers) -> np.ndarray:
    """A test's answers as a one-row int8 matrix of the bank's items (+1 / -1, 0 not
    given), as :func:`~cbmm.efficient.prediction.reconstruct` reads them."""
    coded = np.zeros((1, n_items), dtype=np.int8)
    coded[0, given] = np.where(np.array(answers, dtype=bool), 1, -1)
    return coded


def adaptive_interval_scale(result, reference, *, refit=True, level: float = 0.95,
                            seed: int = 0, max_exposure: float | None = None,
                            coding: str | None = None, layout: str = "auto",
                            **options) -> float:
    """The ``interval_scale`` of :func:`adaptive_test` that makes its accuracy's
    interval hold on models of known accuracy, by cross-validation.

    The ``reference`` models that answered at least 95 % of the calibrated items
    (:data:`~cbmm.efficient.prediction.REFERENCE_UNANSWERED`) are cut into
    :data:`~cbmm.efficient.prediction.SELECTION_FOLDS` folds (as for
    :func:`cbmm.predict_accuracy`'s ``selection``); each fold's models take the test
    ``options`` describe, replayed from their answers, against the calibration refitted
    without them (``refit``, warm-started as there).  A model's score is its predicted
    accuracy's error over its predicted sd; the scale is the ``ceil((n + 1) level)``-th
    smallest of the ``n`` scores (:data:`INTERVAL_SCALE_TESTS` models at most, a random
    subset of more) over the normal quantile of ``level``, so that the
    scaled interval, ``accuracy +- scale * z * sd``, would have held the accuracy of
    that share of the reference models (the normalised score of split-conformal
    prediction, Lei et al. 2018, over folds as in Barber et al. 2021's CV).  Tests
    that will share an exposure cap are given with one too (``max_exposure``): a cap
    shortens a small bank's tests (an :class:`ItemExposure` of ``max_rate`` gives each of
    a planned series about ``max_rate * J`` items) and withholds the most informative
    items from the later ones, and the scale is measured on tests like that.

    Parameters
    ----------
    result : FitResult, pandas.DataFrame or path
        The calibration, as for :func:`adaptive_test`.
    reference : array-like, pandas.DataFrame or Responses
        Answers of models of known accuracy, the calibration models' as a rule (as
        :func:`cbmm.predict_accuracy`'s ``reference``): at least ``level / (1 - level)``
        (19 for 95 %) must have answered 95 % of the calibrated items.
    refit : True or callable
        How ``result`` was fitted (as for :func:`cbmm.predict_accuracy`): True, the
        settings a FitResult or its saved folder records; or ``refit(data)`` of a models x
        items 1 / 0 DataFrame returning the fit.  Five refits.
    level : float
        Coverage of the interval the scale is for: pass the same to the tests.
    seed : int
        Seeds the reference tests' random draws (one stream for them all).
    max_exposure : float, optional
        The exposure cap the tests will share, in (0, 1]: the reference's tests then
        share one ``ItemExposure(max_exposure, tests)`` (None: each test alone).
    coding, layout
        As for :func:`cbmm.as_responses`, of ``reference``.
    **options
        The tests' options, as for :func:`adaptive_test`: ``se_target``, ``max_items``,
        ``min_items``, ``candidates``, ``progressive``, ``content`` (defaults as there).

    Returns
    -------
    float
        The scale: above 1 where the 2PL's interval falls short (MATH-500: 1.2-1.8 over
        splits and streams), below 1 where it is wide.  One test per reference model
        tested: about 10 ms each against 500 items, 20 ms against 12,032.

    Raises
    ------
    ValueError
        Bad arguments, reference or calibration, or too few reference models that answered
        enough items.
    """
    level = check_level(level)
    seed = check_integer("seed", seed, minimum=0)
    known = set(ADAPTIVE_DEFAULTS) | {"content"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"options: {unknown} not among the tests' options {sorted(known)} "
                         "(a shared exposure cap is max_exposure; each reference model's "
                         "test draws from all the items)")
    if max_exposure is not None:  # checked before the refits
        try:
            ItemExposure(max_exposure)
        except ValueError:
            raise ValueError(f"max_exposure must be None or a number in (0, 1], got "
                             f"{max_exposure!r}") from None
    if refit is True:
        refit = refit_like(result)
    elif not callable(refit):
        raise ValueError(f"refit must be a function of the data returning the fit, or True, "
                         f"got {refit!r}")
    bank = ItemBank.of(result)
    answers, labels = reference_answers(reference, bank, coding, layout)
    models = Reference(answers, bank, refit=refit, labels=labels)
    models.check_enough(level)
    return reference_scale(models, level, seed, max_exposure, **options)


def reference_scale(models: Reference, level: float, seed: int,
                    max_exposure: float | None = None, **options) -> float:
    """:func:`adaptive_interval_scale` of the models of a
    :class:`~cbmm.efficient.prediction.Reference` (its folds and their refits, made once
    for any number of settings)."""
    from scipy.special import ndtri

    rng = np.random.default_rng(seed)
    tested = np.zeros(len(models.answers), dtype=bool)
    tested[rng.permutation(tested.size)[:INTERVAL_SCALE_TESTS]] = True
    exposure = None if max_exposure is None else ItemExposure(max_exposure, int(tested.sum()))
    scores = np.full(tested.size, np.nan)
    for rows, fold, _ in models.folds():  # the folds' banks share the items' labels
        n_items = len(fold.bank)
        for row in rows[tested[rows]]:
            test = replayed_test(models.answers[row], fold.bank, seed=rng, exposure=exposure,
                                 **options)
            given = fold.bank.given_labels.get_indexer(test.items)
            out = predicted_accuracy(_coded(n_items, given, test.answers), fold.bank)
            # a test of every item predicts exactly, with sd 0: a score of 0
            scores[row] = _normalised(out["accuracy"][:1] - models.accuracy[row],
                                      out["sd"][:1])[0]
    scores = scores[tested]
    rank = int(np.ceil((len(scores) + 1) * level - 1e-9)) - 1
    return float(np.partition(scores, rank)[rank] / ndtri(0.5 + level / 2))


def replayed_test(answers: np.ndarray, bank: ItemBank, **options) -> AdaptiveTest:
    """:func:`adaptive_test` of a model whose answers are known: ``answers`` is its int8
    row aligned with ``bank`` (+1 correct, -1 wrong, 0 not answered); only the items it
    answered can be given.  ``options`` as for :func:`adaptive_test`."""
    answered = answers != 0
    # a model that answered every item (as most reference models did) needs no pool: the
    # labels' checks cost 3 ms a test on 5,761 items
    return adaptive_test(lambda label: int(answers[bank.given_labels.get_loc(label)] > 0), bank,
                         pool=None if answered.all() else bank.labels[answered], **options)


def _pool(bank, pool) -> np.ndarray:
    if pool is None:
        return np.ones(len(bank), dtype=bool)
    if isinstance(pool, str):  # its characters are no items
        raise ValueError(f"pool must be a list of item labels, got the text {pool!r}")
    labels = [str(label) for label in pool]
    known = set(bank.labels)
    unknown = [label for label in labels if label not in known]
    if unknown:
        raise ValueError(f"pool: {len(unknown)} item(s) not among the calibrated items: "
                         f"{unknown[:5]}")
    if not labels:  # a test of no item is the prior alone
        raise ValueError("pool: empty; give the items the test may draw from, or None for "
                         "every calibrated item")
    return np.asarray(bank.labels.isin(labels))


def _areas(bank, content) -> np.ndarray:
    """Each bank item's content area as an integer code (areas sorted), from ``content``
    (label -> area)."""
    from collections.abc import Mapping

    import pandas as pd

    if not isinstance(content, (Mapping, pd.Series)):
        raise ValueError("content must map item labels to content areas (a dict or a "
                         f"pandas Series), got {type(content).__name__}")
    table = pd.Series(content, dtype=object)
    # labels already strings are kept: the index caches its type, so a content passed to
    # many tests is not relabelled for each (3 of 8 ms per test on 12,032 items)
    if table.index.inferred_type != "string":
        table.index = table.index.map(str)
    if table.index.has_duplicates:
        twice = table.index[table.index.duplicated()].unique()
        raise ValueError(f"content: {len(twice)} item(s) listed more than once: "
                         f"{list(twice[:5])}")
    areas = table.reindex(bank.labels)
    missing = bank.labels[areas.isna().to_numpy()]
    if missing.size:
        raise ValueError(f"content: {missing.size} calibrated item(s) without a content "
                         f"area: {list(missing[:5])}")
    codes, _ = pd.factorize(areas, sort=True)
    return codes


def _posterior(log_weights):
    """The posterior's weights on the grid (summing to 1), mean and sd."""
    weights = np.exp(log_weights - log_weights.max())
    weights /= weights.sum()
    mean, sd = grid_moments(weights)
    return weights, float(mean), float(sd)


def _next_item(bank, posterior, free, candidates, weight, rng) -> int:
    """The next item: drawn among the ``candidates`` free items of highest score
    ``(1 - weight) U + weight I`` (see the module's docstring)."""
    free = np.flatnonzero(free)
    score = _posterior_information(bank, posterior)[free]
    if weight < 1:
        score = weight * score + (1 - weight) * rng.uniform(0.0, score.max(), free.size)
    count = min(candidates, free.size)
    best = np.argpartition(-score, count - 1)[:count]
    return int(free[rng.choice(best)])


def _posterior_information(bank, posterior) -> np.ndarray:
    """Each item's Fisher information averaged over the ability's posterior (its weights
    on the grid, summing to 1), over the run of grid points from its first to its last
    non-negligible weight (one run under a normal prior, the posterior log-concave), which
    keeps the cost of a step at a few columns of the bank's grid table late in a
    test."""
    support = np.flatnonzero(posterior > _NEGLIGIBLE_WEIGHT * posterior.max())
    run = slice(support[0], support[-1] + 1)
    return bank.slope ** 2 * (bank.grid["pq"][:, run] @ posterior[run])


def _answer(respond, label) -> int:
    answer = respond(label)
    if isinstance(answer, (bool, np.bool_)) or answer in (0, 1):
        return int(answer)
    raise ValueError(f"respond({label!r}) returned {answer!r}; expected 1 (correct) or 0 "
                     "(wrong)")


def _trace_table(rows):
    import pandas as pd

    return pd.DataFrame(rows, columns=["item", "answer", "theta", "se"])


def tight_exposure(exposure: ItemExposure, labels, min_items: int) -> str | None:
    """Why ``exposure``, before its first test, keeps the tests over the bank of ``labels``
    short, or None: its share (:meth:`ItemExposure.share`, about ``max_rate`` times the
    items) below ``min_items`` stops every test of the planned series a few items in,
    whatever its SE (AIME24's 30 items at 10 %: 3 items, ability error 0.5)."""
    allowed = exposure.share(labels)
    if allowed >= min_items:
        return None
    planned = exposure.planned_tests
    enough = min(1.0, math.ceil(min_items * planned / len(labels)) / planned)
    return (f"an exposure cap of {exposure.max_rate:g} over {len(labels)} items and "
            f"{planned} tests allows {allowed} items per test, fewer than min_items "
            f"{min_items}: the tests stop at their share (stop 'exposure share') short of "
            f"the SE target; a cap of {enough:.2g} allows {min_items}")


def item_list_text(items) -> str:
    """The items a test gave, in order, as one table cell: a JSON list of their labels as
    text (``["q 3", "010"]``), which any label survives (labels with spaces broke the
    space-separated lists of 0.2.0).  :func:`item_list` reads it back."""
    import json

    return json.dumps([str(item) for item in items], ensure_ascii=False)


def item_list(text) -> list[str]:
    """The labels of an :func:`item_list_text` cell (read from a CSV, a test given no
    item is an empty cell: NaN, or "")."""
    import json

    if not isinstance(text, str) or not text.strip():
        return []
    return json.loads(text)
