"""Registration of cBMM (the paper's Algorithm 1) with the method registry."""

from __future__ import annotations

from ..prior import PRIOR_SD, Penalty
from ..registry import Option, register_method
from ..solver import solve_cbmm
from ._prior import PRIOR_OPTIONS

OPTIONS = {
    "engine": Option("str", "fused", choices=("fused", "numpy"),
                     doc="fused C passes (default) or the plain NumPy reference"),
    "precision": Option("str", "auto", choices=("auto", "float64", "float32"),
                        doc="per-entry arithmetic of the fused engine; auto: float32 when "
                            "tol >= 1e-5"),
    "accelerate": Option("str", "auto", choices=("none", "squarem", "auto"),
                         doc="auto (default): MM, then projected quasi-Newton (a stationary "
                             "point fast); none: plain Algorithm 1 (the paper); squarem: "
                             "SQUAREM-accelerated MM"),
    "stop_se": Option("float", 1e-3, exclusive_minimum=0, nullable=True,
                      doc="accelerate=auto: also stop once every parameter is within stop_se "
                          "standard errors of its optimum (null: the relative rules alone)"),
    **PRIOR_OPTIONS,
}


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None,
          engine="fused", precision="auto", accelerate="none", prior="none", prior_sd=PRIOR_SD,
          stop_se=None):
    """cBMM solver (see :func:`cbmm.solver.solve_cbmm`); ``seed`` is unused: the
    algorithm is deterministic given its start.  ``prior="normal"`` adds the penalty
    of :class:`cbmm.model.Penalty` (MAP)."""
    return solve_cbmm(responses, theta0, a0, b0, sigma=sigma, tol=tol, max_iter=max_iter,
                      engine=engine, precision=precision, accelerate=accelerate,
                      progress=progress, penalty=Penalty.of(prior, prior_sd), stop_se=stop_se)


def preload(options):
    """``accelerate="auto"`` needs :mod:`cbmm.hybrid` (SciPy's optimizers): cbmm.fit imports
    it in the caller, not in each forked worker."""
    return ("cbmm.hybrid",) if options["accelerate"] == "auto" else ()


register_method("cbmm", solve, label="cBMM", options=OPTIONS, color="#e8141c", order=3,
                env="core", seconds_per_million_cells=2.0, reads_sparse=True, preload=preload,
                paper_options={"accelerate": "none", "prior": "none", "stop_se": None},
                minimises_loss=True,
                description="constrained block MM (Algorithm 1)")
