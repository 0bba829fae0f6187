"""Registration of cBMM (the paper's Algorithm 1) with the method registry."""

from __future__ import annotations

from ..registry import register_method
from ..solver import solve_cbmm


def solve(y, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, engine="fused",
          precision="auto", accelerate=None):
    """cBMM solver (see :func:`cbmm.solver.solve_cbmm`); ``seed`` is unused: the
    algorithm is deterministic given its start."""
    return solve_cbmm(y, theta0, a0, b0, sigma=sigma, tol=tol, max_iter=max_iter,
                      engine=engine, precision=precision, accelerate=accelerate)


def check_options(engine="fused", precision="auto", accelerate=None):
    """Reject bad option values before a fit starts."""
    if engine not in ("fused", "numpy"):
        raise ValueError(f"cbmm option engine must be 'fused' or 'numpy', got {engine!r}")
    if precision not in ("auto", "float64", "float32"):
        raise ValueError(
            f"cbmm option precision must be 'auto', 'float64' or 'float32', got {precision!r}")
    if accelerate not in (None, "none", "squarem"):
        raise ValueError(f"cbmm option accelerate must be None or 'squarem', got {accelerate!r}")


register_method("cbmm", solve, label="cBMM", check_options=check_options,
                description="constrained block MM (Algorithm 1); options: engine, precision, accelerate")
