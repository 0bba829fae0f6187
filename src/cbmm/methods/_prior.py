"""The ``prior`` options shared by the methods that minimise loss (3) (cbmm, lbfgsb,
manopt): maximum likelihood as in the paper, or MAP (:class:`cbmm.prior.Penalty`)."""

from __future__ import annotations

from ..prior import PRIOR_SD, PRIORS, Penalty
from ..registry import Option

__all__ = ["PRIOR_OPTIONS", "penalty_of", "takes_prior"]

#: The options of every method that minimises loss (3): ML (the paper) or MAP.
PRIOR_OPTIONS = {
    "prior": Option("str", "normal", choices=PRIORS,
                    doc="none: maximum likelihood, loss (3) as in the paper; normal: MAP with "
                        "theta ~ N(0,1), a/sigma ~ N+(0,prior_sd^2), b/sigma ~ N(0,prior_sd^2), "
                        "which has a finite optimum whatever the data"),
    # Beyond a million logits the prior is none (prior="none" says so); below a millionth
    # it pins a and b to 0.  Further out the fits fail: 1e-170 divided by zero, 1e200
    # overflowed, L-BFGS-B's loss was not finite at 1e-100, Manopt's line search failed
    # at 1e-10.
    "prior_sd": Option("float", PRIOR_SD, minimum=1e-6, maximum=1e6,
                       doc="prior standard deviation of a/sigma and b/sigma (logits) with "
                           "prior=normal"),
}


def takes_prior(method) -> bool:
    """Whether a registered method declares the shared :data:`PRIOR_OPTIONS`."""
    return method.options.get("prior") is PRIOR_OPTIONS["prior"]


def penalty_of(method, options) -> Penalty:
    """The :class:`cbmm.model.Penalty` a method fits with its checked ``options``: none
    unless it declares the shared :data:`PRIOR_OPTIONS`."""
    if not takes_prior(method):
        return Penalty()
    return Penalty.of(options["prior"], options["prior_sd"])
