"""How close a run comes to the paper: the published numbers beside ours.

:func:`load_published` reads the committed file of the paper's numbers
(``published_numbers.csv``, package data: every number its text and tables
state, plus values read off its figures; each row with its source and reading
error).  :func:`fidelity_table` computes our value for every row it can from
the workflow's aggregated tables (``results/tables/*.csv``) and says, for the
others, which table or level the run lacks.  Columns of the result:
``claim, published, ours, within_spread, note, source, id`` and the numbers
behind them (``published_value, published_error, ours_mean, ours_sd,
ours_n``).

``within_spread`` is ``yes`` when ``|ours_mean - published| <= error + 2 sd``
(``sd`` of our replicates, 0 for a single value), for standard deviations
(``stability_sd``) when both are below 1e-3 or within a factor of 10 of each
other, for counts and failure shares when they are equal; empty when we
have no value.  Rows that are a design setting or describe the data
collection carry a note instead of a comparison.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .io import write_csv
from .metrics import METRIC_DEFINITIONS
from .tables import TABLE_DIR, TABLE_FILES, failed_mask, runtime_summary, speedup_table

__all__ = ["QUANTITIES", "PUBLISHED_COLUMNS", "FIDELITY_COLUMNS", "load_published",
           "fidelity_table", "write_fidelity", "concerns_run"]

#: What each ``quantity`` of the published file means, and the table our value comes from
#: (its name in :data:`cbmm.tables.TABLE_FILES`).
QUANTITIES = {
    "sim_median": ("median over replicates of a metric of one method at one level", "simulation"),
    "sim_failed_share": ("share of failed fits (the paper's NA) of one method at one level",
                         "simulation"),
    "sim_replicates": ("replicates per design", "simulation"),
    "sim_speedup_max": ("largest ratio over levels of the fastest other method's median runtime "
                        "to cBMM's", "simulation"),
    "runtime_mean": ("mean runtime of one method on one suite", "runtime"),
    "runtime_failed_share": ("share of failed runtime fits of one method on one suite",
                             "runtime"),
    "runtime_replicates": ("replicates per suite and method", "runtime"),
    "runtime_growth": ("mean runtime on MMLU-Pro over mean runtime on IFEval",
                       "runtime"),
    "speedup": ("fastest baseline's mean runtime over cBMM's, one suite", "runtime"),
    "speedup_min": ("smallest speedup over the suites", "runtime"),
    "speedup_max": ("largest speedup over the suites", "runtime"),
    "n_models": ("number of models (rows) of a suite", "discrimination"),
    "n_items": ("number of items (columns) of a suite", "discrimination"),
    "n_models_listed": ("number of distinct MATH-500 models", "math500_abilities"),
    "cv_a": ("coefficient of variation of a-hat (interpretability fit)", "discrimination"),
    "spearman_top20": ("Spearman(theta-hat, accuracy), top 20 % of models",
                       "discrimination"),
    "spearman_all": ("Spearman(theta-hat, accuracy), all models", "discrimination"),
    "difficulty_median": ("median of -b-hat over the MATH-500 items of one level", "math500_items"),
    "difficulty_max": ("largest -b-hat over the MATH-500 items with a finite optimum",
                       "math500_items"),
    "stability_mean": ("mean Spearman correlation between starts of two variances",
                       "stability_raw"),
    "stability_sd": ("sd of that Spearman correlation over seeds", "stability_raw"),
    "stability_replicates": ("seeds per start variance", "stability_raw"),
    "setting": ("a choice of the design, not a result", None),
    "data_fact": ("how the data were collected, not a result", None),
}

#: Columns of the published file.
PUBLISHED_COLUMNS = ("id", "quantity", "study", "level", "method", "metric", "dataset",
                     "parameter", "s2_row", "s2_col", "definition", "value", "error", "kind",
                     "source", "claim", "note")

#: Columns of the fidelity table.
FIDELITY_COLUMNS = ("claim", "published", "ours", "within_spread", "note", "source", "id",
                    "published_value", "published_error", "ours_mean", "ours_sd", "ours_n")

_KINDS = ("text", "table", "figure-text", "figure-read")


def load_published(path=None) -> pd.DataFrame:
    """The published numbers (default: the file shipped with the package), checked.

    Raises
    ------
    ValueError
        Naming the row (its id or line) of a duplicate id, an unknown
        quantity or kind, an empty source or claim, or a value or error that
        is not a finite number.
    """
    if path is None:
        with resources.as_file(resources.files("cbmm") / "published_numbers.csv") as file:
            return load_published(file)
    where = str(path)
    table = pd.read_csv(path, comment="#", dtype=str, keep_default_na=False)
    missing = [c for c in PUBLISHED_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing}; "
                         f"expected {list(PUBLISHED_COLUMNS)}")
    for i, row in table.iterrows():
        label = f"{where}: row {i + 1} (id {row['id']!r})"
        if not row["id"]:
            raise ValueError(f"{where}: row {i + 1} has no id")
        if row["quantity"] not in QUANTITIES:
            raise ValueError(f"{label}: unknown quantity {row['quantity']!r}; "
                             f"expected one of {sorted(QUANTITIES)}")
        if row["kind"] not in _KINDS:
            raise ValueError(f"{label}: unknown kind {row['kind']!r}; expected one of {_KINDS}")
        for column in ("source", "claim"):
            if not row[column].strip():
                raise ValueError(f"{label}: empty {column}")
        for column in ("value", "error"):
            try:
                number = float(row[column])
            except ValueError:
                raise ValueError(f"{label}: {column} {row[column]!r} is not a number") from None
            if not math.isfinite(number) or (column == "error" and number < 0):
                raise ValueError(f"{label}: {column} {row[column]!r} is not a finite "
                                 f"{'non-negative ' if column == 'error' else ''}number")
        if row["definition"] and row["definition"] not in METRIC_DEFINITIONS:
            raise ValueError(f"{label}: unknown definition {row['definition']!r}")
    duplicated = table["id"][table["id"].duplicated()]
    if len(duplicated):
        raise ValueError(f"{where}: duplicate id(s) {list(duplicated.unique()[:5])}")
    table["value"] = table["value"].astype(float)
    table["error"] = table["error"].astype(float)
    for column in ("level", "s2_row", "s2_col"):
        table[column] = pd.to_numeric(table[column].replace("", np.nan))
    return table


# ----------------------------------------------------------------------- our values

class _Missing(Exception):
    """Our value cannot be computed: no successful value, too few seeds."""


class _NotInRun(_Missing):
    """The row concerns a table, study, level, method or dataset this run does not have."""


class _Tables:
    """The aggregated tables given to :func:`fidelity_table`, by file name."""

    def __init__(self, paths):
        self.paths = {Path(path).name: Path(path) for path in paths
                      if Path(path).suffix == ".csv"}
        self._cache = {}

    def get(self, name: str, **fields) -> pd.DataFrame:
        """The table ``name`` of :data:`cbmm.tables.TABLE_FILES` (``fields`` fill its pattern)."""
        file = TABLE_FILES[name].format(**fields)
        if file not in self.paths:
            raise _NotInRun(f"not in this run: needs {TABLE_DIR}/{file}")
        if file not in self._cache:
            self._cache[file] = pd.read_csv(self.paths[file])
        return self._cache[file]

    def has(self, name: str) -> bool:
        """Whether the table ``name`` of :data:`cbmm.tables.TABLE_FILES` is among them (one
        of its files, for a pattern)."""
        if name == "simulation":
            return bool(self.studies())
        return TABLE_FILES[name] in self.paths

    def datasets(self) -> set[str]:
        """The datasets of the suite tables among the tables (discrimination, runtime,
        stability)."""
        found = set()
        for name in ("discrimination", "runtime", "stability_raw"):
            try:
                found.update(self.get(name)["dataset"].astype(str))
            except (_Missing, KeyError):
                continue
        return found

    def studies(self) -> list[str]:
        """The simulation studies among the tables."""
        prefix, _, suffix = TABLE_FILES["simulation"].partition("{study}")
        return [file[len(prefix):-len(suffix)] for file in self.paths
                if file.startswith(prefix) and file.endswith(suffix)]


def _stats(values) -> tuple[float, float, int]:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise _Missing("no successful value in this run")
    sd = float(np.std(values, ddof=1)) if values.size > 1 else math.nan
    return float(np.mean(values)), sd, int(values.size)


def _sim_cell(tables, row, method=None):
    table = tables.get("simulation", study=row.study)
    levels = table["level"].astype(float)
    cell = table[np.isclose(levels, row.level) & (table["method"] == (method or row.method))]
    if cell.empty:
        present = np.isclose(levels, row.level).any()
        what = (f"method {method or row.method}" if present else f"level {row.level:g}")
        raise _NotInRun(f"not in this run: {what} of study {row.study}")
    return cell


def _sim_median(tables, row):
    cell = _sim_cell(tables, row)
    column = METRIC_DEFINITIONS[row.definition or "published"].get(row.metric, row.metric)
    ok = cell[~failed_mask(cell["status"])]
    if column not in ok.columns:
        raise _NotInRun(f"not in this run: column {column} of sim_{row.study}.csv")
    return _stats(ok[column])


def _sim_failed_share(tables, row):
    cell = _sim_cell(tables, row)
    return float(failed_mask(cell["status"]).mean()), math.nan, len(cell)


def _sim_replicates(tables, row):
    counts = []
    for study in tables.studies():
        table = tables.get("simulation", study=study)
        counts.append(table.groupby(["level", "method"])["replicate"].nunique().max())
    if not counts:
        raise _NotInRun(f"not in this run: needs {TABLE_DIR}/"
                       + TABLE_FILES["simulation"].format(study="<study>"))
    return float(max(counts)), math.nan, len(counts)


def _sim_speedup_max(tables, row):
    table = tables.get("simulation", study=row.study)
    ok = table[~failed_mask(table["status"])]
    medians = ok.groupby(["level", "method"])["runtime_s"].median().unstack()
    others = [m for m in medians.columns if m != "cbmm"]
    if row.method:
        others = [m for m in others if m in row.method.split(",")]
    if "cbmm" not in medians.columns or not others:
        raise _NotInRun(f"not in this run: cBMM and another method in study {row.study}")
    ratio = medians[others].min(axis=1) / medians["cbmm"]
    return float(ratio.max()), math.nan, int(ratio.notna().sum())


def _runtime(tables):
    return tables.get("runtime")


def _runtime_cell(tables, row):
    table = _runtime(tables)
    cell = table[(table["dataset"] == row.dataset) & (table["method"] == row.method)]
    if cell.empty:
        raise _NotInRun(f"not in this run: {row.method} on {row.dataset}")
    return cell


def _runtime_mean(tables, row):
    cell = _runtime_cell(tables, row)
    return _stats(cell.loc[~failed_mask(cell["status"]), "runtime_s"])


def _runtime_failed_share(tables, row):
    cell = _runtime_cell(tables, row)
    return float(failed_mask(cell["status"]).mean()), math.nan, len(cell)


def _runtime_replicates(tables, row):
    table = _runtime(tables)
    return float(table.groupby(["dataset", "method"])["replicate"].nunique().max()), math.nan, 1


def _speedups(tables) -> pd.DataFrame:
    table = _runtime(tables)
    return speedup_table(runtime_summary(table)).set_index("dataset")


def _speedup(tables, row):
    speedups = _speedups(tables)
    if row.dataset not in speedups.index or not np.isfinite(speedups.loc[row.dataset, "speedup"]):
        raise _NotInRun(f"not in this run: cBMM and a baseline on {row.dataset}")
    entry = speedups.loc[row.dataset]
    # spread: the same ratio per replicate (replicate r of the fastest baseline and of cBMM)
    table = _runtime(tables)
    ok = table[(table["dataset"] == row.dataset) & ~failed_mask(table["status"])]
    per_rep = ok.pivot_table(index="replicate", columns="method", values="runtime_s")
    ratios = (per_rep[entry["fastest_baseline"]] / per_rep["cbmm"]).dropna()
    sd = float(ratios.std(ddof=1)) if len(ratios) > 1 else math.nan
    return float(entry["speedup"]), sd, int(len(ratios))


def _speedup_extreme(tables, row):
    values = _speedups(tables)["speedup"].dropna()
    if values.empty:
        raise _NotInRun("not in this run: no suite with cBMM and a baseline")
    value = values.min() if row.quantity == "speedup_min" else values.max()
    return float(value), math.nan, int(values.size)


def _runtime_growth(tables, row):
    table = _runtime(tables)
    ok = table[(table["method"] == row.method) & ~failed_mask(table["status"])]
    means = ok.groupby("dataset")["runtime_s"].mean()
    if not {"IFEval", "MMLU_PRO"} <= set(means.index):
        raise _NotInRun(f"not in this run: {row.method} on IFEval and MMLU_PRO")
    return float(means["MMLU_PRO"] / means["IFEval"]), math.nan, 2


def _suite_row(tables, row):
    for name in ("discrimination", "runtime"):
        try:
            table = tables.get(name)
        except _Missing:
            continue
        block = table[table["dataset"] == row.dataset]
        if not block.empty and row.quantity in block.columns:
            return block
    raise _NotInRun(f"not in this run: dataset {row.dataset} "
                   f"(needs {TABLE_DIR}/{TABLE_FILES['discrimination']})")


def _suite_value(tables, row):
    block = _suite_row(tables, row)
    return float(block[row.quantity].iloc[0]), math.nan, 1


def _math500_items(tables, row):
    items = tables.get("math500_items")
    return items.assign(difficulty=-items["b"].astype(float))


def _difficulty_median(tables, row):
    items = _math500_items(tables, row)
    values = items.loc[items["level"] == row.level, "difficulty"]
    if values.empty:
        raise _NotInRun(f"not in this run: MATH-500 items of level {row.level:g}")
    return float(values.median()), math.nan, int(values.size)


def _difficulty_max(tables, row):
    items = _math500_items(tables, row)
    finite = items[(items["accuracy"] > 0) & (items["accuracy"] < 1)]
    return float(finite["difficulty"].max()), math.nan, int(len(finite))


def _n_models_listed(tables, row):
    abilities = tables.get("math500_abilities")
    return float(abilities["model"].nunique()), math.nan, 1


def _stability_cell(tables, row):
    raw = tables.get("stability_raw")
    cell = raw[(raw["dataset"] == row.dataset) & (raw["parameter"] == row.parameter)
               & np.isclose(raw["s2_row"].astype(float), row.s2_row)
               & np.isclose(raw["s2_col"].astype(float), row.s2_col)]
    if cell.empty:
        raise _NotInRun(f"not in this run: stability of {row.dataset} with start variances "
                       f"{row.s2_row:g} and {row.s2_col:g}")
    return cell["spearman"]


def _stability_mean(tables, row):
    return _stats(_stability_cell(tables, row))


def _stability_sd(tables, row):
    values = _stability_cell(tables, row).dropna()
    if len(values) < 2:
        raise _Missing("fewer than two seeds in this run")
    return float(values.std(ddof=1)), math.nan, int(len(values))


def _stability_replicates(tables, row):
    raw = tables.get("stability_raw")
    return float(raw.groupby(["dataset", "s2_row", "s2_col"])["seed"].nunique().max()), math.nan, 1


_COMPUTE = {
    "sim_median": _sim_median, "sim_failed_share": _sim_failed_share,
    "sim_replicates": _sim_replicates, "sim_speedup_max": _sim_speedup_max,
    "runtime_mean": _runtime_mean, "runtime_failed_share": _runtime_failed_share,
    "runtime_replicates": _runtime_replicates, "runtime_growth": _runtime_growth,
    "speedup": _speedup, "speedup_min": _speedup_extreme, "speedup_max": _speedup_extreme,
    "n_models": _suite_value, "n_items": _suite_value, "n_models_listed": _n_models_listed,
    "cv_a": _suite_value, "spearman_top20": _suite_value, "spearman_all": _suite_value,
    "difficulty_median": _difficulty_median, "difficulty_max": _difficulty_max,
    "stability_mean": _stability_mean, "stability_sd": _stability_sd,
    "stability_replicates": _stability_replicates,
}

_EXACT = ("sim_failed_share", "runtime_failed_share", "sim_replicates", "runtime_replicates",
          "stability_replicates", "n_models", "n_items", "n_models_listed")


def _within(quantity, published, error, mean, sd) -> str:
    if quantity in _EXACT:
        return "yes" if abs(mean - published) <= error + 1e-9 else "no"
    if quantity == "stability_sd":
        if mean < 1e-3 and published < 1e-3:
            return "yes"
        ratio = mean / published if published > 0 else math.inf
        return "yes" if 0.1 <= ratio <= 10 else "no"
    spread = 2 * sd if np.isfinite(sd) else 0.0
    return "yes" if abs(mean - published) <= error + spread else "no"


def _number(value: float, digits: int = 4) -> str:
    if not np.isfinite(value):
        return ""
    return f"{value:.{digits}g}"


def concerns_run(tables, names, published=None) -> bool:
    """Whether :func:`fidelity_table` with ``covered_only`` will have a row for a run, judged
    before the run from what it will make: its aggregated tables' paths ``tables`` and the
    studies and datasets it fits (``names``).  A published number concerns it where the
    number names one of them, or names none and is computed from one of its tables.  The
    workflow builds no fidelity table for a run that none concerns (a user's own data)."""
    published = load_published() if published is None else published
    available = _Tables(tables)
    for row in published.itertuples(index=False):
        named = {row.study, row.dataset} - {""}
        table = QUANTITIES[row.quantity][1]
        computed = table is not None and available.has(table)
        # the MATH-500 tables are the paper's MATH-500 study whatever the dataset's name
        if named & set(names) or computed and (not named or table.startswith("math500")):
            return True
    return False


def fidelity_table(tables, published=None, *, covered_only: bool = False) -> pd.DataFrame:
    """Published numbers beside ours.

    Parameters
    ----------
    tables : iterable of path-like
        The run's aggregated tables (``results/tables/<name>.csv``); others are
        ignored, so a stale file from an earlier configuration cannot enter.
    published : pandas.DataFrame, optional
        :func:`load_published` output (default: the packaged file).
    covered_only : bool
        Only the rows that concern this run: a row about a study, level, method or
        dataset the run does not have (noted "not in this run") is left out, and so is
        a design setting or data fact of a study or dataset it does not have (one that
        names neither when the run has none of the paper's studies and datasets: a
        run on a user's own data).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`FIDELITY_COLUMNS`, one row per published number (that
        concerns the run, with ``covered_only``), in the published file's order.
    """
    published = load_published() if published is None else published
    available = _Tables(tables)
    in_run = set(available.studies()) | available.datasets()
    papers = (set(published["study"]) | set(published["dataset"])) - {""}
    rows = []
    for row in published.itertuples(index=False):
        mean = sd = math.nan
        n = 0
        within = ""
        notes = [row.note] if row.note else []
        if row.quantity in ("setting", "data_fact"):
            named = {row.study, row.dataset} - {""}
            if covered_only and not (named & in_run if named else in_run & papers):
                continue
            notes.insert(0, QUANTITIES[row.quantity][0])
        else:
            try:
                mean, sd, n = _COMPUTE[row.quantity](available, row)
            except _NotInRun as exc:
                if covered_only:
                    continue
                notes.insert(0, str(exc))
            except _Missing as exc:
                notes.insert(0, str(exc))
            else:
                within = _within(row.quantity, row.value, row.error, mean, sd)
        error = f" ± {_number(row.error)}" if row.error else ""
        ours = ""
        if np.isfinite(mean):
            ours = _number(mean) + (f" ± {_number(sd)}" if np.isfinite(sd) else "") + f" (n = {n})"
        rows.append({
            "claim": row.claim, "published": _number(row.value, 6) + error, "ours": ours,
            "within_spread": within, "note": "; ".join(notes), "source": row.source,
            "id": row.id, "published_value": row.value, "published_error": row.error,
            "ours_mean": mean, "ours_sd": sd, "ours_n": n,
        })
    return pd.DataFrame(rows, columns=list(FIDELITY_COLUMNS))


def write_fidelity(tables, out_path, published=None, *, covered_only: bool = False) \
        -> pd.DataFrame:
    """Compute :func:`fidelity_table` and write it to ``out_path`` (CSV, atomically)."""
    table = fidelity_table(tables, published, covered_only=covered_only)
    write_csv(table, out_path)
    return table
