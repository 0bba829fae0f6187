"""Appendix sensitivity figures: one grid of boxplots per simulation study.

Each panel shows one metric; along x the study's levels, at each level one
box per method summarising the replicates.  A replicate whose ``status``
starts with ``failed`` is left out of every panel (runtime included); a
(level, method) cell with no usable value is marked ``NA`` in the method's
colour, never drawn as zero, and a cell with some failed replicates is
annotated with the failure count (``×k``).  Runtimes are on a log scale and
truncated at :data:`RUNTIME_CAP_S`; truncated replicates are drawn at the
cap and marked with a triangle.

Relative error, Hellinger distance and RMSE of b are drawn in the definitions
of the published figures by default (``definitions="published"``, see
:data:`cbmm.metrics.METRIC_DEFINITIONS`); ``definitions="text"`` draws the
paper's text definitions.  Axis labels and captions name the definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import matplotlib.transforms as mtransforms
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from ..metrics import METRIC_DEFINITIONS
from ..tables import failed_mask, read_result_table
from .style import (FIGURE_WIDTH_IN, method_color, method_legend_handles, ordered_methods,
                    paper_style, save_figure)

__all__ = ["STUDIES", "DESIGN_SPECS", "design_spec", "METRIC_LABELS", "METRIC_NAMES",
           "DEFINITION_LABELS", "DEFINITION_NAMES", "DEFINITION_SOURCES", "RUNTIME_CAP_S",
           "SIM_COLUMNS", "StudySpec", "plot_sensitivity", "caption", "metric_column"]

#: Runtimes above this many seconds are drawn at the cap (as in the paper).
RUNTIME_CAP_S = 1000.0

#: Columns of ``results/tables/sim_<study>.csv`` that the figure reads.
SIM_COLUMNS = ("study", "level", "method", "replicate", "status", "runtime_s")

#: Axis label of each metric column.
METRIC_LABELS = {
    "spearman_theta": r"Spearman corr. ($\theta$)",
    "spearman_a": r"Spearman corr. ($a$)",
    "spearman_b": r"Spearman corr. ($b$)",
    "rmse_b": r"RMSE ($b$)",
    "rel_error_x": r"Relative error ($X$)",
    "hellinger_x": r"Hellinger distance ($X$)",
    "recall_a": r"Recall ($a$)",
    "precision_a": r"Precision ($a$)",
    "runtime_s": "Runtime (s)",
}

#: Axis label of the metrics with two definitions, per definition (replaces METRIC_LABELS).
DEFINITION_LABELS = {
    "published": {
        "rmse_b": "RMSE ($b$)\nraw scale",
        "rel_error_x": "Relative error ($X$)\n" + r"$\|\hat X-X\|_F/\|X\|_F$",
        "hellinger_x": "Hellinger distance ($X$)\n" + r"$\mathrm{rms}(\sqrt{\hat p}-\sqrt{p})$",
    },
    "text": {
        "rmse_b": "RMSE ($b$)\ncanonical scale",
        "rel_error_x": "Relative error ($X$)\n" + r"$\|\hat X-X\|_F^2/\|X\|_F^2$",
        "hellinger_x": "Hellinger distance ($X$)\n" + r"mean $d_H^2(\hat p, p)$",
    },
}

#: Caption phrase naming each definition of the metrics that have two.
DEFINITION_NAMES = {
    "published": {
        "rel_error_x": "relative error ‖X̂−X‖_F/‖X‖_F",
        "hellinger_x": "Hellinger distance sqrt(mean((√p̂−√p)²)) over all entries",
        "rmse_b": ("RMSE of the method's raw b̂ (the parametrisation its solver returned) "
                   "against the simulated b"),
    },
    "text": {
        "rel_error_x": "relative error ‖X̂−X‖²_F/‖X‖²_F",
        "hellinger_x": ("Hellinger distance "
                        "(1/NJ)Σ[(√p̂−√p)² + (√(1−p̂)−√(1−p))²]"),
        "rmse_b": "RMSE of b̂ against b with θ standardised in both (canonical scale)",
    },
}

#: Where each set of definitions comes from (captions).
DEFINITION_SOURCES = {"published": "the published figures (the authors' released code)",
                      "text": "the paper's text"}

#: Plain-text name of each metric (captions).
METRIC_NAMES = {
    "spearman_theta": "Spearman correlation of θ", "spearman_a": "Spearman correlation of a",
    "spearman_b": "Spearman correlation of b", "rmse_b": "RMSE of b",
    "rel_error_x": "relative error of X", "hellinger_x": "Hellinger distance of X",
    "recall_a": "recall of the support of a", "precision_a": "precision of the support of a",
    "runtime_s": "runtime",
}

_DEFAULT_METRICS = ("spearman_theta", "spearman_a", "rmse_b", "rel_error_x", "hellinger_x",
                    "runtime_s")


@dataclass(frozen=True)
class StudySpec:
    """How one simulation study is drawn.

    Attributes
    ----------
    xlabel : str
        Name of the varied level.
    description : str
        Phrase used in the caption ("varying temperature ...").
    metrics : tuple of str
        Metric columns, one panel each, in reading order (two per row).
    log_metrics : tuple of str
        Metrics drawn on a log scale besides the runtime (when their values span a
        factor of 10 or more).
    thousands : bool
        Write levels >= 1000 as ``1k``, ``2k``, ...
    """

    xlabel: str
    description: str
    metrics: tuple = _DEFAULT_METRICS
    log_metrics: tuple = ()
    thousands: bool = False


#: How a study is drawn, by what it varies: its design factor (``simulation.studies.<study>.
#: factor`` of the workflow's config) or, for a missing rate, its missingness pattern.  A
#: study is declared once, in the config; its figure follows from its design (:func:`design_spec`).
DESIGN_SPECS = {
    "n_items": StudySpec(r"Number of items $J$",
                         "varying numbers of items J (number of models N fixed)", thousands=True),
    "n_models": StudySpec(r"Number of models $N$",
                          "varying numbers of models N (number of items J fixed)", thousands=True),
    "log10_sigma": StudySpec(r"$\log_{10}\sigma$", "varying temperature σ (x axis: log10 σ)",
                             log_metrics=("rmse_b", "rel_error_x", "hellinger_x")),
    "missing_rate/mcar": StudySpec(r"Missing rate $\rho$ (MCAR)",
                                   "varying missing rate ρ with an MCAR pattern"),
    "missing_rate/mar": StudySpec(r"Missing rate $\rho$ (MAR)",
                                  "varying missing rate ρ with an MAR pattern"),
    # As published: with whole columns of incorrect answers masked, the scale of b is not
    # identified, so the paper reports the rank agreement of b instead of its RMSE.
    "missing_rate/mnar": StudySpec(r"Column-wise missing rate $\rho_c$ (MNAR)",
                                   "varying column-wise missing rate ρ_c with an MNAR pattern",
                                   metrics=("spearman_theta", "spearman_a", "spearman_b",
                                            "rel_error_x", "hellinger_x", "runtime_s")),
    "sparsity": StudySpec(r"Sparsity $s$ of $a$",
                          "varying sparsity s of the discriminations a (benchmark redundancy)",
                          metrics=("spearman_theta", "spearman_a", "recall_a", "precision_a",
                                   "rmse_b", "rel_error_x", "hellinger_x", "runtime_s")),
}


def design_spec(factor: str, missing: str = "none") -> StudySpec:
    """How a study that varies ``factor`` (under missingness pattern ``missing``) is drawn.

    Raises
    ------
    ValueError
        For a factor without a spec, or a missing rate without a pattern (``"none"``).
    """
    key = f"{factor}/{missing}" if factor == "missing_rate" else factor
    if key not in DESIGN_SPECS:
        raise ValueError(f"no sensitivity figure for a study of {factor!r} with missingness "
                         f"{missing!r}; drawn: {list(DESIGN_SPECS)}")
    return DESIGN_SPECS[key]


#: The seven studies of the appendix, keyed as in ``sim_<study>.csv``: what each varies.
STUDIES = {
    "size_fixN": DESIGN_SPECS["n_items"],
    "size_fixJ": DESIGN_SPECS["n_models"],
    "temperature": DESIGN_SPECS["log10_sigma"],
    "mcar": DESIGN_SPECS["missing_rate/mcar"],
    "mar": DESIGN_SPECS["missing_rate/mar"],
    "mnar": DESIGN_SPECS["missing_rate/mnar"],
    "sparsity": DESIGN_SPECS["sparsity"],
}


def _study_spec(study: str, design, where: str = "") -> StudySpec:
    """The spec of ``study``: by its ``design`` ({factor, missing}) where given, else by its
    name among the paper's :data:`STUDIES`."""
    if design is not None:
        return design_spec(design["factor"], design.get("missing", "none"))
    if study not in STUDIES:
        raise ValueError(f"{where}unknown study {study!r}; expected one of {list(STUDIES)} "
                         "(or pass design=...)")
    return STUDIES[study]


def _check_definitions(definitions: str) -> None:
    if definitions not in METRIC_DEFINITIONS:
        raise ValueError(f"definitions must be one of {list(METRIC_DEFINITIONS)}, "
                         f"got {definitions!r}")


def metric_column(metric: str, definitions: str = "published") -> str:
    """Column of ``sim_<study>.csv`` drawn for a panel metric under ``definitions``."""
    _check_definitions(definitions)
    return METRIC_DEFINITIONS[definitions].get(metric, metric)


def _level_text(level: float, thousands: bool) -> str:
    if thousands and level >= 1000 and level % 1000 == 0:
        return f"{level / 1000:g}k"
    text = f"{level:g}"
    return text.replace("-", "\N{MINUS SIGN}")


def _cell_values(block: pd.DataFrame, metric: str) -> tuple[np.ndarray, int]:
    """Finite values of ``metric`` over the successful replicates, and the failure count."""
    failed = failed_mask(block["status"])
    values = pd.to_numeric(block.loc[~failed, metric], errors="coerce").to_numpy(dtype=float)
    return values[np.isfinite(values)], int(failed.sum())


def plot_sensitivity(sim, study: str | None = None, out_paths=(), *, methods=None,
                     definitions: str = "published", design=None):
    """Grid of boxplots (metric x level x method) for one simulation study.

    Parameters
    ----------
    sim : pandas.DataFrame or path-like
        ``results/tables/sim_<study>.csv`` (columns ``study, level, method,
        replicate, status, runtime_s`` and the study's metric columns).
    study : str, optional
        The study (the table's ``study`` column); defaults to the table's single
        ``study`` value.  Without ``design`` it must be a key of :data:`STUDIES`.
    out_paths : sequence of path-like
        Files to write (``.pdf``/``.png``), atomically.
    methods : sequence of str, optional
        Method keys to draw (default: those in the table, in the paper's order).
    definitions : {"published", "text"}
        Which definition of relative error, Hellinger distance and RMSE of b
        to draw (:data:`cbmm.metrics.METRIC_DEFINITIONS`).
    design : mapping, optional
        ``{"factor": ..., "missing": ...}`` of the study (its config entry): drawn by
        :func:`design_spec`, so any study of the config has its figure.

    Returns
    -------
    matplotlib.figure.Figure
        One axes per metric, in :attr:`StudySpec.metrics` order.
    """
    _check_definitions(definitions)
    name = None if isinstance(sim, pd.DataFrame) else str(sim)
    sim = read_result_table(sim, SIM_COLUMNS, name or "simulation table")
    where = name or "simulation table"
    studies = sim["study"].dropna().unique()
    if study is None:
        if len(studies) != 1:
            raise ValueError(f"{where}: pass study=...; the table holds studies {list(studies)}")
        study = str(studies[0])
    spec = _study_spec(study, design, f"{where}: ")
    columns = tuple(metric_column(m, definitions) for m in spec.metrics)
    sim = read_result_table(sim[sim["study"] == study], SIM_COLUMNS + columns, where)
    if sim.empty:
        raise ValueError(f"{where}: no rows for study {study!r}")
    if sim["level"].isna().any():
        row = sim.index[sim["level"].isna()][0]
        raise ValueError(f"{where}: column 'level' is empty in row {row}")
    methods = ordered_methods(methods if methods is not None else sim["method"], where)
    levels = np.sort(sim["level"].astype(float).unique())

    n_rows = math.ceil(len(spec.metrics) / 2)
    with paper_style():
        fig, axes = plt.subplots(n_rows, 2, figsize=(FIGURE_WIDTH_IN, 1.95 * n_rows + 0.45),
                                 squeeze=False)
        for ax, metric in zip(axes.flat, spec.metrics):
            _draw_metric(ax, sim, metric, levels, methods, spec, definitions)
        for ax in axes.flat[len(spec.metrics):]:
            ax.remove()
        for ax in axes[-1]:
            ax.set_xlabel(spec.xlabel)
        fig.legend(handles=method_legend_handles(methods), loc="upper center", ncol=len(methods),
                   frameon=False, bbox_to_anchor=(0.5, 1.0), title="Method", title_fontsize=8,
                   handlelength=1.2, columnspacing=1.2, alignment="center")
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.42 / fig.get_figheight()), h_pad=0.8, w_pad=1.2)
        save_figure(fig, out_paths)
    return fig


def _draw_metric(ax, sim, metric, levels, methods, spec, definitions):
    is_runtime = metric == "runtime_s"
    column = metric_column(metric, definitions)
    n_methods = len(methods)
    slot = 0.8 / n_methods
    width = slot * 0.72
    na_transform = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
    grouped = {key: block for key, block in sim.groupby(["level", "method"])}
    drawn = []
    for k, method in enumerate(methods):
        color = method_color(method)
        positions, data = [], []
        for i, level in enumerate(levels):
            x = i - 0.4 + slot * (k + 0.5)
            block = grouped.get((level, method))
            values, n_failed = (np.array([]), 0) if block is None else _cell_values(block, column)
            if values.size == 0:
                # An empty cell is a failure of the method, shown as such and never as 0.
                ax.text(x, 0.5, "NA", transform=na_transform, ha="center", va="center",
                        fontsize=6, color=color, fontweight="bold", gid=f"NA:{level:g}:{method}")
                continue
            if n_failed:
                ax.text(x, 0.02, f"\N{MULTIPLICATION SIGN}{n_failed}", transform=na_transform,
                        ha="center", va="bottom", fontsize=5, color=color,
                        gid=f"failed:{level:g}:{method}")
            if is_runtime and np.any(values > RUNTIME_CAP_S):
                values = np.minimum(values, RUNTIME_CAP_S)
                ax.plot([x], [RUNTIME_CAP_S], marker="^", color=color, markersize=3.5,
                        clip_on=False, gid=f"truncated:{level:g}:{method}")
            positions.append(x)
            data.append(values)
        if data:  # one call per method: boxplot is slow per call
            ax.boxplot(data, positions=positions, widths=width, showfliers=True,
                       manage_ticks=False,
                       boxprops={"color": color, "linewidth": 1.0},
                       whiskerprops={"color": color, "linewidth": 0.9},
                       capprops={"color": color, "linewidth": 0.9},
                       medianprops={"color": color, "linewidth": 1.3},
                       flierprops={"marker": "o", "markersize": 1.8, "markeredgecolor": color,
                                   "markerfacecolor": "none", "markeredgewidth": 0.5})
            drawn.extend(data)
    ax.set_xticks(range(len(levels)), [_level_text(v, spec.thousands) for v in levels])
    ax.set_xlim(-0.5, len(levels) - 0.5)
    ax.xaxis.grid(False)
    for boundary in np.arange(0.5, len(levels) - 0.5):
        ax.axvline(boundary, color="#e3e3e3", linewidth=0.6, zorder=0)
    ax.set_ylabel(DEFINITION_LABELS[definitions].get(metric, METRIC_LABELS[metric]))
    if is_runtime:
        ax.set_yscale("log")
        ax.axhline(RUNTIME_CAP_S, color="#888888", linewidth=0.6, linestyle=":", zorder=0)
        low, _ = ax.get_ylim()
        ax.set_ylim(low, RUNTIME_CAP_S * 1.8)
    elif (metric in spec.log_metrics and drawn and all(np.all(v > 0) for v in drawn)
          and max(map(np.max, drawn)) >= 10 * min(map(np.min, drawn))):
        # a log axis only where the values span an order of magnitude or more
        ax.set_yscale("log")
    elif metric.startswith("spearman") or metric == "recall_a":
        # as published: correlations and recall on their natural range, so that small
        # differences are not magnified (negative values, e.g. a flipped theta, stay visible)
        low = min([0.0] + [float(np.min(v)) for v in drawn if v.size])
        ax.set_ylim(low - 0.05 * (1.05 - low), 1.05)
    if ax.get_yscale() == "log":
        _plain_log_labels(ax)


def _plain_log_labels(ax):
    """Decimal tick labels on a log axis (0.2, not 2 x 10^-1); within less than 2.5 decades
    the minor ticks at 2 and 5 x 10^k are labelled too."""
    low, high = ax.get_ylim()
    few_decades = np.log10(high / low) < 2.5

    def minor(value, _):
        mantissa = round(value / 10 ** np.floor(np.log10(value) + 1e-9))
        return f"{value:g}" if few_decades and mantissa in (2, 5) else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def caption(study: str, config_summary: dict | None = None, definitions: str = "published",
            design=None) -> str:
    """Figure caption for one study (``config_summary`` may give ``n_replicates``; ``design``
    as for :func:`plot_sensitivity`)."""
    _check_definitions(definitions)
    spec = _study_spec(study, design)
    replicates = (config_summary or {}).get("n_replicates")
    count = f"{replicates} independent replicates" if replicates else "the independent replicates"
    panels = ", ".join(METRIC_NAMES[m] for m in spec.metrics)
    return (f"Sensitivity analysis under {spec.description}. Panels: {panels}. "
            f"Each boxplot summarises {count} of one method at one level; failed replicates are "
            f"left out (their count is marked ×k) and 'NA' marks a level where every replicate of "
            f"the method failed. Runtimes are on a log scale and truncated at "
            f"{RUNTIME_CAP_S:,.0f} s (triangles mark truncated replicates)."
            + _definitions_sentence(spec.metrics, definitions))


def _definitions_sentence(metrics, definitions: str) -> str:
    names = DEFINITION_NAMES[definitions]
    phrases = [names[m] for m in metrics if m in names]
    if not phrases:
        return ""
    return (f" Definitions as in {DEFINITION_SOURCES[definitions]}: " + "; ".join(phrases) + ".")
