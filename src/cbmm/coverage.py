"""Do a fit's intervals hold for data of this shape? Coverage on data drawn from the fit.

The Wald intervals of :meth:`cbmm.FitResult.confint` measure the sampling noise of a
joint (MAP) fit.  They do not measure its bias, and the joint estimate of the items is
biased where every model answers few of them: each ability is a noisy estimate from its
J answers, and the discriminations of steep items are attenuated by that noise (the
incidental-parameter problem of joint maximum likelihood; it does not shrink as models
are added, while the standard errors do).  On the Open LLM Leaderboard's MMLU shape
(4,278 models x 102 items) the 95 % intervals of a and b covered a quarter of the time
(docs/trust.md); the marginal fit, ``method="mml"``, integrates the abilities out.
:func:`coverage_check` measures this for the user's own data: it draws answers from the
fit itself (its probabilities, the data's observed cells), refits each draw with the
same settings and counts how often the intervals hold the fit's values.
"""

from __future__ import annotations

import numpy as np

from ._warn import warn
from .intervals import IntervalWarning, warn_few_models

__all__ = ["COVERAGE_SLACK", "coverage_check"]

#: coverage_check warns where the intervals of a parameter held the truth in fewer than
#: ``level - COVERAGE_SLACK`` of the cases: beyond the draws' noise at 20 of them (the
#: share is over every parameter of every draw), and far enough below the level to be a
#: fault, not a rounding (MMLU's shape: a 0.26, b 0.27, theta 0.78 at 95 %).
COVERAGE_SLACK = 0.05


def coverage_check(responses, method: str = "cbmm", *, n_rep: int = 20, level: float = 0.95,
                   seed: int = 0, **fit_kwargs):
    """Coverage of the fit's Wald intervals on answers drawn from the fit itself.

    Parameters
    ----------
    responses
        As for :func:`cbmm.fit`.
    method : str
        A method that gives standard errors (cbmm, lbfgsb, manopt, mml).
    n_rep : int
        Draws, >= 2; each costs a fit with ``se=True``.
    level : float
        The intervals' level, in (0, 1).
    seed : int
        Seed of the draws and of the fits.
    **fit_kwargs
        Settings of the fit, passed to every :func:`cbmm.fit` (the one of ``responses``,
        whose parameters are the truth of the draws, and the draws'); with ``verbose=N``
        each draw's fit logs its progress and, once done, its status and the seconds so
        far (the ``cbmm`` logger, to stderr).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``theta``, ``a``, ``b``: ``coverage`` (the share of the parameters
        whose interval holds the truth, over the parameters with an interval and the
        draws), ``worst`` (the lowest share of one draw), ``bias_se`` (the mean of
        ``(estimate - truth) / se``: the bias in standard errors, 0 where the intervals
        are centred) and ``sd_z`` (the sd of that ratio, 1 where the standard errors are
        right), ``n_rep``, ``failed`` (draws whose fit failed, left out) and
        ``not_optimum`` (draws whose fit stopped short of an optimum, counted; a
        ConvergenceWarning says so).

    Notes
    -----
    The truth is the fit of ``responses``, so the check is of the intervals under the
    fitted 2PL with the data's shape and missing cells, not of the 2PL itself (see
    :func:`cbmm.cross_validate` for held-out answers).  Every parameter is on the
    canonical scale (abilities of mean 0 and sd 1), the truth's and the estimates'; for
    ``mml`` the truth's abilities are its posterior means standardised (the items with
    them), and the estimates are on the fitted population's scale of mean 0 and sd 1.
    """
    import warnings
    from types import SimpleNamespace

    import pandas as pd

    from ._checks import check_integer, check_level
    from .api import NOT_AN_OPTIMUM, ConvergenceWarning, FitFailedError, _progress_lines, fit
    from .registry import get_method
    from .responses import Responses, as_responses, no_information
    from .result import canonicalize
    from .validation import _observed_cells, cells_in_label_order, predicted_probabilities

    spec = get_method(method)
    if not (spec.minimises_loss or spec.standard_errors):  # before the fit of the data
        raise ValueError(f"coverage_check: method {method!r} gives no standard errors (cbmm, "
                         "lbfgsb, manopt and mml do)")
    n_rep = check_integer("n_rep", n_rep, minimum=2)
    level = check_level(level)
    seed = check_integer("seed", seed, minimum=0)
    data = as_responses(responses, coding=fit_kwargs.pop("coding", None),
                        layout=fit_kwargs.pop("layout", "auto"), storage="auto")
    fit_kwargs.pop("se", None)
    truth = fit(data, method, seed=seed, **fit_kwargs)
    if truth.failed:
        raise FitFailedError(f"coverage_check: the fit of the data failed ({truth.status})")
    warn_few_models(data.shape[0])  # draws from the fit cannot show it
    rows, cols, observed = _observed_cells(data)
    truths = {name: np.asarray(getattr(truth, name), dtype=float) for name in ("theta", "a", "b")}
    if spec.population_scale:
        # the draws' abilities are the fit's posterior means, standardised: their spread is
        # the population the refits estimate (unstandardised, the means' shrinkage would
        # count as the refits' bias)
        truths = dict(zip(truths, canonicalize(*truths.values())))
    probability = predicted_probabilities(SimpleNamespace(**truths, sigma=truth.sigma),
                                          rows, cols)
    # a marginal fit places the models that answered every item alike by their posterior,
    # as it places the rest: only a joint fit's prior places them short
    if not spec.population_scale:
        alike, expected, spread = _alike_models(rows, observed, probability, data.shape[0])
        if alike - expected >= 2 and alike - expected > 2 * spread:
            warn(f"coverage_check: {alike} models answered every item alike, where the fit "
                 f"expects {expected:.1f} ± {spread:.1f}: the prior places them short of "
                 "where their answers put them, and as they enter the abilities' scale (mean "
                 "0, sd 1) the other parameters move with it. Draws from the fit do not "
                 "reproduce them, so this check can report intervals that hold where they do "
                 "not (20 such models of 200: a's intervals covered 0.63 of the truth, this "
                 "check said 0.95; docs/trust.md). degenerate='set_aside' fits without them "
                 "(not always better: docs/trust.md)",
                 IntervalWarning)
    rng = np.random.default_rng([seed, 0xC0])
    shares = {name: [] for name in truths}
    ratios = {name: [] for name in truths}
    failed, stopped = 0, 0
    layout = data.to_sparse()  # the observed cells, row by row, as _observed_cells lists them
    # the cells drawn in their labels' order: one seed, the same draws, whatever the order
    # of the rows and columns
    order = cells_in_label_order(data, rows, cols)
    uniform = np.empty(rows.size)
    with _progress_lines(fit_kwargs.get("verbose", 0)) as report:  # checked by fit
        for rep in range(n_rep):
            uniform[order] = rng.random(rows.size)
            values = np.where(uniform < probability, 1, -1).astype(np.int8)
            drawn = Responses(y=None, indptr=layout.indptr, indices=layout.indices, values=values,
                              n_items=data.shape[1])
            if no_information(drawn):  # a draw all alike (tiny data): no fit, a failed draw
                report("coverage_check: draw %d of %d all alike: not fitted", rep + 1, n_rep)
                failed += 1
                continue
            with warnings.catch_warnings():  # counted below, not once per draw
                warnings.simplefilter("ignore")
                estimate = fit(drawn if data.storage == "sparse" else drawn.to_dense(), method,
                               seed=seed + 1 + rep, se=True, **fit_kwargs)
            report("coverage_check: draw %d of %d fitted (%s)", rep + 1, n_rep, estimate.status)
            if estimate.failed:
                failed += 1
                continue
            stopped += estimate.status in NOT_AN_OPTIMUM
            with warnings.catch_warnings():  # the draws stopped short: counted above
                warnings.simplefilter("ignore", ConvergenceWarning)
                bounds = estimate.confint(level)
            for name, true in truths.items():
                lower, upper = (bounds[name][side].to_numpy(dtype=float) for side in ("lower", "upper"))
                judged = np.isfinite(lower) & np.isfinite(upper) & np.isfinite(true)
                if judged.any():
                    shares[name].append(np.mean((lower[judged] <= true[judged])
                                                & (true[judged] <= upper[judged])))
                se = np.asarray(getattr(estimate, f"{name}_se"), dtype=float)
                with np.errstate(invalid="ignore", divide="ignore"):
                    z = (np.asarray(getattr(estimate, name), dtype=float) - true) / se
                ratios[name].append(z[np.isfinite(z)])
    if failed == n_rep:
        raise ValueError(f"coverage_check: the fits of all {n_rep} draws failed")
    if stopped:
        warn(f"coverage_check: {stopped} of {n_rep} draws' fits stopped short of an "
             "optimum (max_iter, not_stationary or unbounded): their intervals are "
             "counted as they are (see the not_optimum column)", ConvergenceWarning)
    table = {}
    for name in truths:
        z = np.concatenate(ratios[name]) if ratios[name] else np.array([])
        table[name] = {"coverage": np.mean(shares[name]) if shares[name] else np.nan,
                       "worst": np.min(shares[name]) if shares[name] else np.nan,
                       "bias_se": z.mean() if z.size else np.nan,
                       "sd_z": z.std() if z.size else np.nan,
                       "n_rep": n_rep, "failed": failed, "not_optimum": stopped}
    short = {name: row["coverage"] for name, row in table.items()
             if row["coverage"] < level - COVERAGE_SLACK}
    if short:  # the table alone said it: a's 0.26 on MMLU's shape came without a word
        warn(f"coverage_check: the {level:.0%} intervals of "
             + ", ".join(f"{name} held the truth in {share:.2f}" for name, share in short.items())
             + " of the cases: on data of this shape they claim more than the fit knows "
             "(where many models answer few items, the joint fit's items are biased: "
             "method='mml'; docs/trust.md, where they do not hold)", IntervalWarning)
    return pd.DataFrame.from_dict(table, orient="index")


def _alike_models(rows, values, probability, n_models) -> tuple[int, float, float]:
    """Models that answered all their observed cells alike (all correct or all wrong):
    their number in the data (``values`` of the cells, by ``rows``), and the mean and sd of
    that number under the fit's ``probability`` of each cell (a sum of independent
    Bernoulli variables, one per model)."""
    def per_model(weights):
        return np.bincount(rows, weights=weights, minlength=n_models)

    correct, count = per_model(values > 0), np.bincount(rows, minlength=n_models)
    alike = int(((count > 0) & ((correct == 0) | (correct == count))).sum())
    with np.errstate(divide="ignore"):  # a set-aside model's cells: probability 0 or 1
        chance = np.exp(per_model(np.log(probability))) + np.exp(per_model(np.log1p(-probability)))
    chance = np.where(count > 0, chance, 0.0)
    return alike, float(chance.sum()), float(np.sqrt((chance * (1 - chance)).sum()))
