"""The paper's figures: one module per figure, each a function from tables to a figure.

Every ``plot_*`` function takes the aggregated tables it needs (DataFrames or
CSV paths, see docs/figures.md for the columns) and ``out_paths`` (PDF and
PNG), writes the files atomically and returns the matplotlib figure.
:data:`FIGURES` lists, per figure, the function, its input tables, its file
stem under ``results/figures/`` and its caption function, so that the
workflow has one place to look them up.  Needs matplotlib (``pip install
cbmm[figures]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from . import discrimination, item_difficulty, math500_ability, rankflow, runtime, sensitivity
from .discrimination import plot_discrimination
from .item_difficulty import plot_item_difficulty
from .math500_ability import plot_math500_ability
from .rankflow import plot_rankflow
from .runtime import plot_runtime
from .sensitivity import STUDIES, plot_sensitivity
from .style import method_color, method_label, save_figure

__all__ = [
    "FIGURES", "FigureSpec", "plot_runtime", "plot_math500_ability", "plot_item_difficulty",
    "plot_discrimination", "plot_rankflow", "plot_sensitivity", "save_figure",
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
        Tables it reads, relative to ``results/tables/`` (``rankings/{dataset}.csv``
        stands for one file per suite).
    caption : callable
        ``caption(config_summary=None) -> str``.
    """

    plot: Callable
    inputs: tuple
    caption: Callable


#: Every figure, keyed by its file stem under ``results/figures/``.
FIGURES = {
    "runtime": FigureSpec(plot_runtime, ("runtime_leaderboard.csv",), runtime.caption),
    "math500_ability": FigureSpec(plot_math500_ability, ("math500_abilities.csv",),
                                  math500_ability.caption),
    "item_difficulty": FigureSpec(plot_item_difficulty, ("math500_items.csv",),
                                  item_difficulty.caption),
    "discrimination": FigureSpec(plot_discrimination, ("discrimination_summary.csv",),
                                 discrimination.caption),
    "rankflow": FigureSpec(plot_rankflow, ("rankings/{dataset}.csv", "discrimination_summary.csv"),
                           rankflow.caption),
    **{f"sensitivity_{study}": FigureSpec(partial(plot_sensitivity, study=study),
                                          (f"sim_{study}.csv",),
                                          partial(sensitivity.caption, study))
       for study in STUDIES},
}
