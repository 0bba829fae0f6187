"""The Snakemake workflow, run through the real snakemake CLI.

* config/test.yaml end to end in a temporary working directory, interrupted
  after a few fits and resumed: every expected output exists, tables have the
  expected rows, no NaN except in failed fits, completed fits are not redone;
* ``snakemake --lint`` is clean; a dry run of the paper's config schedules the
  number of jobs per rule computed here from the config;
* a user's own CSV dataset added by config produces its per-dataset outputs;
* bad configurations stop before any job with a message naming the key;
* the per-fit time limit (workflow/scripts/fitting.py) records a timeout as a
  failed fit and otherwise returns exactly the in-process result.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import cbmm
import cbmm.metrics
import cbmm.simulate
from cbmm.metrics import SIMULATION_METRICS

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
SHARED_MATH500 = REPO.parent / "shared" / "data" / "math500"
TEST_CONFIG = REPO / "config" / "test.yaml"

needs_shared = pytest.mark.skipif(
    not (SHARED_MATH500 / "MATH_500.csv").is_file(),
    reason=f"the test config reads MATH-500 from {SHARED_MATH500} (shared data beside the repo)")


def snakemake(workdir, *args, configfiles=(TEST_CONFIG,), timeout=900):
    """Run the real snakemake CLI on the repository's Snakefile in ``workdir``."""
    command = [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
               *args]
    if configfiles:
        command += ["--configfile", *map(str, configfiles)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def merged_config(*overlays):
    """config/config.yaml with overlays merged the way Snakemake does (mappings merge)."""
    def merge(base, extra):
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value
        return base

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for overlay in overlays:
        merge(config, yaml.safe_load(Path(overlay).read_text()))
    return config


def job_counts(output: str) -> dict:
    """The 'Job stats' table of a snakemake run or dry run."""
    table = output[output.index("Job stats:"):]
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def fmt(value):
    return format(float(value), "g")


def real_fits(config):
    """(dataset, method, init_scale, seed) of every real-data fit the config implies."""
    real, scale = config["real"], fmt(config["fit"].get("init_scale", 1.0))
    runtime_methods = [m for m in config["methods"] if m not in real["runtime"]["exclude_methods"]]
    fits = {(d, m, scale, s) for d in real["runtime"]["datasets"] for m in runtime_methods
            for s in range(real["runtime"]["replicates"])}
    fits |= {(d, "cbmm", fmt(v), s) for d in real["stability"]["datasets"]
             for v in real["stability"]["init_scales"] for s in range(real["stability"]["replicates"])}
    fits |= {(d, "cbmm", scale, real["interpretability"]["seed"])
             for d in real["interpretability"]["datasets"]}
    return fits


# --------------------------------------------------------------------------- end to end

def finished_fits(log_text):
    """fit.json of every fit job the run's log reports as finished."""
    started = re.finditer(r"rule fit_\w+:\n(?:    .*\n)*?    output: ([^,\n]+/fit\.json)"
                          r".*\n(?:    .*\n)*?    jobid: (\d+)", log_text)
    output_of = {jobid: path for path, jobid in (m.groups() for m in started)}
    finished = re.findall(r"Finished jobid: (\d+) \(Rule: fit_\w+\)", log_text)
    return [output_of[jobid] for jobid in finished]


@pytest.fixture(scope="module")
def test_run(tmp_path_factory):
    """config/test.yaml run in a fresh directory, interrupted after three fits, then resumed."""
    if not (SHARED_MATH500 / "MATH_500.csv").is_file():
        pytest.skip(f"the test config reads MATH-500 from {SHARED_MATH500}")
    workdir = tmp_path_factory.mktemp("workflow")
    log = workdir.parent / f"{workdir.name}-interrupted.log"
    command = [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--configfile", str(TEST_CONFIG), "--cores", "2"]
    with open(log, "w") as stream:
        first = subprocess.Popen(command, stdout=stream, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        deadline = time.monotonic() + 600
        while len(finished_fits(log.read_text())) < 3:
            assert first.poll() is None, "the run ended before three fits were done"
            assert time.monotonic() < deadline, "no three fits within 10 minutes"
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGINT)  # what Ctrl-C does to a foreground run
        first.wait(timeout=120)
    done = {workdir / path: ((workdir / path).stat().st_mtime_ns, (workdir / path).read_bytes())
            for path in finished_fits(log.read_text())}
    resumed = snakemake(workdir, "--cores", "2", "--workflow-profile",
                        str(REPO / "workflow" / "profiles" / "default"))
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    return {"workdir": workdir, "done_before_resume": done, "resume_log": resumed.stderr,
            "config": merged_config(TEST_CONFIG)}


def test_interrupted_run_resumes_without_redoing_completed_fits(test_run):
    assert test_run["done_before_resume"], "the interruption left no completed fit to check"
    for path, (mtime, content) in test_run["done_before_resume"].items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was fitted again"
        assert path.read_bytes() == content
    assert "Nothing to be done" not in test_run["resume_log"]  # the resume did the rest


def expected_outputs(config):
    sim, real = config["simulation"], config["real"]
    tables = [f"results/tables/sim_{s}.csv" for s in sim["run"]]
    tables += ["results/tables/runtime_leaderboard.csv", "results/tables/discrimination_summary.csv",
               "results/tables/stability_raw.csv", "results/tables/math500_abilities.csv",
               "results/tables/math500_items.csv", "results/tables/runtime_summary.csv",
               "results/tables/speedup.csv", "results/tables/stability_summary.csv",
               "results/tables/math500_models.tex"]
    tables += [f"results/tables/stability_{p}.tex" for p in ("theta", "a", "b")]
    tables += [f"results/tables/rankings/{d}.csv" for d in real["interpretability"]["datasets"]]
    figures = [f"sensitivity_{s}" for s in sim["run"]]
    figures += ["runtime", "discrimination", "rankflow", "math500_ability", "item_difficulty"]
    figures += [f"rankflow_{d}" for d in real["interpretability"]["datasets"]]
    return tables + [f"results/figures/{f}.{ext}" for f in figures for ext in ("pdf", "png")]


def test_every_expected_output_exists(test_run):
    workdir = test_run["workdir"]
    missing = [p for p in expected_outputs(test_run["config"]) if not (workdir / p).is_file()]
    assert not missing
    for png in workdir.glob("results/figures/*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_holds_every_figure_and_table_with_captions(test_run):
    workdir = test_run["workdir"]
    done = snakemake(workdir, "--report", str(workdir / "report.html"))
    assert done.returncode == 0, done.stderr[-3000:]
    html = (workdir / "report.html").read_text()
    outputs = expected_outputs(test_run["config"])
    shown = [p for p in outputs if not p.endswith(".pdf")]  # figures appear as PNG
    assert [p for p in shown if p.removeprefix("results/") not in html] == []
    config = test_run["config"]
    # captions are rendered with the config that produced the results
    assert f"{config['simulation']['replicates']} replicates per level" in html
    assert "Full ranking of" in html and "suite_a" in html


def test_simulation_tables_have_one_row_per_fit(test_run):
    config, workdir = test_run["config"], test_run["workdir"]
    sim = config["simulation"]
    for study in sim["run"]:
        table = pd.read_csv(workdir / f"results/tables/sim_{study}.csv")
        levels = sorted(float(v) for v in sim["studies"][study]["levels"])
        expected = {(lv, m, r) for lv in levels for m in config["methods"]
                    for r in range(sim["replicates"])}
        assert set(zip(table["level"], table["method"], table["replicate"])) == expected
        assert len(table) == len(expected)
        assert (table["study"] == study).all()
        columns = ["status", "runtime_s", "n_iter", "loss", *SIMULATION_METRICS]
        assert set(columns) <= set(table.columns)
        ok = ~table["status"].str.startswith("failed")
        # recall/precision of a are undefined (0/0) without true zeros in a: NaN by definition
        always_defined = [c for c in columns if c not in ("recall_a", "precision_a")]
        assert not table.loc[ok, always_defined].isna().any().any(), study
        assert table.loc[~ok, list(SIMULATION_METRICS)].isna().all().all()


def test_sparsity_study_defines_recall_and_precision(test_run):
    table = pd.read_csv(test_run["workdir"] / "results/tables/sim_sparsity.csv")
    ok = ~table["status"].str.startswith("failed")
    assert table.loc[ok, ["recall_a", "precision_a"]].notna().all().all()


def test_simulation_metrics_match_the_saved_fit_and_truth(test_run):
    """Recompute one row of a table from the fit files and the simulated truth."""
    workdir = test_run["workdir"]
    table = pd.read_csv(workdir / "results/tables/sim_temperature.csv")
    row = table.iloc[-1]
    level = fmt(row["level"])
    truth = cbmm.simulate.Simulation.load(
        workdir / f"results/simulations/temperature/level_{level}/rep_{row['replicate']}.npz")
    assert truth.sigma == pytest.approx(10 ** row["level"])
    fit = cbmm.FitResult.load(
        workdir / f"results/fits/simulation/temperature/level_{level}/{row['method']}/rep_{row['replicate']}")
    expected = cbmm.metrics.fit_metrics(fit, truth)
    for name, value in expected.items():
        assert row[name] == pytest.approx(value, rel=1e-9, nan_ok=True), name
    assert row["status"] == fit.status and row["n_iter"] == fit.n_iter


def test_runtime_table_rows(test_run):
    config, workdir = test_run["config"], test_run["workdir"]
    real = config["real"]
    table = pd.read_csv(workdir / "results/tables/runtime_leaderboard.csv")
    methods = [m for m in config["methods"] if m not in real["runtime"]["exclude_methods"]]
    expected = {(d, m, r) for d in real["runtime"]["datasets"] for m in methods
                for r in range(real["runtime"]["replicates"])}
    assert set(zip(table["dataset"], table["method"], table["replicate"])) == expected
    assert len(table) == len(expected)
    ok = ~table["status"].str.startswith("failed")
    assert not table.loc[ok].isna().any().any()
    for dataset, rows in table.groupby("dataset"):
        source = pd.read_csv(REPO / "tests" / "data" / f"{dataset}.csv", index_col=0)
        assert set(rows["n_models"]) == {source.shape[0]} and set(rows["n_items"]) == {source.shape[1]}


def test_real_data_tables(test_run):
    config, workdir = test_run["config"], test_run["workdir"]
    datasets = config["real"]["interpretability"]["datasets"]
    summary = pd.read_csv(workdir / "results/tables/discrimination_summary.csv")
    assert list(summary["dataset"]) == datasets
    assert not summary.isna().any().any()
    math500 = pd.read_csv(SHARED_MATH500 / "MATH_500.csv", index_col=0)
    abilities = pd.read_csv(workdir / "results/tables/math500_abilities.csv")
    assert list(abilities["row_label"]) == list(math500.index)
    np.testing.assert_allclose(abilities["accuracy"], math500.mean(axis=1))
    items = pd.read_csv(workdir / "results/tables/math500_items.csv")
    assert len(items) == math500.shape[1] and set(items["level"]) == {1, 2, 3, 4, 5}
    for dataset in datasets:
        ranking = pd.read_csv(workdir / f"results/tables/rankings/{dataset}.csv")
        assert ranking["theta_rank"].min() == 1 and not ranking.isna().any().any()
    stability = pd.read_csv(workdir / "results/tables/stability_raw.csv")
    st = config["real"]["stability"]
    k = len(st["init_scales"])
    assert len(stability) == len(st["datasets"]) * st["replicates"] * 3 * k * (k + 1) // 2
    diagonal = stability["s2_row"] == stability["s2_col"]
    np.testing.assert_allclose(stability.loc[diagonal, "spearman"], 1.0)


def test_fit_logs_record_the_slurm_job_id(test_run):
    logs = list(test_run["workdir"].glob("logs/fit_*/**/*.log"))
    assert logs
    for log in logs:
        assert log.read_text().splitlines()[0] == "SLURM_JOB_ID=none"


# --------------------------------------------------------------------------- lint and dry runs

def test_lint_is_clean(tmp_path):
    result = snakemake(tmp_path, "--lint")
    assert result.returncode == 0, result.stderr
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr


def installed(methods):
    """The methods whose software is installed (checked in a child: R must not start here)."""
    check = ("import sys, cbmm\nfor m in sys.argv[1:]:\n    try:\n        cbmm.check_methods([m])\n"
             "        print(m)\n    except cbmm.MethodUnavailableError:\n        pass\n")
    result = subprocess.run([sys.executable, "-c", check, *methods], capture_output=True,
                            text=True, check=True)
    return result.stdout.split()


@pytest.mark.slow  # a DAG of some 23,000 jobs: about a minute
def test_dry_run_of_the_paper_schedules_the_expected_jobs(tmp_path):
    """The default config (restricted to the installed methods, where one is missing)."""
    overlays = ()
    paper_methods = merged_config()["methods"]
    if installed(paper_methods) != paper_methods:
        overlay = tmp_path / "installed.yaml"
        overlay.write_text(yaml.safe_dump({"methods": installed(paper_methods)}))
        overlays = (overlay,)
    config = merged_config(*overlays)
    result = snakemake(tmp_path, "--dry-run", "--cores", "1", configfiles=overlays)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = job_counts(result.stdout)

    sim, real = config["simulation"], config["real"]
    n_sim = sum(len(sim["studies"][s]["levels"]) for s in sim["run"]) * sim["replicates"]
    n_methods = len(config["methods"])
    datasets = (set(real["runtime"]["datasets"]) | set(real["stability"]["datasets"])
                | set(real["interpretability"]["datasets"])
                | {p["dataset"] for p in real["interpretability"]["rankflow"]}
                | {real["interpretability"]["math500"]["dataset"]})
    interpretability = len(real["interpretability"]["datasets"])
    expected = {
        "simulate": n_sim, "fit_simulation": n_sim * n_methods,
        "metrics_simulation": n_sim * n_methods, "aggregate_simulation": len(sim["run"]),
        "render_sensitivity": len(sim["run"]), "build_dataset": len(datasets),
        "fit_real": len(real_fits(config)), "metrics_real": interpretability,
        "render_rankflow_dataset": interpretability, "stability": len(real["stability"]["datasets"]),
        "math500_items": 1, "math500_models": 1, "math500_tables": 1,
    }
    assert {rule: counts.get(rule) for rule in expected} == expected
    # the paper's sizes, as the issue states them
    assert n_sim == (5 + 5 + 7 + 9 + 9 + 6 + 6) * 50
    if not overlays:  # runtime: 4 methods; stability: cbmm at s2 = 2..5 (s2 = 1 is shared)
        assert counts["fit_real"] == 6 * 4 * 50 + 6 * 4 * 50 + 1


@pytest.mark.slow
def test_quick_config_renders_every_figure_and_table(tmp_path):
    """The laptop config (it downloads the suites, so here only its DAG) schedules
    every render rule: all figures and tables of the paper."""
    quick = REPO / "config" / "quick.yaml"
    overlays = [quick]
    quick_methods = merged_config(quick)["methods"]
    if installed(quick_methods) != quick_methods:
        overlay = tmp_path / "installed.yaml"
        overlay.write_text(yaml.safe_dump({"methods": installed(quick_methods)}))
        overlays.append(overlay)
    config = merged_config(*overlays)
    result = snakemake(tmp_path, "--dry-run", "--cores", "1", configfiles=overlays)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = job_counts(result.stdout)
    n_studies = len(config["simulation"]["run"])
    assert n_studies == 7
    expected = {
        "render_sensitivity": n_studies, "render_runtime": 1, "render_math500_ability": 1,
        "render_item_difficulty": 1, "render_discrimination": 1, "render_rankflow": 1,
        "render_rankflow_dataset": len(config["real"]["interpretability"]["datasets"]),
        "render_stability_tables": 1, "render_runtime_tables": 1,
        "render_math500_models_table": 1,
    }
    assert {rule: counts.get(rule) for rule in expected} == expected


# --------------------------------------------------------------------------- user dataset

@needs_shared
def test_a_user_dataset_added_by_config_gets_its_outputs(tmp_path):
    rng = np.random.default_rng(7)
    theta, a, b = rng.normal(size=40), rng.uniform(0.5, 1.5, 30), rng.normal(0, 0.5, 30)
    answers = (rng.random((40, 30)) < 1 / (1 + np.exp(-(np.outer(theta, a) + b)))).astype(float)
    answers[rng.random(answers.shape) < 0.05] = np.nan
    data = pd.DataFrame(answers, index=[f"lab/model-{i}" for i in range(40)],
                        columns=[f"q{j}" for j in range(30)])
    csv = tmp_path / "my_suite.csv"
    data.to_csv(csv, float_format="%.0f")
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(yaml.safe_dump({
        "datasets": {"my_suite": {"source": "local", "options": {"path": str(csv)}}},
        "simulation": {"run": []},
        "real": {"runtime": {"datasets": []}, "stability": {"datasets": []},
                 "interpretability": {"datasets": ["my_suite"], "rankflow": [], "math500": {"dataset": None}}},
    }))
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, overlay))
    assert result.returncode == 0, result.stderr[-5000:]

    ranking = pd.read_csv(workdir / "results/tables/rankings/my_suite.csv")
    assert sorted(ranking["model"]) == sorted(data.index)
    np.testing.assert_allclose(ranking.set_index("model").loc[data.index, "accuracy"],
                               data.mean(axis=1))  # mean over answered items
    summary = pd.read_csv(workdir / "results/tables/discrimination_summary.csv")
    assert summary.to_dict("records")[0]["dataset"] == "my_suite"
    assert (summary[["n_models", "n_items"]].to_numpy() == [[40, 30]]).all()
    for name in ("rankflow_my_suite", "discrimination"):
        assert (workdir / f"results/figures/{name}.pdf").is_file()
    fit = json.loads(next(workdir.glob("results/fits/real/my_suite/cbmm/*/seed_0/fit.json")).read_text())
    assert fit["n_models"] == 40 and fit["n_items"] == 30


# --------------------------------------------------------------------------- bad configs

BAD_CONFIGS = {
    "unknown method": ({"methods": ["cbmm", "fancy_irt"]}, ["methods", "fancy_irt"]),
    "negative replicates": ({"simulation": {"replicates": -3}}, ["replicates", "-3"]),
    "missing dataset file": (
        {"datasets": {"mine": {"source": "local", "options": {"path": "no/such/file.csv"}}}},
        ["datasets.mine.options.path", "no/such/file.csv"]),
    "dataset without a path": ({"datasets": {"mine": {"source": "local", "options": {}}}},
                               ["path", "mine"]),
    "unregistered dataset in a study": (
        {"real": {"stability": {"datasets": ["suite_a", "nowhere"]}}},
        ["real.stability.datasets", "nowhere"]),
    "misspelt key": ({"simulation": {"replicate": 2}}, ["replicate"]),
}


@needs_shared
@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_bad_config_stops_before_any_job_naming_the_key(case, tmp_path):
    overlay, expected = BAD_CONFIGS[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(overlay))
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "1", configfiles=(TEST_CONFIG, path))
    assert result.returncode != 0
    for text in expected:
        assert text in result.stderr, (text, result.stderr[-3000:])
    assert not (workdir / "results").exists() and not (workdir / "resources").exists()


# --------------------------------------------------------------------------- time limit

@pytest.fixture(scope="module")
def fitting():
    sys.path.insert(0, str(REPO / "workflow" / "scripts"))
    try:
        import fitting
    finally:
        sys.path.pop(0)
    return fitting


SETTINGS = dict(sigma=1.0, tol=1e-4, max_iter=1000, seed=5, init_scale=1.0)


def test_time_limit_records_a_failed_fit(fitting):
    data = cbmm.as_responses(cbmm.simulate.simulate(400, 300, seed=2).responses)
    result = fitting.run_fit(data, "cbmm", settings=SETTINGS, options={}, timeout_s=1e-3)
    assert result.status == "failed: timeout after 0.001 s"
    assert result.runtime_s == 1e-3 and result.n_iter == 0 and math.isnan(result.loss)
    assert np.isnan(result.theta).all() and np.isnan(result.a).all() and np.isnan(result.b).all()
    assert (len(result.theta), len(result.a)) == (400, 300)


def test_fit_under_a_generous_limit_equals_the_in_process_fit(fitting):
    frame = pd.DataFrame(cbmm.simulate.simulate(80, 50, seed=4).responses,
                         index=[f"m{i}" for i in range(80)], columns=[f"i{j}" for j in range(50)])
    data = cbmm.as_responses(frame)
    limited = fitting.run_fit(data, "cbmm", settings=SETTINGS, options={}, timeout_s=300)
    direct = fitting.run_fit(data, "cbmm", settings=SETTINGS, options={}, timeout_s=None)
    assert limited.status == direct.status == "converged"
    pd.testing.assert_series_equal(limited.theta, direct.theta)
    pd.testing.assert_series_equal(limited.a, direct.a)
    pd.testing.assert_series_equal(limited.b, direct.b)


def test_an_error_in_the_worker_is_raised_not_recorded(fitting):
    data = cbmm.as_responses(cbmm.simulate.simulate(30, 20, seed=1).responses)
    with pytest.raises(ValueError, match="no option"):
        fitting.run_fit(data, "cbmm", settings=SETTINGS, options={"no_such_option": 1},
                        timeout_s=60)
