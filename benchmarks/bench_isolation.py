"""Cost of running a fit in the isolated worker process (``cbmm.fit(isolate=True)``).

For each size a fully observed int8 matrix is drawn once per process.  Two
methods are timed, each in a fresh process per mode so that no mode inherits
another's state:

* ``instant``: a method registered here that returns its start at once, so
  the wall time of ``fit`` is the fixed cost around any solver (checks,
  start, canonical form, float64 loss, stationarity) plus, when isolated,
  the fork, the transfer of the result and the end of the worker;
* ``cbmm`` with ``max_iter`` iterations (default 5).

Printed per size and method: median wall seconds of ``fit`` in-process and
isolated over ``--repeat`` calls, their difference (the isolation overhead)
and ``runtime_s`` of the isolated fit.  Usage::

    python benchmarks/bench_isolation.py --sizes 1000x1000,10000x10000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
import numpy as np
import cbmm

n, j, method, isolate, repeat, max_iter = json.loads(sys.argv[1])


def instant(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0, a0, b0, [], 0, "converged", 0.0)


cbmm.register_method("instant", instant)
rng = np.random.default_rng(0)
y = np.where(rng.random((n, j), dtype=np.float32) < 0.6, 1, -1).astype(np.int8)
data = cbmm.as_responses(y)
walls, runtimes = [], []
for _ in range(repeat):
    began = time.perf_counter()
    result = cbmm.fit(data, method, isolate=isolate, max_iter=max_iter, timeout_s=None)
    walls.append(time.perf_counter() - began)
    runtimes.append(result.runtime_s)
    assert not result.failed, result.status
print(json.dumps({"wall": float(np.median(walls)), "runtime": float(np.median(runtimes))}))
"""


def measure(n, j, method, isolate, repeat, max_iter):
    done = subprocess.run([sys.executable, "-c", CHILD,
                           json.dumps([n, j, method, isolate, repeat, max_iter])],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{n}x{j} {method}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000x1000,4000x5000,10000x10000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-iter", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'N x J':>14} {'method':>8} {'in-process s':>13} {'isolated s':>11} "
          f"{'overhead s':>11} {'runtime_s':>10}")
    for size in args.sizes.split(","):
        n, j = map(int, size.split("x"))
        for method in ("instant", "cbmm"):
            local = measure(n, j, method, False, args.repeat, args.max_iter)
            isolated = measure(n, j, method, True, args.repeat, args.max_iter)
            print(f"{size:>14} {method:>8} {local['wall']:13.3f} {isolated['wall']:11.3f} "
                  f"{isolated['wall'] - local['wall']:11.3f} {isolated['runtime']:10.3f}",
                  flush=True)
    print(f"medians of {args.repeat} calls; {time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
