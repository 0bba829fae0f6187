"""Figure 3: recovered item difficulty ``-b`` against the human difficulty level (MATH-500).

``b`` is the easiness of an item (``x_ij = a_j theta_i + b_j``), so ``-b`` is
its difficulty.  One panel for all items, then one per subject (alphabetical),
each with one box per human-annotated level 1-5; all panels share the y axis.

Items answered wrong (right) by every model have no finite optimum: their
``-b`` grows (falls) without bound while the fit runs, so its value says how
long the fit ran, not how hard the item is.  They count in the boxes (they are
the hardest or easiest items, and the published boxes include them), but the
y axis is set by the other items and they are drawn as triangles at its top
(bottom) edge, as in the published figure, whose axis also leaves them out.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..tables import read_result_table
from .style import FIGURE_WIDTH_IN, paper_style, save_figure

__all__ = ["LEVELS", "plot_item_difficulty", "caption"]

#: Human-annotated difficulty levels of MATH.
LEVELS = (1, 2, 3, 4, 5)

_COLUMNS = ("item", "subject", "level", "a", "b", "accuracy")
_EDGE_COLOR = "#b2182b"
_N_COLS = 4


def plot_item_difficulty(items, out_paths=()):
    """Boxplots of ``-b`` by difficulty level: overall, then one panel per subject.

    Parameters
    ----------
    items : pandas.DataFrame or path-like
        ``results/tables/math500_items.csv`` (columns ``item, subject, level, a, b,
        accuracy``; ``accuracy`` 0 or 1 marks an item without a finite ``b``).
    out_paths : sequence of path-like
        Files to write (``.pdf``/``.png``), atomically.

    Returns
    -------
    matplotlib.figure.Figure
        Axes titled ``Overall`` and then each subject.
    """
    name = None if isinstance(items, pd.DataFrame) else str(items)
    items = read_result_table(items, _COLUMNS, name or "math500_items")
    where = name or "math500_items"
    bad = ~items["level"].isin(LEVELS)
    if bad.any():
        row = items.index[bad][0]
        raise ValueError(f"{where}: row {row}: level {items.loc[row, 'level']!r} "
                         f"is not one of {LEVELS}")
    items = items.assign(difficulty=-items["b"].astype(float), level=items["level"].astype(int))
    accuracy = items["accuracy"].astype(float)
    items["unbounded"] = np.where(accuracy == 0, "top", np.where(accuracy == 1, "bottom", ""))
    finite = items.loc[items["unbounded"] == "", "difficulty"]
    span = (finite.max() - finite.min()) if len(finite) else 1.0
    y_range = ((finite.min() if len(finite) else -1.0) - 0.06 * span,
               (finite.max() if len(finite) else 1.0) + 0.08 * span)
    subjects = sorted(items["subject"].astype(str).unique())
    panels = [("Overall", items)] + [(s, items[items["subject"] == s]) for s in subjects]
    n_rows = math.ceil(len(panels) / _N_COLS)
    colors = plt.get_cmap("Blues")(np.linspace(0.2, 0.75, len(LEVELS)))

    with paper_style():
        fig, axes = plt.subplots(n_rows, _N_COLS, figsize=(FIGURE_WIDTH_IN, 1.75 * n_rows + 0.35),
                                 sharey=True, squeeze=False, layout="constrained")
        for ax, (title, block) in zip(axes.flat, panels):
            data = [block.loc[block["level"] == level, "difficulty"].dropna().to_numpy()
                    for level in LEVELS]
            present = [k for k, values in enumerate(data) if values.size]
            boxes = ax.boxplot([data[k] for k in present], positions=[LEVELS[k] for k in present],
                               widths=0.6, patch_artist=True, manage_ticks=False,
                               medianprops={"color": "#222222", "linewidth": 1.0, "gid": "median"},
                               whiskerprops={"color": "#444444", "linewidth": 0.8},
                               capprops={"color": "#444444", "linewidth": 0.8},
                               flierprops={"marker": "o", "markersize": 2.2,
                                           "markerfacecolor": "none",
                                           "markeredgecolor": "#555555", "markeredgewidth": 0.5})
            for patch, k in zip(boxes["boxes"], present):
                patch.set_facecolor(colors[k])
                patch.set_edgecolor("#444444")
                patch.set_linewidth(0.8)
            for median in boxes["medians"]:
                median.set_gid("median")
            for edge, marker in (("top", "^"), ("bottom", "v")):
                levels = block.loc[block["unbounded"] == edge, "level"].to_numpy()
                if levels.size:
                    ax.plot(levels, np.full(levels.size, y_range[1 if edge == "top" else 0]),
                            linestyle="none", marker=marker, markersize=3.5, color=_EDGE_COLOR,
                            clip_on=False, zorder=4, gid=f"unbounded:{edge}")
            ax.set_xticks(LEVELS)
            ax.set_xlim(0.4, len(LEVELS) + 0.6)
            ax.set_ylim(*y_range)
            ax.xaxis.grid(False)
            ax.set_title(title, fontsize=8.5)
        for ax in axes.flat[len(panels):]:
            ax.remove()
        fig.supxlabel("Human-annotated difficulty level", fontsize=8.5)
        fig.supylabel(r"Recovered difficulty $-\hat b$", fontsize=8.5)
        # constrained layout, unlike tight_layout, leaves room for the shared labels
        fig.get_layout_engine().set(h_pad=0.04, w_pad=0.03)
        save_figure(fig, out_paths)
    return fig


def caption(config_summary: dict | None = None) -> str:
    """Figure caption."""
    return ("Distribution of the cBMM-recovered item difficulties (−b̂, b being the item "
            "easiness) across the human-annotated difficulty levels (1–5) of MATH-500, for all "
            "items (Overall) and for each of the seven subjects. Boxes show the quartiles, "
            "whiskers 1.5 times the interquartile range, circles the items beyond. Items "
            "answered wrong by every model (right by every model) have no finite −b̂: it grows "
            "(falls) for as long as the fit runs. They count in the boxes but are drawn as "
            "triangles at the top (bottom) edge, outside the axis range, as in the published "
            "figure. b̂ is on the canonical scale (θ̂ with mean 0 and standard deviation 1 over "
            "the models); the published figure uses its solver's raw scale, on which −b̂_j "
            "differs by a_j·m/s (m and s the mean and standard deviation of the raw θ̂), a "
            "location the model does not identify.")
