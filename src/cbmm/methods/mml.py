"""Registration of the native marginal maximum-likelihood fit (:mod:`cbmm.marginal`)."""

from __future__ import annotations

import numpy as np

from ..marginal import (POPULATIONS, item_standard_errors, negative_marginal_loglik,
                        solve_marginal)
from ..posterior import posterior_moments, prior_on_grid
from ..registry import Option, register_method

OPTIONS = {
    "n_quad": Option("int", "auto", minimum=21, maximum=1001, specials=("auto",),
                     doc="nodes of the ability grid (R's mirt: 61); auto: 61, more where "
                         "steep items need them (at most 401)"),
    "population": Option("str", "histogram", choices=POPULATIONS,
                         doc="the abilities' distribution: histogram (default; its weights "
                             "on the grid estimated, then scaled to mean 0 and sd 1) or "
                             "normal, N(0, 1) (mirt's default)"),
}


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None,
          n_quad="auto", population="histogram"):
    """Marginal ML by EM (:func:`cbmm.marginal.solve_marginal`); ``theta0`` is unused (the
    abilities are integrated out) and so is ``seed`` (EM is deterministic from its start).
    The abilities are the posterior means under the fitted population as a prior
    (:func:`abilities`)."""
    out = solve_marginal(responses, a0, b0, sigma=sigma, tol=tol, max_iter=max_iter,
                         n_quad=n_quad, population=population, progress=progress)
    if not out.status.startswith("failed"):
        out.theta = abilities(responses, out.a, out.b, out.info["population"], sigma)[0]
    return out


def abilities(responses, a, b, population, sigma):
    """Each model's posterior mean and sd under the items and the fitted population as
    the prior (:func:`cbmm.posterior.prior_on_grid`: a histogram smoothed, with a flat
    share), as ``cbmm.score(..., prior="population")`` places a new model: the EM's own
    posterior on the histogram's nodes is spiky where models answer many items (MATH-500:
    the abilities' 95 % intervals covered 0.53)."""
    return posterior_moments(responses.to_dense().y, np.asarray(a, dtype=float) / sigma,
                             np.asarray(b, dtype=float) / sigma, prior_on_grid(population))


def standard_errors(responses, result, options):
    """Abilities: their posterior sd (:func:`abilities`); items: Louis' observed
    information (:func:`cbmm.marginal.item_standard_errors`), the fitted population taken
    as known.  Where the items' information is not positive definite, the abilities keep
    theirs."""
    items = (np.asarray(result.a, dtype=float), np.asarray(result.b, dtype=float))
    population = result.info["population"]
    theta_se = abilities(responses, *items, population, result.sigma)[1]
    try:
        a_se, b_se = item_standard_errors(responses, *items, population, sigma=result.sigma)
    except np.linalg.LinAlgError as exc:
        result.info["se_problem"] = f"the items' information is not positive definite ({exc})"
        a_se = b_se = np.full(items[0].size, np.nan)
    return theta_se, a_se, b_se


register_method("mml", solve, label="marginal ML", options=OPTIONS, color="#d98c00", order=5,
                env="core", seconds_per_million_cells=30.0, reads_sparse=True,
                population_scale=True, standard_errors=standard_errors,
                objective=negative_marginal_loglik,
                description="marginal maximum likelihood (Bock-Aitkin EM, a >= 0): abilities "
                            "integrated out over an estimated population, EAP abilities; "
                            "items' standard errors that hold with many models and few "
                            "items")
