"""Refits of a calibration without some of its models: the cross-validation of
:func:`cbmm.predict_accuracy`'s intervals (``refit=``), the efficiency study's
calibrations and tinyBenchmarks' validation fit.

A module of its own, so that all three import it without a cycle (prediction imports
selection, which imports tinybenchmarks)."""

from __future__ import annotations

__all__ = ["quiet_fit", "refit_like", "refitted_bank", "QuietFit"]

import numpy as np


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


def refitted_bank(refit, values: np.ndarray, bank):
    """The :class:`~cbmm.efficient.bank.ItemBank` of ``refit`` of some of a calibration's
    models: ``values`` their answers (models x items, 1 / 0 / NaN, aligned with the
    calibration's ``bank``).

    A :class:`QuietFit` that :attr:`~QuietFit.starts_warm` starts from the calibration: its
    items (an item it set aside is finite in the bank) and the posterior means of these
    models' abilities; a refit function of the user's is called with the data alone.
    """
    import pandas as pd

    from .bank import ItemBank, Posterior, coded_answers

    data = pd.DataFrame(values, columns=bank.labels)
    if isinstance(refit, QuietFit) and refit.starts_warm:
        scale = refit.sigma / bank.sigma  # the same probabilities at its temperature
        result = refit(data, start=(Posterior(coded_answers(values), bank).mean,
                                    bank.a * scale, bank.b * scale))
    else:
        result = refit(data)
    refitted = ItemBank.of(result)
    if not refitted.labels.equals(bank.labels):
        raise ValueError("refit: its fit's items are not the calibration's (the same "
                         "labels in the same order)")
    return refitted


def quiet_fit(settings: dict | None = None) -> QuietFit:
    """``data -> cbmm.fit(data, **settings)``, its warnings silenced: the refits of a
    calibration without some of its models, whose degenerate items and stops are the
    calibration's own to report.  See :class:`QuietFit` for its warm start."""
    return QuietFit(settings)


class QuietFit:
    """``cbmm.fit(data, **settings)`` with its warnings silenced (:func:`quiet_fit`).

    Called with ``start=(theta0, a0, b0)`` (the calibration's items and these models'
    abilities), it fits from that one start instead of the settings' starts: the
    calibration is close to the optimum of its data less a fifth of its models.
    :func:`refitted_bank` warm-starts so (the folds of
    :class:`~cbmm.efficient.prediction.Reference`, tinyBenchmarks' validation fit) where
    the refit is this class's and :attr:`starts_warm`.  On 4/5 of a split's calibration
    models of MATH-500, the leaderboard's GSM8K and a simulated 2211 x 12032 matrix, the
    warm fit lands within 0.001-0.004 of the cold three-start fit in every ``a`` and
    ``b`` (objective within 1e-8 relative), in 4 s against 38 s on the last
    (docs/efficiency.md).
    """

    def __init__(self, settings: dict | None = None):
        self.settings = dict(settings or {})

    @property
    def starts_warm(self) -> bool:
        """Whether the refits are to be warm-started: those of the methods that minimise
        the loss from their starts (cbmm, lbfgsb, manopt), several cold ones by default.
        py-irt and mirt fit their own models from one start, py-irt's slopes on the log
        scale, where a calibration's ``a = 0`` has no place: they refit as set."""
        from ..registry import get_method

        return get_method(self.settings.get("method", "cbmm")).minimises_loss

    @property
    def sigma(self) -> float:
        """The temperature the refits use (cbmm.fit's default unless the settings say)."""
        return float(self.settings.get("sigma", 1.0))

    def __call__(self, data, start=None):
        import warnings

        from ..api import fit

        settings = self.settings if start is None else {**self.settings, "start": start,
                                                        "n_starts": 1}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fit(data, **settings)
