"""Item information map of one dataset: every item's discrimination against its share
correct, coloured by its information over the models' abilities, with the items the
audit flags (:func:`cbmm.item_audit`) marked."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..efficient.audit import AbilityAgreement, WrongWayDependence
from ..tables import read_result_table
from .style import FIGURE_WIDTH_IN, paper_style, save_figure

__all__ = ["plot_item_audit", "caption"]

_COLUMNS = ("item", "a", "share_correct", "information", "not_identified", "no_information",
            "negative_discrimination", "out_of_range")
#: How each flag is marked: (label, marker, colour), drawn over the item's dot.
_MARKS = {
    "negative_discrimination": ("negative discrimination (likely mislabelled)", "D", "#b2182b"),
    "no_information": ("no information (a ≈ 0)", "v", "#e08214"),
    "out_of_range": ("outside the models' abilities", "^", "#542788"),
    "not_identified": ("answered alike by every model", "x", "#404040"),
}


def plot_item_audit(audit, out_paths=(), title: str | None = None):
    """Discrimination ``a`` against share correct, one dot per item, flags marked.

    Parameters
    ----------
    audit : pandas.DataFrame or path-like
        ``results/tables/item_audit/<dataset>.csv`` (the columns of
        :func:`cbmm.item_audit`, with ``item`` a column).
    out_paths : sequence of path-like
        Files to write (``.pdf``/``.png``), atomically.
    title : str, optional
        Axes title (e.g. the dataset).

    Returns
    -------
    matplotlib.figure.Figure
    """
    name = None if isinstance(audit, pd.DataFrame) else str(audit)
    audit = read_result_table(audit, _COLUMNS, name or "item_audit")
    information = audit["information"].to_numpy(dtype=float)
    # an item the fit set aside has no a (NaN): drawn at 0, where its answers tell nothing
    audit = audit.assign(a=audit["a"].fillna(0.0))
    with paper_style():
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN * 0.62, 3.0))
        dots = ax.scatter(audit["share_correct"], audit["a"], c=information, s=9,
                          cmap="viridis", vmin=0, vmax=max(np.nanmax(information), 1e-12),
                          linewidths=0, zorder=2)
        fig.colorbar(dots, ax=ax, label="information over the models' abilities")
        agrees, shared = True, False
        if {"ability_rank_correlation", "implied_rank_correlation"} <= set(audit.columns):
            observed, implied = audit[["ability_rank_correlation",
                                       "implied_rank_correlation"]].iloc[0]
            agrees = AbilityAgreement(observed, implied, len(audit)).agrees
            # short lines: the note is right-aligned in the axes and must stay inside them
            note = (f"abilities vs accuracy: rank correlation {observed:.3f},\nthe fit "
                    f"implies {implied:.3f}"
                    + ("" if agrees else "\n(one dimension does not describe these answers)"))
            if {"wrong_way_dependence", "ordinary_dependence"} <= set(audit.columns):
                dependence = WrongWayDependence(
                    *audit[["wrong_way_dependence", "ordinary_dependence"]].iloc[0],
                    n_items=int(audit["negative_discrimination"].sum()))
                shared = dependence.shared
                if shared:
                    note += (f"\nwrong-way items' residual dependence "
                             f"{dependence.observed:.1f}\n(ordinary items' at most "
                             f"{dependence.ordinary:.1f}: a dimension of their own)")
            if "key_checked" in audit.columns:
                note += (f"\na wrong key could show on {int(audit['key_checked'].sum())} "
                         f"of {len(audit)} items")
            low, high = ax.get_ylim()
            # room above the dots for the note, a line at a time
            ax.set_ylim(low, high + 0.07 * (note.count("\n") + 2) * (high - low))
            ax.text(0.99, 0.99, note, transform=ax.transAxes, ha="right", va="top",
                    fontsize=6, color="#404040" if agrees and not shared else "#b2182b")
        for flag, (label, marker, color) in _MARKS.items():
            if flag == "negative_discrimination" and not (agrees and not shared):
                label = "negative discrimination"  # the note says why not mislabelled
            flagged = audit[audit[flag].astype(bool)]
            if len(flagged):
                # a line marker (x) takes a colour, the open ones an edge colour
                paint = {"color": color} if marker == "x" else {"facecolors": "none",
                                                                 "edgecolors": color}
                ax.scatter(flagged["share_correct"], flagged["a"], marker=marker, s=34,
                           linewidths=0.9, zorder=3, label=f"{label} ({len(flagged)})",
                           **paint)
        ax.set_xlabel("share of the models answering correctly")
        ax.set_ylabel(r"discrimination $\hat a$")
        ax.set_xlim(-0.03, 1.03)
        if title:
            ax.set_title(title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=6.5,
                      frameon=False)
        fig.tight_layout()
        save_figure(fig, out_paths)
    return fig


def caption(config_summary: dict | None = None) -> str:
    """Figure caption."""
    return ("Item information map: each item's recovered discrimination â against the share "
            "of models answering it correctly, coloured by its Fisher information averaged "
            "over the models' abilities. Marked: items answered alike by every model (not "
            "identified), items with â ≈ 0 (no information), items held at â = 0 whose "
            "answers weaker models get right more often than stronger ones (negative "
            "discrimination: likely a wrong answer key) and items whose difficulty lies "
            "beyond every model's ability (cbmm.item_audit). Top right: the rank correlation "
            "of the models' abilities with their accuracy, beside the one answers drawn from "
            "the fit give; far below it, the fit's one dimension is not what the benchmark's "
            "score measures, and negative discrimination is no evidence of a wrong key. "
            "Neither is it where the wrong-way items' residuals depend on one another more "
            "than those of every one of 19 random sets of as many ordinary items (the note "
            "then says so): they share a cause, a skill or format the ability does not "
            "measure or a fault common to their keys, not one item's wrong key each. The "
            "note's last line counts the items whose answers could show a wrong key (they "
            "rise with ability as steeply as a flagged item's fall, or the item is flagged); "
            "on the others the audit's silence is no evidence that the key is right.")
