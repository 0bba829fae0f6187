"""Figure 5: ranking flow from mean-accuracy rank to recovered-ability rank.

For each suite the models ranked within the top ``k`` by *both* mean
accuracy and recovered ability are shown (the paper uses k = 30 for MATH,
50 for MMLU-Pro and 90 for GPQA).  Left column: models stacked by accuracy
rank; right column: by ability rank; every model occupies one slot, so a
rank shared by several models (a tie) is one bar spanning their slots --
a wider bar.  A ribbon joins each model's two slots, coloured by its
accuracy rank.  Ranks (and colours) are the ranks among all models of the
suite, as in ``results/tables/rankings/<dataset>.csv``.  Panels are ordered
by increasing CV of ``a``, shown in each title.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Mapping

import matplotlib.patheffects as patheffects
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.patches import Rectangle

from .._warn import CbmmWarning, warn
from ..tables import read_result_table
from .style import FIGURE_WIDTH_IN, paper_style, save_figure, suite_label

__all__ = ["DEFAULT_TOP", "shown_models", "plot_rankflow", "caption"]

#: Top-k per suite used in the paper.
DEFAULT_TOP = {"MATH": 30, "MMLU_PRO": 50, "GPQA": 90}

_COLUMNS = ("model", "accuracy", "accuracy_rank", "theta", "theta_rank")
_BAR_WIDTH = 0.26
_CMAP = "plasma"


def shown_models(ranking: pd.DataFrame, top: int) -> pd.DataFrame:
    """Models within the top ``top`` of both rankings (ranks 1 = best)."""
    return ranking[(ranking["accuracy_rank"] <= top) & (ranking["theta_rank"] <= top)]


def _cv_lookup(summary) -> dict:
    if isinstance(summary, Mapping):
        return {str(k): float(v) for k, v in summary.items()}
    if not isinstance(summary, pd.DataFrame) and str(summary).endswith(".json"):
        with open(summary) as stream:  # one dataset's metrics (rule metrics_real's row)
            row = json.load(stream)
        if not isinstance(row, dict) or not {"dataset", "cv_a"} <= set(row):
            raise ValueError(f"{summary}: expected one dataset's metrics, with keys dataset "
                             "and cv_a")
        return {str(row["dataset"]): float(row["cv_a"])}
    name = None if isinstance(summary, pd.DataFrame) else str(summary)
    table = read_result_table(summary, ("dataset", "cv_a"), name or "discrimination_summary")
    return dict(zip(table["dataset"].astype(str), table["cv_a"].astype(float)))


def plot_rankflow(rankings: Mapping, summary, out_paths=(), *, top: Mapping | None = None,
                  label_models: Mapping | None = None, names: bool = False):
    """Ranking flow panels, one per suite, ordered by increasing CV(â).

    Parameters
    ----------
    rankings : mapping dataset -> DataFrame or path-like
        ``results/tables/rankings/<dataset>.csv`` per suite (columns ``model,
        accuracy, accuracy_rank, theta, theta_rank``).
    summary : DataFrame, path-like or mapping dataset -> float
        ``discrimination_summary.csv`` (its ``cv_a`` column), one dataset's metrics
        (``results/metrics/real/<dataset>.json``), or the CVs directly.
    out_paths : sequence of path-like
        Files to write (``.pdf``/``.png``), atomically.
    top : mapping dataset -> int, optional
        How many top models per ranking to consider (default :data:`DEFAULT_TOP`).
    label_models : mapping dataset -> list of str, optional
        Models to name on both columns (e.g. the paper's Qwen2.5-72B in MATH).
    names : bool
        Name every model shown, beside its bars (left of the accuracy column, right of
        the ability column); the paper's figure names none.

    Returns
    -------
    matplotlib.figure.Figure
        One axes per suite (label ``"rankflow"``) plus one colour bar each.
    """
    top = dict(DEFAULT_TOP if top is None else top)
    cv = _cv_lookup(summary)
    missing = [d for d in rankings if d not in top or d not in cv]
    if missing:
        raise ValueError(f"rankflow: no top-k or no CV(a) for dataset(s) {missing} "
                         f"(top-k given for {list(top)}, CV for {list(cv)})")
    tables = {d: read_result_table(t, _COLUMNS,
                                   f"rankings/{d}" if isinstance(t, pd.DataFrame) else None)
              for d, t in rankings.items()}
    order = sorted(tables, key=lambda d: cv[d])
    for dataset in order:  # a top beyond the models coloured every bar alike
        if top[dataset] > len(tables[dataset]):
            warn(f"rankflow: top {top[dataset]} for {dataset} is more than its "
                 f"{len(tables[dataset])} models; its colours span those", CbmmWarning)
            top[dataset] = len(tables[dataset])

    with paper_style():
        per_panel = 4.6 if names else 2.3  # the names need room on both sides
        width = min(FIGURE_WIDTH_IN * (2 if names else 1), per_panel * len(order) + 0.4)
        fig, axes = plt.subplots(1, len(order), figsize=(width, 4.3), squeeze=False)
        for ax, dataset in zip(axes[0], order):
            shown = shown_models(tables[dataset], top[dataset])
            ax.set_title(f"{suite_label(dataset)}\nCV($\\hat{{a}}$) = {cv[dataset]:.2f}",
                         fontsize=9)
            if shown.empty:  # said in the panel: the other panels are still worth drawing
                ax.axis("off")
                ax.text(0.5, 0.5, f"No model is in the top {top[dataset]}\nof both rankings",
                        ha="center", va="center", fontsize=8, transform=ax.transAxes,
                        gid=f"empty:{dataset}")
                ax.set_label("rankflow")
                continue
            norm = Normalize(1, top[dataset])
            _draw_panel(ax, shown, norm, (label_models or {}).get(dataset, ()), names)
            bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=_CMAP), ax=ax,
                               orientation="horizontal", fraction=0.04, pad=0.11, aspect=25)
            bar.set_label("Rank", fontsize=7.5)
            bar.ax.tick_params(labelsize=6.5)
        fig.tight_layout(w_pad=1.0)
        save_figure(fig, out_paths)
    return fig


def _slots(shown: pd.DataFrame, primary: str, secondary: str) -> pd.Series:
    ordered = shown.sort_values([primary, secondary, "model"], kind="stable")
    return pd.Series(np.arange(len(ordered)), index=ordered["model"].to_numpy())


def _draw_panel(ax, shown, norm, labels, names=False):
    cmap = plt.get_cmap(_CMAP)
    n = len(shown)
    named = _names(shown["model"])
    left = _slots(shown, "accuracy_rank", "theta_rank")
    right = _slots(shown, "theta_rank", "accuracy_rank")
    by_model = shown.set_index("model")
    # ribbons first, bars on top
    t = np.linspace(0, 1, 40)
    smooth = 3 * t ** 2 - 2 * t ** 3
    xs = _BAR_WIDTH + (1 - 2 * _BAR_WIDTH) * t
    for model in left.index[::-1]:
        i, j = left[model], right[model]
        top_edge = i + (j - i) * smooth
        color = cmap(norm(by_model.loc[model, "accuracy_rank"]))
        ax.fill_between(xs, top_edge, top_edge + 1, color=color, alpha=0.45, linewidth=0)
    for column, slots, x0 in (("accuracy", left, 0.0), ("theta", right, 1 - _BAR_WIDTH)):
        ranks = by_model.loc[slots.index, f"{column}_rank"]
        for rank, group in slots.groupby(ranks.to_numpy()):
            ax.add_patch(Rectangle((x0, group.min()), _BAR_WIDTH, len(group),
                                   facecolor=cmap(norm(rank)), edgecolor="black", linewidth=0.4,
                                   gid=f"{column}:{rank}"))
        for model in labels:
            if model in slots.index:
                ax.text(x0 + _BAR_WIDTH / 2, slots[model] + 0.5, named[model],
                        ha="center", va="center", fontsize=5, color="white",
                        path_effects=[patheffects.withStroke(linewidth=1.2, foreground="black")])
    if names:
        size = max(3.0, min(6.0, 180.0 / n))
        for slots, x, align in ((left, -0.03, "right"), (right, 1.03, "left")):
            for model, slot in slots.items():
                ax.text(x, slot + 0.5, named[model], ha=align, va="center", fontsize=size,
                        gid=f"name:{model}")
    ax.set_xlim(-0.9 if names else -0.02, 1.9 if names else 1.02)
    ax.set_ylim(n, 0)  # rank 1 at the top
    ax.set_xticks([_BAR_WIDTH / 2, 1 - _BAR_WIDTH / 2], ["Mean accuracy", "Recovered ability"],
                  fontsize=7)
    ax.tick_params(axis="x", length=0)
    ax.set_yticks([])
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_label("rankflow")


def _short(model: str, most: int = 32, organisation: bool = False) -> str:
    """A model's name as shown: without its organisation (unless ``organisation``), at
    most ``most`` characters, cut in the middle (its end tells variants apart: MATH-500's
    ``..._zero_shot`` and ``..._one_shot`` prompts of one model)."""
    name = str(model) if organisation else str(model).split("/")[-1]
    if len(name) <= most:
        return name
    tail = (most - 1) // 2
    return name[:most - 1 - tail] + "\N{HORIZONTAL ELLIPSIS}" + name[-tail:]


def _names(models, most: int = 32) -> dict:
    """Each model's shown name (:func:`_short`), distinct: names two models share get
    their organisation back, and any still shared a number (``orgX/Big Model`` and
    ``orgY/Big Model`` were both "Big Model")."""
    shown = {model: _short(model, most) for model in models}
    for model in _twins(shown):
        shown[model] = _short(model, most, organisation=True)
    numbered = Counter()
    for model in _twins(shown):
        numbered[shown[model]] += 1
        shown[model] = f"{shown[model]} [{numbered[shown[model]]}]"
    return shown


def _twins(shown: dict) -> list:
    """The models whose shown name another model has too."""
    counts = Counter(shown.values())
    return [model for model, name in shown.items() if counts[name] > 1]


def caption(config_summary: dict | None = None) -> str:
    """Figure caption (``config_summary`` may give ``top``, a mapping dataset -> k)."""
    top = (config_summary or {}).get("top", DEFAULT_TOP)
    named = " Models are named beside their bars." if (config_summary or {}).get("names") else ""
    tops = ", ".join(f"top {k} for {suite_label(d)}" for d, k in top.items())
    return ("Ranking flow between mean accuracy (left column of each panel) and cBMM-recovered "
            f"ability (right column), for the models within the top k of both rankings ({tops}). "
            "Panels are ordered by increasing coefficient of variation of the recovered â, given "
            "in each title. Bar colours give the rank among all models of the suite; a bar "
            "spanning several models marks a tie; ribbons are coloured by the accuracy rank. "
            f"Full rankings are in the supplementary tables.{named}")
