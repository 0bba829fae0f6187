"""What uncertainty costs: standard errors and the bootstrap as multiples of one fit.

For each row (a simulated leaderboard shape with the paper's generator and 20 %
missing cells, or the real MATH-500 matrix when it lies beside the repository) the
script times, wall seconds on all cores, median of ``--repeats``:

* the default ``cbmm.fit`` (spectral start and two random ones, MAP, auto), and one
  start alone (``n_starts=1``);
* ``se=True`` on top of it (the observed information, N x N Schur complement);
* ``cbmm.bootstrap`` with ``--n-boot`` replicates (warm-started, one start each), once.

Target (issue 22): 200 replicates at 2211 x 5761 in at most 20 times one fit.

Usage::

    python benchmarks/bench_uncertainty.py [--rows sim2211x5761,math500] [--n-boot 200]
        [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import MATH500_CANDIDATES, machine

import cbmm
from cbmm.simulate import simulate


def load(row):
    if row == "math500":
        import pandas as pd

        path = next((p for p in MATH500_CANDIDATES if p.is_file()), None)
        if path is None:
            return None
        return cbmm.as_responses(pd.read_csv(path, index_col=0))
    n, j = (int(v) for v in row.removeprefix("sim").split("x"))
    return cbmm.as_responses(simulate(n, j, missing="mcar", missing_rate=0.2, seed=1).responses)


def timed(function, repeats):
    seconds, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - began)
    return float(np.median(seconds)), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="sim2211x5761,math500")
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(machine())
    print(f"{'row':>14} {'fit s':>7} {'1 start':>8} {'se s':>7} {'boot s':>8} "
          f"{'boot/fit':>9} {'boot/1 start':>13} {'per rep s':>10}  status")
    for row in args.rows.split(","):
        data = load(row)
        if data is None:
            print(f"{row:>14}  (not found)")
            continue
        fit_s, result = timed(lambda: cbmm.fit(data), args.repeats)
        one_s, _ = timed(lambda: cbmm.fit(data, n_starts=1), args.repeats)
        se_total, _ = timed(lambda: cbmm.fit(data, se=True), args.repeats)
        began = time.perf_counter()
        boot = cbmm.bootstrap(data, n_boot=args.n_boot)
        boot_s = time.perf_counter() - began
        n, j = data.shape
        print(f"{f'{n}x{j}':>14} {fit_s:7.3f} {one_s:8.3f} {se_total - fit_s:7.3f} {boot_s:8.2f} "
              f"{boot_s / fit_s:9.1f} {boot_s / one_s:13.1f} {boot.runtime_s / args.n_boot:10.4f}"
              f"  {result.status}, {boot.n_failed} failed replicates", flush=True)


if __name__ == "__main__":
    main()
