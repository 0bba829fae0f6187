"""Do the 95 % intervals of ``cbmm.fit(..., se=True)`` cover the truth 95 % of the time?

For each design, ``--replicates`` data sets are drawn from the 2PL model (the paper's
generator: theta ~ N(0, 1), a ~ U(0.5, 1), b ~ N(0, 0.5)), each is fitted with standard
errors, and the truth, put on the canonical scale the same way as the estimate (theta
mean 0 and sd 1 over the models; ``cbmm.canonicalize``), is compared with the Wald
intervals ``estimate -+ 1.96 se``.  Printed per design and prior: the share of
parameters covered (theta, a, b), the mean standard error, and the seconds of the fit
and of the standard errors.  Targets (issue 22): 93-97 % for theta and b, >= 90 % for a.

Usage::

    python benchmarks/bench_coverage.py [--replicates 30] [--designs paper,leaderboard]
        [--priors normal,none] [--level 0.95]

Designs: ``paper`` (N = J = 1000, the paper's default), ``leaderboard`` (2211 x 541, the
IFEval shape), or ``N:J[:missing_rate]``.

``--few-models CSV`` measures the abilities' intervals of fits of few models instead
(``cbmm.coverage.FEW_MODELS``): the truth is the default fit of a real matrix (e.g.
MATH-500), each draw takes ``--models`` of its abilities at random and all its items,
answers them from the 2PL and is fitted with standard errors; about 600 abilities per
size (``--replicates`` ignored)::

    python benchmarks/bench_coverage.py --few-models MATH_500.csv [--models 10,20,40,80]

``--score CSV`` measures :func:`cbmm.score`'s intervals against the calibration's size
(``cbmm.intervals.FEW_CALIBRATION_MODELS``): each draw calibrates on ``--models`` abilities
of the real fit (with standard errors) and scores 100 new ones answering 50 of its items
or all of them, once with the calibration's item error carried (the default) and once with
the items held fixed (``item_error=False``); about 1200 calibration models per row::

    python benchmarks/bench_coverage.py --score MATH_500.csv [--models 20,40,80,160,320]

``--score-heldout CSV`` checks ``score``'s ``se_calibration`` on the real answers, with no
model drawn: per split, 40 models are held out and the other models are the pool; the
reference calibration is the fit of the whole pool, the small ones fits of ``--models``
of its models (3 per size); each held-out model is scored against both on the same
answers, so the answers' own noise cancels and the difference is the small calibration's
error (plus the reference's, which shares most of its models with the larger small
ones). Printed per size: the sd of (small - reference) / ``se_calibration``, with the
reference put on the small calibration's scale, and the share within 1.96::

    python benchmarks/bench_coverage.py --score-heldout MATH_500.csv [--models 20,40,60,80]

``--linked CSV[,CSV...]`` checks ``info["prior_bias"]`` (``cbmm.intervals.PRIOR_BIAS``) on
real answers merged as a leaderboard is: with one file its items are split at random into
two suites; with several, the first file's items are one suite and the others' the other
(joined on the models they share).  Per draw the models are split in two groups, by the
reference fit's ability at its median (the strong answer one suite, the weak the other) or
at random; each group keeps only its suite's answers, except ``--models`` models (0, 1, 2,
5, 10, 20) that keep every answer.  The merged matrix is fitted with standard errors and
compared with the reference, the fit of every answer: printed per grouping and number of
linking models (3 draws each), the share of the other models whose 95 % interval holds
the reference ability (all, and the first group's: the weaker half, or the drawn one), the
error of the gap between the groups' mean abilities, the share
of models beyond one standard error of prior bias, the largest group of them the prior
places together, the draws whose fit warns and the statuses.  The reference has
error of its own, smaller (it reads every item) and shared, so the share is lenient::

    python benchmarks/bench_coverage.py --linked MATH_500.csv [--degenerate set_aside]

``--small-group N`` makes the first group N models drawn at random, the rest the second
(the linking models drawn from it), in place of the two groupings.

``--linked-simulated`` does the same on simulated answers, two designs: two groups of 200
models (theta ~ N(-1.5, 1) and N(1.5, 1); a ~ U(0.5, 2), b ~ N(0, 1)) on their own 200
items each, linked by ``--models`` models that answered all 400 (a leaderboard
maintainer's trial); and groups of 100 on 40 items each, linked by ``--models`` single
answers of a model of one group to an item of the other, scattered at random (a user's
trial), here against the simulated truth::

    python benchmarks/bench_coverage.py --linked-simulated [--models 1,2,5,20,100]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import machine

import cbmm
from cbmm.simulate import simulate

DESIGNS = {"paper": (1000, 1000, 0.0), "leaderboard": (2211, 541, 0.0)}


def design_of(name):
    if name in DESIGNS:
        return DESIGNS[name]
    parts = name.split(":")
    return int(parts[0]), int(parts[1]), float(parts[2]) if len(parts) > 2 else 0.0


def one_replicate(n, j, missing_rate, prior, seed, level):
    draw = simulate(n, j, missing="mcar" if missing_rate else "none",
                    missing_rate=missing_rate, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        began = time.perf_counter()
        cbmm.fit(draw.responses, sigma=draw.sigma, prior=prior, seed=seed)
        fitted = time.perf_counter() - began
        began = time.perf_counter()
        with_se = cbmm.fit(draw.responses, sigma=draw.sigma, prior=prior, seed=seed, se=True)
        se_seconds = time.perf_counter() - began - fitted
    truth = cbmm.canonicalize(draw.theta, draw.a, draw.b)
    bounds = with_se.confint(level)
    covered = {}
    for name, true in zip(("theta", "a", "b"), truth):
        table = bounds[name]
        ok = np.isfinite(table["lower"]) & np.isfinite(table["upper"])
        inside = (table["lower"] <= true) & (true <= table["upper"])
        covered[name] = (int((inside & ok).sum()), int(ok.sum()),
                         float(np.nanmean(getattr(with_se, f"{name}_se"))))
    return covered, with_se.status, fitted, se_seconds


def real_truth(path):
    """The abilities and the items' (alpha, beta) of the default fit of the matrix at
    ``path`` (items with finite parameters), as the truth to draw from."""
    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        truth = cbmm.fit(pd.read_csv(path, index_col=0))
    theta = truth.theta.to_numpy()
    alpha, beta = (np.asarray(v, dtype=float) / truth.sigma for v in (truth.a, truth.b))
    finite = np.isfinite(alpha) & np.isfinite(beta)
    alpha, beta = alpha[finite], beta[finite]
    print(f"truth: the default fit of {path} ({theta.size} models, {alpha.size} items with "
          f"finite parameters, median a/sigma {np.median(alpha):.2f})")
    return theta, alpha, beta


def answers_of(theta, alpha, beta, rng):
    """1/0 answers of abilities ``theta`` to items ``(alpha, beta)``, drawn from the 2PL."""
    p = 1 / (1 + np.exp(-(np.outer(theta, alpha) + beta)))
    return (rng.random(p.shape) < p).astype(float)


def few_models(path, sizes, level):
    """Coverage of the abilities' intervals of fits of ``sizes`` models drawn from the fit
    of the matrix at ``path``: each size's share covered and the sd of (estimate -
    truth) / se (1 where the standard errors are right)."""
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    theta, alpha, beta = real_truth(path)
    print(f"{'models':>6} {'draws':>5} {'theta':>7} {'sd z':>6}  statuses")
    for n in sizes:
        inside, ratios, statuses = [], [], {}
        draws = max(10, 600 // n)
        for rep in range(draws):
            rng = np.random.default_rng([n, rep])
            drawn = theta[rng.choice(theta.size, n, replace=False)]
            answers = answers_of(drawn, alpha, beta, rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted = cbmm.fit(answers, se=True)
            statuses[fitted.status] = statuses.get(fitted.status, 0) + 1
            true = (drawn - drawn.mean()) / drawn.std()
            ok = np.isfinite(fitted.theta_se)
            error = (fitted.theta - true)[ok]
            inside.extend(np.abs(error) <= z * fitted.theta_se[ok])
            ratios.extend(error / fitted.theta_se[ok])
        print(f"{n:6d} {draws:5d} {np.mean(inside):7.3f} {np.std(ratios):6.2f}  "
              + ", ".join(f"{s} {c}" for s, c in statuses.items()), flush=True)


def scored(path, sizes, level):
    """Coverage of :func:`cbmm.score`'s intervals of new models against calibrations of
    ``sizes`` models drawn from the fit of the matrix at ``path``, with the calibration's
    item error carried and with the items fixed, for new models answering 50 items or all;
    the truth of a new model is its ability on the calibration's drawn abilities' scale."""
    import pandas as pd
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    theta, alpha, beta = real_truth(path)
    items = [f"i{j}" for j in range(alpha.size)]
    print(f"{'models':>6} {'items':>5} {'draws':>5} {'carried':>8} {'sd z':>5} {'fixed':>6} "
          f"{'sd z':>5}")
    for n in sizes:
        for answered in (50, alpha.size):
            inside = {True: [], False: []}
            ratios = {True: [], False: []}
            draws = max(6, 1200 // n)
            for rep in range(draws):
                rng = np.random.default_rng([n, rep, answered])
                calibration, new = (theta[rng.choice(theta.size, size)] for size in (n, 100))
                answers = [pd.DataFrame(answers_of(t, alpha, beta, rng), columns=items)
                           for t in (calibration, new)]
                asked = list(rng.choice(items, answered, replace=False))
                true = (new - calibration.mean()) / calibration.std()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fit = cbmm.fit(answers[0], se=True)
                    for carried in (True, False):
                        got = cbmm.score(answers[1][asked], fit, item_error=carried)
                        ok = (got["status"] == "converged").to_numpy()
                        error = got["theta"].to_numpy()[ok] - true[ok]
                        inside[carried].extend(np.abs(error) <= z * got["se"].to_numpy()[ok])
                        ratios[carried].extend(error / got["se"].to_numpy()[ok])
            print(f"{n:6d} {answered:5d} {draws:5d} {np.mean(inside[True]):8.3f} "
                  f"{np.std(ratios[True]):5.2f} {np.mean(inside[False]):6.3f} "
                  f"{np.std(ratios[False]):5.2f}", flush=True)


def scored_heldout(path, sizes, level, splits=6, held_out=40, repeats=3):
    """``se_calibration`` against the differences between a small calibration's scores of
    held-out real models and a large one's (module docstring)."""
    import pandas as pd
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    data = pd.read_csv(path, index_col=0)
    print(f"{path}: {data.shape[0]} models, {held_out} held out per split, {splits} splits, "
          f"the pool's other {data.shape[0] - held_out} the reference calibration")
    print(f"{'models':>6} {'scores':>6} {'sd z':>6} {'within':>7}")
    ratios = {n: [] for n in sizes}
    for split in range(splits):
        rng = np.random.default_rng(split)
        order = rng.permutation(len(data))
        held, pool = data.iloc[order[:held_out]], data.iloc[order[held_out:]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = cbmm.fit(pool, se=True)
            reference_theta = cbmm.score(held, reference, item_error=False)["theta"]
        for n in sizes:
            for _ in range(repeats):
                chosen = rng.choice(len(pool), n, replace=False)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = cbmm.score(held, cbmm.fit(pool.iloc[chosen], se=True))
                anchor = reference.theta.to_numpy()[chosen]  # the small fit's scale
                mapped = (reference_theta - anchor.mean()) / anchor.std()
                ok = (got["status"] == "converged") & np.isfinite(got["se_calibration"])
                ratios[n].extend(((got["theta"] - mapped) / got["se_calibration"])[ok])
    for n in sizes:
        r = np.asarray(ratios[n])
        print(f"{n:6d} {r.size:6d} {r.std():6.2f} {np.mean(np.abs(r) <= z):7.3f}", flush=True)


def _merged(paths):
    """The answers of one or more files (module docstring, ``--linked``) and its two suites'
    item labels."""
    from pathlib import Path

    import pandas as pd

    frames = [pd.read_csv(p, index_col=0) for p in paths]
    if len(frames) == 1:
        order = np.random.default_rng(0).permutation(frames[0].columns)
        return frames[0], list(order[: len(order) // 2]), list(order[len(order) // 2:])
    frames = [f.add_prefix(Path(p).stem + ":") for f, p in zip(frames, paths)]
    common = frames[0].index
    for f in frames[1:]:
        common = common.intersection(f.index)
    merged = pd.concat([f.loc[common] for f in frames], axis=1)
    rest = [c for f in frames[1:] for c in f.columns]
    return merged, list(frames[0].columns), rest


#: The header of the linked modes' rows (:func:`_linked_row`).
LINKED_HEADER = (f"{'coverage':>9} {'first':>6} {'gap err':>9} {'share>1':>8} {'group':>6} "
                 f"{'warned':>7}  statuses")


def _linked_row(label, draws):
    """One printed row of the linked modes: mean coverage (all, first group), gap error and
    prior-bias share, the largest group the prior places together, the draws that warn,
    the statuses."""
    cover, first, gap, share = (np.mean([d[k] for d in draws]) for k in range(4))
    group = max(d[4] for d in draws)
    warned = sum(d[5] for d in draws)
    statuses = sorted({d[6] for d in draws})
    print(f"{label:>18} {cover:9.3f} {first:6.3f} {gap:+9.3f} {share:8.2f} {group:6d} "
          f"{f'{warned}/{len(draws)}':>7}  {', '.join(statuses)}", flush=True)


def _linked_draw(answers, truth, groups, level, **fit_kwargs):
    """Fit merged answers: the coverage of the truth (outside the linking models, and in the
    first group), the error of the gap between the groups' mean abilities, the prior-bias
    share, the largest group, whether the fit warns, and its status (:func:`_linked_row`)."""
    from scipy.stats import norm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = cbmm.fit(answers, se=True, **fit_kwargs)
    theta, se = np.asarray(fitted.theta, float), np.asarray(fitted.theta_se, float)
    first, second = groups
    scored = (first | second) & np.isfinite(theta) & np.isfinite(truth)
    inside = (np.abs(theta[scored] - truth[scored])
              <= norm.ppf(0.5 + level / 2) * se[scored])
    gap = ((theta[second & scored].mean() - theta[first & scored].mean())
           - (truth[second & scored].mean() - truth[first & scored].mean()))
    record = fitted.info.get("prior_bias", {})
    return (inside.mean(), inside[first[scored]].mean(), gap, record.get("share_beyond", np.nan),
            record.get("largest_group", 0), record.get("exceeds_limit", False), fitted.status)


def linked(paths, sizes, level, degenerate="keep", small_group=None, repeats=3):
    """Real answers merged from suites that different groups of models answered (module
    docstring)."""
    full, first_items, second_items = _merged(paths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = cbmm.fit(full, se=True, degenerate=degenerate)
    truth = np.asarray(reference.theta, float)
    print(f"{', '.join(paths)}: {full.shape[0]} models, suites of {len(first_items)} and "
          f"{len(second_items)} items; degenerate={degenerate}; reference "
          f"{reference.status}, prior-bias share {reference.info['prior_bias']['share_beyond']}")
    print(f"{'grouping, linking':>18} {LINKED_HEADER}")
    n = len(full)
    for grouping in (("ability", "random") if not small_group else (f"{small_group} drawn",)):
        for k in sizes:
            draws = []
            for rep in range(repeats):
                rng = np.random.default_rng(100 * rep + k)
                first = (truth < np.nanmedian(truth) if grouping == "ability"
                         else rng.permutation(n) < (small_group or n // 2))
                linking = np.zeros(n, dtype=bool)
                pool = np.flatnonzero(~first) if small_group else np.arange(n)
                linking[rng.choice(pool, k, replace=False)] = True
                answers = full.astype(float)
                answers.loc[first & ~linking, second_items] = np.nan
                answers.loc[~first & ~linking, first_items] = np.nan
                draws.append(_linked_draw(answers, truth, (first & ~linking, ~first & ~linking),
                                          level, degenerate=degenerate))
            _linked_row(f"{grouping}, {k}", draws)


def linked_simulated(sizes, level, repeats=3):
    """Simulated groups linked by full rows or by scattered answers (module docstring)."""
    print(f"{'design, linking':>18} {LINKED_HEADER}")
    for design, n, j in (("full rows", 200, 200), ("scattered", 100, 40)):
        for k in sizes:
            draws = []
            for rep in range(repeats):
                rng = np.random.default_rng(1000 * rep + k)
                extra = k if design == "full rows" else 0
                theta = np.concatenate([rng.normal(-1.5, 1, n), rng.normal(1.5, 1, n),
                                        rng.normal(0, 1.8, extra)])
                a, b = rng.uniform(0.5, 2, 2 * j), rng.normal(0, 1, 2 * j)
                answers = answers_of(theta, a, b, rng)
                hidden = np.zeros(answers.shape, dtype=bool)
                hidden[:n, j:] = hidden[n:2 * n, :j] = True
                if design == "scattered":
                    cells = np.argwhere(hidden)
                    shown = cells[rng.choice(len(cells), k, replace=False)]
                    hidden[shown[:, 0], shown[:, 1]] = False
                answers[hidden] = np.nan
                groups = np.arange(theta.size) < n, (np.arange(theta.size) >= n) & (
                    np.arange(theta.size) < 2 * n)
                draws.append(_linked_draw(answers, (theta - theta.mean()) / theta.std(),
                                          groups, level))
            _linked_row(f"{design}, {k}", draws)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--few-models", metavar="CSV")
    parser.add_argument("--score", metavar="CSV")
    parser.add_argument("--score-heldout", metavar="CSV")
    parser.add_argument("--linked", metavar="CSV[,CSV...]")
    parser.add_argument("--linked-simulated", action="store_true")
    parser.add_argument("--degenerate", default="keep")
    parser.add_argument("--small-group", type=int)
    parser.add_argument("--models")
    parser.add_argument("--replicates", type=int, default=30)
    parser.add_argument("--designs", default="paper,leaderboard")
    parser.add_argument("--priors", default="normal,none")
    parser.add_argument("--level", type=float, default=0.95)
    args = parser.parse_args()
    print(machine())
    if args.linked:
        linked(args.linked.split(","), [int(n) for n in (args.models or "0,1,2,5,10,20").split(",")],
               args.level, args.degenerate, args.small_group)
        return
    if args.linked_simulated:
        linked_simulated([int(n) for n in (args.models or "1,2,5,20,100").split(",")], args.level)
        return
    for path, run, sizes in ((args.few_models, few_models, "10,20,40,80"),
                             (args.score, scored, "20,40,80,160,320"),
                             (args.score_heldout, scored_heldout, "20,40,60,80")):
        if path:
            run(path, [int(n) for n in (args.models or sizes).split(",")], args.level)
            return
    print(f"{args.replicates} replicates per row, {args.level:.0%} Wald intervals")
    print(f"{'design':>14} {'prior':>6} {'theta':>7} {'a':>7} {'b':>7} {'se theta':>9} "
          f"{'se a':>7} {'se b':>7} {'fit s':>7} {'se s':>7}  statuses")
    for name in args.designs.split(","):
        n, j, missing_rate = design_of(name)
        for prior in args.priors.split(","):
            totals = {k: [0, 0, []] for k in ("theta", "a", "b")}
            statuses, fit_s, se_s = {}, [], []
            for rep in range(args.replicates):
                covered, status, fitted, seconds = one_replicate(
                    n, j, missing_rate, prior, 1000 + rep, args.level)
                statuses[status] = statuses.get(status, 0) + 1
                fit_s.append(fitted)
                se_s.append(seconds)
                for k, (inside, count, mean_se) in covered.items():
                    totals[k][0] += inside
                    totals[k][1] += count
                    totals[k][2].append(mean_se)
            share = {k: v[0] / max(v[1], 1) for k, v in totals.items()}
            print(f"{name + f' {n}x{j}':>14} {prior:>6} {share['theta']:7.3f} {share['a']:7.3f} "
                  f"{share['b']:7.3f} {np.mean(totals['theta'][2]):9.4f} "
                  f"{np.mean(totals['a'][2]):7.4f} {np.mean(totals['b'][2]):7.4f} "
                  f"{np.median(fit_s):7.3f} {np.median(se_s):7.3f}  "
                  + ", ".join(f"{s} {c}" for s, c in statuses.items()), flush=True)


if __name__ == "__main__":
    main()
