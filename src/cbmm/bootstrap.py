"""The bootstrap: percentile intervals of abilities, ranks and item parameters.

:func:`bootstrap` fits the data once with :func:`cbmm.fit`, then refits resamples of
items (or of models) warm-started from that fit, each replicate by the method's solver
itself, in one forked worker (:func:`cbmm.api.run_in_worker`).
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where used, so that ``import cbmm`` does not load pandas
    import pandas as pd

__all__ = ["REPLICATE_SE", "RESAMPLE", "BootstrapResult", "bootstrap"]

#: Values of ``bootstrap``'s ``resample``.
RESAMPLE = ("items", "models")

#: cBMM replicates stop once every parameter is within this many standard errors of the
#: replicate's optimum (``stop_se``): far below the spread the bootstrap measures (about
#: one standard error), with fewer MM cycles than the fit's own 1e-3.
REPLICATE_SE = 2e-2


@dataclass(eq=False)
class BootstrapResult:
    """Percentile-bootstrap intervals of a fit (:func:`bootstrap`).

    Attributes
    ----------
    theta, a, b, rank : pandas.DataFrame
        Indexed like the parameters, columns ``estimate`` (the full data's fit),
        ``lower`` and ``upper`` (the replicates' ``(1 - level) / 2`` and
        ``(1 + level) / 2`` quantiles; NaN for the parameters the resample is not for:
        ``a`` and ``b`` of item resampling, ``theta`` and ``rank`` of model
        resampling, and of the models answering every item alike, which every item
        resample keeps so).  ``rank`` is 1 for the ablest model.
    prob_better : pandas.DataFrame
        N x N: the share of replicates in which the row model's theta exceeds the
        column model's, a tie counting one half (models with identical answers tie in
        every replicate: 0.5); the diagonal is NaN; all NaN for model resampling.
    fit : FitResult
        The fit of the full data.
    draws : dict of ndarray
        ``theta`` (n_boot x N), ``a``, ``b`` (n_boot x J): every replicate's estimates
        on the fit's scale (NaN where a replicate has none: a failed replicate, an item not
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
        from .io import write_with_manifest

        files = {name: frame.encode() for name, frame in zip(self.OUTPUT_FILES[:3], (
            self.abilities_frame().to_csv(index=False, float_format="%.17g"),
            self.items_frame().to_csv(index=False, float_format="%.17g"),
            self.prob_better.to_csv(float_format="%.17g")))}
        write_with_manifest(out_dir, files, self.OUTPUT_FILES[3], self.summary(),
                            replace=replace)


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
        (every item kept), for the item parameters.  The other parameters get no
        interval (NaN; their replicates stay in ``draws``).  Each replicate is put on the
        canonical scale (theta mean 0, sd 1 over its models), like the fit; an ``mml``
        replicate stays on its fitted population's scale, like an ``mml`` fit.
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
        Passed to :func:`cbmm.fit` (``sigma``, ``tol``, method options...; ``se=True``
        gives the fit of the full data its standard errors too; ``start`` and
        ``n_starts`` are that fit's, e.g. ``**cbmm.paper_settings("cbmm")``: the
        replicates start from it).

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
    import pandas as pd

    from ._checks import check_integer, check_level
    from .api import FitFailedError, _progress_logging, check_timeout, fit, run_in_worker
    from .intervals import warn_few_models
    from .registry import get_method
    from .responses import as_responses

    n_boot = check_integer("n_boot", n_boot, minimum=2)
    if resample not in RESAMPLE:
        raise ValueError(f"resample must be one of {list(RESAMPLE)}, got {resample!r}")
    level = check_level(level)
    seed = check_integer("seed", seed, minimum=0)
    if timeout_s == "auto":
        raise ValueError("bootstrap: timeout_s must be None (no limit) or a finite number of "
                         "seconds > 0, got 'auto'")
    timeout_s = check_timeout(timeout_s, isolate)
    data = as_responses(responses, coding=fit_kwargs.pop("coding", None),
                        layout=fit_kwargs.pop("layout", "auto"), storage="auto")
    _check_memory(n_boot, *data.shape)
    full = fit(data, method, seed=seed, **fit_kwargs)
    if resample == "items":  # the abilities' intervals, short for the same reason as fit's
        warn_few_models(data.shape[0])
    spec = get_method(method)
    if data.storage == "sparse" and not spec.reads_sparse:
        data = data.to_dense()
    # each replicate runs the method's solver itself: fit's checks and final measures,
    # paid once above, would cost a third of a replicate
    settings = {"sigma": full.sigma, "tol": full.tol, "max_iter": full.max_iter, "seed": seed}
    options = spec.check_options({k: v for k, v in fit_kwargs.items() if k in spec.options})
    fit_kwargs.pop("se", None)
    if "stop_se" in spec.options and options["stop_se"] is not None:
        options["stop_se"] = max(options["stop_se"], REPLICATE_SE)
    if full.failed:
        raise FitFailedError(f"bootstrap: the fit of the full data failed ({full.status})")
    rows, cols = _fitted(full, data)
    core = data.take(rows, cols) if rows.size < data.shape[0] or cols.size < data.shape[1] \
        else data
    warm = tuple(np.asarray(v, dtype=float) for v in full.raw_parameters())
    warm = (warm[0][rows], warm[1][cols], warm[2][cols])

    verbose = fit_kwargs.get("verbose", 0)  # checked by the fit above

    def replicates():
        return _replicates(core, warm, spec, settings, options, n_boot, resample, seed,
                           verbose > 0)

    began = time.perf_counter()
    with _progress_logging(verbose):
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

    def table(estimate, values, index, resampled):
        """Estimates with percentile intervals, where ``resampled`` says the resample is
        the one for them: the other's spread is not their uncertainty (item resampling
        covered a simulated truth's a 34 % and b 5 % of the time; model resampling, with
        a model's answers absent from a third of the replicates, theta's 70 %), so their
        intervals are NaN."""
        if not resampled:
            return pd.DataFrame({"estimate": estimate, "lower": np.nan, "upper": np.nan},
                                index=index)
        quantile = np.nanquantile if np.isnan(values).any() else np.quantile  # 10x faster
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
            lower, upper = quantile(values, [lo, hi], axis=0)
        return pd.DataFrame({"estimate": estimate, "lower": lower, "upper": upper}, index=index)

    model_index = getattr(full.theta, "index", None)
    item_index = getattr(full.a, "index", None)
    theta_full = np.asarray(full.theta, dtype=float)
    models, items = resample == "items", resample == "models"  # whose intervals it gives
    better = _prob_better(theta) if models else np.full((n, n), np.nan)
    theta_table = table(theta_full, theta, model_index, models)
    rank_table = _whole(table(_ranks(theta_full[None, :])[0], ranks, model_index, models))
    # A model answering all its items alike does so in every item resample: its spread
    # over them is the gauge's, not its uncertainty (LaRT's all-wrong models: 0.07 wide,
    # their Wald intervals 1.05).
    for frame in (theta_table, rank_table):
        frame.iloc[data.degenerate_models(), [1, 2]] = np.nan
    return BootstrapResult(
        theta=theta_table,
        a=table(np.asarray(full.a), a, item_index, items),
        b=table(np.asarray(full.b), b, item_index, items),
        rank=rank_table,
        prob_better=pd.DataFrame(better, index=model_index, columns=model_index),
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


def _replicates(data, warm, spec, settings, options, n_boot, resample, seed, report=False):
    """Solve ``n_boot`` resamples from the warm start; canonical estimates, NaN where none.
    ``report``: log progress (the ``cbmm`` logger, INFO) after every tenth of them."""
    from .api import logger, share_identical
    from .result import canonicalize

    n, j = data.shape
    rng = np.random.default_rng([seed, 0x0b00])
    out = {"theta": np.full((n_boot, n), np.nan), "a": np.full((n_boot, j), np.nan),
           "b": np.full((n_boot, j), np.nan), "failed": 0}
    models, items = data.answer_patterns(1), data.answer_patterns(0)
    # drawn in the labels' order: one seed, the same resamples, whatever the order given
    row_order, col_order = data.label_order(0), data.label_order(1)
    every, began = max(1, n_boot // 10), time.perf_counter()

    def progress(done):
        if report:
            logger.info("bootstrap: %d of %d replicates (%d failed), %.1f s", done, n_boot,
                        out["failed"], time.perf_counter() - began)

    for k in range(n_boot):
        if k and k % every == 0:
            progress(k)
        rows = row_order[rng.integers(0, n, n)] if resample == "models" else np.arange(n)
        cols = col_order[rng.integers(0, j, j)] if resample == "items" else np.arange(j)
        part = data.take(rows if resample == "models" else None,
                         cols if resample == "items" else None)
        start = (warm[0][rows], warm[1][cols], warm[2][cols])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                solved = spec.solve(part, *start, progress=None, **settings, **options)
            # a population-scale method (mml) gives its items on its fitted population's
            # scale, as the full fit does; its posterior means' sd is below 1, and
            # standardising them shrank every replicate's a by that sd (about 0.95)
            estimate = (tuple(np.array(v, dtype=float) for v in (solved.theta, solved.a, solved.b))
                        if spec.population_scale
                        else canonicalize(solved.theta, solved.a, solved.b))
        except Exception:  # a replicate the method cannot fit is counted, not fatal
            estimate = None
        if estimate is None or solved.status.startswith("failed") \
                or not all(np.isfinite(v).all() for v in estimate):
            out["failed"] += 1
            continue
        theta, a, b = estimate
        # models (items) identical in the data are identical in every resample
        share_identical(theta, a, b, None if models is None else models[rows],
                        None if items is None else items[cols])
        theta[~np.isfinite(part.accuracy(axis=1))] = np.nan  # a model with no drawn answer
        # the first copy of each drawn row / column
        kept_rows, first_rows = np.unique(rows, return_index=True)
        kept_cols, first_cols = np.unique(cols, return_index=True)
        out["theta"][k, kept_rows] = theta[first_rows]
        out["a"][k, kept_cols] = a[first_cols]
        out["b"][k, kept_cols] = b[first_cols]
    progress(n_boot)
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


def _check_memory(n_boot, n, j) -> None:
    """Refuse ``n_boot`` replicates whose estimates would not fit in this machine's memory
    (held twice: in the worker, and here once sent back); the worker died of it, as
    "exited with status 1"."""
    need = 2 * 8 * n_boot * (n + 2 * j)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # a platform that does not say
        return
    if need > memory:
        raise ValueError(f"n_boot={n_boot}: the replicates' estimates ({n_boot} x ({n} + 2 x "
                         f"{j}) numbers, held twice) take {need / 2**30:.1f} GiB, more than "
                         f"this machine's {memory / 2**30:.1f} GiB of memory; use fewer")


def _prob_better(theta):
    """Share of replicates (rows of ``theta``) in which model i's theta exceeds model k's,
    a tie counting one half, over the replicates where both have one; NaN on the
    diagonal."""
    n = theta.shape[1]
    halves = np.zeros((n, n), dtype=np.int32)  # 2 per replicate it is better, 1 per tie
    both = np.zeros((n, n), dtype=np.int32)
    comparison = np.empty((n, n), dtype=bool)
    for t in theta:
        np.greater(t[:, None], t[None, :], out=comparison)  # False wherever a NaN is
        halves += 2 * comparison
        np.equal(t[:, None], t[None, :], out=comparison)
        halves += comparison
        finite = ~np.isnan(t)
        if finite.all():
            both += 1
        else:
            both += finite[:, None] & finite[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = halves / (2 * both)
    np.fill_diagonal(share, np.nan)
    return share
