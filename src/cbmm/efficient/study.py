"""The efficient-evaluation study of one response matrix (the workflow's rule
``efficiency`` and ``benchmarks/bench_efficiency.py`` run it).

The models are split at random into calibration and held-out models (``splits`` times,
``test_share`` held out) and the calibration models of each split are fitted with
:func:`cbmm.fit` (:func:`calibrations`, one :class:`Calibration` per split, whose models
serve both studies as one :class:`~cbmm.efficient.prediction.Reference`: its folds are
refitted once); then

* :func:`selection_study`: for each ``k`` and strategy, the held-out models answer the
  k selected items (``draws`` draws of a strategy whose items depend on the seed) and
  :func:`cbmm.predict_accuracy` predicts their accuracy over all items (with the split's
  calibration models as its ``reference``; for the strategies that choose on those
  models, their answers or their fit, with the width cross-validated:
  ``selection=<strategy>``, each fold's items chosen again on the calibration refitted
  without it), beside the baseline of the mean of k random items
  (``random_mean``, the same draws as the ``random`` strategy) and, if asked,
  tinyBenchmarks' gp-IRT from its own k anchor items (``tinybenchmarks``);
* :func:`adaptive_study`: each held-out model takes an adaptive test with its own answers
  (for each SE target and exposure setting; the tests of all splits in one stream, with
  one exposure control), compared with its ability from all its answers (the same
  posterior mean, every item answered).

:func:`summarise_selection` and :func:`summarise_adaptive` reduce the per-model rows to
the tables the report shows.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .adaptive import (ADAPTIVE_DEFAULTS, ItemExposure, item_list, item_list_text, reference_scale,
                       replayed_test, tight_exposure)
from .._checks import check_integer
from .._warn import CbmmWarning, warn
from .bank import ItemBank, Posterior, coded_answers, reference_models_needed
from .prediction import (REFERENCE_ANSWERED, SELECTION_DRAWS, Reference, answered_enough,
                         reconstruct)
from .refit import quiet_fit
from .selection import draw_count, forward_selection, select_items
from .tinybenchmarks import tinybenchmarks_predictions

__all__ = ["model_splits", "calibrations", "Calibration", "selection_study", "adaptive_study",
           "summarise_selection", "summarise_adaptive", "calibration_statuses", "BASELINE",
           "TINYBENCHMARKS", "TEST_SHARE", "held_out", "split_count", "selection_seed",
           "tinybenchmarks_draws", "measurable_ks"]

#: The baseline of the selection study: the mean of the k items of each ``random`` draw.
BASELINE = "random_mean"
#: The field's reference beside it: tinyBenchmarks' gp-IRT from its own anchor items.
TINYBENCHMARKS = "tinybenchmarks"
#: The share of the models :func:`calibrations` holds out by default (the issue's 80/20).
TEST_SHARE = 0.2


def held_out(n_models: int, test_share: float = TEST_SHARE) -> int:
    """The models a split of :func:`model_splits` holds out: ``round(test_share *
    n_models)``, at least 1."""
    if not 0 < test_share < 1:
        raise ValueError(f"test_share must be in (0, 1), got {test_share!r}")
    return max(1, int(round(test_share * n_models)))


def split_count(n_models: int, splits: int, held_models: int = 0,
                test_share: float = TEST_SHARE) -> int:
    """The splits a study of ``n_models`` models makes: as many as hold out ``held_models``
    models in all (each :func:`held_out`), at least ``splits``.  Which models are held out
    moves a small matrix's figures more than the tests' own randomness: on LaRT's MATH-500
    (158 models) four sets of five splits put adaptive tests 0.147-0.159 from the
    full-data abilities (docs/efficiency.md), so such a matrix needs more splits than one
    of thousands of models, each of whose splits holds out hundreds.  :func:`model_splits`
    draws splits in turn from one seed, so the first ``splits`` are the same either way."""
    splits = check_integer("splits", splits, minimum=1)
    held_models = check_integer("held_models", held_models, minimum=0)
    return max(splits, math.ceil(held_models / held_out(n_models, test_share)))


def model_splits(n_models: int, splits: int, test_share: float, seed: int):
    """``[(calibration rows, held-out rows), ...]``: ``splits`` random splits of the
    models, :func:`held_out` of them held out in each."""
    splits = check_integer("splits", splits, minimum=1)
    held = held_out(n_models, test_share)
    if n_models - held < 2:
        raise ValueError(f"test_share {test_share:g} holds out {held} of the {n_models} "
                         f"models, which leaves {n_models - held} to calibrate on; at least "
                         "2 are needed")
    rng = np.random.default_rng([check_integer("seed", seed, minimum=0), 0xeff])
    out = []
    for _ in range(splits):
        order = rng.permutation(n_models)
        out.append((np.sort(order[held:]), np.sort(order[:held])))
    return out


def calibrations(table, *, splits: int = 5, test_share: float = TEST_SHARE, seed: int = 0,
                 fit_options: dict | None = None) -> list:
    """One :class:`Calibration` per split (:func:`model_splits`) of ``table`` (a
    pandas.DataFrame, models x items): :func:`cbmm.fit` with ``fit_options`` of the models
    it does not hold out."""
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"table must be a pandas.DataFrame of models x items, got "
                         f"{type(table).__name__}")

    refit = quiet_fit(fit_options)  # degenerate items of a split are the audit's
    return [Calibration(table, held, refit(table.iloc[train]), refit)
            for train, held in model_splits(len(table), splits, test_share, seed)]


class Calibration:
    """One split of :func:`calibrations`.

    Attributes
    ----------
    held : ndarray of int
        The held-out models' rows of the table.
    result : FitResult
        The fit of the other models, the calibration.
    bank : ItemBank
        Its items.
    refit : QuietFit
        How it was fitted (:func:`cbmm.fit` with the study's ``fit_options``): the
        refits of :meth:`reference`'s folds and tinyBenchmarks' validation fit.
    """

    def __init__(self, table, held: np.ndarray, result, refit):
        self.held, self.result, self.refit = held, result, refit
        self.bank = ItemBank.of(result)
        self._table, self._reference = table, None

    def reference(self) -> Reference:
        """The calibration models as the Reference of both studies (made once, so that
        the refits of its folds are shared; those that answered enough items)."""
        if self._reference is None:
            values = self._table.to_numpy(dtype=float)
            calibration = np.setdiff1d(np.arange(len(values)), self.held)
            self._reference = Reference(_coded_rows(values, calibration)[1], self.bank,
                                        refit=self.refit,
                                        labels=self._table.index.delete(self.held))
        return self._reference


def selection_seed(seed: int, split: int, draw: int, splits: int) -> int:
    """The seed of the ``draw``-th selection of k items on ``split`` (of ``splits``) in
    :func:`selection_study`: ``seed + split + draw * splits``, distinct for every split
    and draw (draw 0's, ``seed + split``, is the study's single draw before ``draws``)."""
    return seed + split + draw * splits


def tinybenchmarks_draws(values, calibration, held, bank: ItemBank, ks, *, seed: int,
                        split: int, splits: int, draws: int, refit=None):
    """tinyBenchmarks' predictions of the ``held`` rows, ``draws`` times over, as a seeded
    strategy's items are drawn: each draw its own validation fifth of the ``calibration``
    rows and k-means start (:func:`selection_seed`), since one draw's anchors move every
    held-out model of the split alike (gp-IRT at 100 items of MATH-500's first five
    splits: 0.0225-0.0275 over four seeds).

    Yields
    ------
    draw, k, dict
        :func:`~cbmm.efficient.tinybenchmarks.tinybenchmarks_predictions`' ``k, dict``
        for each draw.
    """
    for draw in range(draws):
        for k, predicted in tinybenchmarks_predictions(
                values, calibration, held, bank, ks,
                seed=selection_seed(seed, split, draw, splits), refit=refit):
            yield draw, k, predicted


def measurable_ks(ks, n_items: int) -> list:
    """The numbers of items of ``ks`` a study of ``n_items`` items measures: those below
    it (k items of J leave J - k to predict; all of them, none)."""
    return [k for k in ks if k < n_items]


def selection_study(table, calibrated, *, ks, strategies, seed: int = 0,
                    draws: int = SELECTION_DRAWS, reference: bool = True,
                    tinybenchmarks: bool = False):
    """Predicted accuracy of held-out models from k selected items.

    Parameters
    ----------
    table : pandas.DataFrame
        Models x items, 1 / 0 / NaN.
    calibrated : list of Calibration
        :func:`calibrations` of ``table``.
    ks : list of int
        Numbers of items; those not below the number of items are skipped.
    strategies : list of str
        Strategies of :func:`cbmm.select_items`.  With the reference, the interval of
        every strategy is cross-validated over the calibration models:
        ``predict_accuracy(..., selection=<strategy>, refit=...)``, refitted as the
        calibration was (:attr:`Calibration.refit`), five refits per split, shared with
        :func:`adaptive_study` (:meth:`Calibration.reference`).  ``random``'s too: its
        items do not depend on the calibration, but the fit does, and the calibration
        models' own errors are in-sample (with 40-45 of them the jackknife's intervals
        covered 0.88-0.95 of held-out models, the cross-validated ones 0.90-0.99;
        docs/efficiency.md).
    seed : int
        Seeds the selections (:func:`selection_seed`).
    draws : int
        Draws of k items per split of a strategy whose items depend on the seed
        (:data:`~cbmm.efficient.selection.SEEDED_STRATEGIES`; the others choose once):
        one draw predicts better or worse by chance, for all the held-out models of its
        split at once (on MATH-500's 18 splits five single draws of 25 ``stratified``
        items gave MAE 0.043-0.049), and the study compares strategies, not draws.
    reference : bool
        Predict with the split's calibration models' answers as the ``reference`` of
        :func:`cbmm.predict_accuracy` (False: the 2PL alone).  Only models that answered
        95 % of the items serve there: where a split's calibration has fewer than 19
        such, the whole study predicts by the 2PL alone, with a warning.
    tinybenchmarks : bool
        Also predict by tinyBenchmarks' gp-IRT from its own k anchor items (strategy
        ``tinybenchmarks``, no interval; its clustering and ``lambda`` chosen on a fifth of
        the calibration models, refitted without them:
        :func:`~cbmm.efficient.tinybenchmarks.tinybenchmarks_predictions`), ``draws``
        times per split (:func:`tinybenchmarks_draws`).

    Returns
    -------
    pandas.DataFrame
        One row per split, k, strategy (and ``random_mean``, ``tinybenchmarks``), draw
        and held-out model: ``split, calibration_status`` (the status of the split's
        calibration fit), ``k, strategy, draw`` (0 for a strategy that chooses once),
        ``model, accuracy`` (over the items the model answered), ``predicted, lower,
        upper``, and ``cv_mae``: with the reference, the split's MAE of the strategy at k
        cross-validated on its calibration models alone (:func:`cbmm.selection_error`'s
        curve, its draws included; the same for every held-out model of the split; NaN
        for the baselines), which the held-out models' error checks; no rows where every
        k is skipped.
    """
    import pandas as pd

    rows = []
    draws = check_integer("draws", draws, minimum=1)
    values = table.to_numpy(dtype=float)
    ks = measurable_ks(ks, table.shape[1])
    reference = reference and _has_reference(values, calibrated, "selection_study")
    for split, calibration in enumerate(calibrated):
        held, bank, status = calibration.held, calibration.bank, calibration.result.status
        truth, coded = _coded_rows(values, held)
        rest = np.setdiff1d(np.arange(len(values)), held)
        known = calibration.reference() if reference else None
        if "predictive" in strategies and ks:  # nested: its first k items are its k
            predictive = list(itertools.islice(forward_selection(_coded_rows(values, rest)[1]),
                                               max(ks)))
            if known is not None:  # so are the folds' of its width: chosen once for all k
                known.choose_fold_items(max(ks))
        accuracy = np.nanmean(truth, axis=1)
        for k, strategy in itertools.product(ks, strategies):
            # selection_error's curve: the interval's errors, and more draws of a sample
            cv_mae = np.nan if known is None else known.cross_validated_errors(
                k, strategy).mean()
            for draw in range(draw_count(strategy, draws)):
                chosen = predictive[:k] if strategy == "predictive" else \
                    bank.given_labels.get_indexer(select_items(bank, k, strategy, seed=selection_seed(
                        seed, split, draw, len(calibrated))))
                answers = np.zeros(coded.shape, dtype=np.int8)
                answers[:, chosen] = coded[:, chosen]
                predicted = reconstruct(answers, bank) if known is None else known.reconstruct(
                    answers, selection=strategy)
                rows.append(pd.DataFrame({
                    "split": split, "calibration_status": status, "k": k,
                    "strategy": strategy, "draw": draw,
                    "model": table.index[held], "accuracy": accuracy,
                    "predicted": predicted["accuracy"], "lower": predicted["lower"],
                    "upper": predicted["upper"], "cv_mae": cv_mae}))
                if strategy == "random":
                    mean = np.nanmean(truth[:, chosen], axis=1)
                    rows.append(pd.DataFrame({
                        "split": split, "calibration_status": status, "k": k,
                        "strategy": BASELINE, "draw": draw,
                        "model": table.index[held], "accuracy": accuracy, "predicted": mean,
                        "lower": np.nan, "upper": np.nan, "cv_mae": np.nan}))
        if tinybenchmarks and ks:
            for draw, k, predicted in tinybenchmarks_draws(
                    values, rest, held, bank, ks, seed=seed, split=split,
                    splits=len(calibrated), draws=draws, refit=calibration.refit):
                rows.append(pd.DataFrame({
                    "split": split, "calibration_status": status, "k": k,
                    "strategy": TINYBENCHMARKS, "draw": draw,
                    "model": table.index[held], "accuracy": accuracy,
                    "predicted": predicted["gp-IRT"], "lower": np.nan, "upper": np.nan,
                    "cv_mae": np.nan}))
    if not rows:
        return pd.DataFrame(columns=["split", "calibration_status", "k", "strategy", "draw",
                                     "model", "accuracy", "predicted", "lower", "upper",
                                     "cv_mae"])
    return pd.concat(rows, ignore_index=True)


def adaptive_study(table, calibrated, *, se_targets, max_exposures=(None,),
                   max_items: int = ADAPTIVE_DEFAULTS["max_items"],
                   min_items: int = ADAPTIVE_DEFAULTS["min_items"],
                   candidates: int = ADAPTIVE_DEFAULTS["candidates"],
                   progressive: int = ADAPTIVE_DEFAULTS["progressive"], contents=(None,),
                   seed: int = 0, reference: bool = True):
    """Adaptive tests of held-out models driven by their own answers.

    For each content balance, exposure setting and SE target, the held-out models of
    every split take their tests in one random order, as a stream of new models would:
    one random stream draws among the candidates, and with exposure control one
    :class:`ItemExposure` counts the uses of each item over all these tests and gives
    each test its share of the bank (a split's few held-out models alone cannot share a
    10 % cap: 28 tests allow each of 500 items twice, 1,000 uses for 28 tests of 41
    items).

    Parameters
    ----------
    table : pandas.DataFrame
        Models x items, 1 / 0 / NaN (a test asks only items the model answered: its
        ``pool``).
    calibrated : list of Calibration
        :func:`calibrations` of ``table``.
    se_targets : list of float
        SE targets of :func:`cbmm.adaptive_test`, one test per model and target.
    max_exposures : list of float or None
        Exposure settings, one set of tests each: the largest share of the tests that
        may give one item (:class:`ItemExposure`); None: no exposure control.
    max_items, min_items, candidates, progressive
        As for :func:`cbmm.adaptive_test`.
    contents : list of pandas.Series or None
        Content balances, one set of tests each: a Series mapping the table's columns to
        content areas, named for the report (e.g. ``subject``), balances the tests over
        them (``cbmm.adaptive_test(content=...)``); None: no balance.  Their names
        (``content`` for an unnamed Series) must differ.
    seed : int
        Seeds the order of the tests and their random draws.
    reference : bool
        Scale the tests' accuracy intervals by
        :func:`~cbmm.efficient.adaptive.adaptive_interval_scale` on the split's
        calibration models (:meth:`Calibration.reference`, refitted without each fifth
        of them, the refits :func:`selection_study` shares), one scale per split,
        content balance, exposure setting and SE target (False: the 2PL's width); under
        an exposure cap the reference's tests share one of the same rate.
        Where a split's calibration has fewer than 19 models that answered 95 % of the
        items, the whole study keeps the 2PL's width, with a warning.  The reference tests draw
        from their own stream: the held-out tests are the same either way.

    Returns
    -------
    pandas.DataFrame
        One row per content balance, exposure setting, SE target and test, in the order
        given: ``split, calibration_status`` (as :func:`selection_study`'s), ``content``
        (the Series' name, ``none`` for None), ``max_exposure``
        (NaN: none), ``se_target, model, n_items, theta, se, theta_full``
        (posterior mean from all the model's answers), ``theta_error`` (``theta -
        theta_full``), ``predicted`` (accuracy), ``lower`` and ``upper`` (its 95 %
        interval, :attr:`~cbmm.efficient.adaptive.AdaptiveTest.lower`),
        ``interval_scale``, ``accuracy`` (over all its answers), ``stop`` and ``items``
        (the labels given, a JSON list: :func:`~cbmm.efficient.item_list`).
    """
    import pandas as pd

    seed = check_integer("seed", seed, minimum=0)
    names = [_content_name(content) for content in contents]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"contents label their rows by name, so each needs its own: "
                         f"{', '.join(map(repr, repeated))} given more than once (name each "
                         "Series, e.g. content.rename('subject'))")
    values = table.to_numpy(dtype=float)
    reference = reference and _has_reference(values, calibrated, "adaptive_study")
    splits = []
    for calibration in calibrated:
        held, bank = calibration.held, calibration.bank
        truth, coded = _coded_rows(values, held)
        known = calibration.reference() if reference else None
        splits.append((held, bank, truth, coded, Posterior(coded, bank).mean, known,
                       calibration.result.status))
    options = {"max_items": max_items, "min_items": min_items, "candidates": candidates,
               "progressive": progressive}
    scales = {}  # per split, content balance, exposure setting and SE target
    tests = [(split, i) for split, (held, *_) in enumerate(splits) for i in range(len(held))]
    order = np.random.default_rng([seed, 0]).permutation(len(tests))
    rows, warned = [], set()  # the caps too tight for min_items, warned of once each
    for setting, (content, max_exposure, se_target) in enumerate(
            (c, e, t) for c in contents for e in max_exposures for t in se_targets):
        exposure = None if max_exposure is None else ItemExposure(max_exposure, len(tests))
        tight = None if exposure is None or max_exposure in warned \
            else tight_exposure(exposure, table.columns, min_items)
        if tight:
            warn(f"adaptive_study: {tight}", CbmmWarning)
            warned.add(max_exposure)
        draws = np.random.default_rng([seed, 1, setting])
        for split, i in (tests[t] for t in order):
            held, bank, truth, coded, theta_full, known, status = splits[split]
            key = (split, setting)
            if key not in scales:
                scales[key] = 1.0 if known is None else reference_scale(
                    known, 0.95, seed, max_exposure, se_target=se_target, content=content,
                    **options)
            test = replayed_test(coded[i], bank, se_target=se_target, exposure=exposure,
                                 content=content, seed=draws, interval_scale=scales[key],
                                 **options)
            rows.append({
                "split": split, "calibration_status": status,
                "content": _content_name(content),
                "max_exposure": np.nan if max_exposure is None else max_exposure,
                "se_target": se_target, "model": table.index[held[i]],
                "n_items": len(test.items), "theta": test.theta, "se": test.se,
                "theta_full": theta_full[i], "theta_error": test.theta - theta_full[i],
                "predicted": test.accuracy, "lower": test.lower, "upper": test.upper,
                "interval_scale": scales[key], "accuracy": float(np.nanmean(truth[i])),
                "stop": test.stop, "items": item_list_text(test.items)})
    return pd.DataFrame(rows)


def _has_reference(values, calibrated, study: str) -> bool:
    """Whether every split's calibration has enough models that answered enough items to
    be a reference (those a Reference keeps); if not, a warning that ``study`` goes on
    with the 2PL alone."""
    kept = answered_enough((~np.isnan(values)).sum(axis=1), values.shape[1])
    fewest = min(int(np.delete(kept, split.held).sum()) for split in calibrated)
    if fewest >= reference_models_needed(0.95):
        return True
    warn(f"{study}: a split's calibration has {fewest} model(s) that answered "
         f"{REFERENCE_ANSWERED}, and a reference needs "
         f"{reference_models_needed(0.95)}: every split is predicted by the 2PL "
         "alone", CbmmWarning)
    return False


def _coded_rows(values, rows):
    """The ``rows`` of a 1 / 0 / NaN matrix, and the same coded +1 / -1 / 0 (int8), as the
    bank's functions read answers."""
    truth = values[rows]
    return truth, coded_answers(truth)


def _content_name(content) -> str:
    """A content balance's name in the rows: ``none``, the Series' name, or ``content``."""
    if content is None:
        return "none"
    return "content" if getattr(content, "name", None) is None else str(content.name)


def summarise_selection(rows):
    """Per k and strategy: ``mae``, ``rmse`` of the predicted accuracy (mean over splits of
    each split's value, its draws' errors together, and its sd ``mae_sd``), ``cv_mae``
    (the mean over splits of the MAE cross-validated on the calibration models,
    :func:`selection_study`'s; NaN without it), ``coverage`` of the intervals,
    ``n_models`` per split and
    ``calibration_status`` (:func:`calibration_statuses`)."""
    import pandas as pd

    error = rows["predicted"] - rows["accuracy"]
    covered = (rows["lower"] <= rows["accuracy"]) & (rows["accuracy"] <= rows["upper"])
    frame = rows.assign(abs_error=error.abs(), sq_error=error ** 2,
                        covered=covered.where(rows["lower"].notna()))
    per_split = frame.groupby(["k", "strategy", "split"]).agg(
        mae=("abs_error", "mean"), mse=("sq_error", "mean"), coverage=("covered", "mean"),
        n_models=("model", "nunique"), cv_mae=("cv_mae", "first"))
    per_split["rmse"] = np.sqrt(per_split.pop("mse"))
    grouped = per_split.groupby(level=["k", "strategy"])
    out = grouped[["mae", "rmse", "cv_mae", "coverage", "n_models"]].mean()
    out.insert(1, "mae_sd", grouped["mae"].std())
    out["calibration_status"] = _calibration_status(rows)
    return pd.DataFrame(out).reset_index()


def summarise_adaptive(rows):
    """Per content balance, exposure setting and SE target: mean and largest ``n_items``,
    ``theta_mae`` (against the full-data ability) and its standard error ``theta_mae_se``
    (over the tests), ``accuracy_mae``, ``accuracy_coverage`` (the share of the tests
    whose interval holds the accuracy over all the model's answers), ``interval_scale``
    (the mean over the splits' tests), ``exposure`` (the largest share of the tests that
    gave one item), ``n_tests`` and ``calibration_status`` (:func:`calibration_statuses`)."""
    keys = ["content", "max_exposure", "se_target"]
    frame = rows.assign(abs_theta=rows["theta_error"].abs(),
                        abs_accuracy=(rows["predicted"] - rows["accuracy"]).abs(),
                        covered=rows["lower"].le(rows["accuracy"])
                        & rows["upper"].ge(rows["accuracy"]))
    grouped = frame.groupby(keys, dropna=False)
    out = grouped.agg(
        n_items=("n_items", "mean"), max_items=("n_items", "max"),
        theta_mae=("abs_theta", "mean"), theta_mae_se=("abs_theta", "sem"),
        accuracy_mae=("abs_accuracy", "mean"), accuracy_coverage=("covered", "mean"),
        interval_scale=("interval_scale", "mean"))
    out["exposure"] = grouped["items"].apply(_largest_exposure)
    out["n_tests"] = grouped.size()
    out["calibration_status"] = _calibration_status(rows)
    return out.reset_index()


def calibration_statuses(statuses) -> str:
    """The statuses of a study's calibration fits, one per split, in words: the status
    where every split's is the same (``converged``), else each with its number of splits
    (``converged 3, multimodal 2``), so that a table or a log says whether its numbers rest
    on fits that are an answer (docs/trust.md)."""
    import pandas as pd

    counts = pd.Series(list(statuses), dtype=object).value_counts().sort_index()
    if len(counts) == 1:
        return str(counts.index[0])
    return ", ".join(f"{status} {count}" for status, count in counts.items())


def _calibration_status(rows) -> str:
    """:func:`calibration_statuses` of the splits in a study's ``rows``."""
    return calibration_statuses(rows.drop_duplicates("split")["calibration_status"])


def _largest_exposure(items):
    counts = {}
    for given in items:
        for label in item_list(given):
            counts[label] = counts.get(label, 0) + 1
    return max(counts.values(), default=0) / len(items)
