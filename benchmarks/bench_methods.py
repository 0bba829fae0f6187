"""Time every method on the same simulated matrices and report cBMM's speedup.

For each size the responses are drawn once (:func:`cbmm.simulate.simulate`,
the paper's design) and every method is fitted from the same shared start
(same seed), each in its own process with a wall-clock limit (a cell that
exceeds it is reported as skipped).  Printed per method: seconds of the fit
(``runtime_s``; start-up and data conversion excluded), iterations, status,
final loss (3), and the relative gap to the best final loss of the row.

Speedup at equal final loss (fastest baseline of the row).  Whichever of
cBMM and the baseline finished with the lower loss passed the other's final
loss on its way; its loss history says when.  If the baseline ended lower,
the speedup is ``t_baseline(loss_cbmm) / runtime_cbmm``; otherwise it is
``runtime_baseline / t_cbmm(loss_baseline)``.  A method without a loss
history (mirt) is charged its full runtime.  The plain ratio of runtimes is
printed as well.

Usage::

    python benchmarks/bench_methods.py --sizes 1000x1000,2211x541,2211x5761 \
        --methods cbmm,lbfgsb,manopt,pyirt,mirt --seed 0 --timeout 600
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys

import numpy as np

DEFAULT_SIZES = "1000x1000,2211x541,2211x5761"
DEFAULT_METHODS = "cbmm,lbfgsb,manopt,pyirt,mirt"


def parse_sizes(text):
    """``"1000x1000,2211x541"`` -> ``[(1000, 1000), (2211, 541)]``."""
    sizes = []
    for part in text.split(","):
        try:
            n, j = (int(v) for v in part.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"size {part!r} is not of the form NxJ") from None
        sizes.append((n, j))
    return sizes


def _fit_in_child(conn, responses, method, sigma, seed):
    import warnings

    import cbmm
    from cbmm.simulate import simulate

    warnings.simplefilter("ignore", cbmm.DegenerateDataWarning)
    # load JIT caches / start R on a tiny problem first (not part of the reported time)
    cbmm.fit(simulate(20, 10, seed=1).responses, method, sigma=sigma, max_iter=2)
    result = cbmm.fit(responses, method, sigma=sigma, seed=seed)
    conn.send({"runtime_s": result.runtime_s, "n_iter": result.n_iter,
               "status": result.status, "loss": result.loss,
               "loss_history": list(result.loss_history),
               "time_history": list(result.info.get("time_history", []))})
    conn.close()


def fit_with_timeout(responses, method, sigma, seed, timeout):
    """Run one fit in a child process; ``None`` if it exceeds ``timeout`` seconds."""
    ctx = mp.get_context("spawn")  # torch, OpenMP threads and embedded R are not fork-safe
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_fit_in_child, args=(child, responses, method, sigma, seed))
    process.start()
    child.close()
    if not parent.poll(timeout):
        process.terminate()
        process.join()
        return None
    row = parent.recv()
    process.join()
    return row


def time_to_reach(row, target):
    """Seconds a fit needed to first reach a loss <= ``target`` (its runtime if unknown)."""
    for loss, seconds in zip(row["loss_history"], row["time_history"], strict=True):
        if loss <= target:
            return seconds
    return row["runtime_s"]


def equal_loss_speedup(reference, baseline):
    """cBMM's speedup over ``baseline`` at the larger of the two final losses."""
    if baseline["loss"] <= reference["loss"]:
        return time_to_reach(baseline, reference["loss"]) / reference["runtime_s"]
    return baseline["runtime_s"] / time_to_reach(reference, baseline["loss"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes(DEFAULT_SIZES),
                        help=f"comma-separated NxJ (default {DEFAULT_SIZES})")
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help=f"comma-separated methods (default {DEFAULT_METHODS})")
    parser.add_argument("--seed", type=int, default=0, help="data and start seed")
    parser.add_argument("--sigma", type=float, default=1.0, help="temperature")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds per fit before the cell is skipped (default 600)")
    args = parser.parse_args(argv)

    import cbmm
    from cbmm.simulate import simulate

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    cbmm.check_methods(methods)

    print(f"{'N x J':>11} {'method':>7} {'seconds':>9} {'iters':>6} {'status':>10} "
          f"{'final loss':>14} {'rel. gap':>9}")
    for n, j in args.sizes:
        data = simulate(n, j, sigma=args.sigma, seed=args.seed).responses
        rows = {}
        for method in methods:
            rows[method] = fit_with_timeout(data, method, args.sigma, args.seed, args.timeout)
        finite = [r["loss"] for r in rows.values() if r and np.isfinite(r["loss"])]
        best = min(finite) if finite else np.nan
        for method, row in rows.items():
            if row is None:
                print(f"{n:>5} x {j:<5} {method:>7}   skipped: exceeded {args.timeout:.0f} s")
                continue
            status = row["status"] if len(row["status"]) <= 10 else "failed"
            print(f"{n:>5} x {j:<5} {method:>7} {row['runtime_s']:9.3f} {row['n_iter']:6d} "
                  f"{status:>10} {row['loss']:14.2f} {(row['loss'] - best) / best:9.1e}")
            if status != row["status"]:
                print(f"{'':>21} {row['status']}")
        reference = rows.get("cbmm")
        baselines = {m: r for m, r in rows.items()
                     if m != "cbmm" and r is not None and not r["status"].startswith("failed")}
        if reference and baselines:
            fastest = min(baselines, key=lambda m: baselines[m]["runtime_s"])
            row = baselines[fastest]
            print(f"{'':>11} speedup of cbmm over the fastest baseline ({fastest}): "
                  f"{row['runtime_s'] / reference['runtime_s']:.1f}x by runtime, "
                  f"{equal_loss_speedup(reference, row):.1f}x at equal final loss")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
