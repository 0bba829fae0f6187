"""The paper's figures: one module per figure, each a function from tables to a figure.

Every ``plot_*`` function takes the aggregated tables it needs (DataFrames or
CSV paths, see docs/figures.md for the columns) and ``out_paths`` (PDF and
PNG), writes the files atomically and returns the matplotlib figure.
:data:`FIGURES` lists, per figure, the function, its input tables, its file
stem under ``results/figures/`` and its caption function, so that the
workflow has one place to look them up; :func:`get_figure` adds the
sensitivity figure of any simulation study.  Needs matplotlib (``pip install
cbmm[figures]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from . import (abilities, discrimination, efficiency, item_audit, item_difficulty, math500_ability,
               rankflow, runtime, sensitivity)
from .abilities import plot_abilities
from .discrimination import plot_discrimination
from .efficiency import plot_efficiency
from .item_audit import plot_item_audit
from .item_difficulty import plot_item_difficulty
from .math500_ability import plot_math500_ability
from .rankflow import plot_rankflow
from .runtime import plot_runtime
from ..tables import TABLE_FILES
from .sensitivity import STUDIES, plot_sensitivity
from .status import PER_FILE, PER_ROW, fit_statuses, status_sentence
from .style import method_color, method_label, save_figure

__all__ = [
    "FIGURES", "FigureSpec", "get_figure", "plot_runtime", "plot_math500_ability", "plot_item_difficulty",
    "plot_discrimination", "plot_rankflow", "plot_sensitivity", "plot_abilities", "plot_efficiency",
    "plot_item_audit", "save_figure",
    "method_label", "method_color", "STUDIES",
]


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the paper.

    Attributes
    ----------
    plot : callable
        The plotting function (for sensitivity figures, bound to the study).
    inputs : tuple of str
        Tables it reads: files under ``results/tables/`` (:data:`cbmm.tables.TABLE_FILES`;
        ``rankings/{dataset}.csv`` stands for one file per suite).
    caption : callable
        ``caption(config_summary=None) -> str``.
    statuses : tuple of (int, str), optional
        Where the fits behind the figure are: ``(k, per)`` for the ``k``-th table argument
        of ``plot``, with one fit per file or per row (:data:`~cbmm.figures.status.PER_FILE`,
        :data:`~cbmm.figures.status.PER_ROW`); empty for a figure of no fit.
    """

    plot: Callable
    inputs: tuple
    caption: Callable
    statuses: tuple = ()

    def caption_for(self, args, **caption_args) -> str:
        """The caption of the figure drawn from the table arguments ``args``: its caption,
        then what its fits' statuses say (:func:`~cbmm.figures.status.status_sentence`)."""
        statuses = [s for k, per in self.statuses for s in fit_statuses(args[k], per)]
        return " ".join(filter(None, (self.caption(**caption_args),
                                      status_sentence(statuses))))


def _sensitivity_figure(study: str) -> FigureSpec:
    """The sensitivity figure of one simulation study (drawn by its design, passed to the plot
    and caption functions as ``design=``, or by its name among the paper's :data:`STUDIES`)."""
    return FigureSpec(partial(plot_sensitivity, study=study),
                      (TABLE_FILES["simulation"].format(study=study),),
                      partial(sensitivity.caption, study), ((0, PER_ROW),))


#: Every figure, keyed by its file stem under ``results/figures/``.
FIGURES = {
    "runtime": FigureSpec(plot_runtime, (TABLE_FILES["runtime"],), runtime.caption,
                          ((0, PER_ROW),)),
    "math500_ability": FigureSpec(plot_math500_ability, (TABLE_FILES["math500_abilities"],),
                                  math500_ability.caption, ((0, PER_FILE),)),
    "item_difficulty": FigureSpec(plot_item_difficulty, (TABLE_FILES["math500_items"],),
                                  item_difficulty.caption, ((0, PER_FILE),)),
    "discrimination": FigureSpec(plot_discrimination, (TABLE_FILES["discrimination"],),
                                 discrimination.caption, ((0, PER_ROW),)),
    "rankflow": FigureSpec(plot_rankflow, (TABLE_FILES["rankings"], TABLE_FILES["discrimination"]),
                           rankflow.caption, ((0, PER_FILE),)),
    "abilities": FigureSpec(plot_abilities, (TABLE_FILES["abilities"],), abilities.caption,
                            ((0, PER_FILE),)),
    # the efficiency study's numbers are errors measured on held-out models, not estimates
    "efficiency": FigureSpec(plot_efficiency, (TABLE_FILES["efficiency"], TABLE_FILES["adaptive"]),
                             efficiency.caption),
    "item_audit": FigureSpec(plot_item_audit, (TABLE_FILES["item_audit"],), item_audit.caption,
                             ((0, PER_FILE),)),
    **{f"sensitivity_{study}": _sensitivity_figure(study) for study in STUDIES},
}


def get_figure(name: str) -> FigureSpec:
    """The figure with file stem ``name``: an entry of :data:`FIGURES`, or
    ``sensitivity_<study>`` of any simulation study (drawn by its design)."""
    if name in FIGURES:
        return FIGURES[name]
    study = name.removeprefix("sensitivity_")
    if study != name:
        return _sensitivity_figure(study)
    raise KeyError(f"no figure {name!r}; figures: {sorted(FIGURES)} and sensitivity_<study>")
