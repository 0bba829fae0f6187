"""Registration of cBMM (the paper's Algorithm 1) with the method registry."""

from __future__ import annotations

from ..registry import Option, register_method
from ..solver import solve_cbmm

OPTIONS = {
    "engine": Option("str", "fused", choices=("fused", "numpy"),
                     doc="fused C passes (default) or the plain NumPy reference"),
    "precision": Option("str", "auto", choices=("auto", "float64", "float32"),
                        doc="per-entry arithmetic of the fused engine; auto: float32 when "
                            "tol >= 1e-5"),
    "accelerate": Option("str", "none", choices=("none", "squarem", "auto"),
                         doc="none: plain Algorithm 1 (the paper); squarem: SQUAREM-accelerated "
                             "MM; auto: MM, then projected quasi-Newton (tight optimum fast)"),
}


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None,
          engine="fused", precision="auto", accelerate="none"):
    """cBMM solver (see :func:`cbmm.solver.solve_cbmm`); ``seed`` is unused: the
    algorithm is deterministic given its start."""
    return solve_cbmm(responses, theta0, a0, b0, sigma=sigma, tol=tol, max_iter=max_iter,
                      engine=engine, precision=precision, accelerate=accelerate,
                      progress=progress)


def preload(options):
    """``accelerate="auto"`` needs :mod:`cbmm.hybrid` (SciPy's optimizers): cbmm.fit imports
    it in the caller, not in each forked worker."""
    return ("cbmm.hybrid",) if options["accelerate"] == "auto" else ()


register_method("cbmm", solve, label="cBMM", options=OPTIONS, color="#e8141c", order=3,
                env="core", seconds_per_million_cells=2.0, reads_sparse=True, preload=preload,
                description="constrained block MM (Algorithm 1)")
