"""Every method side by side: speed at the paper's rule, time to a tight optimum, memory.

For each row (a data set: the real MATH-500 matrix when present, simulated
matrices, the paper's designs) and each method (cBMM plain Algorithm 1,
cBMM + SQUAREM, cBMM ``accelerate="auto"``, L-BFGS-B, Manopt; on request
also py-irt and mirt, minutes per fit) a fresh process, single-threaded (one
core, BLAS pinned to one thread), runs

* the fit at the paper's rule (``tol=1e-4``), ``--repeats`` times: median
  ``runtime_s`` (the solver), median wall of the whole ``cbmm.fit`` call
  (validation, start, solver, final loss and stationarity), iterations,
  status and ``info["stationarity"]``;
* one tight fit (``tol=1e-12``; iterations capped so that it ends within
  about ``--budget`` seconds), whose loss and time histories give the
  seconds until the loss is within eps (1e-4, 1e-6) relative of the best loss
  any method reached on the row, and the stationarity it ends at;
* the peak RSS: the larger of the caller's and its forked workers'.

mirt reports no loss per EM cycle: its times to eps come from its final
losses (the paper-rule fit's and the tight fit's ``runtime_s``), an upper
bound.  A method whose software is missing is a row saying what to install.

``--clock cpu`` makes the time histories count the process's CPU seconds
instead of wall seconds (the fits are single-threaded): on a shared machine
that removes most of the other users' load from the figures.  The
end-to-end column then counts the CPU seconds of the caller and of its
forked worker together.
``--input long`` or ``--input csr`` hands each row to ``cbmm.fit`` as a
long-format table (model, item, correct; missing cells absent) or as CSR
``Responses`` instead of a dense matrix.

Usage::

    python benchmarks/bench_methods.py [--rows issue|leaderboard|paper|NAME,...]
        [--methods cbmm,squarem,auto,lbfgsb,manopt[,pyirt,mirt]] [--repeats 3] [--budget 60]
        [--clock wall|cpu] [--input dense|long|csr]

Row names: ``math500``, ``simNxJ``, ``design:N:J:log10sigma:sparsity:missing:rate:seed``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np
from _common import (
    ISSUE_ROWS,
    LEADERBOARD_ROWS,
    PAPER_ROWS,
    load_row,
    machine,
    peak_rss_mb,
    time_to_target,
    use_cpu_clock,
)

METHODS = {  # label -> (cbmm.fit method, options)
    "cbmm": ("cbmm", {}),
    "squarem": ("cbmm", {"accelerate": "squarem"}),
    "auto": ("cbmm", {"accelerate": "auto"}),
    "lbfgsb": ("lbfgsb", {}),
    "manopt": ("manopt", {}),
    "pyirt": ("pyirt", {}),
    "mirt": ("mirt", {}),
}
#: The methods of a run without --methods (py-irt and mirt take minutes per fit).
DEFAULT_METHODS = ("cbmm", "squarem", "auto", "lbfgsb", "manopt")
ROW_SETS = {"issue": ISSUE_ROWS, "leaderboard": LEADERBOARD_ROWS, "paper": PAPER_ROWS}
TIGHT_TOL = 1e-12


def as_input(responses, kind):
    """The row's responses in the requested input form."""
    import cbmm

    if kind == "dense":
        return responses
    y = cbmm.as_responses(responses, storage="dense").y
    rows, cols = np.nonzero(y)
    if kind == "csr":
        indptr = np.zeros(y.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=y.shape[0]), out=indptr[1:])
        return cbmm.Responses(None, indptr=indptr, indices=cols.astype(np.int32),
                              values=y[rows, cols].astype(np.int8), n_items=y.shape[1])
    import pandas as pd

    return pd.DataFrame({"model": rows, "item": cols, "correct": (y[rows, cols] > 0).astype(int)})


def _cpu_with_children():
    """CPU seconds of this process and of its ended children (the fit's worker)."""
    import resource

    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                resource.getrusage(resource.RUSAGE_CHILDREN)))


def _children_peak_rss_mb():
    """Peak RSS of the largest ended child (a fit's worker; it shares the caller's pages)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def worker(row, label, repeats, budget, clock, input_kind):
    """Runs in a fresh process: prints one JSON line."""
    import cbmm

    warnings.simplefilter("ignore")
    end_to_end = time.perf_counter
    if clock == "cpu":
        use_cpu_clock()
        end_to_end = _cpu_with_children
    responses, sigma, title = load_row(row)
    responses = as_input(responses, input_kind)
    method, options = METHODS[label]
    # the paper's procedure (random start, its rule, no prior), with this row's options
    paper = {**cbmm.paper_settings(method), **options}
    warm_up = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]], dtype=float)
    # imports and kernels loaded before timing, in this process so that the forked
    # workers inherit them (a solver's lazy imports would otherwise be paid in every worker);
    # cbmm.fit's own software check makes a missing method a row saying what to install
    try:
        cbmm.fit(warm_up, method, isolate=False, **{**paper, "max_iter": 50})
    except cbmm.MethodUnavailableError as exc:
        print(json.dumps({"error": " ".join(str(exc).split())}))
        return
    runs = []
    for _ in range(repeats):
        wall = end_to_end()
        result = cbmm.fit(responses, method, sigma=sigma, **paper)
        runs.append((end_to_end() - wall, result))
    walls = [w for w, _ in runs]
    median = sorted(runs, key=lambda p: p[1].runtime_s)[len(runs) // 2][1]
    row_out = {"row": row, "title": title, "method": label, "status": median.status,
               "n_iter": median.n_iter, "runtime_s": median.runtime_s,
               "wall_s": statistics.median(walls), "loss": median.loss,
               "stationarity": median.info.get("stationarity"),
               "storage": median.info.get("storage")}
    # tight fit, its iterations capped to end within about `budget` seconds
    per_iteration = median.runtime_s / max(median.n_iter, 1)
    cap = int(min(200000, max(1000, budget / max(per_iteration, 1e-6))))
    tight = cbmm.fit(responses, method, sigma=sigma,
                     **{**paper, "tol": TIGHT_TOL, "max_iter": cap})
    row_out.update(tight_loss=tight.loss, tight_status=tight.status, tight_iter=tight.n_iter,
                   tight_runtime_s=tight.runtime_s,
                   tight_stationarity=tight.info.get("stationarity"),
                   history=[float(v) for v in tight.loss_history],
                   times=list(tight.info.get("time_history", [])),
                   paper_history=[float(v) for v in median.loss_history],
                   paper_times=list(median.info.get("time_history", [])),
                   peak_rss_mb=max(peak_rss_mb(), _children_peak_rss_mb()))
    print(json.dumps(row_out))


def run_row(row, methods, args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", OMP_NUM_THREADS="1",
               CBMM_NUM_THREADS="1")
    results = {}
    for label in methods:
        cmd = [sys.executable, __file__, "--worker", row, label, "--repeats", str(args.repeats),
               "--budget", str(args.budget), "--clock", args.clock, "--input", args.input]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode or not lines:
            results[label] = {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:150]}
        else:
            results[label] = json.loads(lines[-1])
    return results


def print_row(row, results):
    titles = [r["title"] for r in results.values() if "title" in r]
    title = titles[0] if titles else row
    finite = [r[k] for r in results.values() if "error" not in r
              for k in ("loss", "tight_loss") if r.get(k) is not None and math.isfinite(r[k])]
    best = min(finite) if finite else math.nan
    print(f"\n{title}   (best loss {best:.6f})")
    print(f"{'method':>8} {'paper s':>8} {'iters':>6} {'e2e s':>8} {'->1e-4 s':>9} "
          f"{'->1e-6 s':>9} {'stat@1e-4':>9} {'stat tight':>10} {'peak MB':>8} {'storage':>7}"
          "  status")
    reached = {}
    for label, r in results.items():
        if "error" in r:
            print(f"{label:>8}  error: {r['error']}")
            continue
        t4 = _first(r, best * (1 + 1e-4))
        t6 = _first(r, best * (1 + 1e-6))
        reached[label] = t6
        print(f"{label:>8} {r['runtime_s']:8.3f} {r['n_iter']:6d} {r['wall_s']:8.3f} "
              f"{t4:9.3f} {t6:9.3f} {_fmt(r['stationarity']):>9} "
              f"{_fmt(r['tight_stationarity']):>10} {r['peak_rss_mb']:8.0f} "
              f"{r.get('storage') or '?':>7}  {r['status'][:60]}")
    if "auto" in reached:
        rivals = {k: v for k, v in reached.items() if k in ("cbmm", "squarem", "lbfgsb")}
        finite_rivals = [v for v in rivals.values() if math.isfinite(v)]
        if not finite_rivals:
            print(f"{'':>8} auto reaches 1e-6 in {reached['auto']:.3f} s; plain, SQUAREM and "
                  "L-BFGS-B never do within the budget")
        else:
            fastest = min(finite_rivals)
            verdict = "meets" if reached["auto"] <= fastest else "misses"
            lbfgsb = rivals.get("lbfgsb", math.nan)
            print(f"{'':>8} auto reaches 1e-6 in {reached['auto']:.3f} s; fastest of "
                  f"plain/SQUAREM/L-BFGS-B {fastest:.3f} s ({verdict}); "
                  f"L-BFGS-B / auto = {lbfgsb / reached['auto']:.2f}")
    sys.stdout.flush()


def _first(r, target):
    """Earliest time to ``target`` in the paper-rule or the tight run (from a run's final
    loss and runtime where the method keeps no loss history)."""
    runs = [(r["paper_history"], r["paper_times"], r["loss"], r["runtime_s"]),
            (r["history"], r["times"], r["tight_loss"], r["tight_runtime_s"])]
    return min((time_to_target(history, times, target) if history
                else time_to_target([loss], [runtime], target)
                for history, times, loss, runtime in runs), key=_nan_last)


def _nan_last(value):
    return math.inf if math.isnan(value) else value


def _fmt(value):
    return "-" if value is None or not math.isfinite(value) else f"{value:.1e}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="issue",
                        help="issue, leaderboard, paper, or comma-separated row names")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                        help=f"comma-separated subset of {', '.join(METHODS)} "
                             f"(default {','.join(DEFAULT_METHODS)})")
    parser.add_argument("--repeats", type=int, default=3,
                        help="paper-rule fits per method; medians are reported")
    parser.add_argument("--budget", type=float, default=60.0,
                        help="about how many seconds a tight fit may run")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--input", choices=("dense", "long", "csr"), default="dense")
    parser.add_argument("--json", help="also write every measurement to this JSON Lines file")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker, args.repeats, args.budget, args.clock, args.input)
        return
    rows = ROW_SETS.get(args.rows, tuple(r for r in args.rows.split(",") if r))
    methods = [m for m in args.methods.split(",") if m]
    print(machine())
    print(f"one core per fit; clock: {args.clock}; input: {args.input}; paper rule tol 1e-4 "
          f"(median of {args.repeats}); tight fits tol {TIGHT_TOL:g}; eps relative to the best "
          "loss of the row; stat = info['stationarity']")
    for row in rows:
        if row == "math500" and load_row(row)[0] is None:
            print("\nMATH-500: file not found, row skipped")
            continue
        results = run_row(row, methods, args)
        print_row(row, results)
        if args.json:
            with open(args.json, "a") as handle:
                handle.writelines(json.dumps(r) + "\n" for r in results.values())


if __name__ == "__main__":
    main()
