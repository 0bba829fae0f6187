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


register_method("cbmm", solve, label="cBMM",
                description="constrained block MM (Algorithm 1); options: engine, precision, accelerate")
