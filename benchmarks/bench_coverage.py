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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=30)
    parser.add_argument("--designs", default="paper,leaderboard")
    parser.add_argument("--priors", default="normal,none")
    parser.add_argument("--level", type=float, default=0.95)
    args = parser.parse_args()
    print(machine())
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
