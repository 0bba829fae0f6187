"""Efficient evaluation of one dataset: the error of predicted accuracy of held-out models
against the number of items kept, per selection strategy, beside the mean of random items;
and the adaptive tests' items against their ability error."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import ScalarFormatter

from ..tables import read_result_table
from .style import FIGURE_WIDTH_IN, paper_style, save_figure

__all__ = ["plot_efficiency", "caption", "STRATEGY_STYLE"]

_SELECTION = ("k", "strategy", "mae", "mae_sd")
_ADAPTIVE = ("max_exposure", "se_target", "n_items", "theta_error")
#: Colours of the adaptive tests' settings: content balance and exposure control (light:
#: one test).
_SETTING_COLORS = (("#9ecae1", "#08519c"), ("#fdae6b", "#a63603"), ("#a1d99b", "#006d2c"),
                   ("#bcbddc", "#54278f"))
#: Label and colour of each strategy and baseline.
STRATEGY_STYLE = {
    "stratified": ("stratified", "#b2182b"),
    "random": ("random", "#2166ac"),
    "information": ("maximal information", "#e08214"),
    "anchor": ("anchors (k-means)", "#1b7837"),
    "predictive": ("predictive (calibration answers)", "#762a83"),
    "random_mean": ("mean of random items", "#777777"),
    "tinybenchmarks": ("tinyBenchmarks gp-IRT (own anchors)", "#000000"),
}
#: The baselines, dashed.
_BASELINES = ("random_mean", "tinybenchmarks")
#: Ability errors above this are drawn at the top edge of the adaptive panel.
_ERROR_AXIS = 1.0
#: The field's reference points, drawn for comparison (docs/efficiency.md).
TINYBENCHMARKS_MAE = 0.016  # gp-IRT, 100 anchors, MMLU (Polo et al. 2024)
ATLAS = (41, 0.157)  # items, ability MAE on HellaSwag (ATLAS)


def plot_efficiency(selection, adaptive, out_paths=(), title: str | None = None):
    """Two panels: MAE of predicted accuracy against k (log scale) per strategy; adaptive
    tests' items against |ability error|, one dot per test and the mean per SE target.

    Parameters
    ----------
    selection : pandas.DataFrame or path-like
        ``results/tables/efficiency/<dataset>.csv`` (columns ``k, strategy, mae, mae_sd``
        and, where there, ``cv_mae``, drawn as crosses).
    adaptive : pandas.DataFrame or path-like
        ``results/tables/adaptive/<dataset>.csv`` (columns ``max_exposure, se_target,
        n_items, theta_error`` and, where tests were balanced over content areas,
        ``content``; one colour per content balance and exposure setting, NaN: none).
    out_paths : sequence of path-like
        Files to write, atomically.
    title : str, optional
        Figure title (e.g. the dataset).

    Returns
    -------
    matplotlib.figure.Figure
    """
    selection = read_result_table(selection, _SELECTION, None if isinstance(
        selection, pd.DataFrame) else str(selection))
    adaptive = read_result_table(adaptive, _ADAPTIVE, None if isinstance(
        adaptive, pd.DataFrame) else str(adaptive))
    with paper_style():
        fig, (left, right) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 4.4))
        for strategy, rows in selection.groupby("strategy", sort=False):
            label, color = STRATEGY_STYLE.get(strategy, (strategy, None))
            rows = rows.sort_values("k")
            left.errorbar(rows["k"], rows["mae"], yerr=rows["mae_sd"], label=label,
                          color=color, marker="o", markersize=3, capsize=2, linewidth=1.1,
                          linestyle="--" if strategy in _BASELINES else "-")
            told = rows.dropna(subset=["cv_mae"]) if "cv_mae" in rows else rows.iloc[:0]
            if len(told):  # what cbmm.selection_error would have told, beside it
                left.scatter(told["k"], told["cv_mae"], marker="x", s=30, color=color,
                             linewidths=1.1, zorder=3)
        if selection.get("cv_mae", pd.Series(dtype=float)).notna().any():
            left.scatter([], [], marker="x", s=30, color="black", linewidths=1.1,
                         label="cross-validated on the calibration models, per strategy")
        left.axhline(TINYBENCHMARKS_MAE, color="black", linewidth=0.7, linestyle=":",
                     label=f"tinyBenchmarks, published on MMLU ({TINYBENCHMARKS_MAE})")
        left.set_xscale("log")
        left.set_xticks(sorted(selection["k"].unique()))
        left.xaxis.set_major_formatter(ScalarFormatter())
        left.minorticks_off()
        left.set_xlabel("items kept, k")
        left.set_ylabel("MAE of predicted accuracy")
        left.set_ylim(bottom=0)
        left.legend(fontsize=6.5, frameon=False, loc="upper center",
                    bbox_to_anchor=(0.5, -0.2), ncol=1)
        error = adaptive.assign(abs_error=adaptive["theta_error"].abs())
        if "content" not in error.columns:
            error["content"] = "none"
        settings = error.groupby(["content", "max_exposure"], dropna=False, sort=False)
        for index, (((content, limit), tests), (light, dark)) in enumerate(
                zip(settings, itertools.cycle(_SETTING_COLORS))):
            label = "no exposure control" if pd.isna(limit) else f"exposure ≤ {limit:.0%}"
            if content != "none":
                label += f", by {content}"
            right.scatter(tests["n_items"], tests["abs_error"].clip(upper=_ERROR_AXIS), s=3,
                          color=light, alpha=0.6, linewidths=0, clip_on=False)
            means = tests.groupby("se_target")[["n_items", "abs_error"]].mean()
            right.plot(means["n_items"], means["abs_error"], color=dark, marker="o",
                       markersize=4, label=label)
            if content != "none":  # the same targets as unbalanced: marked there only
                continue
            for target, row in means.iterrows():  # SE targets, above or below by setting
                right.annotate(f"{target:g}", (row["n_items"], row["abs_error"]),
                               textcoords="offset points", xytext=(0, 5 - 12 * (index % 2)),
                               ha="center", fontsize=6, color=dark)
        right.scatter(*ATLAS, marker="*", s=60, color="black", zorder=3,
                      label=f"ATLAS, HellaSwag ({ATLAS[0]} items, {ATLAS[1]})")
        right.set_ylim(0, _ERROR_AXIS)
        right.set_xlabel("items given")
        right.set_ylabel(r"|$\hat\theta$ − full-data $\hat\theta$|")
        right.legend(fontsize=6.5, frameon=False, loc="upper center",
                     bbox_to_anchor=(0.5, -0.2), ncol=1, title="mean per SE target",
                     title_fontsize=6.5)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        save_figure(fig, out_paths)
    return fig


def caption(config_summary: dict | None = None) -> str:
    """Figure caption."""
    summary = config_summary or {}
    splits = summary.get("splits")
    share = summary.get("test_share")
    held = summary.get("held_models")
    more = f"; more splits where {splits} hold out fewer than {held} models in all" if held else ""
    design = (f"{splits} random splits of the models, {share:.0%} held out{more}"
              if splits and share else "random splits of the models into calibration and "
              "held-out models")
    tiny = (" and tinyBenchmarks' gp-IRT from its own k anchor items (black; k-means "
            "anchors, its clustering and lambda chosen on a fifth of the calibration models)"
            if summary.get("tinybenchmarks") else "")
    draws = summary.get("draws") or 1
    tiny_drawn = ", tinyBenchmarks' anchors" if summary.get("tinybenchmarks") else ""
    drawn = (f" (stratified, random, anchor, the mean of k random items{tiny_drawn}: their "
             f"{draws} draws of k items per split together)" if draws > 1 else "")
    content = summary.get("content")
    balance = (f"; and again, each test balanced over the items' {content} in their shares "
               "of the items (content balancing)" if content else "")
    return (f"Efficient evaluation ({design}). Left: mean absolute error of the held-out "
            "models' predicted full-benchmark accuracy (cbmm.predict_accuracy, the split's "
            "calibration models as its reference) from k items chosen by each strategy of "
            "cbmm.select_items on the calibration fit (predictive: on the calibration "
            "models' answers), mean and sd "
            f"over the splits{drawn}, beside the mean of k random items{tiny}; crosses: the "
            "same "
            "strategy's MAE cross-validated on the calibration models alone (five folds, "
            "each predicted from k items chosen on the others, five draws of them for "
            "stratified, random and anchor: cbmm.selection_error, how many items a benchmark "
            "needs), mean over the splits. Right: adaptive tests of "
            "the held-out models (cbmm.adaptive_test, one per SE target and exposure setting, "
            f"the held-out models of every split in one stream{balance}; light dots one "
            "test, dark the mean per SE target): items given against the absolute difference between the "
            "test's ability and the ability from all of the model's answers (errors above 1 "
            "drawn at the top edge). Dotted line and star: "
            "tinyBenchmarks' and ATLAS's published figures on other benchmarks.")
