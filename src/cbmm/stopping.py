"""Stopping rules: the paper's relative change of the loss, for every method.

The paper stops every method when the relative change of the loss between
consecutive iterates falls below ``tol`` (:data:`PAPER_TOL` = 1e-4).  cBMM's MM
iterations use it as it is (:func:`stop_status`).  A quasi-Newton or conjugate
gradient iteration can also make one tiny step far from a stationary point (a
short line-search step after a poor direction, or a step cut short by the bound
``a >= 0``), and the rule alone then reads that step as convergence; so for the
gradient baselines (L-BFGS-B, Manopt) :class:`RelativeLossRule` counts it only once
the solver's own (projected) gradient norm has fallen to ``GRADIENT_SAFEGUARD``
times its norm at the start.  On the paper's designs the safeguard almost never
binds (docs/baselines.md).  Whether a stopped fit is an answer is judged afterwards,
the same way for every method (:mod:`cbmm.diagnostics`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["GRADIENT_SAFEGUARD", "PAPER_TOL", "RelativeLossRule", "relative_change",
           "stop_status"]

#: The paper's tolerance of the relative change of the loss.
PAPER_TOL = 1e-4


def relative_change(previous, current) -> float:
    """``|current - previous| / |previous|`` (a zero ``previous`` counts as the tiniest
    float)."""
    return abs(current - previous) / max(abs(previous), np.finfo(float).tiny)


def stop_status(history, updates, tol, max_iter):
    """Why the paper's rule ends an MM fit after the losses ``history`` and ``updates``
    MM maps: a non-finite loss, a relative change below ``tol`` or ``max_iter``
    maps; None while it goes on."""
    if not np.isfinite(history[-1]):
        return "failed: non-finite loss"
    if len(history) > 1 and relative_change(history[-2], history[-1]) < tol:
        return "converged"
    if updates >= max_iter:
        return "max_iter"
    return None


#: The relative-loss rule counts only at a gradient norm <= this times the start's.
GRADIENT_SAFEGUARD = 0.1


class RelativeLossRule:
    """Decides after every iteration whether a gradient baseline stops.

    Parameters
    ----------
    tol : float
        The paper's relative-loss tolerance.
    safeguard : float
        Gradient-norm ratio (to the start's) below which the relative-loss
        test counts.

    Attributes
    ----------
    start_gradient_norm : float
        Gradient norm at the start (set by :meth:`start`).
    held_back : int
        Iterations at which the relative-loss test held but the safeguard did
        not (the iteration went on).
    gradient_ratio : float
        Gradient norm over the start's at the last iterate.
    stopped : bool
        Whether the rule has ended the iteration.
    reason : str
        Why it stopped (empty until then).
    """

    def __init__(self, tol: float, safeguard: float = GRADIENT_SAFEGUARD):
        self.tol = tol
        self.safeguard = safeguard
        self.start_gradient_norm = math.nan
        self.previous_loss = math.nan
        self.held_back = 0
        self.gradient_ratio = 1.0
        self.stopped = False
        self.reason = ""

    def start(self, loss: float, gradient_norm: float) -> None:
        """Record the loss and gradient norm at the starting point."""
        self.previous_loss = loss
        self.start_gradient_norm = gradient_norm

    def stop(self, loss: float, gradient_norm: float) -> bool:
        """True when the iterate with ``loss`` and ``gradient_norm`` ends the iteration."""
        previous, self.previous_loss = self.previous_loss, loss
        self.gradient_ratio = (gradient_norm / self.start_gradient_norm
                               if self.start_gradient_norm > 0 else 0.0)
        change = relative_change(previous, loss)
        if not change < self.tol:
            return False
        if self.gradient_ratio <= self.safeguard:
            self.stopped = True
            self.reason = (f"relative loss change {change:.2g} < tol = {self.tol:g} at gradient "
                           f"norm {self.gradient_ratio:.2g} x the start's")
            return True
        self.held_back += 1
        return False

    def info(self) -> dict:
        """Diagnostics for ``SolverOutput.info``."""
        return {"gradient_ratio": self.gradient_ratio, "held_back": self.held_back,
                "gradient_safeguard": self.safeguard}
