"""Which k items to keep: :func:`select_items`.

Strategies (each uses only the calibration: the items' parameters and the abilities of
the calibration models, or N(0, 1) quantiles when the calibration has none):

``stratified`` (default)
    The items sorted by their expected share correct over the calibration models, cut
    into k strata of (nearly) equal size, one item drawn at random from each: a sample
    that spans the difficulties in the benchmark's own proportions.
``random``
    k items drawn uniformly without replacement.
``information``
    The item of maximal Fisher information at each of k ability levels spread over the
    calibration models (their quantiles at ``(i + 0.5) / k``), taken in turn.
``anchor``
    tinyBenchmarks' anchor points on the fitted model: the items clustered into k groups
    by their probability curves over the calibration abilities (k-means on the fitted
    probabilities at up to 50 ability quantiles), the item nearest each centre.

Which wins where (held-out models, five 80/20 splits; docs/efficiency.md): on the real
MATH-500 matrices ``stratified`` gives the lowest error of predicted accuracy at 100 and
200 items (0.022 and 0.013 on MATH-500) and ``information`` the highest from 50 items on:
the most discriminating items are no sample of the items left to predict, so a model's
own departure from the 2PL on those is not seen.  On data simulated from the 2PL (where there is no
misfit) ``information`` wins at every k, by 0.003-0.005 at 100 items.
"""

from __future__ import annotations

import numpy as np

from .._checks import check_integer
from .bank import ItemBank

__all__ = ["select_items", "STRATEGIES"]

#: The strategies of :func:`select_items`; the first is the default.
STRATEGIES = ("stratified", "random", "information", "anchor")
_ANCHOR_LEVELS = 50  # ability quantiles at which the anchor strategy compares items


def select_items(result, k: int, strategy: str = "stratified", seed: int = 0):
    """The labels of ``k`` calibrated items to keep.

    Parameters
    ----------
    result : FitResult, pandas.DataFrame or path
        The calibration (as for :func:`cbmm.score`).  A FitResult also gives the
        calibration models' abilities; otherwise N(0, 1) quantiles stand for them.
    k : int
        Items to keep, from 1 to the number of calibrated items.
    strategy : {"stratified", "random", "information", "anchor"}
        See the module docstring.
    seed : int
        Seed of the random draws (stratified, random, the k-means start of anchor).

    Returns
    -------
    pandas.Index
        The item labels, in the order the strategy chose them.

    Raises
    ------
    ValueError
        An unknown strategy, a k or seed out of range, or a bad calibration.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    bank = ItemBank.of(result)
    k = check_integer("k", k, minimum=1, maximum=len(bank))
    seed = check_integer("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    chosen = _STRATEGY[strategy](bank, k, rng)
    return bank.labels[chosen]


def _random(bank, k, rng):
    return rng.choice(len(bank), size=k, replace=False)


def _stratified(bank, k, rng):
    share = bank.probabilities(bank.population()).mean(axis=0)
    order = np.argsort(share, kind="stable")
    edges = np.linspace(0, len(bank), k + 1).round().astype(int)
    return order[rng.integers(edges[:-1], edges[1:])]


def _information(bank, k, rng):
    levels = np.quantile(bank.population(), (np.arange(k) + 0.5) / k)
    information = bank.information(levels)
    free = np.ones(len(bank), dtype=bool)
    chosen = []
    for row in information:
        j = int(np.argmax(np.where(free, row, -np.inf)))
        free[j] = False
        chosen.append(j)
    return np.array(chosen)


def _anchor(bank, k, rng):
    from scipy.cluster.vq import kmeans2

    population = bank.population()
    levels = np.quantile(population, (np.arange(min(_ANCHOR_LEVELS, population.size)) + 0.5)
                         / min(_ANCHOR_LEVELS, population.size))
    curves = bank.probabilities(levels).T  # items x levels
    centres, cluster = kmeans2(curves, k, minit="++", seed=rng)
    distance = ((curves - centres[cluster]) ** 2).sum(axis=1)
    chosen = []
    for c in np.unique(cluster):
        members = np.flatnonzero(cluster == c)
        chosen.append(members[np.argmin(distance[members])])
    # k-means may leave clusters empty (identical curves): the items worst represented
    # by their centres fill the places left
    rest = np.setdiff1d(np.arange(len(bank)), chosen)
    chosen += list(rest[np.argsort(-distance[rest], kind="stable")[:k - len(chosen)]])
    return np.array(chosen)


_STRATEGY = {"stratified": _stratified, "random": _random, "information": _information,
             "anchor": _anchor}
