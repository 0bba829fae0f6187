"""Abilities of new models against calibrated items, without refitting the items.

Given item parameters ``(a, b)`` from a fit (the calibration), the ability of
a new model ``i`` solves a one-dimensional convex problem: minimise

    L_i(theta) = sum_{j in O_i} softplus(-y_ij (theta a_j + b_j) / sigma)  [+ theta^2 / 2]

over the items ``O_i`` it answered (``y_ij = +1`` correct, ``-1`` incorrect),
the bracketed term being the optional N(0, 1) prior (MAP instead of maximum
likelihood).  ``L_i`` is the paper's loss (3) restricted to row ``i``, so the
scores are on the scale of the calibration's canonical theta (mean 0, sd 1
over the calibration models).  ``prior="population"`` takes the posterior mean and
sd instead (EAP, on a grid), under the calibration's population: an ``mml`` fit's
estimated one, whose scale its abilities are on.  Otherwise :func:`score` solves all
models at once by Newton's method with step halving (every step lowers every ``L_i``) and
reports the standard error ``1 / sqrt(L_i''(theta))`` from the observed
information, with the calibration's item error added by the delta method where the
calibration has standard errors (:func:`_calibration_se`).

Without the prior the maximum-likelihood estimate is finite exactly when a
model answered at least one informative item (``a_j > 0``) correctly and one
wrongly.  Otherwise :func:`score` returns ``theta = +inf`` (all correct),
``-inf`` (all wrong) or NaN (no informative item answered), with
``se = inf`` and the status saying so; the priors give a finite estimate for every
model.
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ._checks import check_integer, check_positive
from ._warn import CbmmWarning, warn
from .api import NOT_AN_OPTIMUM, ConvergenceWarning, DegenerateDataWarning
from .intervals import IntervalWarning, warn_small_calibration
from .marginal import checked_population
from .model import SIGMA_RANGE, check_sigma, expit, log_pq
from .posterior import GRID, posterior_moments, prior_on_grid
from .registry import get_method
from .responses import (_EXPECTED, FIRST_LINE, LONG_COLUMNS, Responses, _check_labels, _show,
                        as_responses)
from .result import FitResult, ResultFolderError, read_labelled_csv, read_result_folder

if TYPE_CHECKING:  # imported where used, so that ``import cbmm`` does not load pandas
    import pandas as pd

__all__ = ["score", "read_items", "aligned_responses", "PRIORS"]

#: Allowed values of ``prior``.
PRIORS = ("none", "normal", "population")

_BLOCK_CELLS = 1 << 22  # rows are solved in blocks of about this many cells
_MAX_STEP = 10.0  # largest Newton step on the theta scale (guards far-off starts)
#: Below this share of answered cells in a block the Newton passes read the answered
#: cells alone (2,000 x 12,000 with 20 % answered: 6.3 s read whole)
_CELLS_BELOW = 0.5

#: The columns of an items table holding the calibration's standard errors of a and b.
ITEM_SE = ("a_se", "b_se")


def score(responses, items, *, sigma: float | None = None, prior: str = "none",
          coding: str | None = None, layout: str = "auto", item_error: bool = True,
          tol: float = 1e-10, max_iter: int = 100) -> pd.DataFrame:
    """Estimate the abilities of (new) models with the item parameters held fixed.

    Parameters
    ----------
    responses : array-like, pandas.DataFrame, pandas.Series, scipy.sparse matrix or Responses
        Models x items, coded as for :func:`cbmm.fit` (1/0/NaN, or -1/+1 with
        0/NaN missing), wide or long (columns ``model``, ``item``,
        ``correct``).  A DataFrame's columns (long: its item ids) are matched
        with the calibrated item ids (compared as strings); an unlabelled
        array must have one column per item, in the items' order; a Series is one
        model's answers, indexed by item and labelled by its name.  Missing
        entries are allowed, and items of the calibration that the responses
        lack count as missing.
    items : FitResult, pandas.DataFrame or path
        The calibrated items: a :class:`FitResult`, a DataFrame with columns
        ``a`` and ``b`` (item ids in an ``item`` column or the index), the
        ``items.csv`` written by :meth:`FitResult.save`, or the folder it was
        saved in.
    sigma : float, optional
        Temperature of the link.  Default: the calibration's (from the
        FitResult, the ``fit.json`` beside ``items.csv`` or a DataFrame's
        ``attrs["sigma"]``, as :meth:`FitResult.items_frame` sets it), else 1.  A value
        that contradicts the calibration's is an error: it would put the
        scores on another scale.
    prior : {"none", "normal", "population"}
        ``"none"``: maximum likelihood; ``"normal"``: MAP under theta ~ N(0, 1),
        the calibration's canonical scale; ``"population"``: the posterior mean and sd
        (EAP) under the calibration's population, the abilities an ``mml`` fit gives its
        own models (its estimated histogram; N(0, 1) for a calibration that estimated
        none), on :data:`cbmm.posterior.GRID` as :func:`cbmm.predict_accuracy`
        computes them.
    coding : {None, "binary", "signed"}
        As for :func:`cbmm.as_responses` (None: inferred where unambiguous).
    layout : {"auto", "wide", "long"}
        As for :func:`cbmm.as_responses`.
    item_error : bool
        Carry the calibration's error into ``se`` where its items have standard errors
        (a calibration fitted with ``se=True``: its FitResult, folder, items.csv or
        :meth:`FitResult.items_frame`): by the delta method, each answered item's
        ``a_se`` and ``b_se`` moving the estimate as the estimating equation says.
        False holds the items fixed, as calibrations without standard errors are.
    tol : float
        Newton stops for a model when its step is below ``tol`` standard errors (or
        the float resolution).
    max_iter : int
        Newton iterations at most.

    Returns
    -------
    pandas.DataFrame
        One row per model (index: the model labels, or 0..N-1), columns
        ``theta`` (estimate), ``se`` (standard error from the observed
        information, including the prior's; the posterior sd with
        ``prior="population"``; with the calibration's item error added where it is
        carried, see ``item_error``), ``se_calibration`` (the part of ``se`` owed to the
        calibration's item error, ``se**2`` being the items-fixed variance plus its
        square; NaN where it is not carried), ``n_items`` (answered items of
        the calibration), ``n_correct`` and ``status``: ``"converged"``,
        ``"max_iter"``, ``"all correct"``, ``"all wrong"`` (no finite MLE:
        theta is +-inf without the prior, the MAP value or posterior mean with it) or
        ``"no information"`` (no answered item with ``a > 0``: theta NaN, or
        the prior's mean and sd).

    Raises
    ------
    ValueError
        Bad responses or items (the message names the cell, item or
        argument), response columns that are not calibrated items, or a
        ``sigma`` that contradicts the calibration.

    Warns
    -----
    DegenerateDataWarning
        Some models answered every informative item correctly or wrongly.
    IntervalWarning
        The calibration has too few models for the intervals to hold their level
        (:data:`cbmm.intervals.FEW_CALIBRATION_MODELS`; docs/trust.md).
    """
    import pandas as pd

    if prior not in PRIORS:
        raise ValueError(f"prior must be one of {list(PRIORS)}, got {prior!r}")
    check_positive("tol", tol)
    check_integer("max_iter", max_iter, minimum=1)
    table, calibrated_sigma, where = read_items(items)
    if prior == "population" and "population" not in table.attrs and not (
            isinstance(items, FitResult)  # a fit's own items: its method says
            or isinstance(items, pd.DataFrame) and "sigma" in items.attrs  # items_frame()'s
            or isinstance(items, (str, os.PathLike)) and _fit_folder(Path(items))):
        warn(f"{where}: a table of items without the calibration's population "
             "(attrs['population']): prior='population' is N(0, 1) here, the abilities' scale "
             "of a cbmm, lbfgsb or manopt calibration but not an mml one's population; give "
             "an mml fit's folder or FitResult", CbmmWarning)
    if sigma is None:
        sigma = 1.0 if calibrated_sigma is None else calibrated_sigma
    else:
        sigma = check_sigma(sigma)
    if calibrated_sigma is not None and not math.isclose(sigma, calibrated_sigma):
        raise ValueError(f"sigma={sigma:g} contradicts the calibration's sigma="
                         f"{calibrated_sigma:g} ({where}); the scores would be on another scale")

    y, labels = aligned_responses(responses, table, coding, layout)
    a, b = table["a"].to_numpy(float), table["b"].to_numpy(float)
    has_se = set(ITEM_SE) <= set(table.columns)
    carried = bool(item_error) and has_se
    if carried:
        a_se, b_se = table[list(ITEM_SE)].to_numpy(float).T
    theta = np.empty(y.shape[0])
    se = np.empty(y.shape[0])
    se_calibration = np.full(y.shape[0], np.nan)
    status = np.empty(y.shape[0], dtype=object)
    if prior == "population":
        log_prior = prior_on_grid(table.attrs.get("population"))
        rows = max(1, _BLOCK_CELLS // (y.shape[1] + GRID.size))
    else:
        rows = max(1, _BLOCK_CELLS // max(1, y.shape[1]))
    for lo in range(0, y.shape[0], rows):
        block = slice(lo, lo + rows)
        if prior == "population":
            theta[block], se[block] = posterior_moments(y[block], a / sigma, b / sigma,
                                                        log_prior)
            status[block] = _statuses(y[block], a)
        else:
            theta[block], se[block], status[block] = _solve_block(
                y[block], a, b, float(sigma), prior == "normal", tol, int(max_iter))
        if carried:
            se_calibration[block] = _calibration_se(
                y[block], theta[block], se[block], a, b, a_se, b_se, float(sigma))
    if carried:
        se = np.hypot(se, np.where(np.isnan(se_calibration), 0.0, se_calibration))
    answered = (y != 0).sum(axis=1)
    correct = (y > 0).sum(axis=1)
    if "n_models" in table.attrs and answered.size:
        warn_small_calibration(table.attrs["n_models"], int(answered.max()), has_se, carried)
    extreme = np.isin(status, ("all correct", "all wrong"))
    if extreme.any():
        names = ", ".join(str(labels[i]) for i in np.flatnonzero(extreme)[:5])
        more = ", ..." if extreme.sum() > 5 else ""
        warn(f"{int(extreme.sum())} model(s) answered every informative item correctly "
             f"or every one wrongly ({names}{more})"
             + ("; their maximum-likelihood ability is infinite (use prior='normal' "
                "or 'population' for finite estimates)" if prior == "none" else ""),
             DegenerateDataWarning)
    return pd.DataFrame({"theta": theta, "se": se, "se_calibration": se_calibration,
                         "n_items": answered, "n_correct": correct, "status": status},
                        index=pd.Index(labels, name="model"))


def _calibration_se(y, theta, se, a, b, a_se, b_se, sigma):
    """The standard error each ability owes to the calibration's items, by the delta method.

    The estimate solves ``U(theta) = sum_j alpha_j (u_j - p_j) [- theta] = 0`` over the
    answered items (``alpha = a / sigma``, ``beta = b / sigma``, ``u_j`` 1 for a right
    answer), so ``d theta / d phi = (dU / d phi) / I`` with ``I = 1 / se**2`` its curvature
    (the posterior precision, for a posterior mean):

        d theta / d alpha_j = ((u_j - p_j) - alpha_j theta w_j) / I,
        d theta / d beta_j = -alpha_j w_j / I,        w_j = p_j (1 - p_j),

    and its variance is ``sum_j`` of their squares times ``a_se_j**2 / sigma**2`` and
    ``b_se_j**2 / sigma**2``: each item's error on its own, neither the covariance of its
    a and b nor that between items (which the fit shares through the abilities' scale).
    An item without a standard error (NaN: its a held at 0, or set aside) adds nothing; an
    answered item with an infinite one makes it infinite.  For a posterior mean
    (``prior="population"``) the estimating equation is the MAP's, taken at the mean: an
    approximation (in a user's check against its own finite differences, 1-11 % high).
    NaN where the ability or its ``se`` is not finite."""
    finite = np.isfinite(theta) & np.isfinite(se) & (se > 0)
    out = np.full(theta.shape, np.nan)
    if not finite.any():
        return out
    alpha, beta = a / sigma, b / sigma
    with np.errstate(over="ignore"):
        var_alpha, var_beta = (a_se / sigma) ** 2, (b_se / sigma) ** 2
    unbounded = np.isposinf(var_alpha) | np.isposinf(var_beta)  # an item known not at all
    var_alpha, var_beta = (np.where(np.isfinite(v), v, 0.0) for v in (var_alpha, var_beta))
    t = theta[finite, None]
    answered = y[finite] != 0
    right = (y[finite] > 0).astype(float)
    with np.errstate(over="ignore", invalid="ignore"):
        x = t * alpha + beta
        p = expit(x)
        w = np.exp(log_pq(np.abs(x)))  # p (1 - p), no overflow
        d_alpha = np.where(answered, (right - p) - np.where(w > 0, alpha * t * w, 0.0), 0.0)
        d_beta = np.where(answered, -alpha * w, 0.0)
        variance = (d_alpha ** 2 @ var_alpha + d_beta ** 2 @ var_beta) * se[finite] ** 4
    variance[answered[:, unbounded].any(axis=1)] = np.inf
    out[finite] = np.sqrt(variance)
    return out


#: The logit of an item set aside by the fit (answered alike by every calibration model):
#: finite, so that a new model's other answer to it is a likelihood constant in the
#: ability (exp(-40), not a log of 0), and its probability 1 (or 0) in double precision.
SET_ASIDE_LOGIT = 40.0


def _warn_not_an_answer(status, info) -> None:
    """A ConvergenceWarning when the calibration is not an optimum, a DegenerateDataWarning
    when its answers did not link its items: what is computed from them is not an answer
    either; an IntervalWarning when they linked them weakly (its ``info["prior_bias"]``)."""
    biased = (info or {}).get("prior_bias") or {}
    if status not in NOT_AN_OPTIMUM and status != "disconnected" and biased.get("exceeds_limit"):
        group = (f" (among them a group of {biased['largest_group']})"
                 if biased["largest_group"] >= biased["group_limit"] else "")
        warn(f"the calibration left {biased['share_beyond']:.0%} of its models' "
             f"abilities{group} to its prior (its info['prior_bias']): groups of its items "
             "that few models "
             "answered together are placed against each other by the prior, not by answers, "
             "and so are abilities scored on them (docs/trust.md, weakly linked groups)",
             IntervalWarning)
    if status in NOT_AN_OPTIMUM:
        advice = ("some items have no finite optimum: refit with a prior (method='cbmm', "
                  "its default) or degenerate='set_aside'" if status == "unbounded"
                  else "refit until it is converged")
        warn(f"the calibration's status is {status}: its item parameters "
             f"are not an optimum, nor is what is computed from them; {advice} "
             "(docs/trust.md)", ConvergenceWarning)
    elif status == "disconnected":
        warn("the calibration's status is disconnected: its models and items fall into "
             "groups that share no answer: items of different groups are on scales that no "
             "answer linked, and so is an ability scored on them (docs/trust.md)",
             DegenerateDataWarning)


def read_items(items):
    """The calibrated items as ``(table, sigma, description)``.

    ``table`` has columns ``a`` and ``b`` indexed by item id, and ``a_se`` and ``b_se``
    where the calibration has standard errors (:func:`score` carries them into its
    ``se``); ``sigma`` is the calibration's temperature where it is known (else None), and
    ``table.attrs["n_models"]`` the number of its models where that is known (a FitResult,
    a saved fit, :meth:`FitResult.items_frame`).  An item the fit set
    aside (``degenerate="set_aside"``: a = NaN, b = +-inf) becomes a = 0 and
    b = +-:data:`SET_ASIDE_LOGIT` sigma: no information, answered as every calibration
    model answered it (their positions in ``table.attrs["set_aside"]``).  Where the
    calibration estimated its models' population (an ``mml`` fit's
    ``info["population"]``, which :meth:`FitResult.items_frame` carries in
    ``attrs["population"]``), ``table.attrs["population"]`` holds it: new models' abilities
    have it as their prior (``score(..., prior="population")`` and
    :mod:`cbmm.efficient`).
    """
    import pandas as pd

    sigma = population = n_models = None
    if isinstance(items, FitResult):
        if items.failed:
            raise ValueError(f"items: the calibration fit failed ({items.status})")
        _warn_not_an_answer(items.status, items.info)
        frame = pd.DataFrame({"a": np.asarray(items.a, float), "b": np.asarray(items.b, float)},
                             index=getattr(items.a, "index", None))
        if items.has_se:
            frame["a_se"], frame["b_se"] = (np.asarray(v, float) for v in (items.a_se, items.b_se))
        n_models = int(np.size(items.theta))
        where = "the calibration FitResult"
        sigma = _calibrated_sigma(items.sigma, where)
        population = _fitted_population(items.method, items.info, where)
    elif isinstance(items, pd.DataFrame):
        frame, where = items, "items"
        if "sigma" in items.attrs:  # FitResult.items_frame()'s temperature
            sigma = _calibrated_sigma(items.attrs["sigma"], "items (its attrs['sigma'])")
        if "population" in items.attrs:  # and an mml fit's population
            population = checked_population(items.attrs["population"],
                                            "items (its attrs['population'])")
        if "n_models" in items.attrs:  # items_frame()'s count of the calibration's models
            n_models = check_integer("items (its attrs['n_models'])", items.attrs["n_models"],
                                     minimum=1)
    elif not isinstance(items, (str, os.PathLike)):
        raise ValueError(f"items: expected a FitResult, a DataFrame with columns a and b, or "
                         f"the path of a saved fit or its items.csv; got {type(items).__name__}")
    else:
        path = Path(items)
        if _fit_folder(path):  # a saved fit: its tables checked against the manifest in fit.json
            folder = path if path.is_dir() else path.parent
            meta, _, frame = read_result_folder(folder)
            where = str(folder / "items.csv")
            if str(meta.get("status", "")).startswith("failed"):
                raise ValueError(f"{where}: the calibration fit failed ({meta['status']})")
            _warn_not_an_answer(meta.get("status"), meta.get("info"))
            sigma = _calibrated_sigma(meta.get("sigma"), folder / "fit.json")
            population = _fitted_population(meta["method"], meta["info"], folder / "fit.json")
            n_models = meta["n_models"]
        else:
            where = str(path)
            if path.name == "fit.json" and path.is_file():  # read as a CSV: "2 fields"
                raise ValueError(f"{where}: a fit's record, not its items; give the fit's "
                                 f"folder {path.parent} (or its items.csv)")
            if not path.is_file():
                raise ValueError(f"{where}: no such file (expected the items.csv written by "
                                 "FitResult.save, or its folder)")
            # every line as wide as the header (a short one read as b = NaN, "a failed
            # calibration?"), checked as a response table's lines are
            from .data.local import _check_field_counts, _header

            _check_field_counts(path, len(_header(path)), "items")
            frame = _user_items(path.read_bytes(), where)
    missing = [c for c in ("a", "b") if c not in frame.columns]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing}; expected columns item, a, b")
    if "item" in frame.columns:
        frame = frame.set_index("item")
    columns = ["a", "b", *ITEM_SE] if set(ITEM_SE) <= set(frame.columns) else ["a", "b"]
    table = frame[columns]
    named = ", ".join(columns[:-1]) + " and " + columns[-1]
    try:
        table = table.astype(float)
    except (TypeError, ValueError):
        for column in columns:
            values = table[column]
            try:
                bad = values.notna() & pd.to_numeric(values, errors="coerce").isna()
            except TypeError:  # cells that are not even text (lists, say)
                break
            if bad.any():
                raise ValueError(f"{where}: item {bad.index[bad.argmax()]!r} has {column}="
                                 f"{values[bad].iloc[0]!r}; columns {named} must be "
                                 "numbers") from None
        raise ValueError(f"{where}: columns {named} must be numbers") from None
    if table.empty:
        raise ValueError(f"{where}: no items")
    ids = table.index.astype(str)
    if ids.duplicated().any():
        raise ValueError(f"{where}: item id(s) listed more than once: "
                         f"{list(ids[ids.duplicated()].unique()[:5])}")
    a, b = table["a"].to_numpy(), table["b"].to_numpy()
    aside = np.isnan(a) & np.isinf(b)  # fit(degenerate="set_aside")'s items
    bad = ~aside & (~np.isfinite(table[["a", "b"]].to_numpy()).all(axis=1) | (a < 0))
    if bad.any():
        first = table[bad].iloc[0]
        raise ValueError(f"{where}: item {table.index[bad][0]!r} has a={first['a']:g}, "
                         f"b={first['b']:g}; expected finite values and a >= 0, or a = NaN "
                         f"and b = +-inf for an item the fit set aside ({int(bad.sum())} "
                         "such item(s); a failed calibration?)")
    if len(columns) > 2:  # a standard error: NaN (none: a held at 0, say) or a number >= 0
        errors = table[list(ITEM_SE)]
        wrong = (errors < 0).to_numpy()
        if wrong.any():
            row, col = np.argwhere(wrong)[0]
            raise ValueError(f"{where}: item {table.index[row]!r} has {ITEM_SE[col]}="
                             f"{errors.iat[row, col]:g}; a standard error is >= 0 (or empty)")
    if aside.any():  # every calibration model answered it alike: no information, p = 0 or 1
        table = table.assign(a=np.where(aside, 0.0, a), b=np.where(
            aside, np.sign(b) * SET_ASIDE_LOGIT * (1.0 if sigma is None else sigma), b))
    table.index = ids
    if population is not None:
        table.attrs["population"] = population
    if n_models is not None:
        table.attrs["n_models"] = int(n_models)
    if aside.any():  # positions, for the audit to say so (a tuple: attrs are compared)
        table.attrs["set_aside"] = tuple(np.flatnonzero(aside).tolist())
    return table, sigma, where


def _fit_folder(path: Path) -> bool:
    """Whether ``path`` names a saved fit: its folder, or the items.csv in it."""
    return path.is_dir() or (path.name == "items.csv" and any(
        path.with_name(name).is_file() for name in ("fit.json", "abilities.csv")))


def _fitted_population(method, info, where):
    """The population a fit estimated (its ``info["population"]``, checked; an mml fit's),
    or None for a fit without one; a fit of a method whose scale is its population's that
    lacks it was edited (scored under N(0, 1) instead, its new models came out up to 0.45
    from where the fit puts them)."""
    if "population" in info:
        return checked_population(info["population"], where)
    try:
        population_scale = get_method(method).population_scale
    except ValueError:  # a method this installation does not register
        population_scale = False
    if population_scale:
        raise ValueError(f"{where}: a {method!r} fit without its population "
                         "(info['population']); the file was edited or damaged")
    return None


def _user_items(data: bytes, where: str):
    """An items table of the user's (no fit.json beside it): item ids, in a column ``item``
    or the first column, as text."""
    try:
        return read_labelled_csv(data, "item", where)
    except ResultFolderError:  # no item column: the ids are the first column
        pass
    first, _, rest = data.partition(b"\n")
    try:
        header = next(csv.reader([first.rstrip(b"\r").decode("utf-8-sig")]))
    except (UnicodeDecodeError, StopIteration, csv.Error) as exc:
        raise ValueError(f"{where}: not a readable CSV table ({exc})") from None
    if not header or header[0] in ("a", "b"):
        raise ValueError(f"{where}: no column of item ids (expected columns item, a, b; "
                         f"found {header[:5]})")
    renamed = io.StringIO()
    csv.writer(renamed, lineterminator="\n").writerow(["item", *header[1:]])
    try:
        return read_labelled_csv(renamed.getvalue().encode() + rest, "item", where)
    except ResultFolderError as exc:
        raise ValueError(str(exc)) from None


def _calibrated_sigma(value, where) -> float:
    """The calibration's temperature, checked (scores at a wrong one would be wrong)."""
    try:
        return check_sigma(value)
    except ValueError:
        raise ValueError(f"{where}: sigma {value!r} is not a temperature the model takes "
                         f"(a number in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}]); the file "
                         "was edited or damaged") from None


def aligned_responses(responses, table, coding=None, layout="auto"):
    """The int8 +-1/0 matrix with one column per calibrated item (the rows of ``table``),
    and the row labels."""
    import pandas as pd

    if layout not in ("auto", "wide", "long"):
        raise ValueError(f"layout must be 'auto', 'wide' or 'long', got {layout!r}")
    if isinstance(responses, pd.Series):  # one model's answers, its label the name
        responses = responses.to_frame().T
    long = isinstance(responses, pd.DataFrame) and (
        layout == "long" or layout == "auto" and set(LONG_COLUMNS) <= set(responses.columns))
    if long:
        responses = _long_to_wide(responses, coding)
    elif _is_sparse(responses):  # the stored entries are the observed cells
        coo = responses.tocoo()
        cells = coo.row.astype(np.int64) * coo.shape[1] + coo.col
        order = np.argsort(cells, kind="stable")
        again = np.flatnonzero(cells[order][1:] == cells[order][:-1])
        if again.size:
            first = order[again[0] + 1]
            raise ValueError(f"responses: the sparse matrix stores {again.size} cell(s) more "
                             f"than once, first row {coo.row[first]}, column {coo.col[first]}; "
                             "store each answer once")
        dense = np.full(coo.shape, np.nan)
        dense[coo.row, coo.col] = coo.data
        responses = dense
    if isinstance(responses, Responses):
        labels = responses.row_labels
        # unlabelled (built from an array): one column per calibrated item, in their order
        position = (None if responses.col_labels is None else
                    _item_positions(responses.col_labels, table, labels, long))
        y = responses.to_dense().y
    else:
        frame = responses if isinstance(responses, pd.DataFrame) else None
        if frame is None:
            try:
                values = np.asarray(responses)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"responses: cannot be read as a models x items matrix "
                                 f"({' '.join(str(exc).split())})") from None
            if values.ndim != 2:
                raise ValueError(f"responses: expected a 2-D models x items matrix, "
                                 f"got {values.ndim}-D (one model's answers: a pandas "
                                 "Series indexed by item)")
            frame = pd.DataFrame(values)
            position = None
        else:
            columns = frame.columns
            # as_responses' checks of the user's own columns, before _coded pads them (its
            # count of columns would be off) and before the answers: a column that is no
            # item (a 'rank', say) is named as such, not by its values
            _check_labels(pd.Index(columns), "item ids", "column", "responses")
            position = _item_positions(columns, table, frame.index, long)
        labels = frame.index
        y = _coded(frame, coding)
    n_items = len(table)
    if position is None:
        if y.shape[1] != n_items:
            raise ValueError(f"responses: {y.shape[1]} columns but {n_items} calibrated items; "
                             "pass a DataFrame whose columns are the item ids")
        aligned = y
    else:
        aligned = np.zeros((y.shape[0], n_items), dtype=np.int8)
        aligned[:, position] = y
    if labels is None:
        labels = pd.RangeIndex(y.shape[0])
    return aligned, labels


def _item_positions(columns, table, labels, long: bool) -> np.ndarray:
    """Where each of the responses' items (distinct as text, as as_responses checks them) is
    among the calibrated items (``table``'s rows); an item not calibrated is an error
    (``long``: the items are a long table's ids, not columns)."""
    import pandas as pd

    what = "item id(s)" if long else "item column(s)"
    ids = pd.Index(columns).astype(str)
    position = table.index.get_indexer(ids)
    unknown = ids[position < 0]
    if len(unknown):
        rows_are_items = not long and len(unknown) == len(ids) and labels is not None and (
            table.index.get_indexer(pd.Index(labels).astype(str)) >= 0).mean() > 0.5
        # a long table read as wide (its model column the labels, in a file)
        long_named_otherwise = not long and {"model", "item"} <= {*unknown, getattr(
            labels, "name", None)}
        raise ValueError(f"responses: {len(unknown)} {what} not among the calibrated "
                         f"items: {list(unknown[:5])}; " + (
                             "its rows are, mostly: transpose it (rows are models, "
                             "columns items)" if rows_are_items else
                             "a long table? its columns are model, item and correct: rename "
                             "the answers' column to correct (the commands: "
                             "--correct-column)" if long_named_otherwise else
                             "drop them: cbmm.score holds the calibrated items fixed, and "
                             "items it lacks need a new calibration (a fit of the old and "
                             "the new answers together)"))
    return position


def _is_sparse(data) -> bool:
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(data)


def _long_to_wide(records, coding=None):
    """A long table's records as a models x items frame (every record named in errors:
    by its line, for a file :func:`cbmm.data.read_table` read)."""
    import pandas as pd

    missing = [c for c in LONG_COLUMNS if c not in records.columns]
    if missing:
        raise ValueError(f"responses: a long table needs the columns {list(LONG_COLUMNS)}; "
                         f"missing {missing}")
    def at(*positions):
        """Where records are: by their labels (a file's lines, say), or where the labels
        repeat (tables concatenated) by their positions."""
        if records.index.is_unique:
            name, labels, note = records.index.name or "row", records.index[list(positions)], ""
        else:
            name, labels, note = "record", positions, " (counted from 0)"
        plural = "s" if len(positions) > 1 else ""
        return f"{name}{plural} {' and '.join(str(label) for label in labels)}{note}"
    for column in LONG_COLUMNS[:2]:
        ids = records[column]
        blank = ids.isna() | (ids.map(lambda v: isinstance(v, str) and not v.strip())
                              if ids.dtype == object else False)
        absent = np.flatnonzero(np.asarray(blank))
        if absent.size:
            article = "an" if column == "item" else "a"
            raise ValueError(f"responses: {absent.size} record(s) without {article} {column} "
                             f"id, first at {at(absent[0])}")
    correct = records["correct"]
    allowed = [0, 1] if coding == "binary" else [-1, 0, 1]
    numbers = correct if pd.api.types.is_bool_dtype(correct) \
        else pd.to_numeric(correct, errors="coerce")
    bad = np.flatnonzero((correct.notna() & ~numbers.isin(allowed)).to_numpy())
    if bad.size:
        first = records.iloc[bad[0]]
        more = f" ({bad.size - 1} more such record(s))" if bad.size > 1 else ""
        raise ValueError(f"responses: value {_show(first['correct'])} at {at(bad[0])} "
                         f"(model {_show(first['model'])}, item "
                         f"{_show(first['item'])}){more}; expected {_EXPECTED[coding]}")
    duplicated = np.flatnonzero(records.duplicated(["model", "item"]).to_numpy())
    if duplicated.size:
        first = records.iloc[duplicated[0]]
        same = np.flatnonzero(((records["model"] == first["model"])
                               & (records["item"] == first["item"])).to_numpy())
        answers = records["correct"].iloc[same]
        agree = ("the same answer" if answers.nunique(dropna=False) == 1 else
                 "answers " + ", ".join(_show(v) for v in answers.iloc[:3]))
        raise ValueError(f"responses: model {_show(first['model'])} answers item "
                         f"{_show(first['item'])} more than once, at "
                         f"{at(*same[:3])} ({agree}; "
                         f"{duplicated.size} repeated record(s) in all); keep one record "
                         "per model and item")
    return records.pivot(index="model", columns="item", values="correct")


def _coded(frame: pd.DataFrame, coding) -> np.ndarray:
    """Validate and code ``frame`` with :func:`cbmm.as_responses`.

    ``as_responses`` checks what a fit needs: at least two models and no row
    or column without an observed entry.  A model to score may be alone and
    may have skipped items, so a column of ``1`` (correct in either coding) and two rows
    of ``1`` are appended, and cut off after validation; the rows and columns keep their
    numbers, and what counts as missing (NaN, None, blank text, 0 in signed coding),
    the value checks and their messages stay those of ``as_responses``.
    """
    import pandas as pd

    def unused(labels, stem, count):  # padding labels no user label shares, as text
        taken = set(map(str, labels))
        free = (f"({stem} {k})" for k in range(len(taken) + count))
        return [label for label in free if label not in taken][:count]

    rows = unused(frame.index, "padding row", 2)
    # by position, from the dtypes: a column looked up by label costs 0.1 ms (12,032: 1 s)
    pad = pd.DataFrame({k: [True, True] if pd.api.types.is_bool_dtype(dtype) else [1, 1]
                        for k, dtype in enumerate(frame.dtypes)}, index=rows)
    pad.columns = frame.columns
    padded = pd.concat([frame.set_axis(frame.index.astype(object)), pad])
    padded.columns = frame.columns
    padded.insert(len(frame.columns), unused(frame.columns, "padding column", 1)[0], 1,
                  allow_duplicates=True)  # duplicated user labels are as_responses' to name
    if FIRST_LINE in frame.attrs:  # a file's rows named by its lines, as cbmm fit names them
        padded.attrs[FIRST_LINE] = frame.attrs[FIRST_LINE]
    return as_responses(padded, coding=coding, storage="dense", layout="wide").y[:-2, :-1]


def _statuses(y, a) -> np.ndarray:
    """Each row's status before any solving: ``"converged"`` where a model answered an
    informative item (``a > 0``) correctly and one wrongly, else ``"all correct"``, ``"all
    wrong"`` or ``"no information"``."""
    informative = (y != 0) & (a > 0)[None, :]
    has_correct = (informative & (y > 0)).any(axis=1)
    has_wrong = (informative & (y < 0)).any(axis=1)
    status = np.full(y.shape[0], "converged", dtype=object)
    status[has_correct & ~has_wrong] = "all correct"
    status[~has_correct & has_wrong] = "all wrong"
    status[~has_correct & ~has_wrong] = "no information"
    return status


def _solve_block(y, a, b, sigma, map_prior, tol, max_iter):
    """Each row's minimiser of ``L_i``, a convex function of one variable, found as the root
    of ``L_i'``: Newton steps kept inside a bracket of the root, bisection where a step
    would leave it (or shrinks it too slowly), so that items of any slope converge (an
    item with a huge ``a/sigma`` is a step: Newton alone stalls beside it).

    Every quantity is computed without overflow for ``a`` and ``b`` up to the float64
    range: the linear predictor as ``s_j (theta - t_j)`` with ``s_j = a_j / sigma`` and
    the item's threshold ``t_j = -b_j / a_j``, ``L_i'`` and ``L_i''`` divided by the
    largest slope and its square, and ``p (1 - p)`` from ``|x|`` alone.
    """
    n = y.shape[0]
    yf = y.astype(float)
    observed = y != 0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        slope = a / sigma
        offset = b / sigma
        scale = np.float64(slope.max() if (slope > 0).any() else 1.0)
        relative = slope / scale
        threshold = np.where(slope > 0, -offset / np.where(slope > 0, slope, 1.0), 0.0)
    status = _statuses(y, a)
    active = np.ones(n, dtype=bool) if map_prior else status == "converged"
    by_cells = observed.mean() < _CELLS_BELOW  # the answered cells alone, row by row
    if by_cells:
        cell_row, cell_col = np.nonzero(observed)
        cell_y = yf[cell_row, cell_col]
        chosen = np.zeros(n, dtype=bool)
        place = np.zeros(n, dtype=np.intp)  # a chosen row's place among the rows asked for

    def terms(t, yv, cols):
        """Each cell's ``L'`` and ``L''`` terms (over ``scale`` and its square)."""
        with np.errstate(over="ignore", invalid="ignore"):
            x = np.where(slope[cols] > 0, slope[cols] * (t - threshold[cols]), offset[cols])
            spread = np.exp(log_pq(np.abs(x)))  # p (1 - p)
            return (-yv * relative[cols] * expit(-yv * x),
                    relative[cols] * relative[cols] * spread)

    def derivatives(t, rows):
        """``L_i' / scale`` and ``L_i'' / scale**2`` at ``theta = t`` for the rows."""
        if by_cells:
            chosen[:] = False
            chosen[rows] = True
            place[rows] = np.arange(len(rows))
            keep = chosen[cell_row]
            at = place[cell_row[keep]]
            first, second = terms(t[at], cell_y[keep], cell_col[keep])
            grad = np.bincount(at, weights=first, minlength=len(rows))
            hess = np.bincount(at, weights=second, minlength=len(rows))
        else:
            first, second = terms(t[:, None], yf[rows], slice(None))
            seen = observed[rows]
            grad = np.where(seen, first, 0.0).sum(axis=1)
            hess = np.where(seen, second, 0.0).sum(axis=1)
        if map_prior:
            grad, hess = grad + t / scale, hess + 1.0 / scale ** 2
        return grad, hess

    theta = np.zeros(n)
    todo = np.flatnonzero(active)
    # a bracket [lo, hi] of each row's root: L' is increasing, negative at lo, positive at hi
    lo, hi = np.full(n, -1.0), np.full(n, 1.0)
    for bound, sign in ((lo, 1.0), (hi, -1.0)):
        rows = todo
        while rows.size:
            grad, _ = derivatives(bound[rows], rows)
            rows = rows[sign * grad > 0]  # not yet past the root
            wider = bound[rows] * 2.0
            stuck = ~np.isfinite(wider)
            bound[rows[~stuck]] = wider[~stuck]
            rows = rows[~stuck]
    last_step = np.full(n, np.inf)
    for _ in range(max_iter):
        if todo.size == 0:
            break
        t = theta[todo]
        grad, hess = derivatives(t, todo)
        lo[todo] = np.where(grad < 0, t, lo[todo])
        hi[todo] = np.where(grad > 0, t, hi[todo])
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            newton = t - grad / (hess * scale)
        middle = (lo[todo] + hi[todo]) / 2.0
        # a Newton step below the float resolution of t leaves it where it is, which is
        # an end of the bracket (set just above): converged, not a reason to bisect (the
        # rows converged that way bisected the bracket down to the float resolution: 60
        # derivative passes where 12 do)
        inside = (np.isfinite(newton) & (newton > lo[todo]) & (newton < hi[todo])
                  & (np.abs(newton - t) <= 0.5 * last_step[todo])) | (newton == t)
        new = np.where(grad == 0, t, np.where(inside, newton, middle))
        step = np.abs(new - t)
        theta[todo] = new
        last_step[todo] = step
        # done after a Newton step below tol standard errors (1 / sqrt(L'')), or at the
        # float resolution; not after a bisection: far from a near-deterministic item's
        # threshold the standard error there is not the one at the root
        with np.errstate(divide="ignore", invalid="ignore"):
            se = np.where(hess > 0, 1.0 / (scale * np.sqrt(hess)), 0.0)
        done = (inside & (step <= tol * se)) | (step <= 4 * np.finfo(float).eps * np.abs(new))
        todo = todo[~done]
    status[todo] = "max_iter"

    se = np.full(n, np.inf)
    fitted = np.flatnonzero(active)
    if fitted.size:  # 1 / sqrt(L''), its terms s^2 p (1 - p) summed from their logarithms
        t = theta[fitted]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            margin = np.abs(np.where(slope > 0, slope * (t[:, None] - threshold), offset))
            log_terms = 2.0 * np.log(slope) + log_pq(margin)
            information = np.where(observed[fitted] & (slope > 0), np.exp(log_terms),
                                   0.0).sum(axis=1) + (1.0 if map_prior else 0.0)
            se[fitted] = 1.0 / np.sqrt(information)
    if not map_prior:
        theta[status == "all correct"] = np.inf
        theta[status == "all wrong"] = -np.inf
        theta[status == "no information"] = np.nan
    return theta, se, status
