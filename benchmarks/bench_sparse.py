"""Sparse (CSR) against dense storage: where CSR wins, and a large sparse fit.

1. **Crossover.**  On an N x J matrix (default 3000 x 3000) with a given
   share of observed cells, the seconds of one engine pass (float32 and
   float64 MM passes, float64 loss+gradient pass) on CSR storage over the
   same pass on dense int8 storage, single-threaded, CPU time (the machine may
   be shared), minimum of ``--repeats`` runs; and the bytes of each storage
   (dense: 1 per cell; CSR: 5 per observed cell + 8 per row).
2. **Large sparse fit.**  A fresh process per route draws a 30000 x 30000
   matrix with 99 % of the cells missing (9 M observed, the paper's 2PL
   design) straight into CSR and fits it: through the engine on CSR (solver,
   final loss and stationarity), and through ``cbmm.fit`` from CSR
   ``Responses``, from a long table (model, item, correct; int64 ids) and
   from a ``scipy.sparse.csr_array`` (float64 +-1).  It reports seconds, the
   process's peak RSS (the input, the interpreter and the libraries included;
   target 0.5 GB) and, for ``cbmm.fit``, the peak PSS of the caller and its
   forked worker together.

Usage::

    python benchmarks/bench_sparse.py [--shape 3000x3000] [--large 30000x30000:0.01]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import scipy.sparse
from _common import PssPeak, machine, peak_rss_mb, simulated_csr

DENSITIES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)


def _cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def crossover(n, j, repeats):
    """Print CSR / dense time ratios of each pass by density."""
    from cbmm.engine import dense_responses, fused_matrix

    rng = np.random.default_rng(1)
    theta, a, b = rng.standard_normal(n), rng.uniform(0.5, 1, j), rng.normal(0, 0.5, j)
    stats, theta_out = np.empty((4, j)), np.empty(n)
    grads = np.empty(n), np.empty(j), np.empty(j)
    passes = {
        "MM float32": lambda m: m.mm_step(theta, a, b, a * 1.01, b, theta_out, stats, True, 1),
        "MM float64": lambda m: m.mm_step(theta, a, b, a * 1.01, b, theta_out, stats, False, 1),
        "loss+grad f64": lambda m: m.loss_gradient(theta, a, b, 1.0, 1, *grads),
    }
    print(f"CSR / dense seconds per pass, {n} x {j}, one thread, CPU time, min of {repeats}")
    print(f"{'observed':>9} " + " ".join(f"{name:>14}" for name in passes)
          + f" {'dense MB':>9} {'CSR MB':>8}")
    for density in DENSITIES:
        sparse = simulated_csr(n, j, density)
        dense_y = dense_responses(sparse)
        matrices = {"dense": fused_matrix(dense_y), "sparse": fused_matrix(sparse)}
        for m in matrices.values():
            m.counts(np.empty(j), 1)
        ratios = []
        for run in passes.values():
            seconds = {}
            for label, m in matrices.items():
                times = []
                for _ in range(repeats):
                    start = _cpu()
                    run(m)
                    times.append(_cpu() - start)
                seconds[label] = min(times)
            ratios.append(seconds["sparse"] / seconds["dense"])
        csr_mb = (sparse.indptr.nbytes + sparse.indices.nbytes + sparse.values.nbytes) / 1e6
        print(f"{density:9.2f} " + " ".join(f"{r:14.2f}" for r in ratios)
              + f" {dense_y.nbytes / 1e6:9.1f} {csr_mb:8.1f}", flush=True)


def large_worker(n, j, density, route):
    """Runs in a fresh process: draw, fit by ``route`` ("engine": the cBMM solver
    and the final loss and stationarity on CSR; "fit", "long", "scipy": cbmm.fit of
    CSR Responses, a long table, a scipy CSR array), print one JSON line."""
    import cbmm
    from cbmm.initialization import initial_values
    from cbmm.model import loss_and_stationarity
    from cbmm.result import canonicalize
    from cbmm.solver import solve_cbmm

    start = time.perf_counter()
    responses = simulated_csr(n, j, density, seed=2)
    row = {"shape": f"{n}x{j}", "route": route, "observed": int(responses.indices.size),
           "draw_s": time.perf_counter() - start, "rss_after_draw_mb": peak_rss_mb()}
    if route == "long":
        responses = responses.to_long()
    elif route == "scipy":
        responses = scipy.sparse.csr_array(
            (responses.values.astype(np.float64), responses.indices, responses.indptr),
            shape=responses.shape)
    row["rss_after_input_mb"] = peak_rss_mb()
    wall = time.perf_counter()
    if route != "engine":
        with PssPeak() as pss:
            result = cbmm.fit(responses, **cbmm.paper_settings("cbmm"))
        row.update(runtime_s=result.runtime_s, n_iter=result.n_iter, status=result.status,
                   stationarity=result.info.get("stationarity"),
                   storage=result.info["storage"], pss_peak_mb=pss.peak_kb / 1024)
    else:
        theta0, a0, b0 = initial_values(n, j, seed=0)
        out = solve_cbmm(responses, theta0, a0, b0)
        theta, a, b = canonicalize(out.theta, out.a, out.b)
        _, reached = loss_and_stationarity(theta, a, b, canonicalize(theta0, a0, b0), responses,
                                           reference=out.info["stationarity_reference"])
        row.update(runtime_s=out.runtime_s, n_iter=out.n_iter, status=out.status,
                   stationarity=reached)
    row.update(wall_s=time.perf_counter() - wall, peak_rss_mb=peak_rss_mb())
    print(json.dumps(row))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="3000x3000", help="NxJ of the crossover table")
    parser.add_argument("--repeats", type=int, default=5, help="runs per pass (minimum kept)")
    parser.add_argument("--large", default="30000x30000:0.01",
                        help="NxJ:observed-share of the large sparse fit ('' to skip)")
    parser.add_argument("--skip-crossover", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        shape, density, route = args.worker.split(":")
        n, j = map(int, shape.split("x"))
        large_worker(n, j, float(density), route)
        return
    print(machine())
    if not args.skip_crossover:
        n, j = map(int, args.shape.split("x"))
        crossover(n, j, args.repeats)
    if args.large:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        for route, label in (("engine", "cBMM solver + final loss and stationarity on CSR"),
                             ("fit", "cbmm.fit of CSR Responses"),
                             ("long", "cbmm.fit of a long table"),
                             ("scipy", "cbmm.fit of a scipy.sparse.csr_array")):
            done = subprocess.run([sys.executable, __file__, "--worker", f"{args.large}:{route}"],
                                  capture_output=True, text=True, env=env, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"\nlarge sparse fit {row['shape']}, {row['observed']:,} observed cells, "
                  f"{label}: {row['wall_s']:.2f} s wall, {row['runtime_s']:.2f} s solver, "
                  f"{row['n_iter']} iterations, {row['status']}, stationarity "
                  f"{row['stationarity']:.2e}, peak RSS {row['peak_rss_mb']:.0f} MB (target "
                  f"512; after drawing the data {row['rss_after_draw_mb']:.0f} MB, with the "
                  f"input {row['rss_after_input_mb']:.0f} MB)"
                  + (f", peak PSS of caller + worker {row['pss_peak_mb']:.0f} MB, "
                     f"{row['storage']} storage" if "storage" in row else ""))


if __name__ == "__main__":
    main()
