"""The calibrated item bank, and the posterior of a model's ability given its answers.

Every function of :mod:`cbmm.efficient` reads the calibration once into an
:class:`ItemBank`: the items' ``(a, b)`` and the temperature of a fit (through
:func:`cbmm.score.read_items`, so a FitResult, an ``items.csv`` or a DataFrame
of ``a`` and ``b`` all work), and the calibration models' abilities where the
fit has them.  An ability is on the calibration's canonical scale (mean 0, sd 1
over its models), so the prior of a new model's ability is N(0, 1), as in
``cbmm.score(..., prior="normal")``; an ``mml`` fit's abilities are on its estimated
population's scale, and that population (an empirical histogram, by default) is the
prior (:attr:`ItemBank.log_prior`), as in ``cbmm.score(..., prior="population")``.

:class:`Posterior` holds, for many models at once, the posterior of the ability
on the fixed grid of :mod:`cbmm.posterior` (:data:`GRID`), with the bank's tables at the
grid, which answers drawn on the same items share.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..engine import row_blocks
from ..marginal import log_density
from ..model import expit, log_pq
from ..posterior import (GRID, grid_logits, grid_moments, log_posterior, log_weights,
                         normalised_weights, prior_on_grid)
from ..responses import label_order
from ..result import FitResult, is_saved_fit
from ..score import aligned_responses, read_items

if TYPE_CHECKING:  # imported where used, so that ``import cbmm`` does not load pandas
    import pandas as pd

__all__ = ["GRID", "SETTLED_PROBABILITY", "ItemBank", "Posterior", "aligned_answers",
           "coded_answers", "grid_moments", "log_weights", "normalised_weights",
           "reference_models_needed"]

#: An item whose probability of a correct answer is below this for every model of a bank's
#: population, or above one minus it for every one, is settled (:attr:`ItemBank.settled`).
SETTLED_PROBABILITY = 0.01
#: Abilities of a population drawn as N(0, 1) quantiles, for a calibration given
#: without its models' abilities (an ``items.csv``).
_NORMAL_POPULATION = 200


#: The bank of the FitResult last given to :meth:`ItemBank.of`, kept while that result
#: lives and holds the same arrays: its J x 641 grid tables cost 0.5 s at 12,032 items,
#: which an adaptive test per model, each given the fit, paid once per test.
_last_bank: list = [None]


def _arrays_of(result) -> tuple:
    return result.theta, result.a, result.b, result.sigma


def _forget(dead) -> None:
    """Drop the kept bank once its FitResult is gone (its tables need not outlive it)."""
    if _last_bank[0] is not None and _last_bank[0][0] is dead:
        _last_bank[0] = None


@dataclass(frozen=True, eq=False)
class ItemBank:
    """Calibrated items: labels, discrimination ``a``, easiness ``b``, temperature ``sigma``.

    ``labels`` are text, as answers are matched with them; ``given`` are the labels as
    the calibration gives them where they are not text (a FitResult's or a DataFrame's
    index of integers, say), else None: :attr:`given_labels`, which the public results
    return, so that they index the user's own tables.  ``abilities`` are the calibration
    models' abilities where known (a FitResult), else None; ``models`` their labels, in the
    same order, where the fit has them (its models' labels, for telling them from others),
    else None; ``fitted_population`` the calibration's estimated population (an ``mml`` fit's
    ``info["population"]``), else None: the prior of :attr:`log_prior`; ``set_aside`` the
    positions of the items the fit set aside (their ``a`` 0 and ``b`` +-40 sigma here: see
    :func:`cbmm.score.read_items`).  :attr:`slope` and
    :attr:`intercept` are ``a / sigma`` and ``b / sigma``: the probability of a correct
    answer at ability ``t`` is ``expit(t * slope + intercept)``.
    """

    labels: pd.Index
    a: np.ndarray
    b: np.ndarray
    sigma: float
    abilities: np.ndarray | None
    given: pd.Index | None = None
    models: pd.Index | None = None
    fitted_population: dict | None = None
    set_aside: tuple = ()

    @classmethod
    def of(cls, result) -> ItemBank:
        """The bank of a FitResult, a DataFrame with columns ``a`` and ``b``, an
        ``items.csv`` or its folder (see :func:`cbmm.score.read_items`); an ItemBank is
        returned as it is (with the grid values it has computed).  A FitResult and a
        saved fit carry their temperature; a bare table (a DataFrame, or an items.csv
        without its fit.json) is read at temperature 1: divide a fit's ``a`` and ``b`` by
        its ``sigma`` (:meth:`FitResult.items_frame` carries it in ``attrs["sigma"]``).
        A saved fit's folder is read as the FitResult it holds, with its models' abilities
        (``abilities.csv``), as ``cbmm select --items`` reads it.  The labels of a FitResult
        or a DataFrame are kept as they are (:attr:`given_labels`), a file's are its text."""
        import pandas as pd

        if isinstance(result, ItemBank):
            return result
        table, sigma, _ = read_items(result)
        if is_saved_fit(result):
            return cls.of(FitResult.load(result))
        if isinstance(result, FitResult) and _last_bank[0] is not None:
            kept, arrays, bank = _last_bank[0]
            if kept() is result and all(x is y for x, y in zip(arrays, _arrays_of(result))):
                return bank  # its grid values too: adaptive_test(respond, fit) in a loop
        abilities, given, models = None, None, None
        if isinstance(result, FitResult):
            theta = np.asarray(result.theta, dtype=float)
            finite = np.isfinite(theta)
            abilities = theta[finite]  # set-aside models (+-inf) have no place
            given = getattr(result.a, "index", pd.RangeIndex(len(table)))
            if hasattr(result.theta, "index"):
                models = result.theta.index[finite]
        elif isinstance(result, pd.DataFrame):
            given = pd.Index(result["item"]) if "item" in result.columns else result.index
        if given is not None and given.equals(table.index):
            given = None
        bank = cls(table.index, table["a"].to_numpy(float), table["b"].to_numpy(float),
                   1.0 if sigma is None else float(sigma), abilities, given, models,
                   table.attrs.get("population"), table.attrs.get("set_aside", ()))
        if isinstance(result, FitResult):
            _last_bank[0] = (weakref.ref(result, _forget), _arrays_of(result), bank)
        return bank

    @property
    def given_labels(self) -> pd.Index:
        """The items' labels as the calibration gives them (:attr:`labels` where those
        are text): what :func:`cbmm.select_items`, :func:`cbmm.item_audit` and
        :func:`cbmm.adaptive_test` return."""
        return self.labels if self.given is None else self.given

    @property
    def slope(self) -> np.ndarray:
        return self.a / self.sigma

    @property
    def intercept(self) -> np.ndarray:
        return self.b / self.sigma

    def __len__(self) -> int:
        return self.a.size

    def probabilities(self, theta) -> np.ndarray:
        """``len(theta) x J`` probabilities of a correct answer."""
        return expit(np.multiply.outer(np.asarray(theta, dtype=float), self.slope)
                     + self.intercept)

    def information(self, theta) -> np.ndarray:
        """``len(theta) x J`` Fisher information of each item about the ability:
        ``slope^2 p (1 - p)``, from logarithms: a near-step item (a = 1e300) has none away
        from its threshold, not ``inf * 0``."""
        margin = np.abs(np.multiply.outer(np.asarray(theta, dtype=float), self.slope)
                        + self.intercept)
        with np.errstate(divide="ignore", over="ignore"):
            return np.exp(2.0 * np.log(self.slope) + log_pq(margin))

    @functools.cached_property
    def log_prior(self) -> np.ndarray:
        """The log prior mass of a new model's ability in the cells of :data:`GRID` (up to
        a constant): from the calibration's estimated population where it has one
        (:func:`cbmm.posterior.prior_on_grid`), else N(0, 1), its canonical scale's."""
        return prior_on_grid(self.fitted_population)

    @functools.cached_property
    def grid(self) -> dict:
        """The items at :data:`GRID`, computed once per bank (``J x grid`` each, C order,
        so that a models x items matrix multiplies them without a copy): ``p``, ``pq``
        (``p (1 - p)``), ``log_p``, ``log_q`` (``log (1 - p)``); and the sums over all
        items ``p_total`` and ``pq_total`` (per grid ability)."""
        x = grid_logits(self.slope, self.intercept)
        p = expit(x)
        pq = p * (1.0 - p)
        return {"p": p, "pq": pq, "log_p": -np.logaddexp(0.0, -x),
                "log_q": -np.logaddexp(0.0, x), "p_total": p.sum(axis=0),
                "pq_total": pq.sum(axis=0)}

    @functools.cached_property
    def expected_share(self) -> np.ndarray:
        """Each item's expected share of correct answers over :meth:`population`,
        computed once per bank (the ``stratified`` strategy's strata, drawn again for
        every seed and k): summed over blocks of models, not one models x items matrix
        (2,211 x 12,032: 210 MB at once)."""
        population = self.population()
        total = np.zeros(len(self.labels))
        for block in row_blocks(population.size, len(self.labels)):
            total += self.probabilities(population[block]).sum(axis=0)
        return total / population.size

    @functools.cached_property
    def settled(self) -> np.ndarray:
        """Which items the fit settles for every model of :meth:`population`: a
        probability of a correct answer below :data:`SETTLED_PROBABILITY` for each of
        them, or above one minus it (on the real matrices measured, exactly the items
        every calibration model answered alike, whose parameters the prior sets).  A
        model's answer to one tells the fit next to nothing it did not know."""
        population = self.population()
        # a probability is monotone in the ability: its extremes are the extreme abilities'
        p = self.probabilities([population.min(), population.max()])
        return (p.max(axis=0) < SETTLED_PROBABILITY) | (p.min(axis=0) > 1 - SETTLED_PROBABILITY)

    @functools.cached_property
    def label_order(self) -> np.ndarray:
        """The items' positions in the order of their labels (as text): the seeded
        strategies of :func:`cbmm.select_items` draw in this order, so that the same seed
        chooses the same items whatever the order of the calibration's columns."""
        return label_order(self.labels)

    def population(self) -> np.ndarray:
        """The abilities the bank is meant for: the calibration models', or N(0, 1)
        quantiles when the calibration came without them.  For a calibration that estimated
        its population (``mml``), as many quantiles of that population as it has models:
        its models' posterior means shrink toward the mean, the population does not (the
        histogram itself: the prior of a new model smooths it and adds a flat share for
        models beyond the calibration's, :func:`cbmm.posterior.prior_on_grid`)."""
        known = self.abilities is not None and self.abilities.size
        if self.fitted_population is not None:
            histogram = log_density(self.fitted_population, GRID)
            density = np.exp(histogram - histogram.max())
            cumulative = np.concatenate([[0.0], np.cumsum(density)]) / density.sum()
            half = (GRID[1] - GRID[0]) / 2   # each grid point's mass spread over its cell
            edges = np.append(GRID - half, GRID[-1] + half)
            # as many as the models it was estimated from, however the calibration came
            # (a FitResult gave 140 quantiles on MATH-500 and its items_frame() 200, and
            # select_items chose 41 of 100 items differently)
            count = self.fitted_population.get("n_models") or (
                self.abilities.size if known else _NORMAL_POPULATION)
            return np.interp((np.arange(count) + 0.5) / count, cumulative, edges)
        if known:
            return self.abilities
        from scipy.special import ndtri

        return ndtri((np.arange(_NORMAL_POPULATION) + 0.5) / _NORMAL_POPULATION)


def aligned_answers(responses, bank: ItemBank, *, coding=None, layout="auto"):
    """The responses as an int8 matrix with one column per item of the bank (+1 correct,
    -1 wrong, 0 not answered), and the models' labels (as :func:`cbmm.score` aligns
    them: columns matched to the item labels as strings; an unknown column is an error
    naming it; a bank item the responses lack is not answered)."""
    import pandas as pd

    table = pd.DataFrame({"a": bank.a, "b": bank.b}, index=bank.labels)
    return aligned_responses(responses, table, coding, layout)


def reference_models_needed(level: float) -> int:
    """Reference models a ``level`` interval of predicted accuracy needs (its
    :class:`~cbmm.efficient.prediction.Reference`, and the ``predictive`` strategy's
    warning): ``n`` such that its jackknife quantile, the ``ceil((n + 1) level)``-th
    smallest of ``n`` errors, exists (19 at 0.95, 9 at 0.9)."""
    return int(np.ceil(level / (1 - level) - 1e-9))  # 0.9 / 0.1 is 9.000000000000002


def coded_answers(values: np.ndarray) -> np.ndarray:
    """A models x items matrix of 1 / 0 / NaN (not answered) coded +1 / -1 / 0 (int8), as
    the bank's functions read answers."""
    coded = np.full(values.shape, -1, dtype=np.int8)  # int8 throughout: no N x J int64
    coded[values > 0] = 1
    coded[np.isnan(values)] = 0
    return coded


class Posterior:
    """Posterior weights of the ability on :data:`GRID` for each row of ``answers``
    (int8, +1 / -1 / 0 not answered), under the bank's prior (:attr:`ItemBank.log_prior`).

    ``weights`` is ``models x grid`` (rows sum to 1).
    """

    def __init__(self, answers: np.ndarray, bank: ItemBank):
        #: ``answered_log_q``, ``models x grid``: the sum of ``log (1 - p)`` over the items
        #: each model answered, which answers drawn on the same items share (:func:`log_weights`)
        self.answered, self.answered_log_q, self.log_weights = log_posterior(
            answers, bank.slope, bank.grid["log_q"], bank.log_prior)
        self.weights = normalised_weights(self.log_weights)

    def mean_without(self, answers: np.ndarray, bank: "ItemBank", items) -> np.ndarray:
        """The posterior means had the models not answered ``items`` (column indices of
        ``answers``, the int8 matrix this posterior was computed from): their terms taken
        out of the log weights."""
        held = answers[:, items]
        terms = ((held != 0) @ bank.grid["log_q"][items]
                 + np.multiply.outer((held > 0) @ bank.slope[items], GRID))
        return grid_moments(normalised_weights(self.log_weights - terms))[0]

    @property
    def mean(self) -> np.ndarray:
        """The posterior mean of each model's ability (EAP)."""
        return grid_moments(self.weights)[0]

    @property
    def sd(self) -> np.ndarray:
        """The posterior standard deviation of each model's ability."""
        return grid_moments(self.weights)[1]

    def answered_sums(self, values: np.ndarray) -> np.ndarray:
        """``models x grid``: for each model and grid ability, the sum of ``values``
        (``J x grid``) over the items the model answered."""
        return np.asarray(self.answered @ values)
