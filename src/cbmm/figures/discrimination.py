"""Figure 4: rank agreement of ability and accuracy against the spread of ``a``.

One point per benchmark suite: x the coefficient of variation of the
recovered discriminations (sd / mean of ``a``), y the Spearman correlation
between the recovered abilities and the mean accuracies.  Left panel: the
top 20 % of models by accuracy; right panel: all models.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..tables import read_result_table
from .style import FIGURE_WIDTH_IN, paper_style, place_labels, save_figure, suite_label

__all__ = ["plot_discrimination", "caption"]

_COLUMNS = ("dataset", "n_models", "n_items", "cv_a", "spearman_all", "spearman_top20")
_PANELS = (("spearman_top20", "Top 20% of models by accuracy"), ("spearman_all", "All models"))


def plot_discrimination(summary, out_paths=()):
    """Spearman(θ̂, accuracy) against CV(â), one labelled point per suite, two panels.

    Parameters
    ----------
    summary : pandas.DataFrame or path-like
        ``results/tables/discrimination_summary.csv`` (columns ``dataset,
        n_models, n_items, cv_a, spearman_all, spearman_top20``).
    out_paths : sequence of path-like
        Files to write (``.pdf``/``.png``), atomically.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: top 20 % (left) and all models (right).
    """
    name = None if isinstance(summary, pd.DataFrame) else str(summary)
    summary = read_result_table(summary, _COLUMNS, name or "discrimination_summary")
    if summary["dataset"].duplicated().any():
        twice = summary["dataset"][summary["dataset"].duplicated()].iloc[0]
        raise ValueError(f"{name or 'discrimination_summary'}: dataset {twice!r} listed twice")
    cv = summary["cv_a"].to_numpy(dtype=float)
    shade = np.interp(cv, (np.nanmin(cv), np.nanmax(cv) + 1e-12), (0.45, 0.95))
    colors = plt.get_cmap("Blues")(shade)
    correlations = summary[[column for column, _ in _PANELS]].to_numpy(dtype=float)
    low = min(np.nanmin(correlations), 0.9)
    y_range = (low - 0.12 * (1 - low), 1 + 0.1 * (1 - low))
    labels = [suite_label(d) for d in summary["dataset"]]

    with paper_style():
        fig, axes = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 2.5), sharey=True)
        for ax, (column, title) in zip(axes, _PANELS):
            ax.scatter(cv, summary[column], s=22, color=colors, zorder=3)
            ax.set_xlim(0, np.nanmax(cv) * 1.15)
            ax.set_ylim(*y_range)
            ax.set_title(title)
            ax.set_xlabel(r"Coefficient of variation of $\hat a$")
        axes[0].set_ylabel(r"Spearman($\hat\theta$, mean accuracy)")
        fig.tight_layout(w_pad=1.5)
        for ax, (column, _) in zip(axes, _PANELS):  # after the layout: labels see final boxes
            place_labels(ax, cv, summary[column].to_numpy(dtype=float), labels, colors=colors,
                         fontsize=7)
        save_figure(fig, out_paths)
    return fig


def caption(config_summary: dict | None = None) -> str:
    """Figure caption."""
    return ("Spearman correlation between the cBMM-recovered abilities and the mean accuracies "
            "against the coefficient of variation (sd / mean) of the recovered discriminations â, "
            "one point per benchmark suite. Left: the top 20% of models by mean accuracy; "
            "right: all models.")
