"""Uncertainty of a fit: standard errors from the observed information, and the bootstrap.

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
from items in chunks), so the cost is ``O(N^2 J)`` flops and ``8 N^2`` bytes, never the
``(N + 2J)^2`` matrix.

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

import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .model import Penalty, expit

if TYPE_CHECKING:  # imported where used, so that ``import cbmm`` does not load pandas
    import pandas as pd

__all__ = ["MAX_SE_BYTES", "RESAMPLE", "BootstrapResult", "bootstrap", "standard_errors"]

#: Largest N x N working matrix :func:`standard_errors` builds (bytes): N = 16384.
MAX_SE_BYTES = 2 << 30

_CHUNK_CELLS = 1 << 21  # items are processed in chunks of about this many cells
_NO_INFORMATION = 1e-8  # a theta whose curvature is below this share of the median's has none


def standard_errors(responses, theta, a, b, sigma: float = 1.0, penalty: Penalty | None = None):
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

    Returns
    -------
    theta_se : ndarray (N,)
    a_se, b_se : ndarray (J,)
        On the canonical scale; NaN where a parameter has none (see the module
        docstring).

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
    schur = np.asfortranarray(schur[np.ix_(kept, kept)])
    schur[np.diag_indices_from(schur)] += d_theta[kept]
    schur = np.tril(schur) + np.tril(schur, -1).T
    t = theta[kept]
    m, s = t.mean(), t.std()
    basis = np.linalg.qr(np.column_stack([np.ones(t.size), (t - m) / (s if s > 0 else 1.0)]))[0]
    if not penalty.active:  # constrain to the canonical scale: (P S P + Z Z^T)
        projector = np.eye(t.size) - basis @ basis.T
        schur = np.asfortranarray(projector @ schur @ projector + basis @ basis.T)
    root, info = lapack.dpotrf(schur, lower=1, overwrite_a=1)
    if info != 0:
        raise np.linalg.LinAlgError("the observed information is not positive definite at "
                                    "this point (not a minimum: see the fit's status)")
    root_inv, info = lapack.dtrtri(root, lower=1, overwrite_c=1)
    root_inv = np.tril(root_inv)
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
    return theta_se, a_se, b_se


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


# ---------------------------------------------------------------------------------- bootstrap

#: Values of ``bootstrap``'s ``resample``.
RESAMPLE = ("items", "models")

#: cBMM replicates stop once every parameter is within this many standard errors of the
#: replicate's optimum (``stop_se``): far below the spread the bootstrap measures (one
#: standard error), and half the work of the fit's own 1e-3.
REPLICATE_SE = 2e-2


@dataclass
class BootstrapResult:
    """Percentile-bootstrap intervals of a fit (:func:`bootstrap`).

    Attributes
    ----------
    theta, a, b, rank : pandas.DataFrame
        Indexed like the parameters, columns ``estimate`` (the full data's fit),
        ``lower`` and ``upper`` (the replicates' ``(1 - level) / 2`` and
        ``(1 + level) / 2`` quantiles).  ``rank`` is 1 for the ablest model.
    prob_better : pandas.DataFrame
        N x N: the share of replicates in which the row model's theta exceeds the
        column model's (0.5 on the diagonal's ties excluded: the diagonal is NaN).
    fit : FitResult
        The fit of the full data.
    draws : dict of ndarray
        ``theta`` (n_boot x N), ``a``, ``b`` (n_boot x J): every replicate's canonical
        estimates (NaN where a replicate has none: a failed replicate, an item not
        drawn, a model with no drawn answer).
    n_boot, n_failed : int
        Replicates asked for and replicates whose fit failed.
    resample : str
    level : float
    runtime_s : float
        Wall seconds of the replicates (the full fit excluded).
    """

    #: The files :meth:`save` writes into its folder.
    OUTPUT_FILES = ("abilities.csv", "items.csv", "prob_better.csv", "bootstrap.json")

    theta: pd.DataFrame
    a: pd.DataFrame
    b: pd.DataFrame
    rank: pd.DataFrame
    prob_better: pd.DataFrame
    fit: object
    draws: dict
    n_boot: int
    n_failed: int
    resample: str
    level: float
    runtime_s: float


    def abilities_frame(self) -> pd.DataFrame:
        """One row per model: ``model``, ``theta``, ``theta_lower``, ``theta_upper``, ``rank``,
        ``rank_lower``, ``rank_upper``."""
        return _joined("model", (("theta", self.theta), ("rank", self.rank)))

    def items_frame(self) -> pd.DataFrame:
        """One row per item: ``item``, ``a``, ``a_lower``, ``a_upper``, ``b``, ``b_lower``,
        ``b_upper``."""
        return _joined("item", (("a", self.a), ("b", self.b)))

    def summary(self) -> dict:
        """JSON-serialisable description (no parameter vectors)."""
        return {"n_boot": self.n_boot, "n_failed": self.n_failed, "resample": self.resample,
                "level": self.level, "runtime_s": self.runtime_s, "fit": self.fit.summary()}

    def save(self, out_dir, *, replace: bool = True) -> None:
        """Write :data:`OUTPUT_FILES` into ``out_dir``, whole: ``bootstrap.json`` is the
        manifest of the tables (their sizes and SHA-256) and comes last, as in
        :meth:`cbmm.FitResult.save` (``replace=False``: ``FileExistsError`` when the folder
        holds any of them, so of two concurrent saves one succeeds)."""
        import json

        from .io import write_with_manifest

        files = {name: frame.encode() for name, frame in zip(self.OUTPUT_FILES[:3], (
            self.abilities_frame().to_csv(index=False, float_format="%.17g"),
            self.items_frame().to_csv(index=False, float_format="%.17g"),
            self.prob_better.to_csv(float_format="%.17g")))}

        def manifest(records):
            return (json.dumps({**self.summary(), "files": records}, indent=2) + "\n").encode()

        write_with_manifest(out_dir, files, self.OUTPUT_FILES[3], manifest, replace=replace)


def _joined(key, tables) -> pd.DataFrame:
    import pandas as pd

    parts = [table.set_axis([name, f"{name}_lower", f"{name}_upper"], axis=1)
             for name, table in tables]
    frame = pd.concat(parts, axis=1)
    frame.index.name = key
    return frame.reset_index()


def bootstrap(responses, n_boot: int = 200, resample: str = "items", level: float = 0.95,
              seed: int = 0, *, method: str = "cbmm", isolate: bool = True, timeout_s=None,
              **fit_kwargs) -> BootstrapResult:
    """Percentile-bootstrap intervals for abilities, ranks and item parameters.

    The data are fitted once (``cbmm.fit(responses, method, **fit_kwargs)``); each
    replicate then refits a resample, warm-started from that fit's parameters (one
    start, the same settings), so it costs a fraction of a cold fit.

    Parameters
    ----------
    responses
        As for :func:`cbmm.fit`.
    n_boot : int
        Replicates, >= 2.
    resample : {"items", "models"}
        ``"items"``: draw J items with replacement (every model kept), for the
        abilities and their ranks; ``"models"``: draw N models with replacement
        (every item kept), for the item parameters.  Each replicate is put on the
        canonical scale (theta mean 0, sd 1 over its models), like the fit.
    level : float
        Interval coverage, in (0, 1).
    seed : int
        Seed of the resampling, and the fits' ``seed`` (of their random starts).
    method : str
        The method of the fit and of every replicate.
    isolate : bool
        Run the replicates in one forked worker (a crash becomes an error here,
        not a dead caller), under ``timeout_s`` (None: no limit).
    **fit_kwargs
        Passed to :func:`cbmm.fit` (``sigma``, ``tol``, method options...).

    Returns
    -------
    BootstrapResult

    Raises
    ------
    ValueError
        Bad arguments, or a failed fit of the full data.
    RuntimeError
        The replicates' worker died or ran out of time.
    """
    import numbers

    import pandas as pd

    from .api import check_timeout, fit, run_in_worker
    from .registry import get_method
    from .responses import as_responses

    if isinstance(n_boot, bool) or not isinstance(n_boot, numbers.Integral) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer >= 2, got {n_boot!r}")
    if resample not in RESAMPLE:
        raise ValueError(f"resample must be one of {list(RESAMPLE)}, got {resample!r}")
    if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if timeout_s == "auto":
        raise ValueError("bootstrap: timeout_s must be None (no limit) or a finite number of "
                         "seconds > 0, got 'auto'")
    timeout_s = check_timeout(timeout_s, isolate)
    for name in ("start", "n_starts", "se", "isolate"):
        if name in fit_kwargs:
            raise ValueError(f"bootstrap sets {name!r} itself (replicates start from the fit "
                             "of the full data)")
    data = as_responses(responses, coding=fit_kwargs.pop("coding", None), storage="auto")
    full = fit(data, method, seed=seed, **fit_kwargs)
    spec = get_method(method)
    if data.storage == "sparse" and not spec.reads_sparse:
        data = data.to_dense()
    # each replicate runs the method's solver itself: fit's checks and final measures,
    # paid once above, would cost a third of a replicate
    settings = {"sigma": full.sigma, "tol": full.tol, "max_iter": full.max_iter, "seed": seed}
    options = spec.check_options({k: v for k, v in fit_kwargs.items() if k in spec.options})
    if "stop_se" in spec.options and options["stop_se"] is not None:
        options["stop_se"] = max(options["stop_se"], REPLICATE_SE)
    if full.failed:
        raise ValueError(f"bootstrap: the fit of the full data failed ({full.status})")
    rows, cols = _fitted(full, data)
    core = data.take(rows, cols) if rows.size < data.shape[0] or cols.size < data.shape[1] \
        else data
    warm = tuple(np.asarray(v, dtype=float) for v in full.raw_parameters())
    warm = (warm[0][rows], warm[1][cols], warm[2][cols])

    def replicates():
        return _replicates(core, warm, spec, settings, options, n_boot, resample, seed)

    began = time.perf_counter()
    if isolate:
        draws = run_in_worker(replicates, lambda reason, seconds: reason, timeout_s,
                              f"cbmm-bootstrap-{method}")
        if isinstance(draws, str):
            raise RuntimeError(f"bootstrap: the replicates' worker failed ({draws})")
    else:
        draws = replicates()
    runtime = time.perf_counter() - began
    n, j = data.shape
    theta = _expand(draws["theta"], rows, n, np.asarray(full.theta, dtype=float))
    a = _expand(draws["a"], cols, j, np.asarray(full.a, dtype=float))
    b = _expand(draws["b"], cols, j, np.asarray(full.b, dtype=float))
    ranks = _ranks(theta)
    lo, hi = (1 - level) / 2, (1 + level) / 2

    def table(estimate, values, index):
        quantile = np.nanquantile if np.isnan(values).any() else np.quantile  # 10x faster
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
            lower, upper = quantile(values, [lo, hi], axis=0)
        return pd.DataFrame({"estimate": estimate, "lower": lower, "upper": upper}, index=index)

    model_index = getattr(full.theta, "index", None)
    item_index = getattr(full.a, "index", None)
    theta_full = np.asarray(full.theta, dtype=float)
    return BootstrapResult(
        theta=table(theta_full, theta, model_index), a=table(np.asarray(full.a), a, item_index),
        b=table(np.asarray(full.b), b, item_index),
        rank=_whole(table(_ranks(theta_full[None, :])[0], ranks, model_index)),
        prob_better=pd.DataFrame(_prob_better(theta), index=model_index, columns=model_index),
        fit=full, draws={"theta": theta, "a": a, "b": b}, n_boot=int(n_boot),
        n_failed=int(draws["failed"]), resample=resample, level=float(level), runtime_s=runtime)


def _whole(ranks):
    """Rank intervals widened to whole ranks (quantiles interpolate between replicates)."""
    return ranks.assign(lower=np.floor(ranks["lower"]), upper=np.ceil(ranks["upper"]))


def _fitted(full, data):
    """Rows and columns that the fit estimated (all but the set-aside ones)."""
    set_aside = full.info.get("set_aside")
    n, j = data.shape
    if not set_aside:
        return np.arange(n), np.arange(j)
    theta, a = np.asarray(full.theta, dtype=float), np.asarray(full.a, dtype=float)
    return np.flatnonzero(np.isfinite(theta)), np.flatnonzero(np.isfinite(a))


def _replicates(data, warm, spec, settings, options, n_boot, resample, seed):
    """Solve ``n_boot`` resamples from the warm start; canonical estimates, NaN where none."""
    from .result import canonicalize

    n, j = data.shape
    rng = np.random.default_rng([seed, 0x0b00])
    out = {"theta": np.full((n_boot, n), np.nan), "a": np.full((n_boot, j), np.nan),
           "b": np.full((n_boot, j), np.nan), "failed": 0}
    for k in range(n_boot):
        rows = rng.integers(0, n, n) if resample == "models" else np.arange(n)
        cols = rng.integers(0, j, j) if resample == "items" else np.arange(j)
        part = data.take(rows if resample == "models" else None,
                         cols if resample == "items" else None)
        start = (warm[0][rows], warm[1][cols], warm[2][cols])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                solved = spec.solve(part, *start, progress=None, **settings, **options)
            estimate = canonicalize(solved.theta, solved.a, solved.b)
        except Exception:  # a replicate the method cannot fit is counted, not fatal
            estimate = None
        if estimate is None or solved.status.startswith("failed") \
                or not all(np.isfinite(v).all() for v in estimate):
            out["failed"] += 1
            continue
        theta, a, b = estimate
        theta[~np.isfinite(part.accuracy(axis=1))] = np.nan  # a model with no drawn answer
        # the first copy of each drawn row / column
        kept_rows, first_rows = np.unique(rows, return_index=True)
        kept_cols, first_cols = np.unique(cols, return_index=True)
        out["theta"][k, kept_rows] = theta[first_rows]
        out["a"][k, kept_cols] = a[first_cols]
        out["b"][k, kept_cols] = b[first_cols]
    return out


def _expand(values, index, size, full):
    """Replicate estimates of the fitted rows/columns on the whole data; set-aside ones keep
    the fit's value (+-inf, or NaN) in every replicate."""
    out = np.repeat(full[None, :], values.shape[0], axis=0)
    out[:, index] = values
    return out


def _ranks(theta):
    """Ranks per replicate (row), 1 for the largest theta; ties share their mean rank; NaN
    stays NaN."""
    import pandas as pd

    return pd.DataFrame(theta).rank(axis=1, ascending=False, method="average").to_numpy()


def _prob_better(theta):
    """Share of replicates (rows of ``theta``) in which model i's theta exceeds model k's,
    over the replicates where both have one; NaN on the diagonal."""
    n = theta.shape[1]
    better = np.zeros((n, n), dtype=np.int32)
    both = np.zeros((n, n), dtype=np.int32)
    comparison = np.empty((n, n), dtype=bool)
    for t in theta:
        np.greater(t[:, None], t[None, :], out=comparison)  # False wherever a NaN is
        better += comparison
        finite = ~np.isnan(t)
        if finite.all():
            both += 1
        else:
            both += finite[:, None] & finite[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = better / both
    np.fill_diagonal(share, np.nan)
    return share
