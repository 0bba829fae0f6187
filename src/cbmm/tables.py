"""Tables of the paper: rankings, recovery stability, runtime summary, MATH-500 models.

Pure functions from the workflow's aggregated tables (or from fits) to
:class:`pandas.DataFrame` and LaTeX text (write them with :mod:`cbmm.io`).  Input
tables may be given as a DataFrame or as a path to a CSV file; a missing column is reported with the
file name and the expected columns.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from .io import read_csv
from .metrics import spearman
from .registry import get_method, method_order

__all__ = [
    "read_result_table", "failed_mask",
    "rankings_table",
    "stability_pairs", "stability_table", "stability_latex",
    "runtime_summary", "speedup_table",
    "math500_model_table", "math500_model_latex",
    "TABLE_DIR", "TABLE_FILES", "abilities_table", "STABILITY_PARAMETERS", "SUITE_LABELS",
    "method_label", "suite_label", "ordered_methods",
]

#: Where a workflow run writes its aggregated tables, relative to its working directory.
TABLE_DIR = "results/tables"

#: The aggregated tables, by name: each file under :data:`TABLE_DIR` (``{field}``: one
#: file per study, dataset or parameter).  The one list of them: the workflow writes
#: these files, the figures (:data:`cbmm.figures.FIGURES`) and the fidelity report
#: (:mod:`cbmm.fidelity`) read them by these names.
TABLE_FILES = {
    "simulation": "sim_{study}.csv",
    "runtime": "runtime_leaderboard.csv",
    "runtime_summary": "runtime_summary.csv",
    "speedup": "speedup.csv",
    "discrimination": "discrimination_summary.csv",
    "rankings": "rankings/{dataset}.csv",
    "stability_raw": "stability_raw.csv",
    "stability_summary": "stability_summary.csv",
    "stability_latex": "stability_{parameter}.tex",
    "math500_abilities": "math500_abilities.csv",
    "math500_items": "math500_items.csv",
    "math500_models_latex": "math500_models.tex",
    "abilities": "abilities/{dataset}.csv",
    "heldout": "heldout/{dataset}.csv",
    # efficient evaluation (cbmm.efficient.study): selection, adaptive tests, item audit
    "efficiency": "efficiency/{dataset}.csv",
    "adaptive": "adaptive/{dataset}.csv",
    "adaptive_summary": "adaptive_summary/{dataset}.csv",
    "item_audit": "item_audit/{dataset}.csv",
}

#: Parameters of the stability study, with their LaTeX symbols.
STABILITY_PARAMETERS = {"theta": r"\hat{\boldsymbol\theta}", "a": r"\hat{\mathbf{a}}",
                        "b": r"\hat{\mathbf{b}}"}


# -------------------------------------------------------------------------- names
# Method names, labels and order come from the method registry (cbmm.registry);
# suite names are display facts of the tables and figures.

#: Display names of benchmark suites whose data key is not already the display name.
SUITE_LABELS = {"MMLU_PRO": "MMLU-Pro", "MMLU-PRO": "MMLU-Pro", "MATH500": "MATH-500",
                "MATH_500": "MATH-500", "MATH-500": "MATH-500"}


def method_label(method: str) -> str:
    """Display name of a registered method (``"lbfgsb"`` -> ``"L-BFGS-B"``)."""
    return get_method(method).label


def suite_label(dataset: str) -> str:
    """Display name of a benchmark suite key (``"MMLU_PRO"`` -> ``"MMLU-Pro"``)."""
    return SUITE_LABELS.get(str(dataset), str(dataset))


def ordered_methods(methods, source: str = "table") -> list[str]:
    """The distinct method names in ``methods``, in the registry's display order.

    Raises
    ------
    ValueError
        If a name is not a registered method (names ``source`` in the message).
    """
    try:
        return method_order(methods)
    except ValueError as exc:
        raise ValueError(f"{source}: column 'method': {exc}") from None


# --------------------------------------------------------------------------- I/O

def read_result_table(source, required, name: str | None = None) -> pd.DataFrame:
    """Return ``source`` as a DataFrame after checking it has the ``required`` columns.

    Parameters
    ----------
    source : pandas.DataFrame or path-like
        The table, or a CSV file holding it.
    required : sequence of str
        Columns the caller reads.
    name : str, optional
        How to call the table in error messages (defaults to the path, or "table").

    Raises
    ------
    FileNotFoundError, ValueError
        With the file name, the missing columns and the expected ones.
    """
    if isinstance(source, pd.DataFrame):
        table, where = source, name or "table"
    else:
        path = Path(source)
        where = name or str(path)
        if not path.is_file():
            raise FileNotFoundError(f"{where}: no such file")
        try:
            table = read_csv(path)  # labels as written: "NA" is a model's name
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ValueError(f"{where}: not a readable CSV table ({exc})") from None
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(
            f"{where}: missing column(s) {missing}; expected columns {list(required)}, "
            f"found {list(table.columns)}"
        )
    return table


def failed_mask(status: pd.Series) -> pd.Series:
    """True where a fit's ``status`` reports a failure (``"failed: <reason>"``)."""
    return status.astype(str).str.startswith("failed")


# ----------------------------------------------------------------------- rankings

def rankings_table(abilities: pd.Series, accuracy: pd.Series,
                   status: str | None = None) -> pd.DataFrame:
    """Full ranking of one suite by mean accuracy and by recovered ability.

    Parameters
    ----------
    abilities : pandas.Series
        ``theta`` per model (index: model names).
    accuracy : pandas.Series
        Mean accuracy per model over the items it answered (same index).
    status : str, optional
        The fit's status, added as a last column ``status`` (a ranking from a fit that
        is not ``converged`` is not an optimum's).

    Returns
    -------
    pandas.DataFrame
        Columns ``model, accuracy, accuracy_rank, theta, theta_rank`` (and ``status``); rank 1 is
        the best (highest value) and tied values share the smallest rank of
        their group (``method="min"``).  Rows are sorted by ``theta_rank``,
        then ``accuracy_rank``, then model name.

    Raises
    ------
    ValueError
        If the two series do not cover the same models, a model appears twice,
        or a value is missing (e.g. a failed fit's NaN abilities).
    """
    abilities = pd.Series(abilities, dtype=float)
    accuracy = pd.Series(accuracy, dtype=float)
    for label, series in (("abilities", abilities), ("accuracy", accuracy)):
        duplicated = series.index[series.index.duplicated()].unique()
        if len(duplicated):
            raise ValueError(f"rankings_table: {label} lists model(s) more than once: "
                             f"{list(duplicated[:5])}")
        missing_values = series.index[series.isna()]
        if len(missing_values):
            raise ValueError(f"rankings_table: {label} is missing for model(s) "
                             f"{list(missing_values[:5])} (failed fit or no answered item?)")
    only_theta = abilities.index.difference(accuracy.index)
    only_acc = accuracy.index.difference(abilities.index)
    if len(only_theta) or len(only_acc):
        raise ValueError(
            "rankings_table: abilities and accuracy cover different models "
            f"(only in abilities: {list(only_theta[:5])}, only in accuracy: {list(only_acc[:5])})"
        )
    table = pd.DataFrame({
        "model": abilities.index.astype(str),
        "accuracy": accuracy.reindex(abilities.index).to_numpy(),
        "theta": abilities.to_numpy(),
    })
    table["accuracy_rank"] = table["accuracy"].rank(ascending=False, method="min").astype(int)
    table["theta_rank"] = table["theta"].rank(ascending=False, method="min").astype(int)
    table = table.sort_values(["theta_rank", "accuracy_rank", "model"], kind="stable")
    columns = ["model", "accuracy", "accuracy_rank", "theta", "theta_rank"]
    table = table[columns].reset_index(drop=True)
    if status is not None:
        table["status"] = status
    return table


def abilities_table(fit, boot, accuracy: pd.Series) -> pd.DataFrame:
    """Abilities with their intervals: one row per model, the ablest first.

    Parameters
    ----------
    fit : FitResult
        A fit with standard errors (``cbmm.fit(..., se=True)``).
    boot : cbmm.BootstrapResult
        Its bootstrap (its ``fit`` is the same fit), for the rank intervals.
    accuracy : pandas.Series
        Mean accuracy per model (index: the fit's models).

    Returns
    -------
    pandas.DataFrame
        ``model, accuracy, theta, theta_se, theta_lower, theta_upper`` (Wald, at the
        bootstrap's level), ``theta_boot_lower, theta_boot_upper`` (percentile),
        ``rank, rank_lower, rank_upper`` (1 = ablest; the bootstrap's; tied models share
        their mean rank, where :func:`rankings_table` gives them the lowest of their
        ranks; its intervals NaN for a model answering every item alike) and ``status``
        (the fit's: not ``converged`` means the estimates are not an optimum).
    """
    bounds = fit.confint(boot.level)["theta"]
    index = bounds.index
    table = pd.DataFrame({
        "model": index.astype(str),
        "accuracy": pd.Series(accuracy).reindex(index).to_numpy(),
        "theta": bounds["estimate"].to_numpy(),
        "theta_se": np.asarray(fit.theta_se, dtype=float),
        "theta_lower": bounds["lower"].to_numpy(),
        "theta_upper": bounds["upper"].to_numpy(),
        "theta_boot_lower": boot.theta["lower"].to_numpy(),
        "theta_boot_upper": boot.theta["upper"].to_numpy(),
        "rank": boot.rank["estimate"].to_numpy(),
        "rank_lower": boot.rank["lower"].to_numpy(),
        "rank_upper": boot.rank["upper"].to_numpy(),
        "status": fit.status,
    })
    return table.sort_values(["rank", "model"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------- stability

def stability_pairs(fits: Mapping, dataset: str | None = None) -> pd.DataFrame:
    """Spearman correlations between fits started with different init variances.

    For every seed and every pair of init variances ``s2_row >= s2_col`` the
    fit started from ``(s2_row, seed)`` is compared with the fit started from
    ``(s2_col, seed)``: both starts use the same random draws, scaled by
    different ``s``, so the cell measures sensitivity to the spread of the
    start (the paper's stability study).  On the diagonal the fit is compared
    with itself, so the correlation is exactly 1 (the paper's ``1 (~1e-17)``
    is this value up to floating-point noise); the diagonal is kept only
    for the paper's layout.  Seeds missing for one of the two variances are
    skipped.

    Parameters
    ----------
    fits : mapping ``(s2, seed) -> (theta, a, b)``
        Estimates of one suite (arrays; NaN for a failed fit).
    dataset : str, optional
        Added as a first column ``dataset``.

    Returns
    -------
    pandas.DataFrame
        Columns ``[dataset,] parameter, s2_row, s2_col, seed, spearman``
        (``spearman`` is NaN when a fit failed or an estimate is constant).
    """
    if not fits:
        raise ValueError("stability_pairs: no fits given")
    variances = sorted({s2 for s2, _ in fits})
    seeds = sorted({seed for _, seed in fits})
    rows = []
    for seed in seeds:
        for i, s2_row in enumerate(variances):
            for s2_col in variances[: i + 1]:
                if (s2_row, seed) not in fits or (s2_col, seed) not in fits:
                    continue
                first, second = fits[(s2_row, seed)], fits[(s2_col, seed)]
                for parameter, u, v in zip(STABILITY_PARAMETERS, first, second):
                    rows.append({"parameter": parameter, "s2_row": s2_row, "s2_col": s2_col,
                                 "seed": seed, "spearman": _spearman(u, v)})
    table = pd.DataFrame(rows, columns=["parameter", "s2_row", "s2_col", "seed", "spearman"])
    if dataset is not None:
        table.insert(0, "dataset", dataset)
    return table


def _spearman(u, v) -> float:
    u = np.asarray(u, dtype=float)
    v = np.asarray(v, dtype=float)
    if u.shape != v.shape:
        raise ValueError(f"stability_pairs: estimates of different lengths ({u.size} vs {v.size})")
    return spearman(u, v)


STABILITY_RAW_COLUMNS = ("dataset", "parameter", "s2_row", "s2_col", "seed", "spearman")


def stability_table(raw) -> pd.DataFrame:
    """Mean, standard deviation and count of the Spearman correlations per cell.

    Parameters
    ----------
    raw : pandas.DataFrame or path-like
        ``stability_raw.csv``: columns ``dataset, parameter, s2_row, s2_col, seed, spearman``.

    Returns
    -------
    pandas.DataFrame
        Columns ``dataset, parameter, s2_row, s2_col, mean, sd, n``: ``n``
        counts the seeds with a finite correlation, ``sd`` is the sample
        standard deviation (``ddof=1``; NaN when ``n < 2``).
    """
    raw = read_result_table(raw, STABILITY_RAW_COLUMNS, None if not isinstance(raw, pd.DataFrame)
                     else "stability_raw")
    bad = raw[raw["s2_row"] < raw["s2_col"]]
    if len(bad):
        raise ValueError(f"stability_raw: rows must have s2_row >= s2_col; first offending row "
                         f"{bad.index[0]}: s2_row={bad['s2_row'].iloc[0]}, "
                         f"s2_col={bad['s2_col'].iloc[0]}")
    grouped = raw.groupby(["dataset", "parameter", "s2_row", "s2_col"], sort=True)["spearman"]
    table = grouped.agg(mean="mean", sd="std", n="count").reset_index()
    table["n"] = table["n"].astype(int)
    return table


def _format_mean(value: float) -> str:
    if not np.isfinite(value):
        return "--"
    return "1" if value == 1.0 else f"{value:.3f}"


def _format_sd(value: float) -> str:
    return "--" if not np.isfinite(value) else f"{value:.2e}"


def stability_latex(table, parameter: str, *, datasets=None, caption: str | None = None,
                    label: str | None = None) -> str:
    """LaTeX table in the paper's layout for one parameter (``theta``, ``a`` or ``b``).

    Suites come in blocks of two side by side; each block is the lower
    triangle of a 5 x 5 grid (rows ``s2_row``, columns ``s2_col``) whose
    cells read ``mean`` over ``(sd)``.  The mean has three decimals and is
    printed as ``1`` only when it is exactly one (the diagonal); the sd is in
    scientific notation.  Needs ``\\usepackage{booktabs}``.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`stability_table`.
    parameter : {"theta", "a", "b"}
    datasets : sequence of str, optional
        Suite order (default: as sorted in ``table``); an odd count leaves the
        last right block empty.
    caption, label : str, optional
    """
    if parameter not in STABILITY_PARAMETERS:
        raise ValueError(f"parameter must be one of {list(STABILITY_PARAMETERS)}, "
                         f"got {parameter!r}")
    sub = table[table["parameter"] == parameter]
    if sub.empty:
        raise ValueError(f"stability table has no rows for parameter {parameter!r}")
    datasets = list(datasets) if datasets is not None else list(dict.fromkeys(sub["dataset"]))
    absent = [d for d in datasets if d not in set(sub["dataset"])]
    if absent:
        raise ValueError(f"stability table has no rows for dataset(s) {absent} ({parameter})")
    variances = sorted(set(sub["s2_row"]) | set(sub["s2_col"]))
    k = len(variances)
    cells = {(r.dataset, r.s2_row, r.s2_col): (r.mean, r.sd) for r in sub.itertuples()}

    def cell(dataset, s2_row, s2_col) -> str:
        if dataset is None or s2_col > s2_row:
            return ""
        mean, sd = cells.get((dataset, s2_row, s2_col), (math.nan, math.nan))
        return (r"\begin{tabular}[c]{@{}c@{}}" + _format_mean(mean) + r"\\ ("
                + _format_sd(sd) + r")\end{tabular}")

    def number(value) -> str:
        return f"{value:g}"

    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{caption}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [r"\tiny", r"\begin{tabular}{@{}c" + "c" * (2 * k) + "@{}}", r"\toprule"]
    for block, start in enumerate(range(0, len(datasets), 2)):
        pair = datasets[start:start + 2] + [None] * (2 - len(datasets[start:start + 2]))
        corner = f"${STABILITY_PARAMETERS[parameter]}$" if block == 0 else ""
        if block:
            lines.append(r"\midrule")
        heads = [rf"\multicolumn{{{k}}}{{c}}{{{suite_label(d) if d else ''}}}" for d in pair]
        lines.append(" & ".join([corner] + heads) + r" \\")
        lines.append(rf"\cmidrule(lr){{2-{k + 1}}}\cmidrule(lr){{{k + 2}-{2 * k + 1}}}")
        lines.append(" & ".join([r"$s^2$"] + [number(v) for v in variances] * 2) + r" \\")
        for s2_row in variances:
            row = [number(s2_row)] + [cell(d, s2_row, c) for d in pair for c in variances]
            lines.append(" & ".join(row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------ runtime

RUNTIME_COLUMNS = ("dataset", "n_models", "n_items", "method", "replicate", "status", "runtime_s")


def runtime_summary(runtime) -> pd.DataFrame:
    """Runtime per suite and method over the successful replicates.

    Parameters
    ----------
    runtime : pandas.DataFrame or path-like
        ``runtime_leaderboard.csv`` (columns ``dataset, n_models, n_items,
        method, replicate, status, runtime_s``).

    Returns
    -------
    pandas.DataFrame
        Columns ``dataset, n_models, n_items, method, mean_s, min_s, max_s,
        n_ok, n_failed``; the runtime statistics are NaN where every replicate
        failed.  Rows are ordered by ``n_items`` and then by method.
    """
    runtime = read_result_table(runtime, RUNTIME_COLUMNS,
                         "runtime_leaderboard" if isinstance(runtime, pd.DataFrame) else None)
    methods = ordered_methods(runtime["method"], "runtime_leaderboard")
    failed = failed_mask(runtime["status"])
    ok = runtime.assign(runtime_s=runtime["runtime_s"].where(~failed))
    grouped = ok.groupby(["dataset", "n_models", "n_items", "method"])
    table = grouped["runtime_s"].agg(mean_s="mean", min_s="min", max_s="max", n_ok="count")
    keys = [runtime[c] for c in ("dataset", "n_models", "n_items", "method")]
    table["n_failed"] = failed.groupby(keys).sum()
    table = table.reset_index()
    table["method"] = pd.Categorical(table["method"], categories=methods, ordered=True)
    table = table.sort_values(["n_items", "dataset", "method"]).reset_index(drop=True)
    table["method"] = table["method"].astype(str)
    table["n_failed"] = table["n_failed"].astype(int)
    return table


def speedup_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Speedup of cBMM over the fastest successful baseline, per suite.

    ``speedup = min over baselines of mean runtime / mean cBMM runtime``,
    where a baseline counts only if at least one replicate succeeded.

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`runtime_summary`.

    Returns
    -------
    pandas.DataFrame
        Columns ``dataset, n_items, fastest_baseline, baseline_mean_s,
        cbmm_mean_s, speedup`` in the order of ``summary`` (NaN speedup where
        cBMM or every baseline failed).
    """
    rows = []
    for dataset, block in summary.groupby("dataset", sort=False):
        means = block.set_index("method")["mean_s"]
        baselines = means.drop("cbmm", errors="ignore").dropna()
        cbmm_mean = means.get("cbmm", math.nan)
        fastest = baselines.idxmin() if len(baselines) else None
        baseline_mean = baselines.min() if len(baselines) else math.nan
        rows.append({"dataset": dataset, "n_items": block["n_items"].iloc[0],
                     "fastest_baseline": fastest, "baseline_mean_s": baseline_mean,
                     "cbmm_mean_s": cbmm_mean, "speedup": baseline_mean / cbmm_mean})
    return pd.DataFrame(rows, columns=["dataset", "n_items", "fastest_baseline", "baseline_mean_s",
                                       "cbmm_mean_s", "speedup"])


# ---------------------------------------------------------------- MATH-500 models

MATH500_MODEL_COLUMNS = ("row_label", "model", "prompt", "params_b", "release_date", "tier")


def math500_model_table(models) -> pd.DataFrame:
    """One row per MATH-500 model (the two prompt styles collapsed).

    Parameters
    ----------
    models : pandas.DataFrame or path-like
        ``config/math500_models.csv``: columns ``row_label, model, prompt,
        params_b, release_date, tier`` (one row per model and prompt).

    Returns
    -------
    pandas.DataFrame
        Columns ``model, params_b, tier, release_date, prompts`` sorted by
        model name (case-insensitive), ``prompts`` listing the prompt styles.

    Raises
    ------
    ValueError
        If the rows of one model disagree on size, tier or release date.
    """
    models = read_result_table(models, MATH500_MODEL_COLUMNS,
                        "math500_models" if isinstance(models, pd.DataFrame) else None)
    facts = ["params_b", "tier", "release_date"]
    rows = []
    for model, block in models.groupby("model", sort=False):
        for fact in facts:
            values = block[fact].dropna().unique()
            if len(values) > 1:
                raise ValueError(f"math500_models: model {model!r} has conflicting {fact} values "
                                 f"{list(values)} in rows {list(block['row_label'])}")
        first = block.iloc[0]
        rows.append({"model": model, "params_b": first["params_b"], "tier": first["tier"],
                     "release_date": first["release_date"],
                     "prompts": ";".join(sorted(block["prompt"].astype(str)))})
    table = pd.DataFrame(rows)
    table = table.sort_values("model", key=lambda s: s.str.lower(), kind="stable")
    return table.reset_index(drop=True)


def _latex_escape(text: str) -> str:
    replacements = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                    "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                    "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}
    return "".join(replacements.get(ch, ch) for ch in str(text))


def math500_model_latex(table: pd.DataFrame, *, caption: str | None = None,
                        label: str | None = None) -> str:
    """LaTeX table of the MATH-500 models, in two side-by-side halves.

    Columns per half: model (Hugging Face id), size in billions of parameters,
    tier and release date.  Needs ``\\usepackage{booktabs}``.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`math500_model_table`.
    """
    entries = [(_latex_escape(r.model), f"{float(r.params_b):g}" if pd.notna(r.params_b) else "--",
                _latex_escape(r.tier).replace("-", "--"), _latex_escape(r.release_date))
               for r in table.itertuples()]
    half = math.ceil(len(entries) / 2)
    left, right = entries[:half], entries[half:]
    right += [("", "", "", "")] * (half - len(right))
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{caption}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [r"\scriptsize", r"\setlength{\tabcolsep}{3pt}",
              r"\begin{tabular}{@{}lrll@{\hspace{8pt}}lrll@{}}", r"\toprule",
              " & ".join([r"Model", r"Size (B)", r"Tier", r"Released"] * 2) + r" \\", r"\midrule"]
    lines += [" & ".join(l_ + r_) + r" \\" for l_, r_ in zip(left, right)]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)
