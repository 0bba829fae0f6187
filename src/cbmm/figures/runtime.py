"""Figure 1: runtime on each benchmark suite (the paper's: the six Open LLM Leaderboard
suites), with cBMM's speedup.

Left axis (log scale): mean runtime per method over the successful replicates
(points, joined across suites) with the minimum and maximum as interval
markers.  Right axis: shaded bars with the mean speedup of cBMM over the
fastest successful baseline (:func:`cbmm.tables.speedup_table`), annotated.
A method with no successful replicate on a suite is marked ``NA`` at the top
of the axis instead of a point.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.transforms as mtransforms
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import LogLocator

from ..tables import runtime_summary, speedup_table
from .style import (FIGURE_WIDTH_IN, method_color, method_label, paper_style, save_figure,
                    suite_label)

__all__ = ["plot_runtime", "caption"]

_SPEEDUP_COLOR = "#f4a6a6"


def plot_runtime(runtime, out_paths=()):
    """Runtime per suite and method (log scale) with cBMM's speedup bars.

    Parameters
    ----------
    runtime : pandas.DataFrame or path-like
        ``results/tables/runtime_leaderboard.csv`` (columns ``dataset,
        n_models, n_items, method, replicate, status, runtime_s``).
    out_paths : sequence of path-like
        Files to write (``.pdf``/``.png``), atomically.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: runtime (left) and speedup (right, a twin).
    """
    summary = runtime_summary(runtime)
    speedups = speedup_table(summary)
    suites = list(dict.fromkeys(summary["dataset"]))  # already ordered by n_items
    methods = list(dict.fromkeys(summary["method"]))
    positions = np.arange(len(suites))
    dodge = 0.07

    with paper_style():
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 2.6))
        speed_ax = ax.twinx()
        ax.set_zorder(speed_ax.get_zorder() + 1)  # points above the bars
        ax.patch.set_visible(False)

        speed = speedups.set_index("dataset").reindex(suites)["speedup"].to_numpy(dtype=float)
        speed_ax.bar(positions, np.nan_to_num(speed), width=0.5, color=_SPEEDUP_COLOR, alpha=0.6,
                     zorder=0)
        top = np.nanmax(speed) if np.isfinite(speed).any() else 1.0
        speed_ax.set_ylim(0, top * 2.3)
        for x, value in zip(positions, speed):
            # one decimal below 10 (a speedup of 0.93 read "1x")
            text = (f"{value:.{1 if value < 10 else 0}f}\N{MULTIPLICATION SIGN}"
                    if np.isfinite(value) else "NA")
            # drawn on the top axes (in bar coordinates) so no grid line crosses the number
            ax.annotate(text, (x, np.nan_to_num(value)), xycoords=speed_ax.transData,
                        xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                        fontsize=7.5, fontweight="bold", color="#c81d25", gid="speedup",
                        bbox={"boxstyle": "square,pad=0.1", "facecolor": "white",
                              "edgecolor": "none", "alpha": 0.7})
        speed_ax.set_ylabel("Speedup of cBMM", color="#c81d25")
        speed_ax.tick_params(axis="y", colors="#c81d25")
        speed_ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0f}\N{MULTIPLICATION SIGN}")
        speed_ax.spines["right"].set_visible(True)
        speed_ax.spines["right"].set_color("#c81d25")
        speed_ax.grid(False)

        na_transform = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
        na_count = dict.fromkeys(suites, 0)  # stack the NA marks of one suite
        for k, method in enumerate(methods):
            rows = summary[summary["method"] == method].set_index("dataset").reindex(suites)
            xs = positions + dodge * (k - (len(methods) - 1) / 2)
            mean = rows["mean_s"].to_numpy(dtype=float)
            color = method_color(method)
            ax.plot(xs, mean, marker="o", markersize=3.5, linewidth=1.3, color=color,
                    label=method)
            ax.errorbar(xs, mean, yerr=[mean - rows["min_s"], rows["max_s"] - mean], fmt="none",
                        ecolor=color, elinewidth=0.9, capsize=3.5, capthick=0.9)
            for x, dataset, value in zip(xs, suites, mean):
                if np.isnan(value):
                    ax.text(x, 0.97 - 0.09 * na_count[dataset], "NA", transform=na_transform,
                            ha="center", va="top", fontsize=7, fontweight="bold", color=color,
                            gid=f"NA:{dataset}:{method}")
                    na_count[dataset] += 1
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10))
        ax.yaxis.set_major_formatter(lambda v, _: f"{v:g}")
        low = np.nanmin(summary["min_s"]) if summary["min_s"].notna().any() else 1.0
        high = np.nanmax(summary["max_s"]) if summary["max_s"].notna().any() else 10.0
        ax.set_ylim(low / 3, high * 12)  # headroom for the NA marks
        sizes = summary.groupby("dataset", sort=False)[["n_models", "n_items"]].first()
        models, items = (sizes[column].reindex(suites) for column in ("n_models", "n_items"))
        # one N (the paper's): in the axis label; else N and the J they are ordered by under
        # each suite
        shared = models.nunique() == 1
        ax.set_xticks(positions, [suite_label(s) if shared
                                  else f"{suite_label(s)}\nN = {n}, J = {items[s]}"
                                  for s, n in models.items()])
        ax.set_xlim(-0.5, len(suites) - 0.5)
        ax.xaxis.grid(False)
        ax.set_ylabel("Runtime (s)")
        ax.set_xlabel("Benchmark suite (ordered by number of items J"
                      + (f"; N = {models.iloc[0]})" if shared else ")"))
        handles = [Line2D([], [], color=method_color(m), marker="o", markersize=3.5,
                          linewidth=1.3, label=method_label(m)) for m in methods]
        handles.append(plt.Rectangle((0, 0), 1, 1, color=_SPEEDUP_COLOR, alpha=0.6,
                                     label="Speedup of cBMM"))
        fig.legend(handles=handles, loc="upper center", ncol=len(handles), frameon=False,
                   bbox_to_anchor=(0.5, 1.0))
        fig.tight_layout(rect=(0, 0, 1, 0.9))
        save_figure(fig, out_paths)
    return fig


def caption(config_summary: dict | None = None) -> str:
    """Figure caption (``config_summary`` may give ``n_replicates`` and ``datasets``, the
    suites of the run, named in it)."""
    summary = config_summary or {}
    replicates = summary.get("n_replicates")
    over = f"over {replicates} replicates" if replicates else "over the replicates"
    datasets = [suite_label(d) for d in summary.get("datasets") or ()]
    suites = ("each benchmark suite" if not datasets else
              f"the suite {datasets[0]}" if len(datasets) == 1 else
              f"the {len(datasets)} suites {', '.join(datasets[:-1])} and {datasets[-1]}")
    return (f"Runtime on {suites}, ordered by the number of items J. "
            f"Left axis (log scale): mean runtime of each method {over} (points) with the minimum "
            "and maximum (interval markers), failed replicates left out. Right axis (shaded bars): "
            "mean runtime of the fastest successful baseline divided by the mean runtime of cBMM, "
            "annotated per suite. 'NA' marks a method that failed on every replicate of a suite.")
