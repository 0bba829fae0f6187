"""Tables: rankings, stability, runtime summary and the MATH-500 model table."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from data_fixtures import SHARED_DATA

from cbmm.tables import (
    failed_mask,
    math500_model_latex,
    math500_model_table,
    rankings_table,
    read_result_table,
    runtime_summary,
    speedup_table,
    stability_latex,
    stability_pairs,
    stability_table,
)

SHARED_MODELS = SHARED_DATA / "math500" / "models.csv"


# ------------------------------------------------------------------------ rankings

def test_rankings_best_is_one_and_ties_share_the_minimum_rank():
    accuracy = pd.Series({"a": 0.9, "b": 0.7, "c": 0.7, "d": 0.5, "e": 0.7})
    theta = pd.Series({"a": 1.0, "b": 2.0, "c": -1.0, "d": 0.0, "e": 0.5})
    table = rankings_table(theta, accuracy)
    assert list(table.columns) == ["model", "accuracy", "accuracy_rank", "theta", "theta_rank"]
    ranks = table.set_index("model")
    assert ranks["accuracy_rank"].to_dict() == {"a": 1, "b": 2, "c": 2, "e": 2, "d": 5}
    assert ranks["theta_rank"].to_dict() == {"b": 1, "a": 2, "e": 3, "d": 4, "c": 5}
    assert list(table["model"]) == ["b", "a", "e", "d", "c"]  # sorted by ability rank
    assert ranks.loc["c", "accuracy"] == 0.7 and ranks.loc["c", "theta"] == -1.0


def test_rankings_reject_mismatched_or_missing_models():
    theta = pd.Series({"a": 1.0, "b": 2.0})
    with pytest.raises(ValueError, match=r"only in abilities: \['b'\]"):
        rankings_table(theta, pd.Series({"a": 0.5, "c": 0.1}))
    with pytest.raises(ValueError, match=r"abilities is missing for model\(s\) \['b'\]"):
        rankings_table(pd.Series({"a": 1.0, "b": np.nan}), pd.Series({"a": 0.5, "b": 0.1}))


# ----------------------------------------------------------------------- stability

def spearman_closed_form(u, v):
    """1 - 6 sum d^2 / (n (n^2 - 1)) for vectors without ties."""
    ru = np.argsort(np.argsort(u))
    rv = np.argsort(np.argsort(v))
    n = len(u)
    return 1 - 6 * np.sum((ru - rv) ** 2) / (n * (n * n - 1))


def test_stability_pairs_lower_triangle_same_seed_and_exact_diagonal():
    rng = np.random.default_rng(0)
    base = {seed: (rng.normal(size=8), rng.uniform(0.5, 1, 6), rng.normal(size=6))
            for seed in (0, 1)}
    fits = {}
    for seed, (theta, a, b) in base.items():
        fits[(1, seed)] = (theta, a, b)
        fits[(2, seed)] = (np.exp(theta), 3 * a + 1, b[::-1])        # monotone / reversed copies
        fits[(3, seed)] = (theta + rng.normal(0, 0.5, 8), a, -b)
    pairs = stability_pairs(fits, dataset="GPQA")
    assert list(pairs.columns) == ["dataset", "parameter", "s2_row", "s2_col", "seed", "spearman"]
    # 6 lower-triangular cells (incl. diagonal) x 2 seeds x 3 parameters
    assert len(pairs) == 6 * 2 * 3
    assert (pairs["s2_row"] >= pairs["s2_col"]).all()
    cell = pairs.set_index(["parameter", "s2_row", "s2_col", "seed"])["spearman"]
    assert (pairs.loc[pairs.s2_row == pairs.s2_col, "spearman"] == 1.0).all()
    assert cell[("theta", 2, 1, 0)] == pytest.approx(1.0)
    assert cell[("a", 2, 1, 1)] == pytest.approx(1.0)
    assert cell[("b", 3, 1, 0)] == pytest.approx(-1.0)
    theta0 = base[0][0]
    assert cell[("theta", 3, 1, 0)] == pytest.approx(spearman_closed_form(fits[(3, 0)][0], theta0))
    assert cell[("b", 2, 1, 0)] == pytest.approx(spearman_closed_form(base[0][2][::-1], base[0][2]))


def test_stability_pairs_failed_fit_is_nan_and_missing_seed_is_skipped():
    theta, a, b = np.arange(5.0), np.arange(1.0, 4.0), np.arange(3.0)
    nan_fit = (np.full(5, np.nan), np.full(3, np.nan), np.full(3, np.nan))
    fits = {(1, 0): (theta, a, b), (2, 0): nan_fit, (1, 1): (theta, a, b)}
    pairs = stability_pairs(fits)
    assert "dataset" not in pairs.columns
    assert pairs[(pairs.s2_row == 2)]["spearman"].isna().all()
    assert set(pairs[pairs.seed == 1]["s2_row"]) == {1}


def test_stability_table_mean_sd_count_per_cell():
    raw = pd.DataFrame({
        "dataset": "MATH", "parameter": "theta",
        "s2_row": [2, 2, 2, 2, 1], "s2_col": [1, 1, 1, 1, 1],
        "seed": [0, 1, 2, 3, 0], "spearman": [0.9, 0.95, 1.0, np.nan, 1.0],
    })
    table = stability_table(raw)
    row = table[(table.s2_row == 2)].iloc[0]
    assert row["mean"] == pytest.approx(0.95)
    assert row["sd"] == pytest.approx(0.05)  # sample sd of 0.9, 0.95, 1.0
    assert row["n"] == 3
    diagonal = table[(table.s2_row == 1)].iloc[0]
    assert diagonal["n"] == 1 and np.isnan(diagonal["sd"])
    with pytest.raises(ValueError, match="s2_row >= s2_col"):
        stability_table(raw.assign(s2_col=3))


def test_stability_latex_layout_blocks_of_two_lower_triangular():
    rows = []
    for dataset in ("IFEval", "MuSR", "GPQA"):
        for r in range(1, 6):
            for c in range(1, r + 1):
                for seed in range(3):
                    value = 1.0 if r == c else 0.99 - 0.001 * seed
                    rows.append((dataset, "a", r, c, seed, value))
    raw = pd.DataFrame(rows,
                       columns=["dataset", "parameter", "s2_row", "s2_col", "seed", "spearman"])
    tex = stability_latex(stability_table(raw), "a", datasets=["IFEval", "MuSR", "GPQA"],
                          caption="Stability of a", label="tab:stable2")
    assert tex.count(r"\multicolumn{5}{c}{IFEval}") == 1
    assert tex.count(r"\multicolumn{5}{c}{}") == 1  # GPQA's block has an empty partner
    # 3 suites x 15 lower-triangular cells; diagonal printed as exactly 1 with sd 0
    assert tex.count(r"\begin{tabular}[c]{@{}c@{}}") == 45
    assert tex.count(r"{@{}c@{}}1\\ (0.00e+00)") == 15
    assert r"{@{}c@{}}0.989\\ (1.00e-03)" in tex
    body_rows = [line for line in tex.splitlines() if re.match(r"^[1-5] & ", line)]
    assert len(body_rows) == 10  # two blocks x five rows
    # row s2 = 1 of the first block: one IFEval cell and one MuSR cell, the rest empty
    assert body_rows[0].count("tabular}[c]") == 2
    assert tex.startswith(r"\begin{table}[t]") and r"\label{tab:stable2}" in tex


# ------------------------------------------------------------------------- runtime

def test_runtime_summary_drops_failed_replicates_and_speedup_uses_fastest_baseline():
    rows = []
    for method, times, status in (("cbmm", [1.0, 3.0], "converged"),
                                  ("lbfgsb", [90.0, 110.0], "converged"),
                                  ("manopt", [30.0, 50.0], "max_iter"),
                                  ("mirt", [0.5, 0.7], "failed: singular")):
        for rep, t in enumerate(times):
            rows.append({"dataset": "GPQA", "n_models": 2211, "n_items": 1192, "method": method,
                         "replicate": rep, "status": status, "runtime_s": t})
    summary = runtime_summary(pd.DataFrame(rows))
    assert list(summary["method"]) == ["mirt", "lbfgsb", "manopt", "cbmm"]
    mirt = summary.set_index("method").loc["mirt"]
    assert np.isnan(mirt["mean_s"]) and mirt["n_failed"] == 2 and mirt["n_ok"] == 0
    speed = speedup_table(summary).iloc[0]
    assert speed["fastest_baseline"] == "manopt"
    assert speed["speedup"] == pytest.approx(40.0 / 2.0)


# ------------------------------------------------------------------------ MATH-500

def models_config(path: Path | None = None) -> pd.DataFrame:
    table = pd.read_csv(path) if path else pd.DataFrame({
        "row_label": ["x_a_zero_shot", "x_a_one_shot", "y_b_zero_shot", "y_b_one_shot"],
        "model": ["x/a", "x/a", "Y/b_2", "Y/b_2"], "prompt": ["zero_shot", "one_shot"] * 2,
        "params_b": [7.0, 7.0, 32.0, 32.0], "release_date": ["2024-01-02"] * 2 + ["2025-03-04"] * 2,
    })
    tiers = pd.cut(table["params_b"], [0, 7, 20, np.inf], labels=["0-7B", "7-20B", ">20B"])
    return table.assign(tier=tiers.astype(str))


def test_math500_model_table_one_row_per_model_and_latex():
    table = math500_model_table(models_config())
    assert list(table["model"]) == ["x/a", "Y/b_2"]  # case-insensitive alphabetical
    assert list(table["prompts"]) == ["one_shot;zero_shot"] * 2
    tex = math500_model_latex(table, caption="LLMs", label="tab:llm_list")
    assert r"Y/b\_2 & 32 & \textgreater{}20B & 2025-03-04" in tex
    assert r"x/a & 7 & 0--7B & 2024-01-02 & Y/b\_2" in tex


def test_math500_model_table_rejects_conflicting_dates():
    config = models_config()
    config.loc[1, "release_date"] = "2024-02-02"
    with pytest.raises(ValueError, match=r"'x/a' has conflicting release_date"):
        math500_model_table(config)


@pytest.mark.skipif(not SHARED_MODELS.is_file(),
                    reason=f"shared data not present at {SHARED_DATA} (set CBMM_SHARED_DATA)")
def test_math500_model_table_on_the_real_model_list():
    config = models_config(SHARED_MODELS)
    table = math500_model_table(config)
    assert len(config) == 140
    assert len(table) == 70 == config["model"].nunique()
    assert (table["prompts"] == "one_shot;zero_shot").all()


# ----------------------------------------------------------------------------- I/O

def test_read_table_names_file_and_missing_columns(tmp_path):
    path = tmp_path / "runtime_leaderboard.csv"
    pd.DataFrame({"dataset": ["IFEval"], "method": ["cbmm"]}).to_csv(path, index=False)
    missing = r"runtime_leaderboard.csv: missing column\(s\) \['status'\]"
    with pytest.raises(ValueError, match=missing):
        read_result_table(path, ["dataset", "method", "status"])
    with pytest.raises(FileNotFoundError, match="nope.csv: no such file"):
        read_result_table(tmp_path / "nope.csv", ["x"])


def test_failed_mask():
    status = pd.Series(["converged", "failed: x", "max_iter"])
    assert failed_mask(status).tolist() == [False, True, False]
