"""Efficient evaluation (issue 23): the tables of docs/efficiency.md, with the targets.

For each data set, on random 80/20 splits of its models (calibration fitted with
``cbmm.fit``'s defaults; ``cbmm.efficient.study``; a real data set gets as many as hold
out ``--held`` models in all, at least ``--splits``):

* **selection**: MAE of the held-out models' predicted accuracy (``cbmm.predict_accuracy``
  with the split's calibration models as ``reference``) from k items of each strategy of
  ``cbmm.select_items`` (``--draws`` draws per split of a strategy whose items depend on
  the seed), beside the mean of k random items, and the same by the 2PL alone (no
  ``reference``); target MAE <= 0.015 at k = 100 (tinyBenchmarks: 0.016 on MMLU);
* **adaptive**: adaptive tests of the held-out models with their own answers
  (``cbmm.adaptive_test``'s defaults), per SE target, without and with exposure control
  (the tests of every split in one stream, one exposure count), averaged over as many
  random streams as run ``--adaptive-tests`` tests (2,000: 15 streams of MATH-500's 140
  held-out models, 1 of a leaderboard's 4,000); target (ATLAS): within 0.157 of the full-data
  ability (mean absolute difference) with <= 41 items on average and item exposure below
  10 % (the cap is ``ItemExposure(0.099)``: one of 0.1 allows exactly 10 %); and tests of
  exactly 100 items (maximum information from the first, no SE stop, no exposure
  control), whose predicted accuracy the 100-item target also applies to; where the
  items' content areas are known (MATH-500's subjects; ``--content`` for a ``--real``
  matrix), the adaptive tests again, balanced over them; ``accuracy_coverage``: the share
  of the tests whose 95 % accuracy interval holds the model's accuracy, the interval
  scaled by ``cbmm.adaptive_interval_scale`` on the split's calibration models
  (``interval_scale``; ``--no-interval-scale``: the 2PL's width);
* **tinybenchmarks**: tinyBenchmarks' estimators (Polo et al. 2024, as its tutorials run
  them) on the same splits and calibration fits, for the comparison the target makes:
  k anchor items (k-means on the calibration models' correctness, or on the items'
  fitted slope and intercept), their cluster-weighted mean (``anchor``), p-IRT
  (observed answers plus the 2PL probabilities of the rest at the maximum-likelihood
  ability) and gp-IRT (``lambda`` anchor + ``1 - lambda`` p-IRT, ``lambda`` chosen on a
  fifth of the calibration models held out from a refit on the others), and gp-IRT with
  the clustering also chosen there (the workflow's ``tinybenchmarks`` line;
  ``cbmm.efficient.tinybenchmarks``), ``--draws`` draws of the validation fifth and the
  k-means start per split, as the strategies' items;
* **audit**: the flags of ``cbmm.item_audit`` on a fit of all the models, and its checks
  that the fit's ability ranks the models as their accuracy does (``ability_agreement``)
  and that the wrong-way items depend on one another no more than ordinary items
  (``WrongWayDependence``);
* **howmany** (only when named in ``--parts``), for each real data set: how many items a
  target MAE needs, by ``cbmm.selection_error`` on each split's calibration models (the
  curve over ``cbmm select --target-mae``'s grid), against the held-out models' MAE from
  as many items chosen on all the calibration models; and the k the curve picks for
  targets 0.03, 0.02 and 0.015, with the held-out MAE there;
* **se** (only when named in ``--parts``), for each real data set: whether
  ``selection_error``'s ``mae_se`` is the spread of its MAE over calibration samples, by a
  replicated simulation from the data set's own fit (its items; abilities drawn from its
  models' fitted ones): ``--se-replicates`` calibrations of a split's size (or
  ``--se-calibration-models``), each with
  ``selection_error`` (folds refitted) and the error on ``--se-new-models`` new models of
  items chosen on the whole calibration (``predictive``, and ``stratified``'s
  ``SELECTION_DRAWS`` draws); per k, the curve's bias, its sd over the replicates against
  the mean ``mae_se``, and the difference from the new models' error in units of both
  standard errors (sd near 1 and beyond 1.96 about 5 % of the time if the SE is honest);
* **penalties** (only when named in ``--parts``), for each real data set: the
  ``predictive`` strategy's error at k = 100 per ridge penalty, cross-validated on each
  split's calibration models (``Reference.selection_errors``, the selection inside) and
  on the held-out models, and the held-out error at the penalty the cross-validation
  picks.

Then the planted-mislabel check: 5 % of the items of a matrix get reversed answers;
recall and precision of the audit's ``negative_discrimination`` (target >= 0.9, >= 0.8),
the share of the reversed items found whose reason names a wrong key as the cause
(likely, or possible where the wrong-way items share a dimension), and the share whose
keys the audit before the reversals says the answers could check (``visible``: the
``key_checked`` column), with the share of those found.

Data: the real MATH-500 matrix (``../shared``, where it is there; the simulated shapes
need it), any other real matrices given with
``--real`` (CSV files, models x items, 1 / 0 / empty; docs/efficiency.md names those
measured), and simulated matrices of the Open LLM Leaderboard suites' shapes whose
parameters are those of a converged fit of MATH-500 resampled (the calibrated stand-ins
of ``standin_suites.py``): simulated, so the 2PL holds exactly. The planted-mislabel
check runs on MATH-500, on every ``--real`` matrix and on simulated ones (the paper's
generator with 1,000, 200 and 80 models, and the first two shapes).

Usage::

    python benchmarks/bench_efficiency.py [--real FILE.csv ...] [--shapes 2211x541,...]
        [--splits 5] [--held 500] [--shape-splits 2] [--adaptive-tests 2000]
        [--parts selection,howmany,se,penalties,tinybenchmarks,adaptive,audit,mislabels]
        [--penalties 20,50,...] [--content FILE.csv=CONTENT.csv ...]
        [--se-replicates 60] [--se-calibration-models N] [--se-new-models 1000]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _common import LEADERBOARD_ROWS, MATH500_CANDIDATES, machine
from scipy.special import expit
from standin_suites import parameters

import cbmm
from cbmm.efficient import FLAGS, STRATEGIES, study
from cbmm.efficient.adaptive import ADAPTIVE_DEFAULTS
from cbmm.efficient.audit import key_check_summary
from cbmm.efficient.bank import coded_answers
from cbmm.efficient.cli import TARGET_GRID
from cbmm.efficient.prediction import SELECTION_DRAWS, Reference
from cbmm.efficient.refit import refit_like
from cbmm.efficient.selection import draw_count, forward_selection
from cbmm.simulate import simulate

# the howmany and se parts predict with the calibration models as the reference and read
# only the accuracy, not the interval the warning is about
warnings.filterwarnings("ignore", category=cbmm.efficient.InSampleReferenceWarning)

#: The issue's targets.
MAE_TARGET, MAE_TARGET_K = 0.015, 100
ATLAS_ITEMS, ATLAS_THETA_MAE, EXPOSURE_TARGET = 41, 0.157, 0.10
#: The exposure cap of the adaptive tests: below EXPOSURE_TARGET, not at it.
EXPOSURE_CAP = 0.099
RECALL_TARGET, PRECISION_TARGET = 0.9, 0.8
#: The parts of the benchmark (--parts); the audit's suspects are the mislabel check's.
PARTS = ("selection", "howmany", "se", "penalties", "tinybenchmarks", "adaptive", "audit",
         "mislabels")
#: Those run by default: the penalties', the target curves' and their standard error's
#: checks are diagnostics (10 and 3 minutes on one leaderboard matrix, 5 on MATH-500),
#: asked for by name.
DEFAULT_PARTS = tuple(part for part in PARTS if part not in ("penalties", "howmany", "se"))
#: The targets of the howmany part, and the numbers of items its first table shows.
HOWMANY_TARGETS, HOWMANY_KS = (0.03, 0.02, 0.015), (25, 50, 100, 150, 200)


def read_math500():
    """The real MATH-500 matrix, or None where ``../shared`` does not hold it."""
    for path in MATH500_CANDIDATES:
        if path.is_file():
            return pd.read_csv(path, index_col=0)
    return None


def read_content(spec):
    """A ``--content`` pair FILE=CONTENT.csv: the matrix's path and its items' areas."""
    from cbmm._cli_common import CliError
    from cbmm.efficient.cli import _content

    matrix, _, areas = spec.partition("=")
    try:
        return Path(matrix), _content(Path(areas), None)
    except CliError as error:
        raise SystemExit(str(error)) from None


def math500_subjects():
    """The MATH-500 items' subjects (item -> subject), from MATH-500_test.jsonl beside
    MATH_500.csv, or None without it."""
    from cbmm.data.math500 import read_items_jsonl

    for path in MATH500_CANDIDATES:
        if (path.parent / "MATH-500_test.jsonl").is_file():
            items = read_items_jsonl(path.parent / "MATH-500_test.jsonl")
            return items.set_index("item")["subject"]
    return None


def read_real(path):
    """A ``--real`` matrix and its label: the file's name and shape."""
    try:
        table = pd.read_csv(path, index_col=0)
    except (OSError, ValueError) as error:
        raise SystemExit(f"--real {path}: {error}") from None
    return f"{Path(path).stem} ({table.shape[0]} x {table.shape[1]}, real)", table


def standin(calibration, n_models, n_items, seed):
    """A simulated matrix of the shape with the calibrated stand-in's parameters."""
    rng = np.random.default_rng(seed)
    theta, a, b = parameters("calibrated", calibration, n_models, n_items, rng)
    y = (rng.random((n_models, n_items)) < expit(np.outer(theta, a) + b)).astype(float)
    return pd.DataFrame(y, index=[f"model_{i}" for i in range(n_models)],
                        columns=[f"item_{j}" for j in range(n_items)])


def real_splits(table, args):
    """The splits of a real data set: as many as hold out ``--held`` models in all, at
    least ``--splits`` (``study.split_count``; the first ``--splits`` are those of
    ``--held 0``)."""
    return study.split_count(len(table), args.splits, args.held)


def fitted(table, splits, seed):
    started = time.perf_counter()
    calibrated = study.calibrations(table, splits=splits, seed=seed)
    print(f"\n{table.shape[0]} x {table.shape[1]}: {splits} calibration fits "
          f"({', '.join(sorted({split.result.status for split in calibrated}))}), "
          f"{time.perf_counter() - started:.0f} s")
    return calibrated


def selection_table(name, table, calibrated, args):
    """Prints the selection study's tables; returns its MAE per k and strategy."""
    if not any(k < table.shape[1] for k in args.k):
        print(f"\n{name}: selection skipped, every k is at least its {table.shape[1]} items")
        return None
    started = time.perf_counter()
    summaries = {reference: study.summarise_selection(study.selection_study(
        table, calibrated, ks=args.k, strategies=list(STRATEGIES), seed=args.seed,
        draws=args.draws, reference=reference)) for reference in (True, False)}
    summary = summaries[True]
    mae = summary.pivot(index="k", columns="strategy", values="mae")
    mae = mae[[*STRATEGIES, study.BASELINE]]
    print(f"\n{name}: selection, MAE of predicted accuracy ({len(calibrated)} splits, "
          f"{time.perf_counter() - started:.0f} s)")
    print(mae.to_string(float_format=lambda v: f"{v:.4f}"))
    coverage = summary.pivot(index="k", columns="strategy", values="coverage")[list(STRATEGIES)]
    print("coverage of the 95 % intervals:")
    print(coverage.to_string(float_format=lambda v: f"{v:.3f}"))
    alone = summaries[False].pivot(index="k", columns="strategy", values="mae")
    print("the 2PL alone (no reference): MAE, and coverage of its 95 % intervals")
    print(alone[list(STRATEGIES)].join(summaries[False].pivot(
        index="k", columns="strategy", values="coverage")[list(STRATEGIES)],
        rsuffix=" cov").to_string(float_format=lambda v: f"{v:.4f}"))
    if MAE_TARGET_K in mae.index:
        best = mae.loc[MAE_TARGET_K, list(STRATEGIES)]
        verdict = "meets" if best.min() <= MAE_TARGET else \
            f"misses by {best.min() - MAE_TARGET:.4f}"
        print(f"k = {MAE_TARGET_K} ({table.shape[1] - MAE_TARGET_K} of {table.shape[1]} items "
              f"unanswered): best {best.idxmin()} {best.min():.4f}, default "
              f"{STRATEGIES[0]} {best[STRATEGIES[0]]:.4f}; target <= {MAE_TARGET}: {verdict}")
    return mae


def tinybenchmarks_table(name, table, calibrated, ours, args):
    """MAE of tinyBenchmarks' estimators on the held-out models of each split, beside the
    best of ours (``ours``: :func:`selection_table`'s MAE)."""
    ks = [k for k in args.k if k < table.shape[1]]
    if not ks:
        return
    started = time.perf_counter()
    values = table.to_numpy(dtype=float)
    truth = np.nanmean(values, axis=1)
    rows = []
    for split, calibrated_split in enumerate(calibrated):
        held = calibrated_split.held
        calibration = np.setdiff1d(np.arange(len(table)), held)
        for draw, k, predicted in study.tinybenchmarks_draws(
                values, calibration, held, calibrated_split.bank, ks, seed=args.seed,
                split=split, splits=len(calibrated), draws=args.draws,
                refit=calibrated_split.refit):
            rows += [{"split": split, "draw": draw, "k": k, "estimator": estimator,
                      "mae": np.abs(values_ - truth[held]).mean()}
                     for estimator, values_ in predicted.items()]
    mae = pd.DataFrame(rows).groupby(["k", "estimator"], sort=False)["mae"].mean().unstack()
    mae = mae.rename(columns={"gp-IRT": "gp-IRT (chosen)"})
    if ours is not None:
        mae["ours: stratified"] = ours["stratified"]
        mae["ours: best"] = ours[list(STRATEGIES)].min(axis=1)
    print(f"\n{name}: tinyBenchmarks' estimators, MAE of predicted accuracy on the same "
          f"splits ({time.perf_counter() - started:.0f} s); gp-IRT (chosen): the clustering "
          "and lambda of least error on a fifth of the calibration models, as the workflow's "
          "tinybenchmarks line")
    print(mae.to_string(float_format=lambda v: f"{v:.4f}"))


def penalty_table(name, table, calibrated, penalties):
    """The predictive strategy's MAE at k = MAE_TARGET_K per ridge penalty: cross-validated
    on each split's calibration models and on its held-out models."""
    k = MAE_TARGET_K
    if k >= table.shape[1]:
        return
    started = time.perf_counter()
    values = table.to_numpy(dtype=float)
    coded = coded_answers(values)
    rows = []
    for split, calibrated_split in enumerate(calibrated):
        held, bank = calibrated_split.held, calibrated_split.bank
        calibration = coded[np.setdiff1d(np.arange(len(table)), held)]
        for penalty in penalties:
            known = Reference(calibration, bank, penalty=penalty)
            chosen = list(itertools.islice(forward_selection(calibration, penalty), k))
            answers = np.zeros((len(held), len(bank)), dtype=np.int8)
            answers[:, chosen] = coded[np.ix_(held, chosen)]
            predicted = known.reconstruct(answers, selection="predictive")["accuracy"]
            rows.append({"split": split, "penalty": penalty,
                         "cross-validated": np.abs(known.selection_errors(k)).mean(),
                         "held out": np.abs(predicted - np.nanmean(values[held], axis=1)).mean()})
    rows = pd.DataFrame(rows)
    picked = rows.loc[rows.groupby("split")["cross-validated"].idxmin()]
    print(f"\n{name}: predictive at k = {k}, MAE per ridge penalty ({len(calibrated)} splits, "
          f"{time.perf_counter() - started:.0f} s)")
    print(rows.groupby("penalty")[["cross-validated", "held out"]].mean().T.to_string(
        float_format=lambda v: f"{v:.4f}"))
    print(f"the penalties the cross-validation picks ("
          f"{', '.join(f'{v:g}' for v in picked['penalty'])}): held-out MAE "
          f"{picked['held out'].mean():.4f}")


def howmany_table(name, table, calibrated, seed, draws):
    """``cbmm.selection_error`` on each split's calibration models against the held-out
    models' MAE, per k, and the k it picks for each of HOWMANY_TARGETS (as ``cbmm select
    --target-mae``) with the held-out MAE there (over ``draws`` draws of ``stratified``, the
    selection study's); for ``predictive`` and ``stratified``."""
    started = time.perf_counter()
    grid = [k for k in TARGET_GRID if k < table.shape[1]]
    curves, choices = [], []
    for split, calibrated_split in enumerate(calibrated):
        result, held = calibrated_split.result, table.iloc[calibrated_split.held]
        known = table.drop(index=held.index)
        for strategy in ("predictive", "stratified"):
            curve = cbmm.selection_error(result, known, grid, strategy,
                                         refit=calibrated_split.refit)

            @functools.cache  # a chosen k is often one of the table's too
            def held_out_mae(k):
                errors = []
                for draw in range(draw_count(strategy, draws)):
                    chosen = cbmm.select_items(
                        result, k, strategy,
                        seed=study.selection_seed(seed, split, draw, len(calibrated)),
                        responses=known if strategy == "predictive" else None)
                    predicted = cbmm.predict_accuracy(held[chosen], result, reference=known)
                    errors.append((predicted["accuracy"] - held.mean(axis=1)).abs().mean())
                return np.mean(errors)

            for k in (k for k in HOWMANY_KS if k in curve.index):
                curves.append({"strategy": strategy, "k": k, "cross-validated":
                               curve.loc[k, "mae"], "held out": held_out_mae(k)})
            for target in HOWMANY_TARGETS:
                meeting = curve.index[curve["mae"] <= target]
                k = int(meeting[0]) if len(meeting) else None
                choices.append({"strategy": strategy, "target": target, "k": k,
                                "held out": np.nan if k is None else held_out_mae(k)})
    print(f"\n{name}: how many items, selection_error on the calibration models against the "
          f"held-out models ({len(calibrated)} splits, {time.perf_counter() - started:.0f} s); "
          "MAE of the predicted accuracy")
    print(pd.DataFrame(curves).groupby(["strategy", "k"]).mean().unstack("strategy").to_string(
        float_format=lambda v: f"{v:.4f}"))
    choices = pd.DataFrame(choices).assign(met=lambda d: d["held out"] <= d["target"])
    print("the fewest items whose cross-validated MAE meets a target (cbmm select "
          "--target-mae), and the held-out MAE from that many:")
    print(choices.groupby(["strategy", "target"], sort=False).agg(
        k_mean=("k", "mean"), k_min=("k", "min"), k_max=("k", "max"),
        held_out_mae=("held out", "mean"), held_out_sd=("held out", "std"),
        splits_met=("met", "sum"), splits=("met", "size")).to_string(
        float_format=lambda v: f"{v:.4f}"))


def se_table(name, table, replicates, new_models, seed, calibration_models=None):
    """``selection_error``'s ``mae_se`` against the spread of its MAE over calibration
    samples: a replicated simulation from ``table``'s own fit (module docstring, **se**),
    with calibrations of ``calibration_models`` (default: a split's size)."""
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        truth = cbmm.fit(table)
    pool, a, b = (np.asarray(v) for v in (truth.theta, truth.a, truth.b))
    rng = np.random.default_rng(seed)
    ks = [k for k in HOWMANY_KS if k < table.shape[1]]
    calibration_models = calibration_models or len(table) - study.held_out(len(table))

    def models(n, tag):
        theta = rng.choice(pool, n)
        answers = rng.random((n, len(a))) < expit((np.outer(theta, a) + b) / truth.sigma)
        return pd.DataFrame(answers.astype(float), columns=table.columns,
                            index=[f"{tag}{i}" for i in range(n)])

    fit = refit_like(truth)  # the fit of each calibration and of its folds
    rows = []
    for replicate in range(replicates):
        known, new = models(calibration_models, f"c{replicate}_"), models(new_models, "n")
        result, accuracy = fit(known), new.mean(axis=1).to_numpy()
        for strategy in ("predictive", "stratified"):
            curve = cbmm.selection_error(result, known, ks, strategy, refit=fit)
            draws = draw_count(strategy, SELECTION_DRAWS)  # as the curve's
            for k in ks:
                errors = np.mean([np.abs(cbmm.predict_accuracy(
                    new[cbmm.select_items(result, k, strategy, seed=draw, responses=(
                        known if strategy == "predictive" else None))], result,
                    reference=known)["accuracy"].to_numpy() - accuracy)
                    for draw in range(draws)], axis=0)
                rows.append({"strategy": strategy, "k": k, "curve": curve.loc[k, "mae"],
                             "mae_se": curve.loc[k, "mae_se"], "new": errors.mean(),
                             "new_se": errors.std(ddof=1) / np.sqrt(errors.size)})
    rows = pd.DataFrame(rows).assign(
        difference=lambda d: d["curve"] - d["new"],
        z=lambda d: d["difference"] / np.hypot(d["mae_se"], d["new_se"]))
    print(f"\n{name}: selection_error's mae_se by a replicated simulation from its fit "
          f"({replicates} calibrations of {calibration_models} models, the error of each on "
          f"{new_models} new models; {time.perf_counter() - started:.0f} s)")
    summary = rows.groupby(["strategy", "k"]).agg(
        curve=("curve", "mean"), new=("new", "mean"), bias=("difference", "mean"),
        curve_sd=("curve", "std"), mae_se=("mae_se", "mean"), z_sd=("z", "std"),
        z_beyond_1_96=("z", lambda z: (z.abs() > 1.96).mean()))
    print(summary.to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"all: z sd {rows['z'].std():.2f}, beyond 1.96 in {(rows['z'].abs() > 1.96).mean():.3f} "
          "(an honest standard error: 1 and 0.05)")


def adaptive_table(name, table, calibrated, args, se_targets, content=None):
    """The adaptive tests' table and verdicts; with ``content`` (item -> area), the tests
    balanced over the areas (``cbmm.adaptive_test(content=...)``)."""
    started = time.perf_counter()
    streams = max(1, math.ceil(args.adaptive_tests / sum(len(split.held) for split in calibrated)))
    summaries = [study.summarise_adaptive(study.adaptive_study(
        table, calibrated, se_targets=se_targets, max_exposures=[None, EXPOSURE_CAP],
        max_items=min(args.max_items, table.shape[1]), contents=[content],
        seed=args.seed + draw, reference=args.interval_scale)) for draw in range(streams)]
    if content is not None:
        name += f", balanced over {content.nunique()} content areas ({content.name})"
    keys = ["content", "max_exposure", "se_target"]
    grouped = pd.concat(summaries).groupby(keys, dropna=False, sort=False)
    # the streams share the splits' calibration fits, so their status too
    how = {"max_items": "max", "exposure": "max", "calibration_status": "first"}
    summary = grouped.agg({column: how.get(column, "mean")
                           for column in summaries[0].columns.drop(keys)}).reset_index()
    summary["stream_se"] = grouped["theta_mae"].sem().to_numpy()
    print(f"\n{name}: adaptive tests ({len(calibrated)} splits, {streams} "
          f"random streams, {time.perf_counter() - started:.0f} s); means over the streams "
          "but exposure and max_items (the largest); exposure: largest share of the tests "
          "(every split's, in one stream) given one item; theta_mae_se: its standard error "
          "over the tests of one stream; stream_se: the mean theta_mae's over the streams")
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    for limit, rows in summary.groupby("max_exposure", dropna=False):
        within = rows[rows["n_items"] <= ATLAS_ITEMS]
        setting = "no exposure control" if pd.isna(limit) else f"exposure <= {limit:g}"
        if within.empty:
            print(f"  {setting}: no SE target within {ATLAS_ITEMS} items on average")
            continue
        row = within.sort_values("theta_mae").iloc[0]
        met = row["theta_mae"] <= ATLAS_THETA_MAE and row["exposure"] < EXPOSURE_TARGET
        print(f"  {setting}: SE {row['se_target']:g}, {row['n_items']:.1f} items, theta MAE "
              f"{row['theta_mae']:.3f} (+- {row['theta_mae_se']:.3f} over tests, "
              f"+- {row['stream_se']:.3f} over streams), "
              f"exposure {row['exposure']:.3f}: "
              f"{'meets' if met else 'misses'} ATLAS ({ATLAS_ITEMS} items, "
              f"{ATLAS_THETA_MAE}, exposure < {EXPOSURE_TARGET:.0%})")


def adaptive_100_line(name, table, calibrated, args):
    """Accuracy and ability MAE of adaptive tests of exactly MAE_TARGET_K items."""
    k = MAE_TARGET_K
    if k >= table.shape[1]:
        return
    started = time.perf_counter()
    rows = study.adaptive_study(table, calibrated, se_targets=[1e-9], max_items=k,
                                min_items=k, candidates=1, progressive=0, seed=args.seed,
                                reference=False)  # the accuracy alone
    mae = (rows["predicted"] - rows["accuracy"]).abs().mean()
    verdict = "meets" if mae <= MAE_TARGET else f"misses by {mae - MAE_TARGET:.4f}"
    print(f"  adaptive tests of {k} items (maximum information, {len(rows)} tests, "
          f"{time.perf_counter() - started:.0f} s): accuracy MAE {mae:.4f}, theta MAE "
          f"{rows['theta_error'].abs().mean():.3f}; target <= {MAE_TARGET}: {verdict}")


def quiet_audit(table):
    """``cbmm.item_audit`` of ``table`` on its default fit, without the warnings (the
    benchmark prints what they say), indexed by the items' labels as text, as
    :func:`planted` names them (the audit keeps integer labels integers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        audit = cbmm.item_audit(cbmm.fit(table), table)
    audit.index = audit.index.astype(str)
    return audit


def audit_line(name, table):
    audit = quiet_audit(table)
    counts = ", ".join(f"{flag} {int(audit[flag].sum())}" for flag in FLAGS)
    print(f"\n{name}: item audit of {len(audit)} items: {counts}")
    agreement = audit.attrs["ability_agreement"]
    print(f"  {agreement}, short by {agreement.implied - agreement.observed:.3f}: "
          + ("agrees" if agreement.agrees else "one dimension does not describe the answers"))
    dependence = audit.attrs["wrong_way_dependence"]
    print(f"  {dependence}: " + ("a dimension of their own" if dependence.shared else
                                 "no more than ordinary items"))
    reasons = audit.loc[audit["negative_discrimination"], "reason"]
    print(f"  wrong-way reasons: {reasons.str.contains('likely a wrong').sum()} likely a "
          f"wrong key, {reasons.str.contains('possibly a wrong').sum()} possibly, "
          f"{reasons.str.contains('no evidence').sum()} no evidence")
    print(f"  {key_check_summary(audit)}")
    return audit


def planted(table, share, seed, suspect=frozenset()):
    """``table`` with ``share`` of its items' answers reversed, drawn among the items not
    in ``suspect``; the reversed labels."""
    rng = np.random.default_rng(seed)
    candidates = np.flatnonzero(~table.columns.astype(str).isin(list(suspect)))
    items = rng.choice(candidates, int(round(share * table.shape[1])), replace=False)
    reversed_table = table.astype(float)
    reversed_table.iloc[:, items] = 1.0 - reversed_table.iloc[:, items]
    return reversed_table, set(table.columns[items].astype(str))  # the audit's item labels


#: The audit's reasons that name a wrong key as the cause, likely or (among wrong-way
#: items that share a dimension, where an item does not) possible.
WRONG_KEY_WORDS = r"(?:likely|possibly) a wrong answer key"


def mislabel_rows(name, make, seeds, real_audit=None):
    """Recall and precision of the audit's ``negative_discrimination`` for planted
    reversals of the items of ``make(seed)``. ``real_audit``: the audit of a real matrix,
    the one ``make`` returns for every seed; the items it flags (the suspects: keys that may
    be wrong already) are never reversed, and flagging one again counts neither way.
    ``visible``: the share of the reversed items whose keys the audit of the answers
    before the reversals says the answers could check (``key_checked``);
    ``visible_found``: the share of those it flags after."""
    suspect = frozenset() if real_audit is None else frozenset(
        real_audit.index[real_audit["negative_discrimination"]])
    rows = []
    for seed in seeds:
        original = make(seed)
        table, truth = planted(original, 0.05, seed, suspect)
        audit = quiet_audit(table)
        flagged = set(audit.index[audit["negative_discrimination"]]) - suspect
        found = sorted(flagged & truth)
        labelled = audit.loc[found, "reason"].str.contains(WRONG_KEY_WORDS)
        before = quiet_audit(original) if real_audit is None else real_audit
        visible = set(before.index[before["key_checked"]]) & truth
        rows.append({"data": name, "seed": seed, "suspect": len(suspect),
                     "planted": len(truth), "flagged": len(flagged),
                     "recall": len(found) / len(truth),
                     "precision": len(found) / max(len(flagged), 1),
                     "labelled": labelled.mean() if found else np.nan,
                     "visible": len(visible) / len(truth),
                     "visible_found": (len(visible & flagged) / len(visible) if visible
                                       else np.nan)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", type=Path, nargs="+", default=[], metavar="FILE",
                        help="real matrices (CSV, models x items, 1 / 0 / empty)")
    parser.add_argument("--shapes", default=",".join(r.removeprefix("sim") for r in
                                                     LEADERBOARD_ROWS),
                        help="simulated leaderboard shapes NxJ, comma-separated ('' for none)")
    parser.add_argument("--k", type=lambda s: [int(v) for v in s.split(",")],
                        default=[10, 25, 50, 100, 200])
    parser.add_argument("--splits", type=int, default=5,
                        help="splits of the real data sets at least (see --held)")
    parser.add_argument("--held", type=int, default=500,
                        help="a real data set gets as many splits as hold out this many "
                             "models in all, at least --splits (default 500: 18 splits of "
                             "MATH-500, --splits of a leaderboard matrix)")
    parser.add_argument("--shape-splits", type=int, default=2,
                        help="splits of the simulated shapes (default 2: minutes each)")
    parser.add_argument("--se-targets", type=lambda s: [float(v) for v in s.split(",")],
                        default=[0.1, 0.125, 0.15, 0.2, 0.3])
    parser.add_argument("--max-items", type=int, default=ADAPTIVE_DEFAULTS["max_items"])
    parser.add_argument("--adaptive-tests", type=int, default=2000,
                        help="adaptive tests at least per data set and setting, in random "
                             "streams of all its held-out models (default 2000)")
    parser.add_argument("--no-interval-scale", dest="interval_scale", action="store_false",
                        help="adaptive tests' intervals at the 2PL's width (default: scaled "
                             "on each split's calibration models)")
    parser.add_argument("--content", type=read_content, nargs="+", default=[],
                        metavar="FILE=CONTENT.csv",
                        help="content areas of a --real matrix's items (a CSV of item and "
                             "area, as cbmm adaptive --content reads): its adaptive tests "
                             "are also run balanced over them (MATH-500's: its subjects)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=SELECTION_DRAWS,
                        help="draws of k items per split of a strategy whose items depend "
                             "on the seed, in the selection and howmany parts (default "
                             f"{SELECTION_DRAWS})")
    parser.add_argument("--mislabel-seeds", type=int, default=3)
    parser.add_argument("--penalties", type=lambda s: [float(v) for v in s.split(",")],
                        default=[20, 50, 70, 100, 150, 200, 300],
                        help="ridge penalties of the predictive strategy that the penalties "
                             "part compares on each real data set")
    parser.add_argument("--se-replicates", type=int, default=60,
                        help="the se part's simulated calibrations per data set")
    parser.add_argument("--se-calibration-models", type=int,
                        help="the se part's calibration models (default: a split's, 80 %% "
                             "of the data set's)")
    parser.add_argument("--se-new-models", type=int, default=1000,
                        help="the se part's new models per calibration, whose error the "
                             "curve estimates")
    parser.add_argument("--parts", type=lambda s: set(s.split(",")),
                        default=set(DEFAULT_PARTS),
                        help=f"the parts to run, comma-separated, of {','.join(PARTS)} "
                             f"(default all but howmany, se and penalties)")
    args = parser.parse_args()
    if not args.parts <= set(PARTS):
        parser.error(f"--parts: unknown {sorted(args.parts - set(PARTS))}; known {PARTS}")
    print(machine())

    math500 = read_math500()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",") if s]
    if math500 is None:
        print(f"MATH_500.csv not found in {[str(p) for p in MATH500_CANDIDATES]}: skipped")
        if shapes:
            raise SystemExit("--shapes: the simulated shapes take their parameters from a fit "
                             "of MATH_500.csv; without it, pass --shapes ''")
    real = {path: read_real(path) for path in args.real}
    datasets = {} if math500 is None else {"MATH-500 (140 x 500, real)": math500}
    datasets.update(real.values())
    contents = {"MATH-500 (140 x 500, real)": math500_subjects()}
    for path, areas in args.content:
        if path not in real:
            raise SystemExit(f"--content {path}: not one of the --real matrices")
        contents[real[path][0]] = areas
    if shapes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calibration = cbmm.fit(math500, tol=1e-8, max_iter=20000, accelerate="auto")

    audits = {}
    for name, table in datasets.items():
        if args.parts & {"selection", "howmany", "penalties", "tinybenchmarks", "adaptive"}:
            calibrated = fitted(table, real_splits(table, args), args.seed)
        ours = selection_table(name, table, calibrated, args) \
            if "selection" in args.parts else None
        if "tinybenchmarks" in args.parts:
            tinybenchmarks_table(name, table, calibrated, ours, args)
        if "howmany" in args.parts:
            howmany_table(name, table, calibrated, args.seed, args.draws)
        if "se" in args.parts:
            se_table(name, table, args.se_replicates, args.se_new_models, args.seed,
                     args.se_calibration_models)
        if "penalties" in args.parts:
            penalty_table(name, table, calibrated, args.penalties)
        if "adaptive" in args.parts:
            adaptive_table(name, table, calibrated, args, args.se_targets)
            if contents.get(name) is not None:
                adaptive_table(name, table, calibrated, args, args.se_targets,
                               contents[name])
            adaptive_100_line(name, table, calibrated, args)
        if args.parts & {"audit", "mislabels"}:
            audits[name] = audit_line(name, table)
    for k, (n, j) in enumerate(shapes if args.parts & {"selection", "adaptive"} else []):
        name = f"simulated {n} x {j} (calibrated stand-in)"
        table = standin(calibration, n, j, seed=100 + k)
        calibrated = fitted(table, args.shape_splits, args.seed)
        if "selection" in args.parts:
            selection_table(name, table, calibrated, args)
        if "adaptive" in args.parts:
            adaptive_table(name, table, calibrated, args, [0.1, 0.2])
            adaptive_100_line(name, table, calibrated, args)
    if "mislabels" not in args.parts:
        return

    print(f"\nplanted mislabels: 5 % of the items reversed, {args.mislabel_seeds} seeds each; "
          "on real data an item the audit flags that was not planted counts as a false "
          "positive, but for the suspects (items it flags before the reversals, never "
          "reversed)")
    seeds = range(args.mislabel_seeds)
    rows = []
    for name, table in datasets.items():
        rows += mislabel_rows(name, lambda s, table=table: table, seeds, audits[name])
    # few models: the regime of a lab's own evaluations, where the tests have least power
    for n, j in [(1000, 500), (200, 1000), (80, 1000)]:
        rows += mislabel_rows(f"paper generator {n} x {j}, 5 % a = 0",
                              lambda s, n=n, j=j: pd.DataFrame(
                                  simulate(n, j, sparsity=0.05, seed=s).responses), seeds)
    for n, j in shapes[:2]:
        rows += mislabel_rows(f"simulated {n} x {j} (calibrated stand-in)",
                              lambda s, n=n, j=j: standin(calibration, n, j, seed=200 + s),
                              seeds)
    table = pd.DataFrame(rows).groupby("data", sort=False)[
        ["suspect", "planted", "flagged", "recall", "precision", "labelled", "visible",
         "visible_found"]].mean()
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    met = (table["recall"] >= RECALL_TARGET) & (table["precision"] >= PRECISION_TARGET)
    print(f"targets recall >= {RECALL_TARGET}, precision >= {PRECISION_TARGET}: met on "
          f"{int(met.sum())} of {len(met)}")


if __name__ == "__main__":
    main()
