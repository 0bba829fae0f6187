"""The published-numbers file and the fidelity table (cbmm.fidelity)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cbmm.fidelity import (
    FIDELITY_COLUMNS,
    PUBLISHED_COLUMNS,
    QUANTITIES,
    concerns_run,
    fidelity_table,
    load_published,
    write_fidelity,
)
from cbmm.tables import TABLE_FILES

PAPER = Path(__file__).resolve().parents[1].parent / "shared" / "paper" / "cbmm-paper.tex"


# ------------------------------------------------------------------ published numbers

def test_every_quantity_comes_from_a_table_cbmm_tables_lists():
    sources = {table for _, table in QUANTITIES.values()}
    assert sources - {None} <= set(TABLE_FILES)
    assert {"simulation", "runtime", "discrimination", "stability_raw"} <= sources


def test_every_published_row_has_a_source_and_a_parseable_value():
    table = load_published()
    assert len(table) > 1000
    assert table["id"].is_unique
    assert (table["source"].str.strip() != "").all()
    assert (table["claim"].str.strip() != "").all()
    assert np.isfinite(table["value"]).all() and (table["error"] >= 0).all()
    assert set(table["quantity"]) <= set(QUANTITIES)
    # every simulation study, suite and stability table is represented
    sims = table[table["quantity"] == "sim_median"]
    assert set(sims["study"]) == {"size_fixN", "size_fixJ", "temperature", "mcar", "mar", "mnar",
                                  "sparsity"}
    assert set(table.loc[table["quantity"] == "stability_mean", "parameter"]) == {"theta", "a", "b"}
    assert len(table[table["quantity"] == "stability_mean"]) == 3 * 6 * 15


def test_published_numbers_stated_in_the_text():
    """A few numbers checked against the statements they come from (Sec. 4.1, Sec. 4)."""
    table = load_published().set_index("id")
    assert table.loc["runtime.speedup_min", "value"] == 41
    assert table.loc["runtime.speedup_max", "value"] == 86
    growth = {m: table.loc[f"runtime.growth.{m}", "value"] for m in ("cbmm", "lbfgsb", "manopt")}
    assert growth == {"cbmm": 104, "lbfgsb": 392, "manopt": 508}
    assert table.loc["MMLU_PRO.n_items", "value"] == 12032
    assert table.loc["math500.n_models", "value"] == 140
    # the cBMM default-design boxes sit where the issue places them (published definitions)
    rel = table.loc["sim.temperature.rel_error_x.0.cbmm"]
    assert rel["definition"] == "published" and abs(rel["value"] - 0.14) < 0.01
    hel = table.loc["sim.temperature.hellinger_x.0.cbmm"]
    assert abs(hel["value"] - 0.0196) < 0.001


@pytest.mark.skipif(not PAPER.is_file(), reason="the paper's source is not beside the repository")
def test_stability_table_numbers_occur_in_the_paper():
    """Each stability sd is printed in the paper's LaTeX table it cites."""
    tex = PAPER.read_text()
    table = load_published()
    sds = table[table["quantity"] == "stability_sd"]
    for row in sds.itertuples():
        label = {"theta": "tab:stable1", "a": "tab:stable2", "b": "tab:stable3"}[row.parameter]
        start = tex.index(r"\label{" + label + "}")
        body = tex[start:tex.index(r"\end{table}", start)]
        printed = {float(x) for x in re.findall(r"\(([0-9.]+e[+-]?[0-9]+)\)", body)}
        assert any(math.isclose(row.value, x, rel_tol=1e-9) for x in printed), row.id


def _write(tmp_path, rows, name="published.csv"):
    frame = pd.DataFrame([{c: "" for c in PUBLISHED_COLUMNS} | row for row in rows])
    path = tmp_path / name
    path.write_text("# a comment line\n" + frame.to_csv(index=False))
    return path


GOOD = {"id": "x", "quantity": "cv_a", "dataset": "MATH_500", "value": "0.48", "error": "0.01",
        "kind": "figure-read", "source": "Figure 4", "claim": "CV is 0.48"}


@pytest.mark.parametrize("change, message", [
    ({"quantity": "cv"}, r"row 1 \(id 'x'\): unknown quantity 'cv'"),
    ({"source": " "}, r"row 1 \(id 'x'\): empty source"),
    ({"value": "about 0.5"}, r"row 1 \(id 'x'\): value 'about 0.5' is not a number"),
    ({"error": "-1"}, r"error '-1' is not a finite non-negative number"),
    ({"kind": "guess"}, r"unknown kind 'guess'"),
])
def test_bad_published_rows_are_named(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        load_published(_write(tmp_path, [GOOD | change]))


def test_duplicate_published_ids_are_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"duplicate id\(s\) \['x'\]"):
        load_published(_write(tmp_path, [GOOD, GOOD]))


# --------------------------------------------------------------------- fidelity table

def _sim_table(tmp_path):
    """sim_temperature.csv: cBMM at level 0 with known values, mirt failing everywhere."""
    rows = []
    published_values = [0.13, 0.14, 0.15, 0.16]
    for rep, value in enumerate(published_values):
        rows.append({"study": "temperature", "level": 0.0, "method": "cbmm", "replicate": rep,
                     "status": "converged", "runtime_s": 1.0 + rep,
                     "rel_error_x_published": value, "rel_error_x": value ** 2})
        rows.append({"study": "temperature", "level": 0.0, "method": "lbfgsb", "replicate": rep,
                     "status": "converged", "runtime_s": 10.0 * (1 + rep),
                     "rel_error_x_published": value, "rel_error_x": value ** 2})
        rows.append({"study": "temperature", "level": 0.0, "method": "mirt", "replicate": rep,
                     "status": "failed: singular", "runtime_s": 3.0,
                     "rel_error_x_published": np.nan, "rel_error_x": np.nan})
    path = tmp_path / "sim_temperature.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _row(id, quantity, value, error=0.0, **keys):
    return {"id": id, "quantity": quantity, "value": str(value), "error": str(error),
            "kind": "text", "source": f"source of {id}", "claim": f"claim {id}"} | {
        k: str(v) for k, v in keys.items()}


def test_fidelity_table_on_known_tables(tmp_path):
    sim = _sim_table(tmp_path)
    runtime = tmp_path / "runtime_leaderboard.csv"
    pd.DataFrame([{"dataset": d, "n_models": 10, "n_items": j, "method": m, "replicate": r,
                   "status": "converged", "runtime_s": base * (1 + 0.1 * r)}
                  for d, j in (("IFEval", 5), ("MMLU_PRO", 50))
                  for m, base in (("cbmm", 2.0 if d == "IFEval" else 20.0),
                                  ("lbfgsb", 100.0 if d == "IFEval" else 400.0))
                  for r in range(3)]).to_csv(runtime, index=False)
    stability = tmp_path / "stability_raw.csv"
    pd.DataFrame([{"dataset": "IFEval", "parameter": "theta", "s2_row": 2, "s2_col": 1,
                   "seed": s, "spearman": v} for s, v in enumerate([0.98, 0.99, 1.0])]
                 ).to_csv(stability, index=False)
    items = tmp_path / "math500_items.csv"
    pd.DataFrame({"item": range(5), "subject": "Algebra", "level": [5, 5, 5, 4, 5],
                  "a": 1.0, "b": [-1.0, -2.0, -3.0, 0.0, -50.0],
                  "accuracy": [0.2, 0.1, 0.05, 0.5, 0.0]}).to_csv(items, index=False)
    stale = tmp_path / "sim_mcar.csv"  # present on disk but not an input of this run
    pd.read_csv(sim).assign(study="mcar").to_csv(stale, index=False)
    published = load_published(_write(tmp_path, [
        _row("rel", "sim_median", 0.14, 0.005, study="temperature", level=0, method="cbmm",
             metric="rel_error_x", definition="published"),
        _row("rel_far", "sim_median", 0.30, 0.005, study="temperature", level=0, method="cbmm",
             metric="rel_error_x", definition="published"),
        _row("rel_text", "sim_median", 0.0205, 0.0005, study="temperature", level=0,
             method="cbmm", metric="rel_error_x", definition="text"),
        _row("other_level", "sim_median", 0.2, 0.01, study="temperature", level=0.75,
             method="cbmm", metric="rel_error_x", definition="published"),
        _row("stale", "sim_median", 0.14, 0.01, study="mcar", level=0, method="cbmm",
             metric="rel_error_x", definition="published"),
        _row("na", "sim_failed_share", 1.0, study="temperature", level=0, method="mirt"),
        _row("speed", "sim_speedup_max", 10, 0.5, study="temperature"),
        _row("rt", "runtime_mean", 2.2, 0.1, dataset="IFEval", method="cbmm"),
        _row("speedup", "speedup", 50, 0.5, dataset="IFEval"),
        _row("growth", "runtime_growth", 10, 0.5, method="cbmm"),
        _row("n_items", "n_items", 50, dataset="MMLU_PRO"),
        _row("cv", "cv_a", 0.48, 0.02, dataset="MATH_500"),
        _row("stab", "stability_mean", 0.99, 0.005, dataset="IFEval", parameter="theta",
             s2_row=2, s2_col=1),
        _row("med5", "difficulty_median", 2.0, 0.05, level=5),
        _row("max", "difficulty_max", 3.0, 0.05),
        _row("setting", "setting", 1000),
    ]))
    table = fidelity_table([sim, runtime, stability, items], published).set_index("id")
    assert list(table.reset_index().columns) == ["id"] + [c for c in FIDELITY_COLUMNS if c != "id"]

    # the published-definition column: mean 0.145, sample sd 0.0129 of the four replicates
    rel = table.loc["rel"]
    assert rel["ours_mean"] == pytest.approx(0.145)
    assert rel["ours_sd"] == pytest.approx(np.std([0.13, 0.14, 0.15, 0.16], ddof=1))
    assert rel["ours_n"] == 4 and rel["within_spread"] == "yes"
    assert rel["ours"] == "0.145 ± 0.01291 (n = 4)" and rel["published"] == "0.14 ± 0.005"
    assert table.loc["rel_far", "within_spread"] == "no"
    # the text definition reads the other column (squares)
    squares = np.square([0.13, 0.14, 0.15, 0.16])
    assert table.loc["rel_text", "ours_mean"] == pytest.approx(np.mean(squares))
    # rows the run cannot compute say why and are not compared
    other = table.loc["other_level"]
    assert other["note"].startswith("not in this run: level 0.75 of study temperature")
    assert other["within_spread"] == "" and other["ours"] == ""
    assert table.loc["stale", "note"].startswith(
        "not in this run: needs results/tables/sim_mcar.csv")
    assert table.loc["cv", "note"].startswith("not in this run: dataset MATH_500")
    assert table.loc["setting", "note"].startswith("a choice of the design")
    # failures: every mirt replicate failed, as published
    assert table.loc["na", "ours_mean"] == 1.0 and table.loc["na", "within_spread"] == "yes"
    # runtime: lbfgsb median 25 s over cBMM median 2.5 s
    assert table.loc["speed", "ours_mean"] == pytest.approx(10.0)
    assert table.loc["rt", "ours_mean"] == pytest.approx(2.2)
    assert table.loc["speedup", "ours_mean"] == pytest.approx(110.0 / 2.2)
    assert table.loc["growth", "ours_mean"] == pytest.approx(10.0)
    assert table.loc["n_items", "within_spread"] == "yes"
    assert table.loc["stab", "ours_mean"] == pytest.approx(0.99)
    assert table.loc["stab", "ours_sd"] == pytest.approx(0.01)
    # -b of the level-5 items: 1, 2, 3, 50 -> median 2.5; the all-wrong item (50) is not finite
    assert table.loc["med5", "ours_mean"] == pytest.approx(2.5)
    assert table.loc["max", "ours_mean"] == pytest.approx(3.0)


def test_write_fidelity_writes_every_published_row(tmp_path):
    sim = _sim_table(tmp_path)
    out = tmp_path / "fidelity" / "fidelity.csv"
    table = write_fidelity([sim], out)
    back = pd.read_csv(out, keep_default_na=False)
    assert list(back.columns) == list(FIDELITY_COLUMNS)
    assert len(back) == len(table) == len(load_published())
    assert (back["source"] != "").all()
    # nothing but the simulation table: suites are reported as missing, not dropped
    suite_rows = back[back["id"] == "IFEval.n_items"]
    assert suite_rows["note"].iloc[0].startswith("not in this run: dataset IFEval")


def test_a_run_on_a_users_own_data_gets_only_the_rows_that_concern_it(tmp_path):
    """A user's suites and one simulation study at one of the paper's levels: the rows of
    that study at that level, nothing about the paper's suites, levels or set-up."""
    sim = _sim_table(tmp_path)
    discrimination = tmp_path / "discrimination_summary.csv"
    pd.DataFrame({"dataset": ["mine"], "n_models": [40], "n_items": [30], "cv_a": [0.4],
                  "spearman_top20": [0.5], "spearman_all": [0.9]}).to_csv(discrimination,
                                                                         index=False)
    everything = fidelity_table([sim, discrimination])
    covered = fidelity_table([sim, discrimination], covered_only=True)
    assert len(covered) < len(everything)
    assert not covered["note"].str.startswith("not in this run").any()
    published = load_published().set_index("id")
    rows = published.loc[covered["id"]]
    studies = set(pd.read_csv(sim)["study"])
    assert set(rows["study"]) - {""} <= studies
    assert set(rows["dataset"]) - {""} == set()  # none of the paper's suites
    # every row of those studies at the run's levels that was computed is kept
    computed = everything[everything["ours_n"] > 0]["id"]
    assert set(computed) <= set(covered["id"])


def test_whether_a_run_gets_a_fidelity_table_is_known_before_it_runs(tmp_path):
    """concerns_run, from the tables' paths and the run's names alone, agrees with the rows
    fidelity_table(covered_only=True) gives once the tables exist: none for a user's suite in
    the interpretability study (the table was written with its header alone before), some
    with a simulation study, a paper suite or the MATH-500 tables under another name."""
    discrimination = tmp_path / "discrimination_summary.csv"
    pd.DataFrame({"dataset": ["mine"], "n_models": [40], "n_items": [30], "cv_a": [0.4],
                  "spearman_top20": [0.5], "spearman_all": [0.9]}).to_csv(discrimination,
                                                                         index=False)
    own = [discrimination]
    assert fidelity_table(own, covered_only=True).empty
    assert not concerns_run(own, {"mine"})
    assert concerns_run(own, {"mine", "IFEval"})  # a paper suite: its rows
    sim = _sim_table(tmp_path)
    assert not fidelity_table([sim, discrimination], covered_only=True).empty
    assert concerns_run([sim, discrimination], {"mine", "temperature"})
    items = tmp_path / "math500_items.csv"
    pd.DataFrame({"item": ["q1", "q2"], "level": [1, 2], "b": [-0.1, -0.5],
                  "accuracy": [0.4, 0.6]}).to_csv(items, index=False)
    assert not fidelity_table([items], covered_only=True).empty
    assert concerns_run([items], {"my_math"})
