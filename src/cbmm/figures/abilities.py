"""Abilities with their intervals: a caterpillar plot of one benchmark's ablest models.

Left panel: each model's ability with its Wald interval from the observed information
(``cbmm.fit(..., se=True)``), and the bootstrap's percentile interval beneath it; right
panel: its rank with the bootstrap's rank interval.  Drawn from the abilities table
(:func:`cbmm.tables.abilities_table`); beyond the paper.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..tables import read_result_table
from .style import FIGURE_WIDTH_IN, paper_style, save_figure, suite_label

__all__ = ["plot_abilities", "caption"]

_COLUMNS = ("model", "theta", "theta_lower", "theta_upper", "theta_boot_lower",
            "theta_boot_upper", "rank", "rank_lower", "rank_upper", "status")


def plot_abilities(table, top: int = 30, dataset: str | None = None, out_paths=()):
    """The ``top`` ablest models: ability and rank, each with its interval.

    Parameters
    ----------
    table : pandas.DataFrame or path-like
        ``results/tables/abilities/{dataset}.csv`` (columns ``model, theta, theta_lower,
        theta_upper, theta_boot_lower, theta_boot_upper, rank, rank_lower, rank_upper,
        status``).
    top : int
        How many models to show (the ablest by rank).
    dataset : str, optional
        Suite name for the title.
    out_paths : sequence of path-like
        Files to write (``.pdf``/``.png``), atomically.

    Returns
    -------
    matplotlib.figure.Figure
    """
    name = None if not hasattr(table, "__fspath__") and not isinstance(table, str) \
        else str(table)
    table = read_result_table(table, _COLUMNS, name or "abilities")
    shown = table.sort_values(["rank", "model"], kind="stable").head(int(top))
    y = np.arange(len(shown))[::-1]
    height = max(2.0, 0.16 * len(shown) + 0.8)
    with paper_style():
        fig, (left, right) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, height), sharey=True,
                                          gridspec_kw={"width_ratios": (3, 2)})
        left.hlines(y - 0.18, shown["theta_boot_lower"], shown["theta_boot_upper"],
                    color="#9ecae1", lw=1.6, label="bootstrap (items)")
        left.hlines(y, shown["theta_lower"], shown["theta_upper"], color="#08519c", lw=1.2,
                    label="Wald (observed information)")
        left.plot(shown["theta"], y, "o", color="#08519c", ms=2.8)
        left.set_xlabel(r"Ability $\hat\theta$")
        left.legend(loc="lower right", fontsize=6, frameon=False)
        right.hlines(y, shown["rank_lower"], shown["rank_upper"], color="#a50f15", lw=1.2)
        right.plot(shown["rank"], y, "o", color="#a50f15", ms=2.8)
        right.set_xlabel("Rank (1 = ablest)")
        right.invert_xaxis()
        left.set_yticks(y)
        left.set_yticklabels(shown["model"], fontsize=6)
        status = str(table["status"].iloc[0])
        title = suite_label(dataset) if dataset else ""
        if status != "converged":
            title = f"{title} (fit status: {status})".strip()
        if title:
            fig.suptitle(title, fontsize=8)
        fig.tight_layout()
        save_figure(fig, out_paths)
    return fig


def caption(config_summary: dict | None = None) -> str:
    """Figure caption; ``config_summary`` may give ``top``, ``n_boot`` and ``level``."""
    summary = config_summary or {}
    level = summary.get("level", 0.95)
    return (f"Abilities of the {summary.get('top', 30)} ablest models, with {level:.0%} "
            "intervals: Wald intervals from the observed information of the fit (dark) and "
            "percentile intervals of a bootstrap over items"
            + (f" ({summary['n_boot']} replicates)" if "n_boot" in summary else "")
            + " (light); right, each model's rank with its bootstrap interval (none for a "
            "model answering every item alike, which every resample of items keeps so). The "
            "fit is the library's default (spectral start, three starts, the normal prior).")
