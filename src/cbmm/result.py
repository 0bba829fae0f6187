"""One result type for every method, and the canonical parameter form."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ._checks import check_level, is_integer
from ._warn import CbmmWarning, warn
from .io import file_record, seal_broken, write_with_manifest
from .model import SIGMA_RANGE
from .stopping import PAPER_TOL

if TYPE_CHECKING:  # imported where used, so that ``import cbmm`` does not load pandas
    import pandas as pd

__all__ = ["SolverOutput", "FitResult", "ConvergenceWarning", "ResultFolderError",
           "MissingResultFolderError",
           "canonicalize", "read_result_folder", "read_labelled_csv"]

#: How a missing number is written in the CSV files of a result (pandas' default), and
#: what the readers take for one besides.  Labels are never missing: "NA" is a model name.
_MISSING_NUMBER = ("", "NaN", "nan")


class ResultFolderError(ValueError):
    """A result folder that is not one whole :meth:`FitResult.save`: a file is missing, or
    does not match the manifest in ``fit.json`` (parts of two saves, or an interrupted one)."""


class MissingResultFolderError(ResultFolderError, FileNotFoundError):
    """The result folder does not exist: a :class:`ResultFolderError` and, as for any path
    that is not there, a ``FileNotFoundError``."""


def canonicalize(theta, a, b):
    """Put ``(theta, a, b)`` in the canonical form used for every method.

    theta is standardised to mean 0 and standard deviation 1 over models
    (population sd, ``ddof=0``); ``a <- a * sd`` and ``b <- b + a * mean``
    compensate, so ``X = theta a^T + 1 b^T`` is unchanged.  A constant theta
    (sd = 0) is only centred.  pandas Series come back as Series with their labels,
    arrays as arrays.
    """
    pd = sys.modules.get("pandas")  # not imported for it: no Series without it
    given = (theta, a, b)
    theta, a, b = (np.asarray(values, dtype=float) for values in given)
    mean = theta.mean()
    sd = theta.std()
    b = b + a * mean
    if sd > 0 and np.isfinite(sd):
        theta, a = (theta - mean) / sd, a * sd
    else:
        theta = theta - mean
    return tuple(pd.Series(values, index=original.index, name=original.name)
                 if pd is not None and isinstance(original, pd.Series) else values
                 for values, original in zip((theta, a, b), given))


class ConvergenceWarning(CbmmWarning):
    """A fit is not an answer: stopped at ``max_iter``, short of a stationary point, its
    starts disagree, or it failed (its time limit, a crash: no estimate)."""


@dataclass(eq=False)
class SolverOutput:
    """What a method's solver returns to :func:`cbmm.fit` (raw parametrisation).

    ``runtime_s`` is the wall time of the optimisation alone; ``info`` holds
    method-specific extras (e.g. start-up or conversion seconds).
    """

    theta: np.ndarray
    a: np.ndarray
    b: np.ndarray
    loss_history: list
    n_iter: int
    status: str
    runtime_s: float
    info: dict = field(default_factory=dict)

    @classmethod
    def failed(cls, reason: str, n: int, j: int, *, runtime_s: float = 0.0, loss_history=(),
               n_iter: int = 0, info=None) -> "SolverOutput":
        """A failed solver output: NaN parameters and ``status = "failed: <reason>"`` (the
        prefix is not doubled), with the progress made before the failure."""
        status = reason if reason.startswith("failed") else f"failed: {reason}"
        return cls(theta=np.full(n, np.nan), a=np.full(j, np.nan), b=np.full(j, np.nan),
                   loss_history=list(loss_history), n_iter=int(n_iter), status=status,
                   runtime_s=float(runtime_s), info=dict(info or {}))


@dataclass(eq=False)
class FitResult:
    """Result of :func:`cbmm.fit` for any method.

    Results compare by identity (``==``, ``in``, as keys), as the library's other result
    types do: field by field the truth value of a pandas Series is ambiguous; compare the
    fields themselves (``result.theta.equals(other.theta)``).

    Attributes
    ----------
    theta : ndarray or pandas.Series (N,)
        Model abilities, canonical form (mean 0, sd 1).
    a : ndarray or pandas.Series (J,)
        Item discriminations (>= 0).
    b : ndarray or pandas.Series (J,)
        Item easiness (the paper's difficulty is ``-b``; the ability at which an item is
        answered correctly with probability 1/2, the item audit's ``difficulty``, is
        ``-b / a``).
    loss : float
        Loss (3) at the returned parameters (float64, recomputed by
        :func:`cbmm.fit` for every method alike; NaN if failed).
    loss_history : list of float
        What the method minimises after each iteration, as it tracks it (first entry:
        the start where the method reports it): loss (3) plus the prior's penalty under
        a prior (``info["objective"]`` at the end; ``loss`` is loss (3) alone), the
        negative marginal log-likelihood of a marginal method.
    n_iter : int
        Iterations / epochs / EM cycles used.
    status : str
        ``"converged"``, ``"max_iter"``, ``"not_stationary"``, ``"multimodal"``,
        ``"disconnected"``, ``"unbounded"`` or ``"failed: <reason>"`` (docs/trust.md says what each means
        and which are not an optimum: :data:`cbmm.api.NOT_AN_OPTIMUM`).
    runtime_s : float
        Wall seconds of the fit alone.
    method : str
    sigma, tol, max_iter, seed, init_scale
        The settings of the fit.
    degenerate_items, degenerate_models : list
        Labels (or indices) of items answered all-correct/all-wrong and of
        models with all answers correct/wrong (their b or theta has no finite
        optimum).
    info : dict
        Method-specific extras, and :func:`cbmm.fit`'s measures: ``objective``
        (loss (3) plus the prior's penalty), ``stationarity``,
        ``scaled_gradient``, ``status_reason``, ``starts``, ``set_aside``.
    theta_se, a_se, b_se : ndarray or pandas.Series, optional
        Standard errors of the canonical parameters from the observed
        information (``cbmm.fit(..., se=True)``; NaN where a parameter has
        none, e.g. ``a_j = 0`` at its bound); None when not computed.
    prior_bias : ndarray or pandas.Series, optional
        Per model, how far the ability prior could bias its ability, in standard errors
        (``cbmm.fit(..., se=True)`` under ``prior="normal"``; NaN where not computed;
        :data:`cbmm.intervals.PRIOR_BIAS`); its summary is ``info["prior_bias"]``.
    """

    theta: np.ndarray | pd.Series
    a: np.ndarray | pd.Series
    b: np.ndarray | pd.Series
    loss: float
    loss_history: list
    n_iter: int
    status: str
    runtime_s: float
    method: str
    sigma: float = 1.0
    tol: float = PAPER_TOL
    max_iter: int = 1000
    seed: int | None = 0
    init_scale: float = 1.0
    degenerate_items: list = field(default_factory=list)
    degenerate_models: list = field(default_factory=list)
    info: dict = field(default_factory=dict)
    theta_se: np.ndarray | pd.Series | None = None
    a_se: np.ndarray | pd.Series | None = None
    b_se: np.ndarray | pd.Series | None = None
    prior_bias: np.ndarray | pd.Series | None = None

    #: The files :meth:`save` writes into its folder.
    OUTPUT_FILES = ("abilities.csv", "items.csv", "fit.json")

    @classmethod
    def failure(cls, reason, *, responses, method: str, runtime_s: float = 0.0,
                n_iter: int = 0, loss_history=(), sigma: float = 1.0, tol: float = PAPER_TOL,
                max_iter: int = 1000, seed=0, init_scale: float = 1.0,
                degenerate_items=(), degenerate_models=(), info=None) -> "FitResult":
        """A failed fit (the paper's "NA"): NaN parameters labelled like the data.

        The one constructor of failed results, used by :func:`cbmm.fit` and
        the workflow.

        Parameters
        ----------
        reason : str or BaseException
            Why the fit failed; an exception gives its message (or its type
            name when the message is empty).  Whitespace is collapsed to one
            line; ``status`` is ``"failed: <reason>"``.
        responses : cbmm.Responses or tuple of int
            The data (for the shape and the row/column labels), or ``(N, J)``.
        method : str
        runtime_s : float
            Wall seconds spent before the failure.
        n_iter, loss_history
            Progress made before the failure, where known.
        sigma, tol, max_iter, seed, init_scale
            The settings of the fit.
        degenerate_items, degenerate_models, info
            As for a successful fit; for an exception ``info["exception"]``
            records its type.
        """
        if isinstance(responses, tuple):
            (n, j), row_labels, col_labels = responses, None, None
        else:
            (n, j), row_labels, col_labels = (responses.shape, responses.row_labels,
                                              responses.col_labels)
        info = dict(info or {})
        if isinstance(reason, BaseException):
            info.setdefault("exception", type(reason).__name__)
            reason = str(reason) or type(reason).__name__
        reason = " ".join(str(reason).split()) or "unknown reason"
        status = reason if reason.startswith("failed") else f"failed: {reason}"
        return cls(
            theta=_labelled(np.full(n, np.nan), row_labels, "theta"),
            a=_labelled(np.full(j, np.nan), col_labels, "a"),
            b=_labelled(np.full(j, np.nan), col_labels, "b"),
            loss=math.nan, loss_history=[float(v) for v in loss_history], n_iter=int(n_iter),
            status=status, runtime_s=float(runtime_s), method=method, sigma=float(sigma),
            tol=float(tol), max_iter=int(max_iter), seed=seed, init_scale=float(init_scale),
            degenerate_items=list(degenerate_items), degenerate_models=list(degenerate_models),
            info=info)

    @property
    def failed(self) -> bool:
        return self.status.startswith("failed")

    @property
    def converged(self) -> bool:
        return self.status == "converged"

    def scores(self) -> np.ndarray:
        """Fitted score matrix ``X = theta a^T + 1 b^T``."""
        return np.outer(np.asarray(self.theta), np.asarray(self.a)) + np.asarray(self.b)[None, :]

    def raw_parameters(self):
        """The method's estimates before canonicalisation, ``(theta, a, b)``.

        :func:`cbmm.fit` standardises theta (see :func:`canonicalize`) and
        records the shift and scale it removed in ``info["theta_mean_raw"]``
        and ``info["theta_sd_raw"]``; this undoes that step:
        ``theta_raw = sd * theta + mean``, ``a_raw = a / sd``,
        ``b_raw = b - a_raw * mean`` (``sd = 1`` where theta was constant).
        The published RMSE(b) compares the raw ``b`` with the true ``b``.
        Both values travel through :meth:`save` / :meth:`load` (in
        ``fit.json``).  A failed fit gives NaN.

        Raises
        ------
        ValueError
            If the result records no raw scale (it was not made by
            :func:`cbmm.fit`).
        """
        if self.failed:
            raw = (np.full(np.size(self.theta), np.nan), np.full(np.size(self.a), np.nan),
                   np.full(np.size(self.b), np.nan))
        else:
            try:
                mean = float(self.info["theta_mean_raw"])
                sd = float(self.info["theta_sd_raw"])
            except (KeyError, TypeError) as exc:
                raise ValueError("this result records no raw scale (info['theta_mean_raw'], "
                                 "info['theta_sd_raw']); only results of cbmm.fit do") from exc
            if not (sd > 0 and math.isfinite(sd)):
                sd = 1.0  # canonicalize only centred a constant theta
            theta, a, b = (np.asarray(v, dtype=float) for v in (self.theta, self.a, self.b))
            a_raw = a / sd
            raw = (sd * theta + mean, a_raw, b - a_raw * mean)
        return tuple(_labelled(values, getattr(like, "index", None), name)
                     for values, like, name in zip(raw, (self.theta, self.a, self.b),
                                                   ("theta", "a", "b")))

    def summary(self) -> dict:
        """JSON-serialisable description of the fit (no parameter vectors)."""
        return {
            "method": self.method,
            "status": self.status,
            "loss": _json_float(self.loss),
            "n_iter": int(self.n_iter),
            "runtime_s": float(self.runtime_s),
            "sigma": float(self.sigma),
            "tol": float(self.tol),
            "max_iter": int(self.max_iter),
            "seed": self.seed,
            "init_scale": float(self.init_scale),
            "n_models": int(np.size(self.theta)),
            "n_items": int(np.size(self.a)),
            # without labels (arrays) the tables number the rows, and load gives arrays back
            "labelled": hasattr(self.theta, "index") and hasattr(self.a, "index"),
            "degenerate_items": [_json_label(v) for v in self.degenerate_items],
            "degenerate_models": [_json_label(v) for v in self.degenerate_models],
            "loss_history": [_json_float(v) for v in self.loss_history],
            "info": _jsonable(self.info),
        }

    @property
    def has_se(self) -> bool:
        """Whether the standard errors were computed (``se=True``)."""
        return self.theta_se is not None

    def confint(self, level: float = 0.95) -> dict:
        """Wald intervals ``estimate -+ z se`` of the canonical parameters.

        Parameters
        ----------
        level : float
            Coverage, in (0, 1).

        Returns
        -------
        dict
            ``{"theta", "a", "b"}`` -> pandas.DataFrame indexed like the parameters,
            columns ``estimate``, ``lower``, ``upper``.  ``a``'s lower bound is
            clipped at 0 (its constraint); a parameter without a standard error
            has NaN bounds.

        Raises
        ------
        ValueError
            No standard errors (fit with ``se=True``), or a bad ``level``.
        """
        import pandas as pd
        from scipy.stats import norm

        level = check_level(level)
        if not self.has_se:
            raise ValueError("this fit has no standard errors: fit with cbmm.fit(..., se=True)")
        if self.status != "converged":  # the fit warned once; a table of intervals is read later
            reason = self.info.get("status_reason")
            warn(f"confint: the intervals of a {self.status} fit"
                 + (f" ({reason})" if reason else "")
                 + " are about that point, which is not an answer (docs/trust.md, Status)",
                 ConvergenceWarning)
        z = float(norm.ppf(0.5 + level / 2))
        out = {}
        for name, values, se in (("theta", self.theta, self.theta_se), ("a", self.a, self.a_se),
                                 ("b", self.b, self.b_se)):
            estimate = np.asarray(values, dtype=float)
            half = z * np.asarray(se, dtype=float)
            lower = estimate - half
            if name == "a":
                lower = np.maximum(lower, 0.0)
            out[name] = pd.DataFrame({"estimate": estimate, "lower": lower,
                                      "upper": estimate + half},
                                     index=getattr(values, "index", None))
        return out

    def abilities_frame(self) -> pd.DataFrame:
        import pandas as pd

        theta = self.theta if isinstance(self.theta, pd.Series) else pd.Series(self.theta)
        frame = pd.DataFrame({"model": theta.index, "theta": theta.to_numpy()})
        if self.has_se:
            frame["theta_se"] = np.asarray(self.theta_se, dtype=float)
        if self.prior_bias is not None:
            frame["prior_bias"] = np.asarray(self.prior_bias, dtype=float)
        return frame

    def items_frame(self) -> pd.DataFrame:
        """Columns item, a, b (a_se, b_se with standard errors); ``attrs["sigma"]`` is the
        fit's temperature, which :func:`cbmm.score` and the efficient-evaluation tools read
        from it (a table without it is read at temperature 1), ``attrs["n_models"]`` the
        number of models it rests on (:func:`cbmm.score` warns where its intervals need
        more), and ``attrs["population"]`` an ``mml`` fit's estimated population (new
        models' prior; N(0, 1) without it)."""
        import pandas as pd

        a = self.a if isinstance(self.a, pd.Series) else pd.Series(self.a)
        frame = pd.DataFrame({"item": a.index, "a": a.to_numpy(), "b": np.asarray(self.b)})
        if self.has_se:
            frame["a_se"] = np.asarray(self.a_se, dtype=float)
            frame["b_se"] = np.asarray(self.b_se, dtype=float)
        frame.attrs["sigma"] = self.sigma
        frame.attrs["n_models"] = int(np.size(self.theta))
        if "population" in self.info:
            frame.attrs["population"] = self.info["population"]
        return frame

    def save(self, out_dir, *, replace: bool = True) -> None:
        """Write ``abilities.csv``, ``items.csv`` and ``fit.json`` into ``out_dir``, whole.

        ``fit.json`` is the folder's manifest: it records the size and SHA-256 of the
        two tables, and :meth:`load` (and :func:`cbmm.score`) refuse a folder whose
        tables do not match it, so a folder holding parts of two saves, or an interrupted
        save, is never read as a result (:func:`cbmm.io.write_with_manifest`).  Labels are
        written as text and read back as the same text; a fit without labels (of an
        array) is read back as arrays.

        Parameters
        ----------
        out_dir : path-like
            The folder (created if needed).
        replace : bool
            Replace an earlier result (default).  False: raise ``FileExistsError`` when
            the folder holds any of :data:`OUTPUT_FILES`; of two concurrent saves to one
            folder exactly one succeeds.
        """
        tables = {"abilities.csv": self.abilities_frame(), "items.csv": self.items_frame()}
        files = {name: frame.to_csv(index=False, float_format="%.17g").encode()
                 for name, frame in tables.items()}
        write_with_manifest(out_dir, files, "fit.json", self.summary(), replace=replace)

    @classmethod
    def load(cls, out_dir) -> "FitResult":
        """Read a result written by :meth:`save`, checked against its manifest.

        Raises
        ------
        ResultFolderError
            A missing file, or tables that do not match ``fit.json`` (see :meth:`save`).
        """
        import pandas as pd

        meta, abilities, items = read_result_folder(out_dir)
        labelled = meta.get("labelled", True)  # folders of 0.2.0 record none: labelled

        def column(table, name, label):
            values = table[name].to_numpy()
            return pd.Series(values, index=table[label], name=name) if labelled else values

        theta, a, b = (column(abilities, "theta", "model"), column(items, "a", "item"),
                       column(items, "b", "item"))
        errors = {}
        if "theta_se" in abilities.columns:
            errors["theta_se"] = column(abilities, "theta_se", "model")
            for name in ("a_se", "b_se"):
                errors[name] = column(items, name, "item")
        if "prior_bias" in abilities.columns:
            errors["prior_bias"] = column(abilities, "prior_bias", "model")
        return cls(
            theta=theta, a=a, b=b,
            loss=_from_json_float(meta["loss"]),
            loss_history=[_from_json_float(v) for v in meta["loss_history"]],
            n_iter=meta["n_iter"], status=meta["status"], runtime_s=meta["runtime_s"],
            method=meta["method"], sigma=meta["sigma"], tol=meta["tol"],
            max_iter=meta["max_iter"], seed=meta["seed"], init_scale=meta["init_scale"],
            # labels are read back as text (the tables'), and so are these lists of them;
            # without labels they are positions
            degenerate_items=[str(v) if labelled else int(v) for v in meta["degenerate_items"]],
            degenerate_models=[str(v) if labelled else int(v)
                               for v in meta["degenerate_models"]],
            info=meta["info"], **errors,
        )

    def __repr__(self) -> str:
        size = f"{np.size(self.theta)} models x {np.size(self.a)} items"
        return (f"FitResult(method={self.method!r}, status={self.status!r}, {size}, "
                f"loss={self.loss:.10g}, n_iter={self.n_iter}, runtime_s={self.runtime_s:.3g}, "
                f"sigma={self.sigma:g}{', with standard errors' if self.has_se else ''})")


def read_labelled_csv(data: bytes, label: str, where: str):
    """A CSV table of a result whose column ``label`` holds labels: read as the text they
    are (``"01"``, ``"NA"`` and ``"1e3"`` stay themselves), the other columns as numbers.

    Raises
    ------
    ResultFolderError
        Not a CSV table with a ``label`` column.
    """
    import pandas as pd

    try:
        first = data.split(b"\n", 1)[0].decode("utf-8-sig")
        header = next(csv.reader([first]))
        if label not in header:
            raise ValueError(f"no column {label!r}")
        return pd.read_csv(io.BytesIO(data), dtype={label: str}, keep_default_na=False,
                           na_values={c: _MISSING_NUMBER for c in header if c != label},
                           float_precision="round_trip", encoding="utf-8-sig")
    except (ValueError, StopIteration, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ResultFolderError(f"{where}: not a table with a {label!r} column "
                                f"({' '.join(str(exc).split())})") from None


def is_saved_fit(path) -> bool:
    """Whether ``path`` is a folder holding the files :meth:`FitResult.save` writes (False
    for anything but a path)."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    folder = Path(path)
    return folder.is_dir() and all((folder / name).is_file() for name in FitResult.OUTPUT_FILES)


def read_result_folder(out_dir):
    """``(fit.json as a dict, abilities table, items table)`` of a folder written by
    :meth:`FitResult.save`, each table checked against the manifest in ``fit.json``
    (and its rows against the fit's size).

    Raises
    ------
    ResultFolderError
        A missing or unreadable file, or tables that are not those ``fit.json`` lists.
    """
    out = Path(out_dir)
    meta_path = out / "fit.json"
    if not out.exists():
        raise MissingResultFolderError(f"{out}: no such folder")
    if not meta_path.is_file():
        present = [n for n in FitResult.OUTPUT_FILES if (out / n).is_file()]
        if (out / "bootstrap.json").is_file():  # its items.csv holds intervals, not a fit
            raise ResultFolderError(f"{out}: a bootstrap's folder (bootstrap.json), not a "
                                    "fit's; give the folder `cbmm fit` or FitResult.save "
                                    "wrote")
        raise ResultFolderError(
            f"{out}: no fit.json" + (f" beside {', '.join(present)}: an interrupted save "
                                     "(refit, or save again)" if present
                                     else ": not a folder written by FitResult.save"))
    try:
        meta = _checked_meta(json.loads(meta_path.read_text(encoding="utf-8")))
        size = {"abilities.csv": meta["n_models"], "items.csv": meta["n_items"]}
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ResultFolderError(f"{meta_path}: not a complete fit.json ({exc}); the save was "
                                "interrupted or the file was edited") from None
    if seal_broken(meta):  # an edited sigma rescaled every score silently
        raise ResultFolderError(f"{meta_path}: edited after it was written (its fields no "
                                "longer match its manifest_sha256); refit, or undo the edit")
    tables = {}
    for name, label in (("abilities.csv", "model"), ("items.csv", "item")):
        path = out / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ResultFolderError(f"{path}: missing beside its fit.json (an interrupted "
                                    "save?)") from None
        recorded = (meta.get("files") or {}).get(name)
        if recorded is not None and file_record(data) != recorded:
            differs = (f"{len(data)} bytes, {recorded['bytes']} listed"
                       if len(data) != recorded.get("bytes") else
                       "its sha256 differs from the one listed, at the same size")
            raise ResultFolderError(
                f"{path}: not the file its fit.json lists ({differs}): it was edited, the "
                "folder holds parts of different saves, or a save was interrupted; refit, or "
                "save again")
        tables[name] = read_labelled_csv(data, label, str(path))
        if len(tables[name]) != size[name]:
            raise ResultFolderError(f"{path}: {len(tables[name])} rows, but fit.json says "
                                    f"{size[name]}: the file is truncated or from another fit")
    return meta, tables["abilities.csv"], tables["items.csv"]


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value) -> bool:
    return is_integer(value, 0)


#: What each field of fit.json holds, as :meth:`FitResult.save` writes it (a float that
#: is not finite is written as null).
_META_FIELDS = {
    "method": ("text", lambda v: isinstance(v, str) and v != ""),
    "status": ("text", lambda v: isinstance(v, str) and v != ""),
    "loss": ("a number or null", lambda v: v is None or _is_number(v)),
    "loss_history": ("a list of numbers or nulls",
                     lambda v: isinstance(v, list) and all(x is None or _is_number(x)
                                                           for x in v)),
    "n_iter": ("a whole number >= 0", _is_count),
    "max_iter": ("a whole number >= 0", _is_count),
    "runtime_s": ("a number or null", lambda v: v is None or _is_number(v)),
    "sigma": (f"a temperature: a number in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}]",
              lambda v: _is_number(v) and SIGMA_RANGE[0] <= v <= SIGMA_RANGE[1]),
    "tol": ("a number", _is_number),
    "seed": ("a whole number or null",
             lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool))),
    "init_scale": ("a number or null", lambda v: v is None or _is_number(v)),
    "n_models": ("a whole number >= 0", _is_count),
    "n_items": ("a whole number >= 0", _is_count),
    "degenerate_items": ("a list", lambda v: isinstance(v, list)),
    "degenerate_models": ("a list", lambda v: isinstance(v, list)),
    "info": ("an object", lambda v: isinstance(v, dict)),
}


def _checked_meta(meta):
    """fit.json's fields, each what :meth:`FitResult.save` writes (``ValueError`` naming
    the first that is not: a field missing, or edited to another kind of value, became a
    traceback or a silent default further on)."""
    if not isinstance(meta, dict):
        raise ValueError(f"expected an object, got {type(meta).__name__}")
    for key, (expected, holds) in _META_FIELDS.items():
        if key not in meta:
            raise ValueError(f"no field {key!r}")
        if not holds(meta[key]):
            raise ValueError(f"field {key!r} is {json.dumps(meta[key])[:60]}, expected "
                             f"{expected}")
    return meta


def _labelled(values, labels, name):
    if labels is None:
        return values
    import pandas as pd  # labels come from pandas input: already imported

    return pd.Series(values, index=labels, name=name)


def _json_float(v):
    v = float(v)
    return v if math.isfinite(v) else None


def _from_json_float(v):
    return float("nan") if v is None else float(v)


def _json_label(v):
    return v.item() if isinstance(v, np.generic) else v


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (float, np.floating)):
        return _json_float(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
