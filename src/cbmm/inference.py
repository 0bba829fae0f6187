"""Standard errors of a fit from the observed information.

The objective (loss (3), plus the prior's penalty under ``prior="normal"``) is a
function of ``(theta, alpha, beta)`` with ``alpha = a / sigma`` and ``beta = b / sigma``.
With ``x_ij = theta_i alpha_j + beta_j``, ``p_ij = expit(x_ij)``, ``w_ij = p_ij (1 - p_ij)``
and ``r_ij = p_ij - [y_ij = 1]`` on the observed cells, its Hessian (the observed
information) has the blocks

* ``theta_i theta_i``: ``sum_j w_ij alpha_j^2`` (diagonal in theta);
* item j: ``[[sum_i w_ij theta_i^2, sum_i w_ij theta_i], [., sum_i w_ij]]`` (a 2 x 2
  block per item);
* ``theta_i alpha_j``: ``w_ij theta_i alpha_j + r_ij``; ``theta_i beta_j``: ``w_ij alpha_j``;

plus the penalty's precisions on the diagonal.  The item blocks are inverted in closed
form and eliminated (Schur complement ``S = D_theta - B D_items^-1 B^T``, N x N, built
from items in chunks, factored and inverted in place), so the cost is ``O(N^2 J + N^3)``
flops and ``8 N^2`` bytes, never the ``(N + 2J)^2`` matrix.

**The scale.**  Reported parameters are canonical: theta has mean 0 and sd 1 over the
models.  Without a prior, loss (3) does not fix theta's shift and scale, the Hessian is
singular along those two directions, and the covariance of the canonical estimate is the
constrained one: with ``Q`` an orthonormal basis of the complement of ``span(1, theta)``
(the directions the constraints mean 0, sd 1 leave free),
``Cov(theta) = Q (Q^T S Q)^-1 Q^T``, computed as ``(P S P + Z Z^T)^-1 - Z Z^T`` with
``Z = [1, theta]`` orthonormalised and ``P = I - Z Z^T``.  With the prior the solver's
parameters are identified; their covariance ``S^-1`` is carried to the canonical ones
(``theta_c = (theta - m) / s``, ``a_c = a s``, ``b_c = b + a m``, ``m`` and ``s``
theta's mean and sd) by the delta method.

**Parameters without a standard error (NaN):** ``a_j = 0`` (held at its bound: the
constraint is active and a Wald interval does not apply; ``b_j`` keeps its SE), items
or models whose block carries no information (no observed cell with ``0 < p < 1``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .intervals import PRIOR_BIAS
from .model import expit
from .prior import Penalty

__all__ = ["MAX_SE_BYTES", "PRIOR_BIAS_MODELS", "PRIOR_BIAS_CORRELATION", "PriorBias",
           "standard_errors"]

#: Largest N x N working matrix :func:`standard_errors` builds (bytes): N = 16384.
MAX_SE_BYTES = 2 << 30

#: The models :func:`standard_errors` bounds the prior's bias for (evenly spaced beyond it):
#: each costs ``O(N^2)`` flops.
PRIOR_BIAS_MODELS = 2048

#: Models beyond :data:`cbmm.intervals.PRIOR_BIAS` whose estimates correlate above this,
#: directly or through a chain, are placed together by the prior (:class:`PriorBias`'
#: groups): in the designs of docs/trust.md the 99th percentile of all pairs' correlations
#: was 0.03-0.06 in well-linked, few-item and randomly sparse designs (no model beyond one
#: standard error joined another), and chains above 0.1 linked 5-43 models of groups of
#: 10-20 that few models linked to the rest (above 0.2 they broke into pieces of 1-9).
PRIOR_BIAS_CORRELATION = 0.1

_CHUNK_CELLS = 1 << 21  # items are processed in chunks of about this many cells
_NO_INFORMATION = 1e-8  # a theta whose curvature is below this share of the median's has none


def standard_errors(responses, theta, a, b, sigma: float = 1.0, penalty: Penalty | None = None,
                    *, prior_bias: bool = False):
    """Standard errors of the canonical ``(theta, a, b)`` from the observed information.

    Parameters
    ----------
    responses : Responses
        The data of the fit (dense or sparse).
    theta, a, b : ndarray
        The estimate: the solver's raw parameters under a prior; without one, any
        equivalent point (the canonical form is used).
    sigma : float
    penalty : cbmm.model.Penalty, optional
        The prior of the fit (none: maximum likelihood).
    prior_bias : bool
        Also return, for each ability, the most the ability prior can bias it, in standard
        errors, and the groups the prior places together (:class:`PriorBias`).

    Returns
    -------
    theta_se : ndarray (N,)
    a_se, b_se : ndarray (J,)
        On the canonical scale; NaN where a parameter has none (see the module
        docstring).
    bias : PriorBias
        Only with ``prior_bias=True``.

    Raises
    ------
    ValueError
        When the N x N working matrix would exceed :data:`MAX_SE_BYTES`.
    """
    from scipy.linalg import blas, lapack

    from .result import canonicalize

    penalty = penalty or Penalty()
    n, j = responses.shape
    theta, a, b = (np.asarray(v, dtype=float) for v in (theta, a, b))
    if not penalty.active:
        theta, a, b = canonicalize(theta, a, b)
    alpha, beta = a / sigma, b / sigma
    theta_precision, item_precision = penalty.curvature()
    columns = _ColumnBlocks(responses)

    # pass 1: the diagonal of theta and the Schur complement's item part
    d_theta = np.full(n, theta_precision)
    schur = np.zeros((n, n), order="F")
    blocks = []
    for cols in columns.chunks():
        part = _ItemBlock(columns.dense(cols), theta, alpha[cols], beta[cols], item_precision)
        d_theta += part.theta_curvature
        blocks.append(part.inverse)
        e = part.root_product()
        if e.shape[1]:
            schur = blas.dsyrk(-1.0, e, beta=1.0, c=schur, trans=0, lower=1, overwrite_c=1)
    inverse = _ItemBlock.concatenate(blocks)
    # models with (next to) no information: all answers on the discriminating items alike
    kept = d_theta > _NO_INFORMATION * np.median(d_theta)
    if 8.0 * kept.sum() ** 2 > MAX_SE_BYTES:
        raise ValueError(f"standard errors for {int(kept.sum())} models need a "
                         f"{int(kept.sum())} x {int(kept.sum())} matrix "
                         f"({8 * kept.sum() ** 2 / 2 ** 30:.1f} GiB > "
                         f"{MAX_SE_BYTES / 2 ** 30:.0f} GiB); use cbmm.bootstrap instead")
    # Only the lower triangle of the N x N matrices below is ever written or read (BLAS
    # and LAPACK's symmetric routines, lower=1); the upper stays the zeros np.zeros gave,
    # so the triangular factor and its inverse need no masking copy.
    if not kept.all():
        schur = np.asfortranarray(schur[np.ix_(kept, kept)])
    schur[np.diag_indices_from(schur)] += d_theta[kept]
    t = theta[kept]
    m, s = t.mean(), t.std()
    basis = np.linalg.qr(np.column_stack([np.ones(t.size), (t - m) / (s if s > 0 else 1.0)]))[0]
    if not penalty.active:
        # constrain to the canonical scale: P S P + Z Z^T with P = I - Z Z^T, as rank-2
        # updates in place, S - Z (S Z)^T - (S Z) Z^T + Z (Z^T S Z + I) Z^T: no N x N
        # projector, no two N^3 products (18 s of 8,000 models' standard errors)
        product = blas.dsymm(1.0, schur, basis, side=0, lower=1)
        middle = basis.T @ product + np.eye(2)
        schur = blas.dsyr2k(-1.0, basis, product, beta=1.0, c=schur, trans=0, lower=1,
                            overwrite_c=1)
        half = basis @ np.linalg.cholesky(middle)
        schur = blas.dsyrk(1.0, half, beta=1.0, c=schur, trans=0, lower=1, overwrite_c=1)
    root, info = lapack.dpotrf(schur, lower=1, overwrite_a=1, clean=0)
    if info != 0:
        raise np.linalg.LinAlgError("the observed information is not positive definite at "
                                    "this point (not a minimum: see the fit's status)")
    root_inv, info = lapack.dtrtri(root, lower=1, overwrite_c=1)
    cov_diag = np.einsum("ij,ij->j", root_inv, root_inv)   # diag of M^-1
    if penalty.active:
        # delta method to the canonical theta: diag(P C P) / s^2 with C = S^-1
        cz = root_inv.T @ (root_inv @ basis)
        zcz = basis.T @ cz
        theta_var = (cov_diag - 2 * np.einsum("ij,ij->i", cz, basis)
                     + np.einsum("ij,ij->i", basis @ zcz, basis)) / s ** 2
        u, v = (t - m) / (s * t.size), np.full(t.size, 1.0 / t.size)
        lu, lv = root_inv @ u, root_inv @ v
    else:
        theta_var = cov_diag - np.einsum("ij,ij->i", basis, basis)
    theta_se = np.full(n, np.nan)
    theta_se[kept] = np.sqrt(np.maximum(theta_var, 0.0))
    bias = PriorBias(np.full(n, np.nan), np.full(n, -1))
    if prior_bias and penalty.active:
        rows = np.unique(np.linspace(0, t.size - 1, min(t.size, PRIOR_BIAS_MODELS)).astype(int))
        rows = rows[theta_se[kept][rows] > 0]   # two models: sd 1 leaves no freedom
        raw_se = s * theta_se[kept]
        bound = np.full(t.size, np.nan)
        beyond_rows = []   # the rows of the models beyond PRIOR_BIAS, for their groups
        for i, row in zip(rows, _canonical_rows(root_inv, basis, cz, zcz, rows)):
            bound[i] = np.abs(row).sum() * (theta_precision / raw_se[i])
            if bound[i] > PRIOR_BIAS:
                beyond_rows.append(row.copy())   # not a view that keeps its chunk
        beyond = np.flatnonzero(bound > PRIOR_BIAS)
        group = np.full(t.size, -1)
        if beyond.size:
            block = np.array([row[beyond] for row in beyond_rows])
            group[beyond] = _correlated_groups(block, raw_se[beyond])
        bias.bound[kept], bias.group[kept] = bound, group

    # pass 2: the item blocks of the covariance, D^-1 + G^T C G with G = B D^-1
    var_a, var_b, cov_ab = inverse.copy()
    var_a[alpha <= 0] = 0.0  # held at its bound: no variance of its own (its SE is NaN)
    cross = np.zeros((3, j))  # Cov(alpha, u'theta), Cov(alpha, v'theta), Cov(beta, v'theta)
    for cols in columns.chunks():
        part = _ItemBlock(columns.dense(cols), theta, alpha[cols], beta[cols], item_precision)
        g_a, g_b = (g[kept] for g in part.solved())
        x_a, x_b = root_inv @ g_a, root_inv @ g_b
        aa, bb, ab = ((x_a * x_a).sum(0), (x_b * x_b).sum(0), (x_a * x_b).sum(0))
        if penalty.active:
            cross[:, cols] = [-(lu @ x_a), -(lv @ x_a), -(lv @ x_b)]
        else:
            za, zb = basis.T @ g_a, basis.T @ g_b
            aa, bb, ab = (aa - (za * za).sum(0), bb - (zb * zb).sum(0), ab - (za * zb).sum(0))
        var_a[cols] += aa
        var_b[cols] += bb
        cov_ab[cols] += ab
    if penalty.active:
        a_u, a_v, b_v = cross
        ucu, vcv = lu @ lu, lv @ lv
        var_a, var_b = (s * s * var_a + 2 * s * alpha * a_u + alpha * alpha * ucu,
                        var_b + m * m * var_a + alpha * alpha * vcv + 2 * m * cov_ab
                        + 2 * alpha * b_v + 2 * m * alpha * a_v)
    a_se = sigma * np.sqrt(np.maximum(var_a, 0.0))
    b_se = sigma * np.sqrt(np.maximum(var_b, 0.0))
    a_se[(alpha <= 0) | ~np.isfinite(inverse[0]) | (inverse[0] == 0)] = np.nan
    b_se[~np.isfinite(inverse[1])] = np.nan
    return (theta_se, a_se, b_se, bias) if prior_bias else (theta_se, a_se, b_se)


class PriorBias(NamedTuple):
    """What :func:`standard_errors` returns of the ability prior's bias, per model.

    Attributes
    ----------
    bound : ndarray (N,)
        The most the ability prior can bias the ability, in its standard errors: where the
        true abilities lie up to one prior sd from where the prior puts them, in any
        pattern (:func:`_canonical_rows`).  NaN without a prior, where theta has no SE, and
        beyond the :data:`PRIOR_BIAS_MODELS` models it is computed for.
    group : ndarray of int (N,)
        For the models whose bound exceeds :data:`cbmm.intervals.PRIOR_BIAS`, which group
        of them it belongs to: models linked by a chain of estimates correlated above
        :data:`PRIOR_BIAS_CORRELATION` (a group the prior places together); -1 elsewhere.
    """

    bound: np.ndarray
    group: np.ndarray


def _canonical_rows(root_inv, basis, cz, zcz, rows, chunk: int = 256):
    """The rows ``rows`` of ``P C P``, the covariance of the canonical abilities on the
    solver's (raw) scale, one at a time.

    ``C = S^-1`` and ``P`` is the projector off ``span(1, theta)`` that the canonical scale
    removes.  Why their absolute sums bound the prior's bias: near the estimate the MAP is
    linear in the prior's mean; where the true abilities lie ``delta`` from it (the prior's
    mean is 0), the estimate is biased by ``-C p delta`` (``p`` the prior's precision;
    exact for a Gaussian likelihood), and over every ``delta`` with ``|delta_k| <= 1``
    (each model within one prior sd of where the prior puts it, in any pattern the answers
    may not see) the largest bias of ability i is ``p ||(P C P)_i||_1`` (the right-hand
    ``P``: a ``delta`` along ``1`` or theta moves no canonical ability).  Were ``C``
    diagonal (each ability set by its own answers and the prior) this would be ``p C_ii``,
    at most one standard error (``C_ii <= 1 / p``); where groups of models are compared
    by the prior alone, the group's rows of ``C`` share a large block and it is several.

    Parameters
    ----------
    root_inv : ndarray (N, N)
        ``L^-1`` with ``S = L L^T``, lower triangular (its upper triangle zero).
    basis : ndarray (N, 2)
        Orthonormal basis of ``span(1, theta)``.
    cz, zcz : ndarray
        ``C basis`` and ``basis^T C basis``.
    rows : ndarray of int
        The rows wanted (ascending).
    chunk : int
        Rows built at once.

    Yields
    ------
    ndarray (N,)
    """
    for lo in range(0, rows.size, chunk):
        block = rows[lo:lo + chunk]
        first = block[0]   # column i of L^-1 is zero above row i
        c_rows = root_inv[first:, block].T @ root_inv[first:]
        c_rows -= basis[block] @ cz.T + cz[block] @ basis.T - basis[block] @ zcz @ basis.T
        yield from c_rows


def _correlated_groups(covariance, sd):
    """Group labels of models whose estimates are linked by a chain of correlations above
    :data:`PRIOR_BIAS_CORRELATION` (connected components), from their covariance block."""
    from scipy.sparse.csgraph import connected_components

    linked = covariance / np.outer(sd, sd) > PRIOR_BIAS_CORRELATION
    return connected_components(linked, directed=False)[1]


class _ColumnBlocks:
    """Dense int8 column chunks of a dense or CSR response matrix."""

    def __init__(self, responses):
        self.shape = responses.shape
        n, j = self.shape
        if responses.storage == "sparse":
            import scipy.sparse

            self.csc = scipy.sparse.csr_array(
                (responses.values, responses.indices, responses.indptr), shape=(n, j)).tocsc()
            self.y = None
        else:
            self.y = responses.y

    def chunks(self):
        n, j = self.shape
        step = max(1, _CHUNK_CELLS // max(n, 1))
        for start in range(0, j, step):
            yield np.arange(start, min(start + step, j))

    def dense(self, cols):
        if self.y is not None:
            return self.y[:, cols]
        return self.csc[:, cols].toarray()


class _ItemBlock:
    """The Hessian's parts for a chunk of items: ``B`` (theta x items), the items' 2 x 2
    blocks and their inverses (an ``a_j = 0`` held at its bound keeps only ``b_j``)."""

    def __init__(self, y, theta, alpha, beta, item_precision):
        observed = y != 0
        x = np.outer(theta, alpha) + beta
        p = expit(x)
        w = np.where(observed, p * (1.0 - p), 0.0)
        r = np.where(observed, p - (y > 0), 0.0)
        self.theta_curvature = w @ (alpha * alpha)
        h_aa = (theta * theta) @ w + item_precision
        h_ab = theta @ w
        h_bb = w.sum(axis=0) + item_precision
        free = alpha > 0
        self.b_alpha = np.where(free, w * np.outer(theta, alpha) + r, 0.0)
        self.b_beta = w * alpha
        det = h_aa * h_bb - h_ab * h_ab
        scale = np.maximum(h_aa * h_bb, np.finfo(float).tiny)
        two = free & (det > 1e-12 * scale)
        one = ~free & (h_bb > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.i_aa = np.where(two, h_bb / det, 0.0)
            self.i_ab = np.where(two, -h_ab / det, 0.0)
            self.i_bb = np.where(two, h_aa / det, np.where(one, 1.0 / h_bb, 0.0))
        identified = two | one
        self.b_alpha[:, ~two] = 0.0
        self.b_beta[:, ~identified] = 0.0
        self.inverse = np.vstack([np.where(two, self.i_aa, np.nan),
                                  np.where(identified, self.i_bb, np.nan),
                                  np.where(two, self.i_ab, 0.0)])

    @staticmethod
    def concatenate(blocks):
        return np.hstack(blocks) if blocks else np.zeros((3, 0))

    def root_product(self):
        """``B L`` with ``L L^T = D_items^-1`` per item: ``B D^-1 B^T = (B L)(B L)^T``."""
        l11 = np.sqrt(self.i_aa)
        with np.errstate(divide="ignore", invalid="ignore"):
            l21 = np.where(l11 > 0, self.i_ab / l11, 0.0)
        l22 = np.sqrt(np.maximum(self.i_bb - l21 * l21, 0.0))
        return np.hstack([self.b_alpha * l11 + self.b_beta * l21, self.b_beta * l22])

    def solved(self):
        """``G = B D^-1``: its alpha and beta columns."""
        return (self.b_alpha * self.i_aa + self.b_beta * self.i_ab,
                self.b_alpha * self.i_ab + self.b_beta * self.i_bb)
