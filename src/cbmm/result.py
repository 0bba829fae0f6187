"""One result type for every method, and the canonical parameter form."""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ._atomic import atomic_path

__all__ = ["SolverOutput", "FitResult", "canonicalize"]


def canonicalize(theta, a, b):
    """Put ``(theta, a, b)`` in the canonical form used for every method.

    theta is standardised to mean 0 and standard deviation 1 over models
    (population sd, ``ddof=0``); ``a <- a * sd`` and ``b <- b + a * mean``
    compensate, so ``X = theta a^T + 1 b^T`` is unchanged.  A constant theta
    (sd = 0) is only centred.
    """
    theta = np.asarray(theta, dtype=float)
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    mean = theta.mean()
    sd = theta.std()
    b = b + a * mean
    if sd > 0 and np.isfinite(sd):
        return (theta - mean) / sd, a * sd, b
    return theta - mean, a, b


@dataclass
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


@dataclass
class FitResult:
    """Result of :func:`cbmm.fit` for any method.

    Attributes
    ----------
    theta : ndarray or pandas.Series (N,)
        Model abilities, canonical form (mean 0, sd 1).
    a : ndarray or pandas.Series (J,)
        Item discriminations (>= 0).
    b : ndarray or pandas.Series (J,)
        Item easiness (difficulty is ``-b``).
    loss : float
        Loss (3) at the returned parameters (float64, recomputed by
        :func:`cbmm.fit` for every method alike; NaN if failed).
    loss_history : list of float
        Loss after each iteration as tracked by the method (first entry: the
        start where the method reports it).
    n_iter : int
        Iterations / epochs / EM cycles used.
    status : str
        ``"converged"``, ``"max_iter"`` or ``"failed: <reason>"``.
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
        Method-specific extras.
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
    tol: float = 1e-4
    max_iter: int = 1000
    seed: int | None = 0
    init_scale: float = 1.0
    degenerate_items: list = field(default_factory=list)
    degenerate_models: list = field(default_factory=list)
    info: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status.startswith("failed")

    @property
    def converged(self) -> bool:
        return self.status == "converged"

    def scores(self) -> np.ndarray:
        """Fitted score matrix ``X = theta a^T + 1 b^T``."""
        return np.outer(np.asarray(self.theta), np.asarray(self.a)) + np.asarray(self.b)[None, :]

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
            "degenerate_items": [_json_label(v) for v in self.degenerate_items],
            "degenerate_models": [_json_label(v) for v in self.degenerate_models],
            "loss_history": [_json_float(v) for v in self.loss_history],
            "info": _jsonable(self.info),
        }

    def abilities_frame(self) -> pd.DataFrame:
        theta = self.theta if isinstance(self.theta, pd.Series) else pd.Series(self.theta)
        return pd.DataFrame({"model": theta.index, "theta": theta.to_numpy()})

    def items_frame(self) -> pd.DataFrame:
        a = self.a if isinstance(self.a, pd.Series) else pd.Series(self.a)
        return pd.DataFrame({"item": a.index, "a": a.to_numpy(), "b": np.asarray(self.b)})

    def save(self, out_dir) -> None:
        """Write ``abilities.csv``, ``items.csv`` and ``fit.json`` into ``out_dir``.

        Files are written under temporary names and renamed at the end, so a
        crash leaves no partial output.
        """
        out = Path(out_dir)
        staged = {
            "abilities.csv": self.abilities_frame().to_csv(index=False, float_format="%.17g"),
            "items.csv": self.items_frame().to_csv(index=False, float_format="%.17g"),
            "fit.json": json.dumps(self.summary(), indent=2) + "\n",
        }
        # every file is renamed into place only once all of them are written
        with contextlib.ExitStack() as stack:
            for name, text in staged.items():
                stack.enter_context(atomic_path(out / name)).write_text(text)

    @classmethod
    def load(cls, out_dir) -> "FitResult":
        """Read a result written by :meth:`save`."""
        out = Path(out_dir)
        meta = json.loads((out / "fit.json").read_text())
        abilities = pd.read_csv(out / "abilities.csv", float_precision="round_trip")
        items = pd.read_csv(out / "items.csv", float_precision="round_trip")
        theta = pd.Series(abilities["theta"].to_numpy(), index=abilities["model"], name="theta")
        a = pd.Series(items["a"].to_numpy(), index=items["item"], name="a")
        b = pd.Series(items["b"].to_numpy(), index=items["item"], name="b")
        return cls(
            theta=theta, a=a, b=b,
            loss=_from_json_float(meta["loss"]),
            loss_history=[_from_json_float(v) for v in meta["loss_history"]],
            n_iter=meta["n_iter"], status=meta["status"], runtime_s=meta["runtime_s"],
            method=meta["method"], sigma=meta["sigma"], tol=meta["tol"],
            max_iter=meta["max_iter"], seed=meta["seed"], init_scale=meta["init_scale"],
            degenerate_items=meta["degenerate_items"],
            degenerate_models=meta["degenerate_models"], info=meta["info"],
        )


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
