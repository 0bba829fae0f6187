"""Figures render from small synthetic aggregated tables, with the expected panels.

The synthetic tables follow the workflow's table contracts (docs/figures.md).
Each test renders into a temporary folder, checks the files are real,
non-empty PDF/PNG images, and checks the drawn content against values
computed here independently (medians, speedups, NA cells, ranks).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.patches import Rectangle

from cbmm.figures import (
    FIGURES,
    get_figure,
    math500_ability,
    plot_discrimination,
    plot_item_difficulty,
    plot_math500_ability,
    plot_rankflow,
    plot_runtime,
    plot_sensitivity,
    sensitivity,
)
from cbmm.figures.sensitivity import RUNTIME_CAP_S, STUDIES, design_spec
from cbmm.metrics import METRIC_DEFINITIONS
from cbmm.tables import TABLE_FILES, rankings_table, read_result_table

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"

METHODS = ("mirt", "lbfgsb", "manopt", "cbmm", "pyirt")


@pytest.fixture(autouse=True)
def close_figures():
    """The figure functions return their figure open, for the tests to read; close them
    after each test, as a script that draws many would."""
    yield
    plt.close("all")
SUITES = {"IFEval": 541, "MuSR": 756, "GPQA": 1192, "MATH": 1324, "BBH": 5761, "MMLU_PRO": 12032}


# ----------------------------------------------------------------- synthetic tables

def sim_table(study: str, levels, *, n_rep: int = 6, seed: int = 0,
              all_failed=(), some_failed=(), slow=()) -> pd.DataFrame:
    """A ``sim_<study>.csv`` table with plausible metrics.

    ``all_failed``/``some_failed`` hold (level, method) cells where every
    replicate / the first two replicates failed; ``slow`` cells get runtimes
    above the 1000 s cap.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for level in levels:
        for method in METHODS:
            for rep in range(n_rep):
                failed = ((level, method) in all_failed
                          or ((level, method) in some_failed and rep < 2))
                metrics = {
                    "spearman_theta": 0.98 + 0.01 * rng.random(),
                    "spearman_a": 0.85 + 0.05 * rng.random(),
                    "spearman_b": 0.9 + 0.05 * rng.random(),
                    "rmse_b": 0.07 + 0.01 * rng.random(),
                    "rel_error_x": 0.15 + 0.02 * rng.random(),
                    "hellinger_x": 0.02 + 0.003 * rng.random(),
                    "rmse_b_published": 0.3 + 0.01 * rng.random(),
                    "rel_error_x_published": 0.4 + 0.02 * rng.random(),
                    "hellinger_x_published": 0.5 + 0.003 * rng.random(),
                    "recall_a": 1.0, "precision_a": 0.9 + 0.05 * rng.random(),
                }
                if failed:
                    metrics = {k: np.nan for k in metrics}
                runtime = ((1500.0 + 100 * rep) if (level, method) in slow
                           else 10 ** rng.uniform(0, 2))
                rows.append({"study": study, "level": float(level), "method": method,
                             "replicate": rep,
                             "status": ("failed: singular information matrix" if failed
                                        else "converged"),
                             "runtime_s": runtime, "n_iter": 50, "loss": 0.5, **metrics})
    return pd.DataFrame(rows)


def runtime_table(*, mirt_fails=("GPQA", "MATH", "BBH", "MMLU_PRO"),
                  n_rep: int = 4) -> pd.DataFrame:
    """``runtime_leaderboard.csv`` with known means: baselines 100/200/300 s x scale,
    cBMM 2 s x scale."""
    rows = []
    for k, (dataset, n_items) in enumerate(SUITES.items()):
        scale = 1.0 + k
        means = {"mirt": 50.0 * scale, "lbfgsb": 100.0 * scale, "manopt": 200.0 * scale,
                 "cbmm": 2.0 * scale}
        for method, mean in means.items():
            for rep in range(n_rep):
                failed = method == "mirt" and dataset in mirt_fails
                # symmetric spread around the mean: mean stays exact
                runtime = mean * (1 + 0.1 * (rep - (n_rep - 1) / 2))
                rows.append({"dataset": dataset, "n_models": 2211, "n_items": n_items,
                             "method": method, "replicate": rep,
                             "status": "failed: EM did not converge" if failed else "converged",
                             "runtime_s": 3.0 if failed else runtime, "n_iter": 10, "loss": 0.4})
    return pd.DataFrame(rows)


def math500_abilities(seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    tiers = {"0-7B": (1.5, 7.0), "7-20B": (8.0, 14.0), ">20B": (32.0, 72.0)}
    dates = pd.date_range("2023-07-13", "2025-09-08", periods=30)
    for t, (tier, sizes) in enumerate(tiers.items()):
        for m in range(10):
            date = dates[(7 * m + 3 * t) % len(dates)]
            base = rng.normal(t * 0.5, 1.0)
            for prompt, shift in (("zero_shot", -0.2), ("one_shot", 0.2)):
                rows.append({"row_label": f"org_model{t}{m}_{prompt}", "model": f"org/model-{t}{m}",
                             "prompt": prompt, "params_b": sizes[m % 2], "tier": tier,
                             "release_date": date.strftime("%Y-%m-%d"), "theta": base + shift,
                             "accuracy": 0.5})
    return pd.DataFrame(rows)


SUBJECTS = ("Algebra", "Counting & Probability", "Geometry", "Intermediate Algebra",
            "Number Theory", "Prealgebra", "Precalculus")


def math500_items(seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for j in range(350):
        subject = SUBJECTS[j % len(SUBJECTS)]
        level = 1 + (j // 7) % 5
        rows.append({"item": j, "subject": subject, "level": level, "a": rng.uniform(0.2, 2),
                     "b": -(level - 3) + rng.normal(0, 1), "accuracy": 0.5})
    return pd.DataFrame(rows)


def discrimination_summary() -> pd.DataFrame:
    cv = {"MATH500": 0.48, "IFEval": 0.49, "MATH": 0.58, "MMLU_PRO": 0.95, "BBH": 0.95,
          "GPQA": 1.13, "MuSR": 1.33}
    return pd.DataFrame({
        "dataset": list(cv), "n_models": [140] + [2211] * 6,
        "n_items": [500, 541, 1324, 12032, 5761, 1192, 756], "cv_a": list(cv.values()),
        "spearman_all": [0.99, 0.99, 0.99, 0.99, 0.98, 0.79, 0.77],
        "spearman_top20": [0.97, 0.97, 0.99, 0.93, 0.87, 0.60, 0.42],
    })


def rankings(n: int, seed: int, ties: int = 0) -> pd.DataFrame:
    """A ``rankings/<dataset>.csv`` table; the first ``ties`` pairs of models share accuracy."""
    rng = np.random.default_rng(seed)
    models = [f"org/m{seed}-{i:03d}" for i in range(n)]
    accuracy = np.round(np.sort(rng.uniform(0.2, 0.8, n))[::-1], 6)
    for k in range(ties):
        accuracy[2 * k + 1] = accuracy[2 * k]
    theta = accuracy * 5 + rng.normal(0, 0.15, n)
    return rankings_table(pd.Series(theta, index=models), pd.Series(accuracy, index=models))


# ------------------------------------------------------------------------ helpers

def assert_images(paths):
    """Every path is a non-trivial PDF or PNG; PNGs decode to a non-blank image."""
    for path in paths:
        assert path.is_file() and path.stat().st_size > 2000, path
        head = path.read_bytes()[:8]
        if path.suffix == ".pdf":
            assert head.startswith(b"%PDF-")
        else:
            assert head == b"\x89PNG\r\n\x1a\n"
            image = mpimg.imread(path)
            assert image.shape[0] > 300 and image.shape[1] > 1000
            assert image[..., :3].std() > 0.01  # not a blank canvas
    leftovers = [p for p in os.listdir(paths[0].parent) if p.startswith(".")]
    assert leftovers == []  # no temporary files left behind


def out(tmp_path, stem):
    return [tmp_path / f"{stem}.pdf", tmp_path / f"{stem}.png"]


def texts_with_gid(fig, prefix):
    return {t.get_gid(): t for ax in fig.axes for t in ax.texts
            if t.get_gid() and t.get_gid().startswith(prefix)}


# ---------------------------------------------------------------------- sensitivity

@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_sensitivity_study_renders_with_one_panel_per_metric(tmp_path, study):
    table = sim_table(study, [200.0, 1000.0, 5000.0] if study.startswith("size") else [0.1, 0.3])
    paths = out(tmp_path, study)
    fig = plot_sensitivity(table, study, paths)
    assert_images(paths)
    metrics = STUDIES[study].metrics
    assert len(fig.axes) == len(metrics)
    published = sensitivity.DEFINITION_LABELS["published"]
    assert [ax.get_ylabel() for ax in fig.axes] == [published.get(m, sensitivity.METRIC_LABELS[m])
                                                    for m in metrics]
    assert fig.axes[-1].get_yscale() == "log"  # runtime panel


def _median_lines(ax):
    """y of every horizontal two-point line (box medians, whisker caps, hinges excluded)."""
    return [line.get_ydata()[0] for line in ax.get_lines()
            if len(line.get_ydata()) == 2 and line.get_ydata()[0] == line.get_ydata()[1]]


@pytest.mark.parametrize("definitions", ["published", "text"])
def test_sensitivity_draws_the_chosen_metric_definitions(tmp_path, definitions):
    """Relative error, Hellinger and RMSE b panels draw the columns of the chosen definition."""
    table = sim_table("temperature", [0.0], n_rep=5)
    fig = plot_sensitivity(table, "temperature", out(tmp_path, definitions),
                           definitions=definitions)
    for metric in ("rmse_b", "rel_error_x", "hellinger_x"):
        column = METRIC_DEFINITIONS[definitions][metric]
        other = METRIC_DEFINITIONS["text" if definitions == "published" else "published"][metric]
        ax = fig.axes[STUDIES["temperature"].metrics.index(metric)]
        lines = _median_lines(ax)
        cbmm_values = table.loc[table.method == "cbmm", column]
        assert any(np.isclose(y, np.median(cbmm_values)) for y in lines), metric
        assert not any(np.isclose(y, np.median(table.loc[table.method == "cbmm", other]))
                       for y in lines), metric
        assert ax.get_ylabel() == sensitivity.DEFINITION_LABELS[definitions][metric]
    text = sensitivity.caption("temperature", definitions=definitions)
    assert sensitivity.DEFINITION_SOURCES[definitions] in text
    assert all(phrase in text for phrase in sensitivity.DEFINITION_NAMES[definitions].values())


def test_sensitivity_rejects_unknown_definitions():
    with pytest.raises(ValueError, match="definitions must be one of"):
        plot_sensitivity(sim_table("mcar", [0.1]), "mcar", definitions="squared")
    with pytest.raises(ValueError, match="definitions must be one of"):
        sensitivity.caption("mcar", definitions="squared")


def test_failed_cell_is_na_not_zero_and_partial_failures_use_survivors(tmp_path):
    levels = [0.25, 0.5, 0.75]
    table = sim_table("temperature", levels, all_failed={(0.5, "mirt")},
                      some_failed={(0.75, "mirt")})
    fig = plot_sensitivity(table, "temperature", out(tmp_path, "temperature"))
    first = fig.axes[0]  # Spearman theta
    na = texts_with_gid(fig, "NA:")
    # one NA label per panel, all for the failed cell, and nowhere else
    assert set(na) == {"NA:0.5:mirt"}
    assert sum(t.get_text() == "NA" for ax in fig.axes for t in ax.texts) == len(fig.axes)
    # no median line (or any data) at the NA cell's position
    x_na = na["NA:0.5:mirt"].get_position()[0]
    assert np.isclose(x_na, 1 - 0.4 + 0.8 / 5 * 0.5)
    xs = np.concatenate([line.get_xdata() for line in first.get_lines()])
    assert not np.any(np.isclose(xs, x_na))
    # partial failure: the median line is the median of the 4 successful replicates
    survivors = table[(table.level == 0.75) & (table.method == "mirt")
                      & (table.status == "converged")]["spearman_theta"]
    x_partial = 2 - 0.4 + 0.8 / 5 * 0.5
    medians = [line for line in first.get_lines()
               if len(line.get_xdata()) == 2 and np.allclose(np.mean(line.get_xdata()), x_partial)
               and line.get_ydata()[0] == line.get_ydata()[1]]
    assert any(np.isclose(line.get_ydata()[0], np.median(survivors)) for line in medians)
    failed_notes = texts_with_gid(fig, "failed:")
    assert failed_notes["failed:0.75:mirt"].get_text() == "\N{MULTIPLICATION SIGN}2"


def test_runtime_above_cap_is_truncated_and_marked(tmp_path):
    table = sim_table("size_fixN", [200.0, 1000.0], slow={(1000.0, "pyirt")})
    fig = plot_sensitivity(table, "size_fixN", out(tmp_path, "size"))
    runtime_ax = fig.axes[-1]
    top = max(np.max(line.get_ydata()) for line in runtime_ax.get_lines()
              if line.get_gid() is None and len(line.get_ydata()))
    assert top == pytest.approx(RUNTIME_CAP_S)
    markers = [line for line in runtime_ax.get_lines() if line.get_gid() == "truncated:1000:pyirt"]
    assert len(markers) == 1
    assert [t.get_text() for t in runtime_ax.xaxis.get_ticklabels()] == ["200", "1k"]


def test_sensitivity_rejects_unknown_method_and_missing_column(tmp_path):
    table = sim_table("mcar", [0.1])
    with pytest.raises(ValueError, match="unknown method.*'bfgs'"):
        plot_sensitivity(table.replace({"method": {"lbfgsb": "bfgs"}}), "mcar")
    path = tmp_path / "sim_mcar.csv"
    table.drop(columns="hellinger_x_published").to_csv(path, index=False)
    with pytest.raises(ValueError,
                       match=r"sim_mcar.csv: missing column\(s\) \['hellinger_x_published'\]"):
        plot_sensitivity(path, "mcar")
    assert not list(tmp_path.glob("*.p*"))


def test_a_study_of_your_own_is_drawn_by_what_it_varies(tmp_path):
    """A study the paper does not have (declared only in a workflow config) gets the
    figure of its design: here a missing rate under the MNAR pattern."""
    table = sim_table("mnar", [0.1, 0.3]).assign(study="patchy")
    figure = get_figure("sensitivity_patchy")
    assert figure.inputs == ("sim_patchy.csv",)
    design = {"factor": "missing_rate", "missing": "mnar"}
    paths = out(tmp_path, "patchy")
    fig = figure.plot(table, out_paths=paths, design=design)
    assert_images(paths)
    published = sensitivity.DEFINITION_LABELS["published"]
    assert [ax.get_ylabel() for ax in fig.axes] == [
        published.get(m, sensitivity.METRIC_LABELS[m]) for m in
        ("spearman_theta", "spearman_a", "spearman_b", "rel_error_x", "hellinger_x", "runtime_s")]
    assert fig.axes[-1].get_xlabel() == r"Column-wise missing rate $\rho_c$ (MNAR)"
    assert "column-wise missing rate ρ_c with an MNAR pattern" in figure.caption(
        {"n_replicates": 6}, design=design)
    with pytest.raises(ValueError, match="unknown study 'patchy'"):
        figure.plot(table)  # without its design only the paper's studies are known by name


def test_every_design_the_config_accepts_has_a_figure():
    """Each factor of the schema (and, for a missing rate, each pattern but 'none', which
    the workflow's config check refuses) has a sensitivity figure."""
    study = yaml.safe_load(SCHEMA.read_text())["properties"]["simulation"]["properties"][
        "studies"]["additionalProperties"]["properties"]
    for factor in study["factor"]["enum"]:
        for missing in study["missing"]["enum"]:
            if (factor, missing) == ("missing_rate", "none"):
                with pytest.raises(ValueError, match="no sensitivity figure"):
                    design_spec(factor, missing)
            else:
                assert design_spec(factor, missing).metrics
    assert design_spec("missing_rate", "mar") is STUDIES["mar"]
    assert design_spec("n_items", "mcar") is STUDIES["size_fixN"]


# -------------------------------------------------------------------------- runtime

def test_runtime_figure_speedups_na_and_order(tmp_path):
    table = runtime_table()
    paths = out(tmp_path, "runtime")
    fig = plot_runtime(table, paths)
    assert_images(paths)
    ax, speed_ax = fig.axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["IFEval", "MuSR", "GPQA", "MATH", "BBH", "MMLU-Pro"]
    # fastest baseline: mirt (50 s x scale) where it runs, L-BFGS-B (100 s x scale) elsewhere
    expected = [25, 25, 50, 50, 50, 50]
    annotations = [t.get_text() for t in ax.texts if t.get_gid() == "speedup"]
    assert annotations == [f"{e}\N{MULTIPLICATION SIGN}" for e in expected]
    heights = [p.get_height() for p in speed_ax.patches]
    assert heights == pytest.approx(expected)
    # below 10 with a decimal: cBMM at 107.5 s against L-BFGS-B's 100 s is 0.93x, not "1x"
    slow = table.copy()
    slow.loc[slow["method"] == "cbmm", "runtime_s"] *= 53.75
    annotations = [t.get_text() for t in plot_runtime(slow).axes[0].texts
                   if t.get_gid() == "speedup"]
    assert annotations[2] == "0.9\N{MULTIPLICATION SIGN}"
    na = sorted(t.get_gid() for t in ax.texts if t.get_text() == "NA")
    assert na == sorted(f"NA:{d}:mirt" for d in ("GPQA", "MATH", "BBH", "MMLU_PRO"))
    # failed mirt runs have a recorded runtime (3 s) that must not be drawn
    mirt_line = next(line for line in ax.get_lines() if line.get_label() == "mirt")
    assert np.isnan(mirt_line.get_ydata()[2:]).all()
    assert mirt_line.get_ydata()[:2] == pytest.approx([50.0, 100.0])


def test_runtime_figure_of_a_users_suites_names_them_and_their_sizes(tmp_path):
    """Suites drawn by J, each with its own N and J under it when the N differ; the caption
    names the suites of the run, not the paper's."""
    rows = [{"dataset": name, "n_models": n, "n_items": j, "method": method, "replicate": 0,
             "status": "converged", "runtime_s": 1.0, "n_iter": 3, "loss": 0.1}
            for name, n, j in (("mine_b", 40, 90), ("mine_a", 300, 20), ("mine_c", 7, 50))
            for method in ("cbmm", "lbfgsb")]
    fig = plot_runtime(pd.DataFrame(rows), out(tmp_path, "runtime_mine"))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "mine_a\nN = 300, J = 20", "mine_c\nN = 7, J = 50", "mine_b\nN = 40, J = 90"]
    assert ax.get_xlabel() == "Benchmark suite (ordered by number of items J)"
    same = plot_runtime(runtime_table(), out(tmp_path, "runtime_paper"))
    assert same.axes[0].get_xlabel().endswith("; N = 2211)")
    text = FIGURES["runtime"].caption({"n_replicates": 2, "datasets": ["mine_a", "mine_b"]})
    assert text.startswith("Runtime on the 2 suites mine_a and mine_b, ordered by the number")
    assert "Leaderboard" not in text and "six" not in text


# -------------------------------------------------------------------------- MATH-500

def test_math500_ability_one_point_per_model_with_highlights(tmp_path):
    table = math500_abilities()
    paths = out(tmp_path, "ability")
    fig = plot_math500_ability(table, paths)
    assert_images(paths)
    assert len(fig.axes) == 3
    assert [ax.get_title() for ax in fig.axes] == ["Small (0–7B)", "Medium (7–20B)", "Large (>20B)"]
    # one point per model at its better prompt's ability (as published)
    per_model = table.groupby("model").agg(theta=("theta", "max"), tier=("tier", "first"))
    for ax, tier in zip(fig.axes, ("0-7B", "7-20B", ">20B")):
        expected = per_model[per_model.tier == tier]
        offsets = np.concatenate([c.get_offsets() for c in ax.collections])
        assert len(offsets) == len(expected)  # one point per model, not per prompt
        assert sorted(offsets[:, 1]) == pytest.approx(sorted(expected.theta))
        labelled = {t.get_text().replace("\n", "") for t in ax.texts if t.get_gid() == "highlight"}
        assert expected.theta.idxmax() in labelled
        if tier == ">20B":
            assert expected.theta.idxmin() in labelled
    assert fig.axes[0].get_xlim() == fig.axes[2].get_xlim()


def test_math500_ability_mean_of_prompts_on_request(tmp_path):
    table = math500_abilities()
    fig = plot_math500_ability(table, out(tmp_path, "ability_mean"), prompts="mean")
    per_model = table.groupby("model")["theta"].mean()
    offsets = np.concatenate([c.get_offsets() for ax in fig.axes for c in ax.collections])
    assert sorted(offsets[:, 1]) == pytest.approx(sorted(per_model))
    with pytest.raises(ValueError, match="prompts must be one of"):
        math500_ability.model_abilities(table, prompts="first")


def test_math500_ability_rejects_conflicting_metadata():
    table = math500_abilities()
    table.loc[0, "tier"] = ">20B"
    with pytest.raises(ValueError, match="conflicting tier"):
        math500_ability.model_abilities(table)


def test_item_difficulty_panels_and_boxes(tmp_path):
    items = math500_items()
    paths = out(tmp_path, "difficulty")
    fig = plot_item_difficulty(items, paths)
    assert_images(paths)
    assert [ax.get_title() for ax in fig.axes] == ["Overall", *SUBJECTS]
    overall = fig.axes[0]
    # medians drawn for the five levels equal the medians of -b
    medians = [line.get_ydata()[0] for line in overall.get_lines() if line.get_gid() == "median"]
    expected = (-items["b"]).groupby(items["level"]).median().to_numpy()
    assert medians == pytest.approx(expected)


def test_item_difficulty_unbounded_items_count_in_boxes_but_sit_at_the_edge(tmp_path):
    """All-wrong items (no finite b) are in the box statistics and drawn at the top edge."""
    items = math500_items()
    wrong = items.index[(items["level"] == 5)][:6]
    items.loc[wrong, "b"] = -40.0  # a drifting estimate far above every other item
    items.loc[wrong, "accuracy"] = 0.0
    fig = plot_item_difficulty(items, out(tmp_path, "difficulty_unbounded"))
    overall = fig.axes[0]
    medians = [line.get_ydata()[0] for line in overall.get_lines() if line.get_gid() == "median"]
    assert medians == pytest.approx((-items["b"]).groupby(items["level"]).median().to_numpy())
    finite = -items.loc[items["accuracy"] > 0, "b"]
    low, high = overall.get_ylim()
    assert finite.max() < high < 40.0 and low < finite.min()
    edge = [line for line in overall.get_lines() if line.get_gid() == "unbounded:top"]
    assert len(edge) == 1
    assert list(edge[0].get_xdata()) == [5] * 6 and set(edge[0].get_ydata()) == {high}


def test_discrimination_two_panels_one_labelled_point_per_suite(tmp_path):
    summary = discrimination_summary()
    paths = out(tmp_path, "discrimination")
    fig = plot_discrimination(summary, paths)
    assert_images(paths)
    assert len(fig.axes) == 2
    for ax, column in zip(fig.axes, ("spearman_top20", "spearman_all")):
        offsets = ax.collections[0].get_offsets()
        assert np.asarray(offsets) == pytest.approx(summary[["cv_a", column]].to_numpy())
        assert sorted(t.get_text() for t in ax.texts) == sorted(
            ["MATH-500", "IFEval", "MATH", "MMLU-Pro", "BBH", "GPQA", "MuSR"])


# ------------------------------------------------------------------------- abilities

def test_abilities_shows_the_ablest_with_their_intervals_and_a_status_that_is_not_an_answer(
        tmp_path):
    import cbmm
    from cbmm.figures import FIGURES, plot_abilities
    from cbmm.simulate import simulate
    from cbmm.tables import abilities_table

    draw = simulate(40, 60, seed=2)
    frame = pd.DataFrame(draw.responses, index=[f"model {i}" for i in range(40)])
    boot = cbmm.bootstrap(frame, n_boot=5, se=True)
    table = abilities_table(boot.fit, boot, frame.mean(axis=1))
    paths = out(tmp_path, "abilities")
    fig = plot_abilities(table, top=10, dataset="MATH_500", out_paths=paths)
    assert_images(paths)
    left, right = fig.axes
    by_height = sorted(zip(left.get_yticks(), (t.get_text() for t in left.get_yticklabels())))
    assert [label for _, label in by_height][::-1] == list(table["model"].head(10))  # ablest on top
    assert fig.texts[0].get_text() == "MATH-500"
    caption = FIGURES["abilities"].caption_for([table], config_summary={"top": 10})
    assert caption.endswith("The fit shown converged (a stationary point of its objective).")
    table["status"] = "not_stationary"
    fig = plot_abilities(table, top=10, dataset="MATH_500")
    assert fig.texts[0].get_text() == "MATH-500 (fit status: not_stationary)"
    caption = FIGURES["abilities"].caption_for([table], config_summary={"top": 10})
    assert "did not converge (status not_stationary): it is not an optimum" in caption
    table["status"] = "unbounded"  # MATH-500 under the paper's maximum likelihood
    caption = FIGURES["abilities"].caption_for([table], config_summary={"top": 10})
    assert caption.endswith("The fit shown is unbounded: under maximum likelihood its items or "
                            "models separated by ability (all-correct and all-wrong ones "
                            "included) have no finite optimum, so their estimates are not an "
                            "answer (docs/trust.md).")


def test_captions_count_the_statuses_of_the_fits_behind_each_figure(tmp_path):
    """One fit per ranking file, one per row of the runtime table; a failed fit's reason is
    counted as 'failed'."""
    from cbmm.figures import FIGURES

    rankings = {}
    for dataset, status in (("A", "converged"), ("B", "max_iter"), ("C", "converged")):
        rankings[dataset] = tmp_path / f"{dataset}.csv"
        pd.DataFrame({"model": ["m1", "m2"], "status": status}).to_csv(rankings[dataset])
    caption = FIGURES["rankflow"].caption_for([rankings, None])
    assert caption.endswith("Statuses of the 3 fits shown: 2 converged, 1 max_iter; a fit that "
                            "did not converge is not an optimum, and its estimates are not an "
                            "answer (docs/trust.md).")
    runtime = pd.DataFrame({"status": ["converged"] * 4 + ["failed: timed out after 5 s",
                                                           "failed: R error"]})
    assert "Statuses of the 6 fits shown: 4 converged, 2 failed;" in FIGURES[
        "runtime"].caption_for([runtime])
    runtime["status"] = "converged"
    assert FIGURES["runtime"].caption_for([runtime]).endswith(
        "All 6 fits shown converged (stationary points of their objectives).")
    assert FIGURES["efficiency"].caption_for([None, None]) == FIGURES["efficiency"].caption()


def test_the_efficiency_caption_states_the_split_rule_the_config_gave():
    from cbmm.figures import efficiency

    five = efficiency.caption({"splits": 5, "held_models": 0, "test_share": 0.2})
    assert five.startswith("Efficient evaluation (5 random splits of the models, 20% held out).")
    more = efficiency.caption({"splits": 5, "held_models": 500, "test_share": 0.2})
    assert more.startswith("Efficient evaluation (5 random splits of the models, 20% held "
                           "out; more splits where 5 hold out fewer than 500 models in all).")
    # the seeded strategies' draws per split, where there are several
    assert "random items: their 5 draws of k items per split together" in efficiency.caption(
        {"splits": 5, "test_share": 0.2, "draws": 5})
    assert "tinyBenchmarks' anchors: their 5 draws" in efficiency.caption(
        {"splits": 5, "test_share": 0.2, "draws": 5, "tinybenchmarks": True})
    assert "draws of k items" not in five + efficiency.caption({"draws": 1})


def test_the_efficiency_figure_marks_the_cross_validated_error_beside_the_held_out_one():
    from matplotlib.collections import PathCollection

    from cbmm.figures import plot_efficiency

    selection = pd.DataFrame({"k": [10, 50, 10, 50, 10, 50],
                              "strategy": ["stratified"] * 2 + ["predictive"] * 2
                              + ["random_mean"] * 2,
                              "mae": [0.05, 0.03, 0.04, 0.02, 0.07, 0.04],
                              "mae_sd": 0.002,
                              "cv_mae": [0.052, 0.029, 0.043, 0.021, np.nan, np.nan]})
    adaptive = pd.DataFrame({"max_exposure": np.nan, "se_target": 0.3, "n_items": [12, 15],
                             "theta_error": [0.1, -0.2]})
    left = plot_efficiency(selection, adaptive).axes[0]
    crosses = [c for c in left.collections if isinstance(c, PathCollection)]
    drawn = np.concatenate([c.get_offsets() for c in crosses])
    expected = selection.dropna()[["k", "cv_mae"]].to_numpy()
    assert sorted(map(tuple, drawn)) == sorted(map(tuple, expected))
    assert "cross-validated on the calibration models, per strategy" in [
        t.get_text() for t in left.get_legend().get_texts()]
    # a table written before the column: the held-out errors alone
    left = plot_efficiency(selection.drop(columns="cv_mae"), adaptive).axes[0]
    assert not [c for c in left.collections if isinstance(c, PathCollection)]
    assert "cross-validated" not in " ".join(t.get_text() for t in left.get_legend().get_texts())


# -------------------------------------------------------------------------- rankflow

def test_rankflow_ties_are_wider_bars_and_panels_ordered_by_cv(tmp_path):
    tables = {"MATH": rankings(60, 1, ties=2), "MMLU_PRO": rankings(80, 2),
              "GPQA": rankings(120, 3)}
    top = {"MATH": 30, "MMLU_PRO": 50, "GPQA": 90}
    summary = discrimination_summary()
    paths = out(tmp_path, "rankflow")
    fig = plot_rankflow(tables, summary, paths, top=top)
    assert_images(paths)
    panels = [ax for ax in fig.axes if ax.get_label() == "rankflow"]
    assert [ax.get_title().splitlines()[0] for ax in panels] == ["MATH", "MMLU-Pro", "GPQA"]
    assert "CV($\\hat{a}$) = 0.58" in panels[0].get_title()
    math_table = tables["MATH"]
    shown = math_table[(math_table.accuracy_rank <= 30) & (math_table.theta_rank <= 30)]
    bars = [p for p in panels[0].patches if isinstance(p, Rectangle) and p.get_gid()]
    left = [p for p in bars if p.get_gid().startswith("accuracy")]
    right = [p for p in bars if p.get_gid().startswith("theta")]
    # one bar per distinct rank; a tie of two models is one bar twice as tall
    assert len(left) == shown.accuracy_rank.nunique()
    assert len(right) == shown.theta_rank.nunique()
    heights = sorted(p.get_height() for p in left)
    assert heights[-1] == pytest.approx(2 * heights[0])
    assert sum(p.get_height() for p in left) == pytest.approx(len(shown))


def test_a_rankflow_top_beyond_the_models_spans_the_colours_over_those_with_a_warning():
    """top 1000 of 60 models: every bar the colour of ranks 1-60 of 1000, alike."""
    table = rankings(60, 5)
    with pytest.warns(UserWarning, match="top 1000 for mine is more than its 60 models"):
        fig = plot_rankflow({"mine": table}, {"mine": 0.3}, top={"mine": 1000})
    bar = next(ax for ax in fig.axes if ax.get_label() != "rankflow")  # the colour bar's
    assert bar.get_xlim() == pytest.approx((1, 60))


def test_a_rankflow_of_one_dataset_reads_its_cv_from_its_own_metrics(tmp_path):
    """The workflow's per-dataset figure: its metrics_real row, not the summary of all."""
    metrics = tmp_path / "mine.json"
    metrics.write_text(json.dumps({"dataset": "mine", "cv_a": 0.4321, "n_models": 40}))
    fig = plot_rankflow({"mine": rankings(40, 4)}, metrics, top={"mine": 10})
    panel = next(ax for ax in fig.axes if ax.get_label() == "rankflow")
    assert panel.get_title().endswith("CV($\\hat{a}$) = 0.43")
    metrics.write_text(json.dumps({"dataset": "mine"}))
    with pytest.raises(ValueError, match="mine.json: expected one dataset's metrics"):
        plot_rankflow({"mine": rankings(40, 4)}, metrics, top={"mine": 10})


def test_rankflow_labels_keep_the_end_of_long_names():
    """Two prompts of one model differ at the end of their names: cut in the middle, the
    labels stay apart (cut at the end, both read 'Qwen_Qwen3_30B_A3B_Instruct_250...')."""
    from cbmm.figures.rankflow import _short

    names = [f"Qwen/Qwen_Qwen3_30B_A3B_Instruct_2507_{p}_shot" for p in ("zero", "one")]
    labels = [_short(name) for name in names]
    assert labels[0] != labels[1] and all(len(label) == 32 for label in labels)
    assert labels[1].startswith("Qwen_Qwen3_30B") and labels[1].endswith("_one_shot")
    assert _short("org/short") == "short"


def test_rankflow_names_models_whose_short_names_coincide_apart():
    """orgX/Big Model and orgY/Big Model were both shown as "Big Model", and two long names
    cut in the middle alike shared their label."""
    from cbmm.figures.rankflow import _names

    long = [f"lab/{'a' * 20}{middle}{'z' * 20}" for middle in "mn"]
    shown = _names(["orgX/Big Model", "orgY/Big Model", "orgX/Small", *long])
    assert shown["orgX/Big Model"] == "orgX/Big Model" and shown["orgX/Small"] == "Small"
    assert [shown[name][-4:] for name in long] == [" [1]", " [2]"]
    assert len(set(shown.values())) == len(shown)


def test_rankflow_names_the_models_of_a_users_suite(tmp_path):
    table = rankings(40, 4)
    fig = plot_rankflow({"mine": table}, {"mine": 0.3}, out(tmp_path, "rankflow_mine"),
                        top={"mine": 10}, names=True)
    panel = next(ax for ax in fig.axes if ax.get_label() == "rankflow")
    shown = table[(table.accuracy_rank <= 10) & (table.theta_rank <= 10)]
    named = [t for t in panel.texts if (t.get_gid() or "").startswith("name:")]
    assert len(named) == 2 * len(shown)  # beside each column
    assert {t.get_text() for t in named} == {m.split("/")[-1] for m in shown["model"]}
    left = sorted((t.get_position()[1], t.get_text()) for t in named if t.get_ha() == "right")
    by_accuracy = shown.sort_values(["accuracy_rank", "theta_rank", "model"])
    assert [text for _, text in left] == [m.split("/")[-1] for m in by_accuracy["model"]]


def test_a_rankflow_panel_without_shared_top_models_says_so_and_the_others_are_drawn(tmp_path):
    """The top 1 by accuracy is not the top 1 by ability: that panel is a note, not an
    error that would take the other panels (or figures) with it."""
    crossed = rankings(30, 5)
    crossed.loc[crossed["accuracy_rank"] == 1, "theta_rank"] = 2
    crossed.loc[(crossed["theta_rank"] == 2) & (crossed["accuracy_rank"] != 1), "theta_rank"] = 1
    fig = plot_rankflow({"crossed": crossed, "fine": rankings(30, 6)},
                        {"crossed": 0.2, "fine": 0.3}, out(tmp_path, "rankflow_two"),
                        top={"crossed": 1, "fine": 10})
    panels = [ax for ax in fig.axes if ax.get_label() == "rankflow"]
    notes = [t.get_text() for t in panels[0].texts if t.get_gid() == "empty:crossed"]
    assert notes == ["No model is in the top 1\nof both rankings"]
    assert [p for p in panels[1].patches if p.get_gid()]  # the other panel is drawn


# ------------------------------------------------------------------ registry/captions

def test_every_figure_has_a_caption_and_inputs():
    for name, spec in FIGURES.items():
        text = spec.caption()
        assert isinstance(text, str) and len(text) > 60, name
        assert spec.inputs, name
    with pytest.raises(KeyError, match="no figure 'histogram'"):
        get_figure("histogram")


def test_figures_read_the_tables_cbmm_tables_lists():
    patterns = [re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(file))
                for file in TABLE_FILES.values()]
    inputs = {file for spec in FIGURES.values() for file in spec.inputs}
    assert inputs >= {"runtime_leaderboard.csv", "sim_mcar.csv", "rankings/{dataset}.csv"}
    assert [f for f in inputs if not any(re.fullmatch(p, f) for p in patterns)
            and f not in TABLE_FILES.values()] == []
    assert "better prompt style" in FIGURES["math500_ability"].caption()
    assert "not identified" in FIGURES["math500_ability"].caption()
    assert "raw scale" in FIGURES["item_difficulty"].caption()


def test_labels_that_pandas_reads_as_missing_or_numbers_are_read_back_as_written(tmp_path):
    """"NA", "None", "null", "nan", "01", "1", "1.0" and "1e3" are valid labels (docs/data.md);
    read back with pandas' defaults they became NaN or numbers: the rankflow figure of such
    a suite crashed and the abilities figure named four models "nan"."""
    from cbmm.io import write_csv

    odd = ["NA", "None", "null", "nan", "01", "1", "1.0", "1e3"]
    table = rankings(20, 7)
    table["model"] = odd + list(table["model"][len(odd):])  # the best-ranked models
    write_csv(table, tmp_path / "rankings.csv")
    write_csv(pd.DataFrame({"dataset": ["NA"], "cv_a": [0.3]}), tmp_path / "summary.csv")
    fig = plot_rankflow({"NA": tmp_path / "rankings.csv"}, tmp_path / "summary.csv",
                        out(tmp_path, "rankflow_na"), top={"NA": 20}, names=True)
    panel = next(ax for ax in fig.axes if ax.get_label() == "rankflow")
    named = {t.get_text() for t in panel.texts if (t.get_gid() or "").startswith("name:")}
    assert set(odd) <= named
    read = read_result_table(tmp_path / "rankings.csv", ("model",))
    assert list(read["model"][:len(odd)]) == odd
