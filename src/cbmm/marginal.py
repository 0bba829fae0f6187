"""Marginal maximum likelihood of the 2PL: the abilities integrated out (Bock-Aitkin EM).

A joint fit (cBMM, L-BFGS-B, Manopt) estimates every ability from its model's J
answers, and that noise biases the items' estimates where models answer few items
(the incidental-parameter problem; docs/trust.md: on the leaderboard's MMLU shape,
4,278 models x 102 items, a's 95 % intervals covered 0.26).  The marginal likelihood
integrates each ability out over the models' population, so the items' estimates are
consistent as models are added, and their standard errors hold.

With ``alpha = a / sigma``, ``beta = b / sigma`` and the abilities on a grid of ``Q``
nodes ``t_q`` with weights ``w_q`` (N(0, 1)'s on [-6, 6], R's mirt's grid, or an
estimated histogram: :func:`fit_marginal`), model i's marginal log-likelihood is

    l_i = log sum_q w_q prod_{j observed} p_jq^[y_ij = 1] (1 - p_jq)^[y_ij = -1],
    p_jq = expit(alpha_j t_q + beta_j).

**EM.**  The E-step gives each model's posterior over the nodes; the M-step then
maximises, item by item, the expected complete log-likelihood
``sum_q r_jq log p_jq + (n_jq - r_jq) log(1 - p_jq)`` (``r``: expected correct answers
at node q, ``n``: expected answers) over ``alpha_j >= 0`` and ``beta_j``: a weighted
logistic regression on Q points, concave, solved by projected Newton steps with a
backtracking line search.  Each EM cycle raises the marginal likelihood.

**Stopping.**  The paper's rule on the marginal loss ``-sum_i l_i`` (relative change
< tol), counted only once the marginal gradient (Fisher's identity: the expected
complete-data score) is within :data:`cbmm.diagnostics.STATIONARY_BELOW` of its
one-at-a-time standard error (the observed information's diagonal) in every item
parameter; ``converged`` is then an optimum.

**Runaway items.**  Where an item's answers order the models by ability almost
perfectly, its likelihood rises without bound as its slope grows.  Past
:data:`MAX_SLOPE` the item is held where it is while the others converge, and the fit is
``unbounded`` (``info["runaway_items"]``); the others' standard errors are given with it
held.

**Abilities.**  Posterior means (EAP) and posterior standard deviations under the
fitted items (here on the histogram's nodes; the ``mml`` method reports them under the
population smoothed, :func:`cbmm.posterior.prior_on_grid`).  The scale is the
population's: the item parameters are not rescaled to the posterior means' spread, which
shrink toward 0.

**Standard errors of the items** (:func:`item_standard_errors`): the observed
information of the marginal likelihood by Louis' formula, the expected complete-data
information less the posterior variance of the complete-data score,

    I = sum_q n_jq p_jq (1 - p_jq) [t_q^2, t_q; t_q, 1]  (block diagonal)
        - sum_i Var_post( s_i(theta) ),   s_i(theta)_j = [y_ij = 1] - p_j(theta)) (theta, 1),

exact at any point and positive definite at a maximum; inverted over the free
parameters (an ``alpha_j`` held at 0 has none, as in :mod:`cbmm.inference`).
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from ._checks import is_integer
from .diagnostics import STATIONARY_BELOW
from .model import expit
from .result import SolverOutput
from .stopping import relative_change

__all__ = ["GRID_HALF_WIDTH", "MAX_NODE_STEP", "MAX_SLOPE", "MAX_QUADRATURE_POINTS", "MAX_SE_ITEMS",
           "POPULATIONS", "QUADRATURE_POINTS", "checked_population", "fit_marginal",
           "item_standard_errors", "log_density", "negative_marginal_loglik",
           "observed_information", "quadrature", "solve_marginal"]

#: The abilities' distributions :func:`solve_marginal` fits.
POPULATIONS = ("histogram", "normal")
#: Nodes of the ability grid (R's mirt: 61 for one dimension).
QUADRATURE_POINTS = 61
#: The grid spans [-GRID_HALF_WIDTH, GRID_HALF_WIDTH] (mirt's default).
GRID_HALF_WIDTH = 6.0
#: ``n_quad="auto"`` refines the grid until the steepest item's logit changes by at most
#: this much from one node to the next ...
MAX_NODE_STEP = 1.0
#: ... with at most this many nodes.
MAX_QUADRATURE_POINTS = 401
#: A slope ``a / sigma`` above this many logits per sd of the population is a step, not an
#: estimate: the item's answers split the models by ability (almost) perfectly, and its
#: marginal likelihood rises without bound as the slope grows.
MAX_SLOPE = 50.0
#: :func:`item_standard_errors` inverts a 2J x 2J matrix: up to this many items.
MAX_SE_ITEMS = 8192

_NEWTON_STEPS = 8      # projected Newton steps per M-step, at most
_NO_GAIN = 1e-13       # relative gain of an item's objective below which it has converged
_NEGLIGIBLE = 1e-12    # posterior weight of a node below which it adds nothing to the SEs
_GATHERED = 1 << 22    # values per block of the stopping check's products (32 MB)
_LOG_FLOOR = -700.0    # log weight of an empty node of the histogram (its exp is > 0)
_NEW_NODE = math.log(1e-9)  # log weight of a node added at the grid's ends (EM can fill it)
# a grid is refined to this share of MAX_NODE_STEP: its spacing moves with the histogram's
# scale every cycle, and one refined to the bound exactly was refined again by a node
# (on Winogrande's shape 375 more cycles for one node)
_REFINED_SHARE = 0.8


def quadrature(n_points: int = QUADRATURE_POINTS):
    """The ability grid: ``n_points`` equally spaced nodes on [-6, 6] and their
    normalised N(0, 1) weights (log)."""
    nodes = np.linspace(-GRID_HALF_WIDTH, GRID_HALF_WIDTH, n_points)
    log_w = -0.5 * nodes ** 2
    log_w -= np.logaddexp.reduce(log_w)
    return nodes, log_w


class _Answers:
    """The observed answers as two 0/1 matrices (correct, answered), dense or CSR."""

    def __init__(self, responses):
        if responses.storage == "sparse":
            import scipy.sparse

            n, j = responses.shape
            shape = (n, j)
            parts = (responses.indices, responses.indptr)
            self.correct = scipy.sparse.csr_array(
                ((responses.values > 0).astype(float), *parts), shape=shape)
            self.answered = scipy.sparse.csr_array(
                (np.ones(responses.values.size), *parts), shape=shape)
        else:
            y = responses.y
            self.correct = (y > 0).astype(float)
            self.answered = (y != 0).astype(float)

    def log_joint(self, log_p, log_q):
        """``N x Q``: each model's log-likelihood of its answers at every node
        (``log_p``, ``log_q``: ``J x Q`` log-probabilities of a correct and a wrong answer)."""
        return self.correct @ (log_p - log_q) + self.answered @ log_q

    def expected(self, posterior):
        """``J x Q`` expected correct answers and expected answers at each node."""
        return self.correct.T @ posterior, self.answered.T @ posterior

    def dense(self):
        """``(correct, answered)`` as dense ``N x J`` arrays."""
        if isinstance(self.correct, np.ndarray):
            return self.correct, self.answered
        return self.correct.toarray(), self.answered.toarray()


def _log_probabilities(alpha, beta, nodes):
    x = np.outer(alpha, nodes) + beta[:, None]
    return -np.logaddexp(0.0, -x), -np.logaddexp(0.0, x)


def _e_step(answers, alpha, beta, nodes, log_w):
    """Posterior over the nodes (``N x Q``) and the marginal log-likelihood."""
    log_post = answers.log_joint(*_log_probabilities(alpha, beta, nodes)) + log_w
    top = log_post.max(axis=1, keepdims=True)
    post = np.exp(log_post - top)
    total = post.sum(axis=1, keepdims=True)
    post /= total
    return post, float((top[:, 0] + np.log(total[:, 0])).sum())


def _item_objective(alpha, beta, correct, answered, nodes):
    """Per item: the expected complete log-likelihood at ``(alpha, beta)``."""
    log_p, log_q = _log_probabilities(alpha, beta, nodes)
    return (correct * log_p + (answered - correct) * log_q).sum(axis=1)


def _score_information(alpha, beta, correct, answered, nodes):
    """Per item: the complete-data score ``(g_alpha, g_beta)`` and information
    ``(h_aa, h_ab, h_bb)`` given expected counts (Fisher's identity: at the posterior of
    the same point, the score is the marginal likelihood's gradient)."""
    p = expit(np.outer(alpha, nodes) + beta[:, None])
    residual = correct - answered * p
    weight = answered * p * (1.0 - p)
    return ((residual * nodes).sum(1), residual.sum(1),
            (weight * nodes ** 2).sum(1), (weight * nodes).sum(1), weight.sum(1))


def _m_step(alpha, beta, correct, answered, nodes):
    """Maximise each item's expected complete log-likelihood over ``alpha >= 0``, ``beta``:
    projected Newton steps with backtracking (an item whose ``alpha`` is held at 0 while
    its score pushes it below moves in ``beta`` alone)."""
    current = _item_objective(alpha, beta, correct, answered, nodes)
    for _ in range(_NEWTON_STEPS):
        g_a, g_b, h_aa, h_ab, h_bb = _score_information(alpha, beta, correct, answered, nodes)
        det = h_aa * h_bb - h_ab ** 2
        held = (alpha <= 0) & (g_a <= 0) | ~(det > 1e-12 * np.maximum(h_aa * h_bb, 1e-300))
        with np.errstate(divide="ignore", invalid="ignore"):
            step_a = np.where(held, 0.0, (h_bb * g_a - h_ab * g_b) / det)
            step_b = np.where(held, g_b / h_bb, (h_aa * g_b - h_ab * g_a) / det)
        step_a, step_b = np.nan_to_num(step_a), np.nan_to_num(step_b)
        # items whose Newton step promises next to nothing are at their maximum: a step
        # there can lose to rounding, and would be halved in vain
        moving = g_a * step_a + g_b * step_b > _NO_GAIN * (1.0 + np.abs(current))
        if not moving.any():
            break
        length = np.ones_like(alpha)
        for _ in range(40):
            trial_a = np.maximum(alpha + length * step_a, 0.0)
            trial_b = beta + length * step_b
            value = _item_objective(trial_a, trial_b, correct, answered, nodes)
            better = moving & (value >= current)
            alpha = np.where(better, trial_a, alpha)
            beta = np.where(better, trial_b, beta)
            current = np.where(better, value, current)
            moving &= ~better
            if not moving.any():
                break
            length = np.where(moving, length / 2, length)
    return alpha, beta


def _scaled_gradient(answers, post, alpha, beta, nodes, *, exact=True) -> float:
    """The marginal gradient's largest component in units of its one-at-a-time standard
    error (:func:`_observed_diagonal`), projected onto ``alpha >= 0``; runaway items
    (:data:`MAX_SLOPE`) left out.  ``post``: the posterior at ``(alpha, beta)``.
    ``exact=False`` returns the cheaper value in units of the complete-data information
    (never larger than the observed's) where that already exceeds
    :data:`~cbmm.diagnostics.STATIONARY_BELOW`: enough to go on."""
    counts = answers.expected(post)
    g_a, g_b, h_aa, _, h_bb = _score_information(alpha, beta, *counts, nodes)
    g_a = np.where((alpha <= 0) & (g_a < 0), 0.0, g_a)
    runaway = alpha > MAX_SLOPE
    g_a, g_b = np.where(runaway, 0.0, g_a), np.where(runaway, 0.0, g_b)

    def largest(d_aa, d_bb):
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.concatenate([np.abs(g_a) / np.sqrt(d_aa), np.abs(g_b) / np.sqrt(d_bb)])
        return float(np.where(np.isnan(scaled), 0.0, scaled).max(initial=0.0))  # 0/0: none

    bound = largest(h_aa, h_bb)
    if not exact and bound > STATIONARY_BELOW:
        return bound
    return largest(*_observed_diagonal(answers, post, counts, alpha, beta, nodes))


def _observed_diagonal(answers, post, counts, alpha, beta, nodes, gathered=_GATHERED):
    """The diagonal of :func:`observed_information` (``alpha`` part, ``beta`` part) at
    the cost of a few E-steps (dense or sparse): where the marginal likelihood is flat
    along the items' common shifts (models answering hundreds of items), the complete-data
    information overstates it, and a gradient in its units looked smaller than it is.
    ``counts``: ``answers.expected(post)``, which the caller has.  A component that is not
    positive (not a maximum along it) is 0, so that any gradient there is infinitely many
    standard errors."""
    p = expit(np.outer(alpha, nodes) + beta[:, None])   # J x Q
    correct, answered = counts
    weight = answered * p * (1.0 - p)
    # sum_i E_post[s_ij^2]: with 0/1 answers (c - n p)^2 = c (1 - 2 p) + n p^2
    second = correct * (1.0 - 2.0 * p) + answered * p * p
    d_aa = (weight * nodes ** 2).sum(1) - (second * nodes ** 2).sum(1)
    d_bb = weight.sum(1) - second.sum(1)
    # + sum_i E_post[s_ij]^2: a cell not answered adds 0.  Dense answers by blocks of
    # models (products of matrices, as the E-step); sparse ones by blocks of their answered
    # cells (on 20,000 x 2,000 at 1 % the blocks of models cost 32 E-steps)
    mean_t = post @ nodes
    if isinstance(answers.correct, np.ndarray):
        rows = max(1, gathered // alpha.size)
        for start in range(0, post.shape[0], rows):
            block = slice(start, start + rows)
            c, n = answers.correct[block], answers.answered[block]
            d_bb += ((c - n * (post[block] @ p.T)) ** 2).sum(0)
            d_aa += ((c * mean_t[block, None] - n * (post[block] @ (nodes[:, None] * p.T)))
                     ** 2).sum(0)
        return np.maximum(d_aa, 0.0), np.maximum(d_bb, 0.0)
    counts = np.diff(answers.answered.indptr)
    models = np.repeat(np.arange(counts.size), counts)
    items, right = answers.answered.indices, answers.correct.data
    cells = max(1, gathered // nodes.size)
    for start in range(0, models.size, cells):
        model, item = models[start:start + cells], items[start:start + cells]
        expected_p = np.einsum("kq,kq->k", post[model], p[item])
        expected_tp = np.einsum("kq,kq->k", post[model], p[item] * nodes)
        d_bb += np.bincount(item, (right[start:start + cells] - expected_p) ** 2,
                            minlength=alpha.size)
        d_aa += np.bincount(item, (right[start:start + cells] * mean_t[model] - expected_tp)
                            ** 2, minlength=alpha.size)
    return np.maximum(d_aa, 0.0), np.maximum(d_bb, 0.0)


def solve_marginal(responses, a0, b0, *, sigma=1.0, tol=1e-6, max_iter=1000,
                   n_quad="auto", population="histogram", progress=None):
    """Fit the 2PL by marginal maximum likelihood (:func:`fit_marginal`) on a grid fine
    enough for its items.

    ``n_quad="auto"``: :data:`QUADRATURE_POINTS` nodes, then, while the steepest item's
    logit changes by more than :data:`MAX_NODE_STEP` from one node to the next (the sum
    over the grid then misses the integral: steep items and a narrow population), EM goes
    on from there on a grid a little finer than that (the histogram carried over), of at most
    :data:`MAX_QUADRATURE_POINTS` nodes.
    ``info["n_quad"]`` is the grid used; ``n_iter`` and ``loss_history`` count both fits.
    An integer ``n_quad`` fixes the grid.  The other parameters are
    :func:`fit_marginal`'s.
    """
    run = functools.partial(fit_marginal, responses, sigma=sigma, tol=tol,
                            population=population, progress=progress)
    if n_quad != "auto":
        return _judged(run(a0, b0, max_iter=max_iter, n_quad=n_quad), sigma)
    out = run(a0, b0, max_iter=max_iter, n_quad=QUADRATURE_POINTS)
    while not out.status.startswith("failed") and out.n_iter < max_iter:
        nodes = np.asarray(out.info["population"]["nodes"])
        slopes = np.asarray(out.a, dtype=float) / sigma
        step = float(np.max(slopes[slopes <= MAX_SLOPE], initial=0.0)) * (nodes[1] - nodes[0])
        if step <= MAX_NODE_STEP or nodes.size >= MAX_QUADRATURE_POINTS:
            break
        n_quad = min(MAX_QUADRATURE_POINTS,
                     math.ceil(nodes.size * step / (_REFINED_SHARE * MAX_NODE_STEP)))
        finer = run(out.a, out.b, max_iter=max_iter - out.n_iter, n_quad=n_quad,
                    start_population=out.info["population"])
        finer.n_iter += out.n_iter
        finer.loss_history = out.loss_history + finer.loss_history[1:]
        finer.runtime_s += out.runtime_s
        out = finer
    return _judged(out, sigma)


def _judged(out, sigma):
    """``unbounded`` where an item's slope passed :data:`MAX_SLOPE` (listed, by column, in
    ``info["runaway_items"]``): its estimate is wherever EM stopped."""
    runaway = np.flatnonzero(np.asarray(out.a, dtype=float) / sigma > MAX_SLOPE)
    if runaway.size and not out.status.startswith("failed"):
        out.status = "unbounded"
        out.info["runaway_items"] = runaway.tolist()
        out.info["status_reason"] = (
            f"no finite maximum: {runaway.size} item(s) whose slopes passed {MAX_SLOPE:g} "
            "logits per sd of the abilities and grow without bound (their answers split the "
            "models by ability almost perfectly)")
    return out


def fit_marginal(responses, a0, b0, *, sigma=1.0, tol=1e-6, max_iter=1000,
                 n_quad=QUADRATURE_POINTS, population="histogram", progress=None,
                 start_population=None):
    """Fit the 2PL by marginal maximum likelihood (Bock-Aitkin EM; module docstring).

    Parameters
    ----------
    responses : cbmm.Responses
        +-1/0 coding (0 = missing), dense or sparse (CSR).
    a0, b0 : ndarray
        Start of the items (``a0 >= 0``); the abilities are integrated out.
    sigma : float
        Temperature: the solver works on ``a / sigma`` and ``b / sigma``.
    tol : float
        Relative change of the marginal loss below which, once stationary, EM stops.
    max_iter : int
        EM cycles, at most.
    n_quad : int
        Nodes of the ability grid.
    population : {"normal", "histogram"}
        The abilities' distribution: ``N(0, 1)``, or its weights on the grid estimated
        with the items (an empirical histogram: each cycle's weights are the models'
        mean posterior, and the grid is moved to their mean 0 and sd 1, the items with
        it, which leaves the likelihood as it was and fixes the scale; where that shrinks
        the grid it is extended, at its spacing, back to +-:data:`GRID_HALF_WIDTH`).
    progress : callable, optional
        ``progress(cycle, marginal_loss)`` after each cycle.
    start_population : dict, optional
        A histogram to start from (another fit's ``info["population"]``), its density
        interpolated onto ``n_quad`` nodes over the same range.

    Returns
    -------
    SolverOutput
        ``theta`` the EAP abilities, ``a``, ``b`` the items, ``loss_history`` the marginal
        loss ``-sum_i l_i`` after each cycle (first entry: the start); ``info``:
        ``marginal_loglik``, ``scaled_gradient_marginal`` (in standard errors),
        ``population`` (its ``kind``, ``nodes`` and ``weights``, which the standard
        errors and posterior sds use).
    """
    started = time.perf_counter()
    nodes, log_w = quadrature(n_quad)
    if start_population is not None and population == "histogram":
        given, given_log_w = _population(start_population)
        nodes = np.linspace(given[0], given[-1], n_quad)
        log_w = np.interp(nodes, given, given_log_w)
        log_w -= np.logaddexp.reduce(log_w)
    answers = _Answers(responses)
    alpha = np.maximum(np.asarray(a0, dtype=float) / sigma, 0.0)
    beta = np.asarray(b0, dtype=float) / sigma
    post, loglik = _e_step(answers, alpha, beta, nodes, log_w)
    history = [-loglik]
    status, cycle, scaled = "max_iter", 0, math.inf
    while cycle < max_iter:
        correct, answered = answers.expected(post)
        # a runaway item is held where it is: the others converge given it
        held = alpha > MAX_SLOPE
        moved = _m_step(alpha, beta, correct, answered, nodes)
        alpha, beta = np.where(held, alpha, moved[0]), np.where(held, beta, moved[1])
        if population == "histogram":
            with np.errstate(divide="ignore"):
                log_w = np.maximum(np.log(post.mean(axis=0)), _LOG_FLOOR)
            log_w -= np.logaddexp.reduce(log_w)
            nodes, alpha, beta = _standardised(nodes, np.exp(log_w), alpha, beta)
            nodes, log_w = _extended(nodes, log_w, max(MAX_QUADRATURE_POINTS, n_quad))
        post, loglik = _e_step(answers, alpha, beta, nodes, log_w)
        cycle += 1
        history.append(-loglik)
        if progress is not None:
            progress(cycle, -loglik)
        if not math.isfinite(loglik):
            status = "failed: non-finite marginal likelihood"
            break
        if relative_change(history[-2], history[-1]) < tol:
            scaled = _scaled_gradient(answers, post, alpha, beta, nodes, exact=False)
            if scaled <= STATIONARY_BELOW:
                status = "converged"
                break
    if status != "converged":   # the last check's may be the bound (exact=False)
        scaled = _scaled_gradient(answers, post, alpha, beta, nodes)
    # an item answered all alike has no finite maximum (its beta runs off while alpha
    # falls toward 0, where EM leaves it at 1e-16 or so): alpha is 0, as a held item's
    alpha[responses.degenerate_items()] = 0.0
    weights = np.exp(log_w)
    info = {"marginal_loglik": loglik, "scaled_gradient_marginal": scaled, "n_quad": nodes.size,
            "population": {"kind": population, "nodes": nodes.tolist(),
                           "weights": weights.tolist(), "n_models": int(responses.shape[0])}}
    return SolverOutput(theta=post @ nodes, a=sigma * alpha, b=sigma * beta,
                        loss_history=history, n_iter=cycle, status=status,
                        runtime_s=time.perf_counter() - started, info=info)


def _standardised(nodes, weights, alpha, beta):
    """The grid moved to the population's mean 0 and sd 1, the items with it: the same
    likelihood (``alpha t + beta`` at every node unchanged), the scale identified."""
    mean = weights @ nodes
    sd = np.sqrt(weights @ (nodes - mean) ** 2)
    return (nodes - mean) / sd, alpha * sd, beta + alpha * mean


def _extended(nodes, log_w, most):
    """The grid extended, at its spacing, back out to [-GRID_HALF_WIDTH, GRID_HALF_WIDTH]
    where standardising shrank it (a histogram whose sd on the grid exceeds 1), the new
    nodes' weights :data:`_NEW_NODE`: otherwise the grid's ends close in on the population's
    tails cycle by cycle, and the models beyond them pile up on the end nodes.  It is
    extended to ``most`` nodes at most, each end in proportion to its shortfall: where the
    histogram's scale keeps growing (a population without a finite maximum), the grid
    grew every cycle, and each cycle's cost with it (on the leaderboard's MMLU, 61 nodes
    to 939 over 661 cycles).  (Coarsening the grid instead, to keep its range, blurred the
    models' cluster that such items split and lost likelihood every cycle.)"""
    step = nodes[1] - nodes[0]
    below = max(0, math.ceil((nodes[0] + GRID_HALF_WIDTH) / step - 1e-9))
    above = max(0, math.ceil((GRID_HALF_WIDTH - nodes[-1]) / step - 1e-9))
    if not (below or above):
        return nodes, log_w
    room = max(0, most - nodes.size)
    if below + above > room:
        below = round(room * below / (below + above))
        above = room - below
        if not (below or above):
            return nodes, log_w
    nodes = np.concatenate([nodes[0] - step * np.arange(below, 0, -1), nodes,
                            nodes[-1] + step * np.arange(1, above + 1)])
    log_w = np.concatenate([np.full(below, _NEW_NODE), log_w, np.full(above, _NEW_NODE)])
    return nodes, log_w - np.logaddexp.reduce(log_w)


def _population(population):
    """``(nodes, log_weights)`` of a fit's ``info["population"]``."""
    with np.errstate(divide="ignore"):
        return (np.asarray(population["nodes"], dtype=float),
                np.log(np.asarray(population["weights"], dtype=float)))


def checked_population(population, where):
    """A fit's ``info["population"]`` as read from ``where`` (a file, a DataFrame's
    ``attrs``), checked: ``kind`` one of :data:`POPULATIONS`, at least two equally spaced
    increasing ``nodes`` and as many ``weights``, non-negative and summing to 1, and
    ``n_models`` (the models it was estimated from; written since 2026-12-06) a whole
    number >= 1 where given."""
    problem = None
    try:
        kind = population["kind"]
        nodes = np.asarray(population["nodes"], dtype=float)
        weights = np.asarray(population["weights"], dtype=float)
    except (TypeError, KeyError, ValueError) as exc:
        problem = f"expected kind, nodes and weights ({type(exc).__name__}: {exc})"
    else:
        steps = np.diff(nodes) if nodes.ndim == 1 else np.array([])
        if kind not in POPULATIONS:
            problem = f"kind {kind!r} is not one of {list(POPULATIONS)}"
        elif nodes.ndim != 1 or nodes.size < 2 or weights.shape != nodes.shape:
            problem = (f"{nodes.size} nodes and {weights.size} weights; expected as many "
                       "of each, at least two")
        elif not (np.isfinite(nodes).all() and steps.min() > 0
                  and np.allclose(steps, steps[0], rtol=1e-6, atol=0.0)):
            problem = "its nodes are not finite, increasing and equally spaced"
        elif not (np.isfinite(weights).all() and weights.min() >= 0
                  and math.isclose(weights.sum(), 1.0, rel_tol=1e-6)):
            problem = "its weights are not non-negative numbers summing to 1"
        elif "n_models" in population and not is_integer(population["n_models"], 1):
            problem = f"n_models {population['n_models']!r} is not a whole number >= 1"
    if problem:
        raise ValueError(f"{where}: the calibration's population is not one a fit writes "
                         f"({problem}); the file was edited or damaged")
    checked = {"kind": kind, "nodes": nodes.tolist(), "weights": weights.tolist()}
    if "n_models" in population:
        checked["n_models"] = int(population["n_models"])
    return checked


def log_density(population, points):
    """The log prior mass, up to a constant, of a fit's population (its
    ``info["population"]``) in the cells of equally spaced ``points`` (half a spacing each
    side): N(0, 1)'s density at them for ``kind="normal"``; for an estimated histogram,
    each node's weight spread evenly over its bin (half a node spacing each side) and
    integrated exactly over each cell, so that a bin keeps its weight however many points
    it covers (taking each point's bin's weight gave a bin of 2.8 points' width 2 or 3 of
    them, a third of its mass more or less), with the floor of an empty node's weight in
    cells with none."""
    points = np.asarray(points, dtype=float)
    if population["kind"] == "normal":
        return -0.5 * points ** 2
    nodes, log_w = _population(population)
    half_bin = (nodes[1] - nodes[0]) / 2
    edges = np.append(nodes - half_bin, nodes[-1] + half_bin)
    cumulative = np.concatenate([[0.0], np.cumsum(np.exp(log_w))])
    half_cell = (points[1] - points[0]) / 2 if points.size > 1 else half_bin
    mass = (np.interp(points + half_cell, edges, cumulative)
            - np.interp(points - half_cell, edges, cumulative))
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(np.maximum(mass, 0.0)), _LOG_FLOOR)


def item_standard_errors(responses, a, b, population, *, sigma=1.0):
    """Standard errors of a marginal fit's items from Louis' observed information.

    Parameters
    ----------
    responses : cbmm.Responses
    a, b : ndarray
        The items (``a >= 0``) on the population's scale.
    population : dict
        The fit's ``info["population"]`` (``nodes``, ``weights``), taken as known.
    sigma : float

    Returns
    -------
    a_se, b_se : ndarray (J,)
        NaN for an ``a_j`` held at 0 (its ``b_j`` keeps one), for both of an item whose slope
        ran away (above :data:`MAX_SLOPE`; the others' are given it held where it is) or
        that every model answered alike (its ``b_j`` runs off: no finite maximum), and for
        parameters the data carry no information on.

    Raises
    ------
    ValueError
        More than :data:`MAX_SE_ITEMS` items.
    numpy.linalg.LinAlgError
        The information is not positive definite (not a maximum).
    """
    n, j = responses.shape
    if j > MAX_SE_ITEMS:
        raise ValueError(f"marginal standard errors for {j} items need a {2 * j} x {2 * j} "
                         f"matrix; at most {MAX_SE_ITEMS} items (use cbmm.bootstrap instead)")
    alpha = np.asarray(a, dtype=float) / sigma
    information = observed_information(responses, alpha, np.asarray(b, dtype=float) / sigma,
                                       *_population(population))
    bounded = alpha <= MAX_SLOPE   # a runaway item has no finite estimate to bound,
    bounded[responses.degenerate_items()] = False   # nor has one answered all alike
    free = np.concatenate([(alpha > 0) & bounded, bounded])
    free &= np.diag(information) > 0
    root = np.linalg.cholesky(information[np.ix_(free, free)])
    inverse_root = np.linalg.solve(root, np.eye(root.shape[0]))
    variance = np.full(2 * j, np.nan)
    variance[free] = np.einsum("ij,ij->j", inverse_root, inverse_root)
    return sigma * np.sqrt(variance[:j]), sigma * np.sqrt(variance[j:])


def observed_information(responses, alpha, beta, nodes, log_w):
    """The marginal likelihood's observed information in ``(alpha, beta)`` (Louis' formula;
    module docstring) with the population (``nodes``, log weights ``log_w``) known:
    ``2J x 2J``, the alphas first.  Exact at any point: the negative Hessian of the marginal
    log-likelihood, whose finite differences it matches."""
    j = responses.shape[1]
    answers = _Answers(responses)
    post, _ = _e_step(answers, alpha, beta, nodes, log_w)
    correct, answered = answers.dense()
    p = expit(np.outer(alpha, nodes) + beta[:, None])   # J x Q
    # the complete-data information, expected under the posterior: a 2 x 2 block per item
    counts = answered.T @ post
    weight = counts * p * (1.0 - p)
    h_aa, h_ab, h_bb = (weight * nodes ** 2).sum(1), (weight * nodes).sum(1), weight.sum(1)
    # sum_i E_post[s s^T]: per node, the residuals' weighted cross-products
    second = np.zeros((3, j, j))   # weights 1, t, t^2
    for q, t in enumerate(nodes):
        rows = post[:, q] > _NEGLIGIBLE
        if not rows.any():
            continue
        residual = (correct[rows] - answered[rows] * p[:, q]) * np.sqrt(post[rows, q])[:, None]
        cross = residual.T @ residual
        second += np.array([1.0, t, t * t])[:, None, None] * cross
    # sum_i E_post[s] E_post[s]^T
    mean_b = correct - answered * (post @ p.T)
    mean_a = correct * (post @ nodes)[:, None] - answered * (post @ (nodes[:, None] * p.T))
    means = np.hstack([mean_a, mean_b])
    information = -(np.block([[second[2], second[1]], [second[1], second[0]]])
                    - means.T @ means)
    information[np.arange(j), np.arange(j)] += h_aa
    information[np.arange(j), j + np.arange(j)] += h_ab
    information[j + np.arange(j), np.arange(j)] += h_ab
    information[j + np.arange(j), j + np.arange(j)] += h_bb
    return information


def negative_marginal_loglik(out) -> float:
    """What a marginal-likelihood method minimises, for comparing its starts
    (``Method.objective`` of ``mml`` and ``mirt``): minus ``info["marginal_loglik"]`` of
    a solver output; NaN where the fit failed or did not report it."""
    value = out.info.get("marginal_loglik") if not out.status.startswith("failed") else None
    try:
        return -float(value)
    except (TypeError, ValueError):
        return float("nan")
