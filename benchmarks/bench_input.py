"""Peak memory and time of ``cbmm.as_responses`` per input kind and size.

Each (kind, size) runs in a fresh process, which builds the input and calls
``cbmm.as_responses`` once under ``tracemalloc`` and then ``--repeats`` times untraced.  It reports

* **peak MB**: the peak of memory allocated during the first call (the input excluded, the
  result included), as ``tracemalloc`` counts it: NumPy arrays, pandas hash tables, Python
  objects and the C extension's buffers; not the CSV parser's or Arrow's own buffers;
* **B/cell**: that peak per matrix cell (N x J);
* **RSS MB**: the rise of the process's peak resident memory during the first call (Linux;
  ``/proc/self/clear_refs``), which does include those buffers but reads low when the C
  allocator reuses pages freed while the input was built;
* **seconds**: the median of the untraced calls.

Kinds (values: 40 % incorrect, 10 % missing for dense inputs; random cells for sparse ones):

* dense NumPy: ``float64`` (0/1/NaN), ``float64-F`` (column-major), ``float32``, ``int8``
  (0/1), ``int8-signed`` (+-1/0, ``coding="signed"``), ``uint8``, ``bool``, ``int64``;
* DataFrames: ``frame-float64`` (one block), ``frame-mixed`` (float64 and int64 columns, as
  ``pandas.read_csv`` gives for a 0/1/empty file), ``frame-object`` (object dtype);
* sparse (``--observed`` share of the cells, default 0.01): ``long-int`` (long DataFrame,
  int64 ids), ``long-category`` (categorical ids), ``scipy-csr`` (float64 +-1),
  ``long-csv`` / ``long-parquet`` (a long file read with ``cbmm.data.read_responses``; time
  and memory include the reading).

Run ``python benchmarks/bench_input.py`` (defaults: dense kinds at 4000 x 25000, sparse kinds at
30000 x 30000 with 1 % observed) or ``--help``.  With an older cbmm that lacks ``coding=``, the
call is retried without it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc

DENSE = ("float64", "float64-F", "float32", "int8", "int8-signed", "uint8", "bool", "int64",
         "frame-float64", "frame-mixed", "frame-object")
SPARSE = ("long-int", "long-category", "scipy-csr", "long-csv", "long-parquet")


def _status(key):
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _dense_input(kind, n, j, seed):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    codes = np.empty((n, j), dtype=np.int8)  # 1 correct, 0 incorrect, -1 missing
    for start in range(0, n, 256):
        u = rng.random((min(256, n - start), j), dtype=np.float32)
        codes[start:start + 256] = np.where(u < 0.1, -1, np.where(u < 0.5, 0, 1))
    missing = codes == -1
    if kind == "int8-signed":
        codes[codes == 0] = -2
        codes[missing] = 0
        codes[codes == -2] = -1
        return codes, {"coding": "signed"}
    if kind in ("int8", "uint8", "bool", "int64"):
        codes[missing] = 0  # integer kinds are fully observed
        return codes.astype({"int8": np.int8, "uint8": np.uint8, "bool": bool,
                             "int64": np.int64}[kind]), {}
    floats = np.empty((n, j), dtype=np.float32 if kind == "float32" else np.float64)
    for start in range(0, n, 256):
        block = codes[start:start + 256]
        floats[start:start + 256] = np.where(block == -1, np.nan, block)
    del codes, missing
    if kind == "float64-F":
        return np.asfortranarray(floats), {}
    if kind == "frame-float64":
        return pd.DataFrame(floats, copy=False), {}
    if kind == "frame-mixed":  # two blocks, as read_csv gives: int64 (no missing cell), float64
        ints = np.nan_to_num(floats[:, : j // 2]).astype(np.int64)
        frame = pd.concat([pd.DataFrame(ints, copy=False),
                           pd.DataFrame(floats[:, j // 2:], columns=range(j // 2, j))], axis=1)
        return frame, {}
    if kind == "frame-object":
        return pd.DataFrame(floats).astype(object), {}
    return floats, {}


def _sparse_input(kind, n, j, observed, seed, tmpdir):
    import numpy as np
    import pandas as pd
    import scipy.sparse

    rng = np.random.default_rng(seed)
    m = int(observed * n * j)
    cells = np.unique(rng.integers(0, n * j, size=int(m * 1.01) + 10, dtype=np.int64))
    cells = cells[rng.permutation(cells.size)[:m]]
    rows, cols = cells // j, cells % j
    correct = (rng.random(cells.size) < 0.6).astype(np.float64)
    del cells
    if kind == "scipy-csr":
        return scipy.sparse.csr_array((2 * correct - 1, (rows, cols)), shape=(n, j)), {}
    frame = pd.DataFrame({"model": rows, "item": cols, "correct": correct})
    if kind == "long-category":
        return frame.astype({"model": "category", "item": "category"}), {}
    if kind == "long-csv":
        path = os.path.join(tmpdir, "long.csv")
        frame.to_csv(path, index=False)
        return path, {}
    if kind == "long-parquet":
        path = os.path.join(tmpdir, "long.parquet")
        frame.to_parquet(path, index=False)
        return path, {}
    return frame, {}


def worker(kind, n, j, observed, repeats, seed=0):
    """Runs in a child process: prints one JSON line of measurements."""
    import gc

    import cbmm

    with tempfile.TemporaryDirectory() as tmpdir:
        if kind in SPARSE:
            data, kwargs = _sparse_input(kind, n, j, observed, seed, tmpdir)
        else:
            data, kwargs = _dense_input(kind, n, j, seed)
        if isinstance(data, str):
            from cbmm.data import read_responses

            def convert(**kw):
                return read_responses(data, **kw)
        else:
            def convert(**kw):
                return cbmm.as_responses(data, **kw)
        gc.collect()
        before = _status("VmRSS:")
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # reset the peak-RSS counter (VmHWM) to the current RSS
        tracemalloc.start()
        try:
            try:
                responses = convert(**kwargs)
            except TypeError:  # a cbmm without coding=
                responses = convert()
        except Exception as exc:  # noqa: BLE001  (reported, e.g. an unsupported input)
            print(json.dumps({"kind": kind, "error": f"{type(exc).__name__}: {exc}"[:120]}))
            return
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rss = _status("VmHWM:") - before
        storage = getattr(responses, "storage", "dense")
        n_observed = int(responses.n_observed)
        del responses
        times = []
        for _ in range(repeats):
            gc.collect()
            start = time.perf_counter()
            try:
                convert(**kwargs)
            except TypeError:
                convert()
            times.append(time.perf_counter() - start)
    times.sort()
    print(json.dumps({"kind": kind, "n": n, "j": j, "observed": n_observed, "storage": storage,
                      "peak_mb": peak / 2 ** 20, "bytes_per_cell": peak / (n * j),
                      "rss_mb": rss / 2 ** 20,
                      "seconds": times[len(times) // 2]}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", nargs="+", default=list(DENSE + SPARSE),
                        choices=DENSE + SPARSE, metavar="KIND")
    parser.add_argument("--dense-shape", nargs=2, type=int, default=(4000, 25000),
                        metavar=("N", "J"))
    parser.add_argument("--sparse-shape", nargs=2, type=int, default=(30000, 30000),
                        metavar=("N", "J"))
    parser.add_argument("--observed", type=float, default=0.01,
                        help="observed share of the sparse kinds (default 0.01)")
    parser.add_argument("--repeats", type=int, default=3, help="untraced timed calls")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        kind, n, j, observed, repeats = args.worker
        worker(kind, int(n), int(j), float(observed), int(repeats))
        return
    print(f"{'kind':>14} {'N x J':>13} {'observed':>10} {'storage':>7} {'peak MB':>8} "
          f"{'B/cell':>7} {'RSS MB':>7} {'seconds':>8}")
    for kind in args.kinds:
        n, j = args.sparse_shape if kind in SPARSE else args.dense_shape
        # a fixed mmap threshold: freed large arrays go back to the OS (glibc otherwise raises
        # the threshold and reuses freed heap pages without a change in RSS)
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
        done = subprocess.run([sys.executable, __file__, "--worker", kind, str(n), str(j),
                               str(args.observed), str(args.repeats)],
                              capture_output=True, text=True, env=env, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            print(f"{kind:>14}  failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        row = json.loads(lines[-1])
        if "error" in row:
            print(f"{kind:>14}  {row['error']}")
            continue
        print(f"{kind:>14} {f'{n} x {j}':>13} {row['observed']:>10} {row['storage']:>7} "
              f"{row['peak_mb']:>8.0f} {row['bytes_per_cell']:>7.2f} {row['rss_mb']:>7.0f} "
              f"{row['seconds']:>8.3f}")


if __name__ == "__main__":
    main()
