"""cBMM's driver: Algorithm 1 with the paper's stopping rule, SQUAREM or auto.

:func:`solve_cbmm` runs the MM map (:class:`cbmm.mm.MMOperator`) from a start: plain
(the paper: stop when the relative change of the loss between iterations is < tol,
:func:`cbmm.stopping.stop_status`), wrapped in SQUAREM extrapolation
(:func:`cbmm.mm.squarem_cycles`: projection onto ``a >= 0`` and a monotonicity
safeguard), or ``accelerate="auto"``, MM until its rate slows and then a projected
quasi-Newton phase on the same objective (:mod:`cbmm.hybrid`).

**Scale.** cBMM is exactly equivariant under ``(theta, a, b, sigma) ->
(theta, a / sigma, b / sigma, 1)`` (same iterates, same loss), so every engine
runs on ``(theta, a / sigma, b / sigma)`` at sigma = 1 and scales back at the
end: no sigma can overflow or underflow the per-entry arithmetic.
"""

from __future__ import annotations

import time

import numpy as np

from .mm import MMOperator, squarem_cycles
from .model import canonical_projected_norm, check_sigma
from .result import SolverOutput
from .stopping import PAPER_TOL, stop_status

__all__ = ["FLOAT32_MIN_TOL", "solve_cbmm"]

#: With ``precision="auto"`` the float32 kernels are used when tol is at least
#: this large: their loss evaluations carry relative errors of about 1e-7,
#: two orders of magnitude below such a tolerance.
FLOAT32_MIN_TOL = 1e-5


def solve_cbmm(responses, theta0, a0, b0, *, sigma=1.0, tol=PAPER_TOL, max_iter=1000,
               engine="fused", precision="auto", accelerate="none", record_times=True,
               progress=None, threads=None, penalty=None, stop_se=None):
    """Run cBMM from ``(theta0, a0, b0)``.

    Parameters
    ----------
    responses : Responses or ndarray of int8 (N, J)
        Responses in the +-1/0 coding, dense or sparse (CSR).
    theta0, a0, b0 : ndarray
        Starting point (``a0 >= 0``).
    sigma : float
        Temperature.  Every engine runs at sigma = 1 on ``a / sigma`` and
        ``b / sigma`` (cBMM is equivariant under that) and scales back.
    tol : float
        Stop when the relative change of the loss between iterations is < tol
        (``accelerate="auto"``: see :func:`cbmm.hybrid.solve_auto`).
    max_iter : int
        Maximum number of MM iterations (MM maps evaluated, also with SQUAREM).
    engine : {"fused", "numpy"}
        Fused kernels or the plain NumPy reference.
    precision : {"auto", "float64", "float32"}
        Arithmetic of the fused engine's per-entry work (exp, log1p).
        Parameters and all sums stay float64.  ``"auto"``: float32 when
        ``tol >= 1e-5`` (about 2x faster; its loss evaluations are accurate
        to ~1e-7 relative), float64 otherwise.  A float32 pass whose inputs
        leave float32's safe range is redone in float64 and the fit continues
        in float64 (``info["precision"]`` then reads ``"float32->float64"``).
        The loss reported by :func:`cbmm.fit` is always computed in float64.
    accelerate : {"none", "squarem", "auto"}
        Plain Algorithm 1 (default), SQUAREM-accelerated MM, or MM followed by
        a projected quasi-Newton phase (:mod:`cbmm.hybrid`).
    record_times : bool
        Store the elapsed seconds at each loss evaluation in
        ``info["time_history"]``.
    progress : callable, optional
        Called as ``progress(iteration, loss)`` after every iteration.
    threads : int, optional
        Threads of the fused passes; default :func:`available_cores` (one for
        matrices below :data:`PARALLEL_MIN_ENTRIES` stored cells).
    penalty : cbmm.model.Penalty, optional
        A prior: the fit minimises loss (3) plus the penalty (MAP), and every
        loss in ``loss_history`` includes it.
    stop_se : float, optional
        ``accelerate="auto"``: also stop once the scaled gradient is at most this
        (see :func:`cbmm.hybrid.solve_auto`).

    Returns
    -------
    SolverOutput
        ``loss_history[k]`` is the loss after k iterations (entry 0: the start; under
        ``accelerate="auto"`` with ``stop_se``, the start with its abilities moved to their
        optimum given its items, :func:`cbmm.hybrid._mm_phase`).
        ``info["stationarity_reference"]``: the projected-gradient norm at
        the start in the canonical parametrisation (sigma = 1 scale), from the
        first pass, for :func:`cbmm.model.loss_and_stationarity`.
    """
    if accelerate not in (None, "none", "squarem", "auto"):
        raise ValueError(f"accelerate must be 'none', 'squarem' or 'auto', got {accelerate!r}")
    sigma = check_sigma(sigma)
    if precision == "auto":  # auto's MM phase only warms up its float64 quasi-Newton phase
        precision = "float32" if tol >= FLOAT32_MIN_TOL or accelerate == "auto" else "float64"
    setup_start = time.perf_counter()
    op = MMOperator(responses, engine=engine, precision=precision, threads=threads,
                    penalty=penalty, track_gradient=accelerate == "auto" and stop_se is not None)
    start = time.perf_counter()
    theta = np.array(theta0, dtype=float)
    a = np.maximum(np.array(a0, dtype=float), 0.0) / sigma
    b = np.array(b0, dtype=float) / sigma
    if accelerate == "squarem":
        out = _squarem(op, theta, a, b, tol, max_iter, start, progress)
    elif accelerate == "auto":
        from .hybrid import solve_auto

        out = solve_auto(op, theta, a, b, tol=tol, max_iter=max_iter, start=start,
                         progress=progress, stop_se=stop_se)
    else:
        out = _plain(op, theta, a, b, tol, max_iter, start, progress)
    out.runtime_s = time.perf_counter() - start
    if op.gradient is not None:  # from the first pass: the reference of info["stationarity"]
        out.info["stationarity_reference"] = canonical_projected_norm(theta, a, *op.gradient)
    out.a = out.a * sigma
    out.b = out.b * sigma
    if not record_times:
        out.info.pop("time_history", None)
    used = precision if op.switched_to_float64 is None else "float32->float64"
    out.info.update(setup_s=start - setup_start, engine=engine, accelerate=accelerate or "none",
                    threads=op.n_threads, precision=used if engine == "fused" else "float64")
    if op.switched_to_float64 is not None:
        out.info["float64_from_iteration"] = op.switched_to_float64
    return out


def _plain(op, theta, a, b, tol, max_iter, start, progress=None):
    value = op.evaluate(theta, a, b, gradient=True)
    history, times = [value], [time.perf_counter() - start]
    while (status := stop_status(history, op.updates, tol, max_iter)) is None:
        value = op.update()
        history.append(value)
        times.append(time.perf_counter() - start)
        if progress is not None:
            progress(op.updates, value)
    theta, a, b = op.point
    return SolverOutput(theta=theta, a=a, b=b, loss_history=history, n_iter=op.updates,
                        status=status, runtime_s=0.0, info={"time_history": times})


def _squarem(op, theta, a, b, tol, max_iter, start, progress=None):
    """SQUAREM-accelerated MM (:func:`squarem_cycles`) with the relative-loss rule."""
    history, times = [], []
    status = "max_iter"
    for value in squarem_cycles(op, theta, a, b, gradient=True, max_updates=max_iter):
        history.append(value)
        times.append(time.perf_counter() - start)
        if progress is not None and len(history) > 1:
            progress(op.updates, value)
        stop = stop_status(history, op.updates, tol, max_iter)
        if stop is not None:
            status = stop
            break
    theta, a, b = op.point
    return SolverOutput(theta=theta.copy(), a=a.copy(), b=b.copy(), loss_history=history,
                        n_iter=op.updates, status=status, runtime_s=0.0,
                        info={"time_history": times, "outer_iterations": len(history) - 1})
