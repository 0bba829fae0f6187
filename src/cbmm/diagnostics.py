"""Is a fit an answer?  Stationarity in standard errors, unbounded directions, set-aside rows.

A method's own stopping rule says when it stopped, not whether it got anywhere: the
paper's relative-loss rule ends plain MM where theta and a are strongly coupled while
some parameters are still several standard errors from their optimum, and on data with
no finite optimum (loss (3) alone: items or models answered all-correct or all-wrong,
items that the abilities separate perfectly) every method "converges" while parameters
run away.  :func:`cbmm.fit` therefore judges every fit the same way, after the method:

* :func:`scaled_gradient`: the largest component of the objective's (projected)
  gradient in units of its parameter's standard error, ``max_k |g_k| / sqrt(F_kk)``
  with ``F`` the diagonal of the Fisher information (plus the prior's curvature).  To
  first order ``g_k / F_kk`` is how far parameter k is from its optimum with the others
  held, so the measure is that distance in standard errors.  A fit is ``converged``
  only when it is at most :data:`STATIONARY_BELOW`: the optimisation error is then
  negligible next to the statistical one.
* :func:`separation` (maximum likelihood only): items whose correct answers all come
  from abler models than their wrong ones (the loss falls without bound as their ``a``
  grows), and models whose answers on the discriminating items (``a > 0``) are all
  correct or all wrong (their theta runs to +-inf).  With the normal prior
  (:class:`cbmm.model.Penalty`) the objective is coercive and neither can happen.
* :func:`identified_core`: the models and items left after setting aside, repeatedly,
  those answered all-correct or all-wrong (``degenerate="set_aside"``).
* :func:`components`: the groups of models and items that the observed answers link;
  abilities in different groups are compared by the prior (or the population) alone.
"""

from __future__ import annotations

import numpy as np

from .engine import Objective
from .model import fit_measures
from .prior import Penalty

__all__ = ["STATIONARY_BELOW", "identified_core", "scaled_gradient", "separation"]

#: A fit is ``converged`` when :func:`scaled_gradient` is at most this: every parameter
#: within about 1 % of its standard error of its optimum (the others held).
STATIONARY_BELOW = 1e-2


def scaled_gradient(theta, a, b, responses, sigma: float = 1.0, penalty: Penalty | None = None,
                    gradient=None) -> float:
    """The largest gradient component in units of its parameter's standard error.

    Parameters
    ----------
    theta, a, b : ndarray
        The point, in the solver's parametrisation under a prior (the penalty is not
        invariant), or any equivalent one without (loss (3) is: :func:`cbmm.fit`
        passes the canonical form).
    responses : Responses
    sigma : float
    penalty : cbmm.model.Penalty, optional
    gradient : tuple of ndarray, optional
        The gradient of loss (3) plus the penalty with respect to
        ``(theta, a / sigma, b / sigma)`` at the point
        (:func:`cbmm.model.fit_measures`), if already computed.

    Returns
    -------
    float
        ``max_k |g_k| / sqrt(F_kk)`` over ``(theta, a / sigma, b / sigma)``, where ``g``
        is that gradient projected onto ``a >= 0`` (a component ``a_j = 0`` pushed below
        zero counts as 0), and ``F`` the diagonal of the Fisher information plus the
        penalty's curvature.  A component with no information (``F_kk = 0``) counts as
        inf unless its gradient vanishes.
    """
    penalty = penalty or Penalty()
    theta, a, b = (np.ascontiguousarray(v, dtype=float) for v in (theta, a, b))
    objective = Objective(responses, sigma, penalty)
    if gradient is None:
        gradient = fit_measures(theta, a, b, (theta, a, b), objective.matrix, sigma,
                                reference=1.0, penalty=penalty)[3]
    curvature = objective.curvature(theta, a, b)
    g_theta, g_alpha, g_beta = gradient
    g_alpha = np.where((a <= 0) & (g_alpha > 0), 0.0, g_alpha)
    largest = 0.0
    for g, f in zip((g_theta, g_alpha, g_beta), curvature):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(g == 0, 0.0, np.abs(g) / np.sqrt(f))
        largest = max(largest, float(np.max(z, initial=0.0)))
    return largest


def separation(responses, theta, a):
    """Items and models along which loss (3) falls without bound.

    Parameters
    ----------
    responses : Responses
    theta : ndarray (N,)
        Abilities (any increasing transform: only their order matters).
    a : ndarray (J,)
        Discriminations.

    Returns
    -------
    items : ndarray of bool (J,)
        Items whose correct answers all come from strictly abler models than their
        wrong answers (all-correct and all-wrong items included): raising ``a_j``
        with ``b_j`` following lowers the loss for ever.
    models : ndarray of bool (N,)
        Models that answered at least one item with ``a_j > 0`` and all of those
        correctly, or all wrongly: their theta runs to +-inf.
    """
    from . import _ingest

    theta = np.ascontiguousarray(theta, dtype=float)
    informative = np.asarray(a, dtype=float) > 0
    n, j = responses.shape
    lowest_correct = np.full(j, np.inf)
    highest_wrong = np.full(j, -np.inf)
    right = np.zeros(n, dtype=np.int64)
    wrong = np.zeros(n, dtype=np.int64)
    # one pass in C over the cells where they lie (numpy's took as long as the solver on
    # 4000 x 25000, and 25 bytes per answer of sparse storage)
    _ingest.separation_scan(*responses.coded_buffers(), n, j, theta, informative,
                            lowest_correct, highest_wrong, right, wrong)
    items = highest_wrong < lowest_correct
    models = (right + wrong > 0) & ((right == 0) | (wrong == 0))
    return items, models


def identified_core(responses):
    """Rows and columns left after setting aside, until none is left, the models and
    items answered all-correct or all-wrong (setting one aside can make another so).

    Returns
    -------
    rows, cols : ndarray of int
        Indices of the kept models and items (increasing).
    """
    n, j = responses.shape
    rows, cols = np.arange(n), np.arange(j)
    part = responses
    while True:
        acc_items, acc_models = part.accuracy(axis=0), part.accuracy(axis=1)
        keep_items = (acc_items > 0) & (acc_items < 1)
        keep_models = (acc_models > 0) & (acc_models < 1)
        if keep_items.all() and keep_models.all():
            return rows, cols
        rows, cols = rows[keep_models], cols[keep_items]
        if rows.size < 2 or cols.size < 1:
            return rows, cols
        part = responses.take(rows, cols)


def components(responses):
    """The groups of models and items that the observed answers link.

    Two models are linked when they answered a common item, two items when a common
    model answered both, and so on through chains of such links (the connected
    components of the bipartite graph of observed cells).  Loss (3) is unchanged when
    one group's abilities shift and stretch while its items' parameters compensate, so
    only the prior (or mml's population) compares abilities across groups: merged
    leaderboards whose models answered disjoint item sets, say.

    Parameters
    ----------
    responses : Responses

    Returns
    -------
    model_groups, item_groups : ndarray of int
        Each model's and item's group, numbered from 0 by decreasing number of models
        (then items); all 0 when the answers link everything.
    """
    n, j = responses.shape
    if responses.fully_observed:
        return np.zeros(n, dtype=int), np.zeros(j, dtype=int)
    from . import _ingest

    # union-find over the cells where they lie, each row past the point where everything
    # before it is linked read to its first answer only: SciPy's graph search on the
    # bipartite block matrix took 0.8 GB and 3 s for 12 M sparse answers, a breadth-first
    # search of dense masks 2 bytes a cell
    roots = np.empty(n + j, dtype=np.int64)
    _ingest.components(*responses.coded_buffers(), n, j, roots)
    count, labels = np.unique(roots, return_inverse=True)
    count = count.size
    models, items = labels[:n], labels[n:]
    order = np.lexsort((-np.bincount(items, minlength=count),
                        -np.bincount(models, minlength=count)))
    rank = np.empty(count, dtype=int)
    rank[order] = np.arange(count)
    return rank[models], rank[items]
