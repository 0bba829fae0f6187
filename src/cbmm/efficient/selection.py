"""Which k items to keep: :func:`select_items`.

Strategies (each uses only the calibration: the items' parameters and the abilities of
the calibration models, or N(0, 1) quantiles when the calibration has none):

``stratified`` (default)
    The items sorted by their expected share correct over the calibration models, cut
    into k strata of (nearly) equal size, one item drawn at random from each: a sample
    that spans the difficulties in the benchmark's own proportions.  Items the fit
    settles for every calibration model (:attr:`~cbmm.efficient.bank.ItemBank.settled`:
    in practice those they all answered alike) are left to the fit, which knows their
    answers: they are drawn only where k exceeds the other items.
``random``
    k items drawn uniformly without replacement.
``information``
    The item of maximal Fisher information at each of k ability levels spread over the
    calibration models (their quantiles at ``(i + 0.5) / k``), taken in turn.
``anchor``
    tinyBenchmarks' anchor points on the fitted model: the items clustered into k groups
    by their probability curves over the calibration abilities (k-means on the fitted
    probabilities at up to 50 ability quantiles), the item nearest each centre.
``predictive``
    Items chosen on the calibration models' answers (``responses``), as metabench chooses
    them by what they predict: forward selection, one item at a time, of the item whose
    answers most reduce the leave-one-out error of a ridge regression of the models'
    accuracy on their answers to the items chosen (coded +-1, an unanswered item at its
    mean over the models that answered it; penalty :data:`PREDICTIVE_PENALTY`).  It sees
    what the one-dimensional fit cannot (a second skill, items answered alike by models
    of one family) and is nested: the first k of a larger selection are the selection
    of k.

Which wins where (held-out models of 80/20 splits; docs/efficiency.md): on the real
MATH-500 matrices ``stratified`` gives the lowest error of predicted accuracy of the
strategies that need only the fit at 100 and 200 items (0.0214 and 0.0128 on MATH-500,
18 splits, five draws each; ``random`` 0.0219 and 0.0135) and ``information`` the
highest from 50 items on:
the most discriminating items are no sample of the items left to predict, so a model's
own departure from the 2PL on those is not seen.  On data simulated from the 2PL (where there is no
misfit) ``information`` wins at every k, by 0.003-0.005 at 100 items.  ``predictive``
wants thousands of calibration models: on five real Open LLM Leaderboard matrices
(4,000-5,500 models) it is the best at every k (GSM8K at 100 items: 0.0147 against
0.0165-0.0177 for the others); on MATH-500's 112 calibration models it gives 0.019 at
100 items (18 splits) and depends on its penalty (five splits: 0.017-0.031; 0.017-0.021
over the penalties that cross-validation on those models finds good, 70-200).  The items
it chooses make the calibration models' own errors look small: predict with
``cbmm.predict_accuracy(..., reference=<those models>, selection="predictive")``, whose
interval width is cross-validated with the selection inside (coverage 0.94-0.96 there;
the plain jackknife's, 0.92-0.93).
"""

from __future__ import annotations

import itertools

import numpy as np

from .._checks import check_integer
from .._warn import CbmmWarning, warn
from .bank import ItemBank, aligned_answers, reference_models_needed
from .tinybenchmarks import cluster_representatives

__all__ = ["select_items", "forward_selection", "draw_count", "STRATEGIES", "SEEDED_STRATEGIES",
           "PREDICTIVE_PENALTY"]

#: The strategies of :func:`select_items`; the first is the default.
STRATEGIES = ("stratified", "random", "information", "anchor", "predictive")
#: Those whose items depend on the seed, drawn again with another seed, other items: a
#: random sample (``stratified``, ``random``) or k-means from a random start (``anchor``:
#: two seeds share 36-42 of 100 items on MATH-500).
SEEDED_STRATEGIES = ("stratified", "random", "anchor")
_ANCHOR_LEVELS = 50  # ability quantiles at which the anchor strategy compares items
#: The ridge penalty of the ``predictive`` strategy's regression (answers coded +-1).  On
#: the leaderboard's GSM8K (4,033 calibration models, 100 items) 10, 100 and 1,000 gave
#: MAE 0.0148, 0.0148 and 0.0146: the choice matters little where the strategy is meant
#: for, and a penalty worth 100 models restrains it where there are few.
PREDICTIVE_PENALTY = 100.0


def select_items(result, k: int, strategy: str = "stratified", seed: int = 0, *,
                 responses=None, coding: str | None = None, layout: str = "auto"):
    """The labels of ``k`` calibrated items to keep.

    Parameters
    ----------
    result : FitResult, pandas.DataFrame or path
        The calibration (as for :func:`cbmm.score`; a bare table is read at
        temperature 1, :meth:`~cbmm.efficient.bank.ItemBank.of`).  A FitResult also gives
        the calibration models' abilities; otherwise N(0, 1) quantiles stand for them.
    k : int
        Items to keep, from 1 to the number of calibrated items.
    strategy : {"stratified", "random", "information", "anchor", "predictive"}
        See the module docstring.
    seed : int
        Seed of the random draws (stratified, random, the k-means start of anchor).
    responses : array-like, pandas.DataFrame or Responses, optional
        The ``predictive`` strategy's calibration models' answers (and only its), in any
        form :func:`cbmm.predict_accuracy` reads.  Models that answered no calibrated item
        are left out; at least 2 must remain.
    coding, layout
        As for :func:`cbmm.as_responses`, for ``responses``.

    Returns
    -------
    pandas.Index
        The item labels (as the calibration gives them: a FitResult's or a DataFrame's
        own, a file's text), in the order the strategy chose them.

    Raises
    ------
    ValueError
        An unknown strategy, a k or seed out of range, a bad calibration, ``responses``
        missing for ``predictive`` or given to another strategy, or bad responses.

    Warns
    -----
    CbmmWarning
        ``predictive``, with k beyond the items whose answers differ between the
        ``responses``' models: the rest are items they all answered alike.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    if (responses is None) == (strategy == "predictive"):
        raise ValueError("responses (the calibration models' answers) are needed by the "
                         "predictive strategy and read by no other")
    bank = ItemBank.of(result)
    k = check_integer("k", k, minimum=1, maximum=len(bank))
    seed = check_integer("seed", seed, minimum=0)
    if strategy == "predictive":
        answers, _ = aligned_answers(responses, bank, coding=coding, layout=layout)
        chosen = list(itertools.islice(forward_selection(answers), k))
        _warn_too_few_to_choose_on(int(np.count_nonzero((answers != 0).any(axis=1))))
        varying = int(_differing(answers).sum())
        if k > varying:
            warn(f"k={k}: the responses' answers differ between models on "
                 f"{varying} of the calibrated items; the other {k - varying} "
                 "chosen are items they all answered alike (or none answered), "
                 "in the bank's order", CbmmWarning)
        return bank.given_labels[chosen]
    rng = np.random.default_rng(seed)
    chosen = _STRATEGY[strategy](bank, k, rng)
    return bank.given_labels[chosen]


def draw_count(strategy: str, draws: int) -> int:
    """The draws of k items that ``draws`` asks of ``strategy``: all of them where its items
    depend on the seed (:data:`SEEDED_STRATEGIES`), one where another draw would choose
    the same items."""
    return draws if strategy in SEEDED_STRATEGIES else 1


def _random(bank, k, rng):
    return bank.label_order[rng.choice(len(bank), size=k, replace=False)]


def _stratified(bank, k, rng):
    # a settled item's answer is known before it is given: the strata span the others,
    # and settled items fill only the places k has beyond them (the real AIME's 9-11 of
    # 100 items: 25 items' held-out MAE 0.039 -> 0.037; docs/efficiency.md)
    order = bank.label_order
    unsettled, settled = order[~bank.settled[order]], order[bank.settled[order]]
    if k <= unsettled.size:
        return _strata(unsettled, k, bank.expected_share, rng)
    return np.concatenate([unsettled, _strata(settled, k - unsettled.size,
                                              bank.expected_share, rng)])


def _strata(items, k, share, rng):
    """One of ``items`` drawn from each of k strata of (nearly) equal size by ``share``
    (items of equal share in their order in ``items``)."""
    order = items[np.argsort(share[items], kind="stable")]
    edges = np.linspace(0, order.size, k + 1).round().astype(int)
    return order[rng.integers(edges[:-1], edges[1:])]


def _information(bank, k, rng):
    levels = np.quantile(bank.population(), (np.arange(k) + 0.5) / k)
    order = bank.label_order  # of items alike, the first by label
    information = bank.information(levels)[:, order]
    free = np.ones(len(bank), dtype=bool)
    chosen = []
    for row in information:
        j = int(np.argmax(np.where(free, row, -np.inf)))
        free[j] = False
        chosen.append(j)
    return order[chosen]


def _anchor(bank, k, rng):
    population = bank.population()
    levels = np.quantile(population, (np.arange(min(_ANCHOR_LEVELS, population.size)) + 0.5)
                         / min(_ANCHOR_LEVELS, population.size))
    order = bank.label_order  # clustered in label order: the k-means++ start is by position
    curves = bank.probabilities(levels).T[order]  # items x levels
    chosen, _, distance = cluster_representatives(curves, k, rng)
    # k-means may leave clusters empty (identical curves): the items worst represented
    # by their centres fill the places left
    rest = np.setdiff1d(np.arange(len(curves)), chosen)
    fill = rest[np.argsort(-distance[rest], kind="stable")[:k - len(chosen)]]
    return order[np.concatenate([chosen, fill]).astype(int)]


def _warn_too_few_to_choose_on(models: int) -> None:
    """Warn where fewer models chose the ``predictive`` items than a 0.95 interval of
    their accuracy needs as a reference (19): a regression over so few is no basis."""
    needed = reference_models_needed(0.95)
    if models < needed:
        warn(f"responses: {models} model(s) answered a calibrated item; the predictive "
             "strategy chooses the items by a regression of their accuracy over them, and "
             f"predicting with them as the reference needs at least {needed} for a 0.95 "
             "interval: with fewer, choose the items by the fit (strategy 'stratified')",
             CbmmWarning)


def forward_selection(answers, penalty: float = PREDICTIVE_PENALTY):
    """Items in the order the ``predictive`` strategy chooses them, one at a time.

    Parameters
    ----------
    answers : ndarray of int8
        Calibration models x items, +1 / -1 / 0 not answered.
    penalty : float
        The ridge penalty ``lambda`` (the strategy's is :data:`PREDICTIVE_PENALTY`;
        ``benchmarks/bench_efficiency.py --penalties`` compares others).

    Yields
    ------
    int
        The next item's position: the one whose answers most reduce the leave-one-out
        error of the ridge regression of the models' accuracy on their answers to the
        items chosen so far.  Items that every model answered alike (or none answered)
        tell the regression nothing and come last, in their order.

    Notes
    -----
    The regression of the models' accuracy ``t`` (over the items each answered) on the
    centred answers ``X_S`` of the chosen items ``S`` (+-1 less the item's mean over the
    models that answered it, 0 where a model did not), with an unpenalised intercept, has
    the hat matrix ``H = 11'/n + X_S (X_S'X_S + lambda I)^-1 X_S'`` and leave-one-out errors
    ``((I - H) t)_i / (1 - H_ii)``.  Adding item ``j`` with centred answers ``x`` adds
    ``u u' / s`` to ``H``, where ``u = (I - H) x`` and ``s = lambda + x'u`` (the block
    inverse), so every candidate's errors follow from the ``(I - H) x`` of all items,
    which one rank-one update keeps current after each choice: ``O(n J)`` a step.  The
    update and the candidates' scores are one threaded pass of the C extension
    (``cbmm._fused.loo_scores``): 0.025 s a step on 1,768 models x 12,032 items (2 cores),
    against 0.155 s for BLAS's update and the sums in blocks of NumPy operations.
    """
    x = answers[np.count_nonzero(answers, axis=1) > 0].astype(float)
    if len(x) < 2:
        raise ValueError(f"responses: {len(x)} model(s) answered a calibrated item; the "
                         "predictive strategy needs at least 2")
    from .._fused import loo_scores
    from ..engine import thread_count

    n, n_items = x.shape
    target = np.count_nonzero(x > 0, axis=1) / np.count_nonzero(x, axis=1)
    target -= target.mean()
    # centred on the models that answered each item, an unanswered one at that mean: a
    # new model answers the items it is given, so not answering must tell nothing
    answered = x != 0
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = np.nan_to_num(x.sum(axis=0) / answered.sum(axis=0))
    x = np.asfortranarray(np.where(answered, x - centre, 0.0))  # an item's answers contiguous
    residual = x.copy(order="F")  # (I - H) x of every item
    error = target.copy()  # (I - H) t
    leverage = np.full(n, 1.0 / n)  # the intercept's
    pivot = penalty + np.einsum("ij,ij->j", x, x)  # lambda + x'(I - H) x
    covariance = x.T @ target  # x'(I - H) t
    # an item answered alike by every model would tie with "no item": once no other
    # item lowers the error, MATH-500's dozen such items came first, as a block
    free = _differing(answers)
    alike = np.flatnonzero(~free)
    threads = thread_count(n * n_items, n_items)
    score = np.empty(n_items)
    gain = covariance / pivot
    # each item's sum over the models of its leave-one-out errors squared, one pass
    loo_scores(residual.T, error, 1.0 - leverage, gain, 1.0 / pivot, score, threads)
    for _ in range(int(free.sum())):
        score[~free] = np.inf
        j = int(np.argmin(score))
        free[j] = False
        yield j
        u, size = residual[:, j].copy(), pivot[j]
        shared = x.T @ u  # x'u = u'x: the rank-one update of every item's terms
        error -= u * gain[j]
        leverage += u * u / size
        covariance -= shared * (covariance[j] / size)
        pivot -= shared * shared / size
        gain = covariance / pivot
        # residual -= u shared' / size, and the next step's scores, in the same pass
        loo_scores(residual.T, error, 1.0 - leverage, gain, 1.0 / pivot, score, threads,
                   u, shared / size)
    yield from (int(j) for j in alike)


def _differing(answers) -> np.ndarray:
    """Which items some models answered right and some wrong.  The others are alike: one
    none answered, or one that every model that answered it got right (or every one
    wrong); a model that did not answer an item stands at its mean, so the item's centred
    answers are 0 throughout (a skipped cell once counted as a difference, and such items
    came among the informative ones, unwarned)."""
    return (answers > 0).any(axis=0) & (answers < 0).any(axis=0)


_STRATEGY = {"stratified": _stratified, "random": _random, "information": _information,
             "anchor": _anchor}
