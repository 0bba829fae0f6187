"""Scale: end-to-end cost of cbmm.fit, thread efficiency, and a 1e9-entry fit.

Each measurement runs in a fresh process (peak RSS is per process):

1. **End-to-end** (``--e2e``, default 4000 x 25000 = 1e8 entries, int8 +-1
   input, all usable cores): wall of ``cbmm.fit`` against its ``runtime_s``
   (target: wall <= 1.3 x runtime_s + 0.2 s), with the seconds of the parts
   the engine owns (solver set-up, solver, final loss + stationarity) and the
   rest (input checks and coding, start, canonical form); medians of
   ``--repeats``.
2. **Thread efficiency** (``--threads-shape``, default 2211 x 12032): seconds
   per MM iteration at 1 and at 2 threads (float32 and float64 passes),
   efficiency ``t1 / (2 t2)`` (target >= 0.8); medians of ``--repeats``.
   Also the process's CPU seconds per iteration at 1 and 2 threads: their
   ratio is the share of the work that is not overhead of the split (wall
   efficiency needs two idle cores; on a shared machine it mostly measures
   the other users).
3. **Memory per entry** (``--memory``, default 4000 x 25000): for an int8
   +-1 input and a float64 0/1/NaN input (10 % missing), the memory
   ``cbmm.fit`` needs beyond its input, per matrix entry (targets 1.5 and 3
   bytes): in-process (``isolate=False``) the rise of the process's peak RSS
   (``VmHWM``, reset before the call); isolated (the default), the peak of
   the summed proportional set size (PSS, which splits the pages the forked
   worker shares with the caller) of the caller and its worker, sampled
   every 5 ms.
4. **1e9 entries** (``--big``, default 20000 x 50000, 2 threads): the int8
   input drawn block by block (1 GB), then the solver (plain cBMM, tol 1e-4),
   the final float64 loss and the stationarity; seconds and peak RSS of the
   process, the input included (target 2.5 GB).  Then ``cbmm.fit`` on the same
   input in the same process, whose extra peak is the input layer's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _common import PssPeak, machine, peak_rss_mb, pss_kb, simulated_int8, status_kb


def _shape(text):
    n, j = (int(v) for v in text.lower().split("x"))
    return n, j


def e2e_worker(n, j, repeats):
    import cbmm
    import cbmm.api

    y = simulated_int8(n, j)
    paper = cbmm.paper_settings("cbmm")  # one start, the paper's rule: the fit's own overhead
    cbmm.fit(y[:40, :40], **paper)
    timings = {}

    def timed(name):  # the api calls each once per fit: the final measures
        original = getattr(cbmm.api, name)

        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timings[name] = time.perf_counter() - start
        setattr(cbmm.api, name, call)

    timed("fit_measures")
    timed("scaled_gradient")
    rows = []
    for _ in range(repeats):
        wall = time.perf_counter()
        result = cbmm.fit(y, **paper)
        wall = time.perf_counter() - wall
        rows.append({"wall_s": wall, "runtime_s": result.runtime_s,
                     "setup_s": result.info.get("setup_s", 0.0),
                     "final_s": sum(timings.values()), "n_iter": result.n_iter,
                     "threads": result.info.get("threads")})
    out = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    out["peak_rss_mb"] = peak_rss_mb()
    out["input_mb"] = y.nbytes / 2**20
    print(json.dumps(out))


def threads_worker(n, j, repeats):
    import resource

    from cbmm.initialization import initial_values
    from cbmm.solver import solve_cbmm

    def cpu():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    y = simulated_int8(n, j)
    start = initial_values(n, j)
    out = {}
    for precision in ("float32", "float64"):
        for threads in (1, 2):
            per, per_cpu = [], []
            for _ in range(repeats):
                before = cpu()
                fit = solve_cbmm(y, *start, tol=1e-300, max_iter=10, precision=precision,
                                 threads=threads)
                passes = fit.n_iter + 1  # n_iter updates + 1 evaluation
                per.append(fit.runtime_s / passes)
                per_cpu.append((cpu() - before) / passes)
            out[f"{precision}_{threads}"] = statistics.median(per)
            out[f"{precision}_{threads}_cpu"] = statistics.median(per_cpu)
    print(json.dumps(out))


def memory_worker(n, j, kind, isolate):
    """Memory of one cbmm.fit beyond its input, in a fresh process (one JSON line)."""
    import gc

    import numpy as np

    import cbmm

    y = simulated_int8(n, j)
    if kind == "float64":
        values = (y > 0).astype(np.float64)
        del y
        values[np.random.default_rng(1).random((n, j), dtype=np.float32) < 0.1] = np.nan
    else:
        values = y
    paper = cbmm.paper_settings("cbmm")
    cbmm.fit(values[:40, :40], isolate=isolate, **paper)  # imports, kernels
    gc.collect()
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    before_rss, before_pss = status_kb("VmRSS:"), pss_kb(os.getpid())
    with PssPeak() as pss:
        result = cbmm.fit(values, isolate=isolate, **{**paper, "max_iter": 50})
    rise_kb = (pss.peak_kb - before_pss) if isolate else (status_kb("VmHWM:") - before_rss)
    print(json.dumps({"kind": kind, "isolate": isolate, "input_mb": values.nbytes / 2**20,
                      "extra_mb": rise_kb / 1024, "bytes_per_entry": rise_kb * 1024 / (n * j),
                      "status": result.status, "storage": result.info["storage"]}))


def big_worker(n, j):
    import cbmm
    from cbmm.initialization import initial_values
    from cbmm.model import loss_and_stationarity
    from cbmm.result import canonicalize
    from cbmm.solver import solve_cbmm

    start = time.perf_counter()
    y = simulated_int8(n, j)
    out = {"draw_s": time.perf_counter() - start, "input_mb": y.nbytes / 2**20,
           "rss_after_draw_mb": peak_rss_mb()}
    wall = time.perf_counter()
    theta0, a0, b0 = initial_values(n, j)
    fit = solve_cbmm(y, theta0, a0, b0)
    theta, a, b = canonicalize(fit.theta, fit.a, fit.b)
    final = time.perf_counter()
    loss, reached = loss_and_stationarity(theta, a, b, canonicalize(theta0, a0, b0), y)
    out.update(engine_wall_s=time.perf_counter() - wall, runtime_s=fit.runtime_s,
               setup_s=fit.info["setup_s"], final_s=time.perf_counter() - final,
               n_iter=fit.n_iter, status=fit.status, threads=fit.info["threads"],
               stationarity=reached, loss=loss, engine_peak_rss_mb=peak_rss_mb())
    try:
        wall = time.perf_counter()
        with PssPeak() as pss:
            result = cbmm.fit(y, **cbmm.paper_settings("cbmm"))
        out.update(fit_wall_s=time.perf_counter() - wall, fit_runtime_s=result.runtime_s,
                   fit_n_iter=result.n_iter, fit_peak_rss_mb=peak_rss_mb(),
                   fit_peak_pss_mb=pss.peak_kb / 1024)
    except MemoryError as exc:
        out["fit_error"] = f"MemoryError: {exc}"
    print(json.dumps(out))


def _run(args, env=None):
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--e2e", default="4000x25000", help="NxJ of the end-to-end check ('')")
    parser.add_argument("--threads-shape", default="2211x12032",
                        help="NxJ of the thread-efficiency check ('' to skip)")
    parser.add_argument("--memory", default="4000x25000",
                        help="NxJ of the memory-per-entry check ('' to skip)")
    parser.add_argument("--big", default="20000x50000", help="NxJ of the big fit ('' to skip)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        kind, shape = args.worker
        n, j = _shape(shape)
        {"e2e": lambda: e2e_worker(n, j, args.repeats),
         "threads": lambda: threads_worker(n, j, args.repeats),
         "big": lambda: big_worker(n, j),
         "memory-int8": lambda: memory_worker(n, j, "int8", True),
         "memory-int8-inprocess": lambda: memory_worker(n, j, "int8", False),
         "memory-float64": lambda: memory_worker(n, j, "float64", True),
         "memory-float64-inprocess": lambda: memory_worker(n, j, "float64", False)}[kind]()
        return
    print(machine())
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("OMP_NUM_THREADS", None)
    env.pop("CBMM_NUM_THREADS", None)
    if args.e2e:
        r = _run(["--worker", "e2e", args.e2e, "--repeats", str(args.repeats)], env)
        rest = r["wall_s"] - r["runtime_s"] - r["setup_s"] - r["final_s"]
        target = 1.3 * r["runtime_s"] + 0.2
        print(f"\nend to end, {args.e2e} int8 +-1, {r['threads']} threads, median of "
              f"{args.repeats}: cbmm.fit wall {r['wall_s']:.2f} s; solver runtime_s "
              f"{r['runtime_s']:.2f} s ({r['n_iter']:.0f} iterations), solver set-up "
              f"{r['setup_s']:.2f} s, final loss + stationarity {r['final_s']:.2f} s, the rest "
              f"(input layer, start, canonical form) {rest:.2f} s; target wall <= "
              f"{target:.2f} s: {'met' if r['wall_s'] <= target else 'missed'}; engine part "
              f"(runtime + set-up + final) {r['runtime_s'] + r['setup_s'] + r['final_s']:.2f} s; "
              f"peak RSS {r['peak_rss_mb']:.0f} MB with a {r['input_mb']:.0f} MB input")
    if args.threads_shape:
        r = _run(["--worker", "threads", args.threads_shape, "--repeats", str(args.repeats)],
                 env)
        for precision in ("float32", "float64"):
            t1, t2 = r[f"{precision}_1"], r[f"{precision}_2"]
            c1, c2 = r[f"{precision}_1_cpu"], r[f"{precision}_2_cpu"]
            print(f"threads, {args.threads_shape}, {precision} pass: {t1 * 1e3:.1f} ms per "
                  f"iteration on 1 thread, {t2 * 1e3:.1f} ms on 2; efficiency t1/(2 t2) = "
                  f"{t1 / (2 * t2):.2f}; CPU seconds 1 thread / 2 threads = {c1 / c2:.2f}")
    if args.memory:
        for kind, target in (("int8", 1.5), ("float64", 3.0)):
            for mode, label in (("", "isolated (PSS of caller + worker)"),
                                ("-inprocess", "in-process (peak RSS)")):
                r = _run(["--worker", f"memory-{kind}{mode}", args.memory], env)
                print(f"memory, {args.memory} {kind} input ({r['input_mb']:.0f} MB), "
                      f"{label}: {r['extra_mb']:.0f} MB beyond the input = "
                      f"{r['bytes_per_entry']:.2f} B/entry (target {target}: "
                      f"{'met' if r['bytes_per_entry'] <= target else 'missed'}); "
                      f"{r['storage']} storage, {r['status']}")
    if args.big:
        big_env = dict(env, CBMM_NUM_THREADS="2")
        r = _run(["--worker", "big", args.big], big_env)
        print(f"\n1e9-entry fit {args.big}, {r['threads']} threads: input drawn in "
              f"{r['draw_s']:.0f} s ({r['input_mb']:.0f} MB); solver {r['runtime_s']:.1f} s "
              f"({r['n_iter']} iterations, {r['status']}), set-up {r['setup_s']:.1f} s, final "
              f"loss + stationarity {r['final_s']:.1f} s, engine total {r['engine_wall_s']:.1f} "
              f"s; peak RSS {r['engine_peak_rss_mb']:.0f} MB (target 2560), stationarity "
              f"{r['stationarity']:.1e}")
        if "fit_wall_s" in r:
            print(f"  cbmm.fit on the same input (isolated): wall {r['fit_wall_s']:.1f} s, "
                  f"runtime_s {r['fit_runtime_s']:.1f} s ({r['fit_n_iter']} iterations), peak "
                  f"RSS of the caller {r['fit_peak_rss_mb']:.0f} MB, peak PSS of caller + "
                  f"worker {r['fit_peak_pss_mb']:.0f} MB (target 2560)")
        else:
            print(f"  cbmm.fit on the same input: {r['fit_error']}")


if __name__ == "__main__":
    main()
