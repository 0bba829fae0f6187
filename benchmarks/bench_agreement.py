"""Real data: do intervals hold up between halves of a benchmark, and do seeds agree?

Two checks on real response matrices (the MATH-500 matrix beside the repository when
present, and any CSV given with ``--files``: models in rows, items in columns, 1/0):

* **Split halves.**  The items are split at random in two halves, ``--splits`` times;
  each half is fitted with standard errors, and the share of models whose two abilities
  differ by at most ``1.96 sqrt(se_A^2 + se_B^2)`` is printed: close to 95 % when the
  intervals are honest, although the 2PL is only an approximation of real data.  Rows:
  the library's default (MAP), maximum likelihood with degenerate rows and columns set
  aside, and the way available before (a tight maximum-likelihood fit of each half, then
  ``cbmm.score``'s standard errors, which hold the items fixed).
* **Seeds.**  ``--seeds`` fits of the whole matrix with seeds 0, 1, ...: how many reach
  the best objective found (within 1), their rank correlation with the best fit's
  abilities, and their statuses; for the default and for the paper's procedure
  (random start, its rule).

Usage::

    python benchmarks/bench_agreement.py [--files a.csv,b.csv] [--splits 10] [--seeds 10]
        [--prior-sds 3]

``--prior-sds 2,3,5`` repeats the default's split halves with each prior standard
deviation (``prior_sd``).
"""

from __future__ import annotations

import argparse
import functools
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _common import MATH500_CANDIDATES

import cbmm


def split_halves(table, splits, how):
    rng = np.random.default_rng(2026)
    shares = []
    for _ in range(splits):
        items = rng.permutation(table.columns)
        estimates = [how(table[list(part)]) for part in np.array_split(items, 2)]
        (t_a, s_a), (t_b, s_b) = estimates
        ok = np.isfinite(t_a) & np.isfinite(t_b) & np.isfinite(s_a) & np.isfinite(s_b)
        gap = np.abs(t_a - t_b)[ok]
        # no standard errors at all: a half without a finite optimum (status unbounded)
        shares.append(float(np.mean(gap <= 1.96 * np.hypot(s_a, s_b)[ok])) if ok.any()
                      else np.nan)
    return np.array(shares)


def default(half, prior_sd=cbmm.prior.PRIOR_SD):
    fit = cbmm.fit(half, se=True, prior_sd=prior_sd)
    return np.asarray(fit.theta), np.asarray(fit.theta_se)


def set_aside(half):
    fit = cbmm.fit(half, se=True, prior="none", degenerate="set_aside")
    return np.asarray(fit.theta), np.asarray(fit.theta_se)


def before(half):
    settings = {**cbmm.paper_settings("cbmm"), "tol": 1e-9, "max_iter": 20000,
                "accelerate": "auto"}
    fit = cbmm.fit(half, **settings)
    scored = cbmm.score(half, fit)
    return scored["theta"].to_numpy(), scored["se"].to_numpy()


def seeds(table, count, settings):
    fits = [cbmm.fit(table, seed=seed, **settings) for seed in range(count)]
    objectives = np.array([f.info["objective"] for f in fits])
    best = fits[int(np.argmin(objectives))]
    reach = int(np.sum(objectives - objectives.min() <= 1.0))
    rho = [pd.Series(np.asarray(f.theta)).corr(pd.Series(np.asarray(best.theta)),
                                               method="spearman") for f in fits]
    statuses = pd.Series([f.status for f in fits]).value_counts().to_dict()
    return reach, min(rho), statuses, float(objectives.max() - objectives.min())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--prior-sds", default=str(cbmm.prior.PRIOR_SD))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    paths = [p for p in MATH500_CANDIDATES if p.is_file()][:1]
    paths += [Path(p) for p in args.files.split(",") if p]
    for path in paths:
        table = pd.read_csv(path, index_col=0)
        print(f"{path.name}: {table.shape[0]} models x {table.shape[1]} items")
        rows = [(f"default, prior_sd {sd:g}", functools.partial(default, prior_sd=sd))
                for sd in map(float, args.prior_sds.split(","))]
        for name, how in rows + [("ML, set aside", set_aside), ("before: score's SE", before)]:
            shares = split_halves(table, args.splits, how)
            answered = shares[np.isfinite(shares)]
            if not answered.size:
                print(f"  split halves, {name:>24}: no finite optimum in any split")
                continue
            print(f"  split halves, {name:>24}: {answered.mean():.3f} of models within "
                  f"(range {answered.min():.3f}-{answered.max():.3f} over {answered.size} "
                  f"splits; {args.splits - answered.size} without a finite optimum)")
        for name, settings in (("default", {}), ("paper", cbmm.paper_settings("cbmm"))):
            reach, rho, statuses, spread = seeds(table, args.seeds, settings)
            print(f"  seeds, {name:>8}: {reach}/{args.seeds} reach the best objective "
                  f"(spread {spread:.1f}), min rank correlation with the best {rho:.4f}, "
                  f"statuses {statuses}", flush=True)


if __name__ == "__main__":
    main()
