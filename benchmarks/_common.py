"""Shared pieces of the benchmark scripts: the machine line, data sets, clocks."""

from __future__ import annotations

import os
import platform
import resource
import time
from pathlib import Path

import numpy as np

#: Where the real MATH-500 matrix may lie: ``shared/`` beside the checkout (or
#: beside its parent, for worktrees).  Benchmarks read it when present; tests never need it.
_ROOT = Path(__file__).resolve().parents[1]
MATH500_CANDIDATES = tuple(base / "shared" / "data" / "math500" / "MATH_500.csv"
                           for base in (_ROOT.parent, _ROOT.parent.parent))

#: The rows of issue 15's table, and the simulated leaderboard shapes.
ISSUE_ROWS = ("math500", "sim2211x1324", "sim2211x5761", "design:1000:500:0.5:0:mnar:0.3:8",
              "design:1000:500:-0.75:0.3:mcar:0.5:7")
LEADERBOARD_ROWS = tuple(f"sim2211x{j}" for j in (541, 756, 1192, 1324, 5761, 12032))
#: Further paper designs (N 1000, J 1000 unless stated): the extremes of each study.
PAPER_ROWS = ("design:1000:1000:-0.75:0:none:0:1", "design:1000:1000:0.75:0:none:0:2",
              "design:1000:1000:0:0:mar:0.5:3", "design:1000:1000:0:0:mcar:0.8:4",
              "design:1000:1000:0:0.5:none:0:5", "design:1000:1000:0:0:mnar:0.5:6",
              "design:5000:1000:0:0:none:0:9")


def machine() -> str:
    """CPU model, usable cores and the current load (timings depend on all three)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"machine: {model}, {cores} cores usable, load average {load:.1f}"


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def status_kb(key, pid="self"):
    """A field of /proc/<pid>/status in kB (VmRSS, VmHWM, ...)."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def pss_kb(pid):
    """Proportional set size of a process in kB (shared pages split among their users)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:  # the worker ended between listing and reading
        pass
    return 0


class PssPeak:
    """Peak of the summed PSS of this process and its children, sampled in a thread."""

    def __init__(self, every_s=0.005):
        import threading

        self.every_s, self.peak_kb, self.running = every_s, 0, True
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        me = os.getpid()
        while self.running:
            try:
                with open(f"/proc/{me}/task/{me}/children") as handle:
                    children = handle.read().split()
            except OSError:
                children = []
            total = pss_kb(me) + sum(pss_kb(child) for child in children)
            self.peak_kb = max(self.peak_kb, total)
            time.sleep(self.every_s)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def use_cpu_clock() -> None:
    """Make ``time.perf_counter`` (behind every ``time_history``) count this
    process's CPU seconds: on a shared machine a single-threaded fit's CPU
    time does not grow with other users' load, its wall time does."""
    time.perf_counter = time.process_time


def simulated_int8(n, j, seed=0):
    """Fully observed +-1 responses of the paper's design (theta ~ N(0,1),
    a ~ U(0.5,1), b ~ N(0,0.5^2), sigma 1), drawn row block by row block."""
    from scipy.special import expit

    rng = np.random.default_rng(seed)
    theta, a, b = rng.standard_normal(n), rng.uniform(0.5, 1.0, j), rng.normal(0.0, 0.5, j)
    y = np.empty((n, j), dtype=np.int8)
    step = max(1, (1 << 22) // j)
    for start in range(0, n, step):
        p = expit(np.outer(theta[start:start + step], a) + b)
        y[start:start + step] = np.where(rng.random(p.shape) < p, 1, -1)
    return y


def simulated_csr(n, j, density, seed=0):
    """CSR responses of the same design, each cell observed with probability
    ``density`` (every row at least once), drawn row by row (never dense)."""
    from scipy.special import expit

    from cbmm import Responses

    rng = np.random.default_rng(seed)
    theta, a, b = rng.standard_normal(n), rng.uniform(0.5, 1.0, j), rng.normal(0.0, 0.5, j)
    counts = np.maximum(rng.binomial(j, density, size=n), 1)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=np.int32)
    values = np.empty(indptr[-1], dtype=np.int8)
    for i in range(n):
        cols = np.sort(rng.choice(j, size=counts[i], replace=False)).astype(np.int32)
        p = expit(theta[i] * a[cols] + b[cols])
        indices[indptr[i]:indptr[i + 1]] = cols
        values[indptr[i]:indptr[i + 1]] = np.where(rng.random(cols.size) < p, 1, -1)
    return Responses(None, indptr=indptr, indices=indices, values=values, n_items=j)


def load_row(name):
    """``(responses, sigma, label)`` of a benchmark row.

    ``math500``: the real matrix (None when the file is absent);
    ``simNxJ``: :func:`simulated_int8`;
    ``design:N:J:log10sigma:sparsity:missing:rate:seed``: :func:`cbmm.simulate.simulate`.
    """
    if name == "math500":
        import pandas as pd

        for path in MATH500_CANDIDATES:
            if path.exists():
                return pd.read_csv(path, index_col=0), 1.0, "MATH-500 140x500 (real)"
        return None, 1.0, "MATH-500 (file not found)"
    if name.startswith("sim"):
        n, j = (int(v) for v in name[3:].split("x"))
        return simulated_int8(n, j), 1.0, f"simulated {n}x{j}"
    if name.startswith("design:"):
        from cbmm.simulate import simulate

        n, j, log_sigma, sparsity, missing, rate, seed = name.split(":")[1:]
        sigma = 10.0 ** float(log_sigma)
        sim = simulate(int(n), int(j), sigma=sigma, sparsity=float(sparsity), missing=missing,
                       missing_rate=float(rate), seed=int(seed))
        parts = [f"N {n}, J {j}", f"sigma 10^{log_sigma}"]
        if float(sparsity):
            parts.append(f"sparsity {sparsity}")
        if missing != "none":
            parts.append(f"{missing.upper()} {rate}")
        return sim.responses, sigma, "design " + ", ".join(parts) + f", seed {seed}"
    raise ValueError(f"unknown row {name!r}")


def time_to_target(loss_history, time_history, target):
    """Seconds until the loss first reached ``target`` (NaN if never)."""
    for value, seconds in zip(loss_history, time_history):
        if value <= target:
            return seconds
    return float("nan")
