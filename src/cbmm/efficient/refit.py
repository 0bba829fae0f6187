"""Refits of a calibration without some of its models: the cross-validation of
:func:`cbmm.predict_accuracy`'s intervals (``refit=``), the efficiency study's
calibrations and tinyBenchmarks' validation fit.

A module of its own, so that all three import it without a cycle (prediction imports
selection, which imports tinybenchmarks)."""

from __future__ import annotations

__all__ = ["quiet_fit", "refit_like"]


def refit_like(result):
    """A function of the data that fits it as ``result`` (a FitResult, or the folder of a
    saved one) was fitted: the method and settings the fit records."""
    import os
    from pathlib import Path

    from ..result import FitResult

    if isinstance(result, (str, os.PathLike)) and Path(result).is_dir():
        result = FitResult.load(result)
    if not isinstance(result, FitResult):  # a table or an items.csv records no settings
        raise ValueError("refit=True refits as the calibration was fitted, which only a "
                         "FitResult or its saved folder records: pass a function instead")
    return quiet_fit({"method": result.method, "sigma": result.sigma, "tol": result.tol,
                      "max_iter": result.max_iter, "seed": result.seed,
                      "init_scale": result.init_scale,
                      **{key: result.info[key] for key in ("n_starts", "degenerate")
                         if key in result.info},
                      **result.info.get("options", {})})


def quiet_fit(settings: dict | None = None):
    """``data -> cbmm.fit(data, **settings)``, its warnings silenced: the refits of a
    calibration without some of its models, whose degenerate items and stops are the
    calibration's own to report."""
    import warnings

    from ..api import fit

    def refit(data):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fit(data, **(settings or {}))
    return refit
