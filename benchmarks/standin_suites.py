"""Simulated stand-ins of the six Open LLM Leaderboard suites, for timing the workflow
offline (benchmarks/bench_workflow.py): 0/1 matrices of the suites' shapes and an
overlay config that points the datasets at them.

Two kinds of parameters:

* ``--kind simple``: theta ~ N(0, 1), a ~ U(0.5, 1), b ~ N(0, 0.5^2), sigma 1 (the
  well-conditioned designs of the benchmark tables);
* ``--kind calibrated --calibrate MATH_500.csv``: the parameters of a converged cBMM
  fit of a real matrix, resampled to each suite's shape (abilities by model, (a, b)
  by item): real data's spread of difficulties, near-separable items included, which
  make fits slower than on the simple designs.

Usage::

    python benchmarks/standin_suites.py OUT_DIR --kind calibrated \\
        --calibrate ../shared/data/math500/MATH_500.csv \
        [--math500 that same file --math500-items ../shared/data/math500/MATH-500_test.jsonl]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.special import expit

import cbmm

#: The suites' shapes (models x items) in the paper authors' release.
SHAPES = {"IFEval": (2211, 541), "MuSR": (2211, 756), "GPQA": (2211, 1192),
          "MATH": (2211, 1324), "BBH": (2211, 5761), "MMLU_PRO": (2212, 12032)}


def parameters(kind, calibrate, n, j, rng):
    """theta (n), a (j), b (j) of one stand-in."""
    if kind == "simple":
        return rng.normal(size=n), rng.uniform(0.5, 1.0, j), rng.normal(0.0, 0.5, j)
    theta, a, b = (np.asarray(v) for v in (calibrate.theta, calibrate.a, calibrate.b))
    items = rng.integers(len(a), size=j)
    return rng.choice(theta, n), a[items], b[items]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--kind", choices=["simple", "calibrated"], default="simple")
    parser.add_argument("--calibrate", type=Path, help="real 0/1 matrix (calibrated kind)")
    parser.add_argument("--math500", type=Path, help="MATH_500.csv for the overlay's MATH_500")
    parser.add_argument("--math500-items", type=Path, help="MATH-500_test.jsonl (its items)")
    parser.add_argument("--seed", type=int, default=100)
    args = parser.parse_args()
    fit = None
    if args.kind == "calibrated":
        if args.calibrate is None:
            parser.error("--kind calibrated needs --calibrate MATRIX.csv")
        fit = cbmm.fit(pd.read_csv(args.calibrate, index_col=0), "cbmm",
                       **{**cbmm.paper_settings("cbmm"), "tol": 1e-8, "max_iter": 20000,
                          "accelerate": "auto", "seed": 0})
        print(f"calibration fit of {args.calibrate}: {fit.status}, {fit.n_iter} iterations")
    args.out.mkdir(parents=True, exist_ok=True)
    datasets = {}
    for k, (name, (n, j)) in enumerate(SHAPES.items()):
        rng = np.random.default_rng(args.seed + k)
        theta, a, b = parameters(args.kind, fit, n, j, rng)
        y = (rng.random((n, j)) < expit(np.outer(theta, a) + b)).astype(np.int8)
        path = args.out / f"{name}.csv"
        pd.DataFrame(y, index=[f"model_{i}" for i in range(n)],
                     columns=[f"item_{i}" for i in range(j)]).to_csv(path)
        datasets[name] = {"source": "local", "options": {"path": str(path.resolve())}}
        print(f"{path}: {n} x {j}, mean {y.mean():.3f}")
    if args.math500 is not None:
        datasets["MATH_500"] = {"source": "local",
                                "options": {"path": str(args.math500.resolve())}}
    overlay = {"registry": None, "datasets": datasets}
    if args.math500_items is not None:
        overlay["real"] = {"interpretability": {"math500": {
            "dataset": "MATH_500", "items": str(args.math500_items.resolve())}}}
    (args.out / "overlay.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    print(f"overlay: {args.out / 'overlay.yaml'}")


if __name__ == "__main__":
    main()
