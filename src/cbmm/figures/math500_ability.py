"""Figure 2: recovered MATH-500 abilities against release date, by size tier.

Each model was evaluated with two prompt styles (zero-shot, one-shot), i.e.
two rows of the response matrix and two abilities.  The figure shows one
point per model at its better prompt's ability by default, as the published
figure does (``prompts="max"``; ``"mean"`` averages the two, see
:func:`model_abilities` and docs/fidelity.md); the three panels share the date
range and the ability axis.  The highest ability in each panel and the lowest
in the large tier are highlighted and labelled.

Abilities are on the canonical scale (mean 0, sd 1 over the matrix rows); the
published figure is on its solver's raw scale, which the model does not
identify, hence its wider axis.
"""

from __future__ import annotations

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import pandas as pd

from ..tables import read_result_table
from .style import FIGURE_WIDTH_IN, paper_style, save_figure

__all__ = ["TIERS", "PROMPT_AGGREGATIONS", "model_abilities", "plot_math500_ability", "caption"]

#: Size tiers (key in the table, panel title), in panel order.
TIERS = {"0-7B": "Small (0–7B)", "7-20B": "Medium (7–20B)", ">20B": "Large (>20B)"}

#: How the abilities of a model's prompt styles become its one point (caption phrase).
PROMPT_AGGREGATIONS = {
    "max": "the ability of the model's better prompt style (the higher of its zero-shot and "
           "one-shot abilities), as in the published figure",
    "mean": "the mean of the model's zero-shot and one-shot abilities",
}

_COLUMNS = ("row_label", "model", "prompt", "params_b", "release_date", "tier", "theta", "accuracy")
_HIGH_COLOR = "#6a3df0"
_LOW_COLOR = "#0b5d3b"
_POINT_COLOR = "#555555"


def model_abilities(abilities, prompts: str = "max") -> pd.DataFrame:
    """Collapse the prompt styles: one row per model.

    Parameters
    ----------
    abilities : pandas.DataFrame or path-like
        ``results/tables/math500_abilities.csv`` (columns ``row_label, model,
        prompt, params_b, release_date, tier, theta, accuracy``).
    prompts : {"max", "mean"}
        ``theta`` of a model: the highest of its prompt styles' abilities
        (the published figure) or their mean.

    Returns
    -------
    pandas.DataFrame
        Index ``model``; columns ``theta`` (max or mean), ``accuracy`` (mean),
        ``n_prompts``, ``params_b``, ``tier``, ``release_date`` (datetime).

    Raises
    ------
    ValueError
        On an unknown tier, an unparsable date or rows of one model that
        disagree on size, tier or release date.
    """
    if prompts not in PROMPT_AGGREGATIONS:
        raise ValueError(f"prompts must be one of {list(PROMPT_AGGREGATIONS)}, got {prompts!r}")
    name = None if isinstance(abilities, pd.DataFrame) else str(abilities)
    table = read_result_table(abilities, _COLUMNS, name or "math500_abilities")
    where = name or "math500_abilities"
    unknown = sorted(set(table["tier"].astype(str)) - set(TIERS))
    if unknown:
        raise ValueError(f"{where}: unknown tier(s) {unknown} in column 'tier'; "
                         f"expected {list(TIERS)}")
    dates = pd.to_datetime(table["release_date"], format="%Y-%m-%d", errors="coerce")
    if dates.isna().any():
        row = dates.index[dates.isna()][0]
        raise ValueError(f"{where}: row {row} ({table.loc[row, 'row_label']}): release_date "
                         f"{table.loc[row, 'release_date']!r} is not a YYYY-MM-DD date")
    table = table.assign(release_date=dates)
    for fact in ("params_b", "tier", "release_date"):
        counts = table.groupby("model")[fact].nunique()
        if (counts > 1).any():
            model = counts.index[counts > 1][0]
            values = list(table.loc[table["model"] == model, fact].unique())
            raise ValueError(f"{where}: model {model!r} has conflicting {fact} values {values}")
    return table.groupby("model").agg(
        theta=("theta", prompts), accuracy=("accuracy", "mean"), n_prompts=("prompt", "nunique"),
        params_b=("params_b", "first"), tier=("tier", "first"),
        release_date=("release_date", "first"),
    )


def plot_math500_ability(abilities, out_paths=(), *, prompts: str = "max"):
    """Three panels (size tiers) of ability against release date.

    Parameters
    ----------
    abilities : pandas.DataFrame or path-like
        ``results/tables/math500_abilities.csv``.
    out_paths : sequence of path-like
        Files to write (``.pdf``/``.png``), atomically.
    prompts : {"max", "mean"}
        How a model's prompt styles become one point (:func:`model_abilities`).

    Returns
    -------
    matplotlib.figure.Figure
        Three axes, one per tier of :data:`TIERS`.
    """
    models = model_abilities(abilities, prompts)
    span = models["release_date"].max() - models["release_date"].min()
    pad = max(span * 0.06, pd.Timedelta(days=20))
    x_range = (models["release_date"].min() - pad, models["release_date"].max() + pad)
    y_pad = 0.12 * (models["theta"].max() - models["theta"].min() or 1.0)
    y_range = (models["theta"].min() - y_pad, models["theta"].max() + 2.2 * y_pad)

    with paper_style():
        fig, axes = plt.subplots(1, 3, figsize=(FIGURE_WIDTH_IN, 2.6), sharey=True)
        for ax, (tier, title) in zip(axes, TIERS.items()):
            tier_models = models[models["tier"] == tier]
            highlight = {}
            if len(tier_models):
                highlight[tier_models["theta"].idxmax()] = _HIGH_COLOR
                if tier == ">20B":
                    highlight.setdefault(tier_models["theta"].idxmin(), _LOW_COLOR)
            plain = tier_models.drop(index=list(highlight))
            ax.scatter(plain["release_date"], plain["theta"], s=14, color=_POINT_COLOR,
                       alpha=0.8, edgecolors="white", linewidths=0.4)
            for model, color in highlight.items():
                row = tier_models.loc[model]
                ax.scatter([row["release_date"]], [row["theta"]], s=30, color=color, zorder=3,
                           edgecolors="white", linewidths=0.4)
                _label(ax, model, row["release_date"], row["theta"], color, x_range,
                       above=color == _HIGH_COLOR)
            ax.set_title(title)
            ax.set_xlim(*x_range)
            ax.set_ylim(*y_range)
            ax.xaxis.set_major_locator(mdates.MonthLocator(bymonth=(1, 7)))
            ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m"))
            ax.tick_params(axis="x", labelrotation=30)
            ax.set_xlabel("Release date")
        which = "(better prompt)" if prompts == "max" else "(mean of the two prompts)"
        axes[0].set_ylabel(r"Recovered ability $\hat\theta$" + "\n" + which)
        fig.tight_layout(w_pad=0.8)
        save_figure(fig, out_paths)
    return fig


def _label(ax, model, x, y, color, x_range, *, above: bool):
    """Name a highlighted model: above it (highest) or beside it (lowest), never clipped."""
    # Long ids are split after the organisation so they fit in a third of the width.
    text = model.replace("/", "/\n", 1) if len(model) > 24 else model
    middle = x_range[0] + (x_range[1] - x_range[0]) / 2
    ha = "right" if x > middle else "left"
    if above:
        offset, va = (4 if ha == "left" else -4, 5), "bottom"
    else:
        offset, va = (6 if ha == "left" else -6, 0), "center"
    ax.annotate(text, (x, y), xytext=offset, textcoords="offset points", ha=ha, va=va,
                fontsize=6.5, color=color, linespacing=1.1, gid="highlight")


def caption(config_summary: dict | None = None, prompts: str = "max") -> str:
    """Figure caption."""
    if prompts not in PROMPT_AGGREGATIONS:
        raise ValueError(f"prompts must be one of {list(PROMPT_AGGREGATIONS)}, got {prompts!r}")
    return ("cBMM-recovered abilities of the LLMs in MATH-500 against their release date, in "
            "three size tiers: small (0–7B), medium (7–20B) and large (>20B) parameters. Each "
            "model was evaluated with a zero-shot and a one-shot prompt; one point per model "
            f"shows {PROMPT_AGGREGATIONS[prompts]}. All panels share the release date range "
            "and the ability axis. The model with the highest ability is highlighted in each "
            "panel, and the one with the lowest ability in the large tier. Abilities are on "
            "the canonical scale: mean 0 and standard deviation 1 over the rows of the "
            "response matrix. The scale of θ is not identified (θ → sθ + m with a → a/s and "
            "b → b − am/s leaves every probability unchanged), so the published figure, drawn "
            "on its solver's raw scale, spans a wider range (about −6.5 to 3.5) with the same "
            "order of the models.")
