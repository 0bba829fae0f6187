"""Speed and memory of cBMM on fully observed matrices of the leaderboard shapes.

For each shape N x J (default: 2211 x {541, 756, 1192, 1324, 5761, 12032}) a
fresh process simulates responses from the paper's design (written straight
into int8, row block by row block), fits them with ``cbmm.fit`` and reports

* seconds (``FitResult.runtime_s``: the fit alone; median of ``--repeats``
  runs), iterations, final loss and peak RSS of the process for the default fit
  (Algorithm 1, tol 1e-4) and for the SQUAREM-accelerated variant;
* the time each variant needs to reach a target loss, within ``--target-gap``
  (default 1e-6, relative) of the best loss found by any run (a tightly
  converged accelerated fit), read off the loss and time histories;
* optionally (``--reference``) the plain NumPy reference engine.

BLAS is pinned to one thread; the fused passes use ``--threads`` cores (all
this process may use by default).  Run ``python benchmarks/bench_cbmm.py --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

LEADERBOARD_ITEMS = (541, 756, 1192, 1324, 5761, 12032)

def _simulated_int8(n, j, seed):
    import numpy as np
    from scipy.special import expit

    rng = np.random.default_rng(seed)
    theta, a, b = rng.standard_normal(n), rng.uniform(0.5, 1.0, j), rng.normal(0.0, 0.5, j)
    y = np.empty((n, j), dtype=np.int8)
    for start in range(0, n, 64):
        p = expit(np.outer(theta[start:start + 64], a) + b)
        y[start:start + 64] = np.where(rng.random(p.shape) < p, 1, -1)
    return y


def _time_to_target(result, target):
    times = result.info.get("time_history", [])
    for value, seconds in zip(result.loss_history, times):
        if value <= target:
            return seconds
    return float("nan")


def _median_run(fit, repeats):
    """The fit whose runtime is the median of ``repeats`` runs (the fits are identical)."""
    results = sorted((fit() for _ in range(repeats)), key=lambda r: r.runtime_s)
    return results[len(results) // 2]


def worker(n, j, seed, target_gap, reference, repeats):
    """Runs in a child process: prints one JSON line of measurements."""
    import resource

    import cbmm

    # the paper's procedure: its random start, Algorithm 1 and its rule, no prior
    paper = cbmm.paper_settings("cbmm")
    y = _simulated_int8(n, j, seed)
    cbmm.fit(y[:8, :8], **paper)  # load the extension and allocate nothing big before measuring
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    plain = _median_run(lambda: cbmm.fit(y, **paper), repeats)
    rss_plain = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    squarem = _median_run(lambda: cbmm.fit(y, **{**paper, "accelerate": "squarem"}), repeats)
    best = cbmm.fit(y, **{**paper, "accelerate": "squarem", "tol": 1e-13, "max_iter": 100000,
                          "precision": "float64"})
    long_plain = cbmm.fit(y, **{**paper, "tol": 1e-12, "precision": "float64"})
    best_loss = min(best.loss, long_plain.loss)
    target = best_loss * (1 + target_gap)
    row = {
        "shape": f"{n}x{j}",
        "cbmm_s": plain.runtime_s, "cbmm_iter": plain.n_iter, "cbmm_loss": plain.loss,
        "squarem_s": squarem.runtime_s, "squarem_iter": squarem.n_iter,
        "squarem_loss": squarem.loss, "best_loss": best_loss,
        "cbmm_gap": plain.loss / best_loss - 1, "squarem_gap": squarem.loss / best_loss - 1,
        "plain_to_target_s": _time_to_target(long_plain, target),
        "squarem_to_target_s": _time_to_target(best, target),
        "rss_before_mb": rss_before, "peak_rss_mb": rss_plain,
        "threads": plain.info.get("threads"),
    }
    if reference:
        numpy_fit = cbmm.fit(y, engine="numpy", **paper)
        row.update(numpy_s=numpy_fit.runtime_s, numpy_iter=numpy_fit.n_iter)
    print(json.dumps(row))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=2211, help="N (default 2211)")
    parser.add_argument("--items", type=int, nargs="+", default=list(LEADERBOARD_ITEMS),
                        help="values of J (default: the six leaderboard suites)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    parser.add_argument("--target-gap", type=float, default=1e-6,
                        help="relative gap to the best loss that counts as reaching the "
                             "target (default 1e-6)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="runs of each timed fit; the median is reported (default 5)")
    parser.add_argument("--reference", action="store_true",
                        help="also time the plain NumPy reference engine")
    parser.add_argument("--threads", type=int, default=0,
                        help="cores for the fused passes (default: all this process may use)")
    parser.add_argument("--json", action="store_true", help="print JSON lines only")
    parser.add_argument("--worker", nargs=2, type=int, metavar=("N", "J"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker, args.seed, args.target_gap, args.reference, args.repeats)
        return
    # single-threaded BLAS; the fused passes use --threads cores (OMP_NUM_THREADS)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    else:
        env.pop("OMP_NUM_THREADS", None)
    header = (f"{'shape':>12} {'cBMM s':>8} {'iter':>5} {'gap':>8} {'SQUAREM s':>9} {'iter':>5} "
              f"{'gap':>8} {'plain->tgt s':>12} {'SQ->tgt s':>10} {'peak RSS MB':>11} {'thr':>3}"
              + (f" {'NumPy s':>8}" if args.reference else ""))
    if not args.json:
        print(f"cbmm on fully observed simulated matrices (seed {args.seed}); gap = final loss "
              f"/ best loss - 1; target = best loss x (1 + {args.target_gap:g})")
        print(header)
    for j in args.items:
        cmd = [sys.executable, __file__, "--worker", str(args.models), str(j), "--seed",
               str(args.seed), "--target-gap", str(args.target_gap), "--repeats",
               str(args.repeats)]
        if args.reference:
            cmd.append("--reference")
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        if args.json:
            print(json.dumps(row))
            continue
        line = (f"{row['shape']:>12} {row['cbmm_s']:8.3f} {row['cbmm_iter']:5d} "
                f"{row['cbmm_gap']:8.1e} {row['squarem_s']:9.3f} {row['squarem_iter']:5d} "
                f"{row['squarem_gap']:8.1e} {row['plain_to_target_s']:12.2f} "
                f"{row['squarem_to_target_s']:10.2f} {row['peak_rss_mb']:11.0f} "
                f"{row['threads']:3d}")
        if args.reference:
            line += f" {row['numpy_s']:8.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
