"""The Snakemake workflow, run through the real snakemake CLI on the repository's own
test data (.test/: no network, no ../shared).

* .test/config.yaml end to end in a temporary working directory, killed
  (SIGKILL) after a few batches and resumed the documented way (--unlock, then
  the same command): every expected output exists, tables have the expected
  rows, no NaN except in failed fits, finished fits are not redone;
* the report shows every figure with the caption its caption function writes;
* a dry run of the paper's config schedules the jobs the config implies;
* a user's own dataset and a user's own method (config key method_modules) run
  end to end; methods that crash or hang become failed results, not failed runs;
* bad configurations stop before any job with one line naming the key (each case is
  checked without Snakemake in tests/test_workflow_plan.py);
* a simulation study declared only in the config gets its table and its figure;
* a download that fails stops only its own job, with one line naming the dataset.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from snakemake.utils import validate

import cbmm
import cbmm.metrics
import cbmm.simulate
from cbmm.data import read_matrix
from cbmm.efficient import item_list
from cbmm.efficient.audit import key_check_summary
from cbmm.efficient.study import calibrations, held_out, model_splits, summarise_adaptive
from cbmm.fidelity import load_published
from cbmm.figures import plot_runtime
from cbmm.metrics import SIMULATION_METRICS
from test_workflow_plan import BAD_CONFIGS

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
TEST_CONFIG = REPO / ".test" / "config.yaml"
TEST_DATA = REPO / ".test" / "data"


def snakemake(workdir, *args, configfiles=(TEST_CONFIG,), timeout=1800, cwd=None):
    """Run the real snakemake CLI on the repository's Snakefile in ``workdir`` (the default
    profile, profiles/default, is picked up by Snakemake itself)."""
    command = [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
               *args]
    if configfiles:
        command += ["--configfile", *map(str, configfiles)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def merged_config(*overlays):
    """config/config.yaml with overlays merged the way Snakemake does (mappings merge), the
    schema's defaults filled in as the Snakefile does."""
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
    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))  # the defaults
    return config


def overlay(tmp_path, name, content) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(content))
    return path


def job_counts(output: str) -> dict:
    """The 'Job stats' table of a snakemake run or dry run."""
    table = output[output.index("Job stats:"):]
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def fmt(value):
    return format(float(value), "g")


def stored_fits(workdir):
    """Every stored fit (a folder with unit.json) with its files' mtimes and contents."""
    return {unit.parent: {p.name: (p.stat().st_mtime_ns, p.read_bytes())
                          for p in unit.parent.iterdir()}
            for unit in Path(workdir).glob("results/fits/**/unit.json")}


# --------------------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def test_run(tmp_path_factory):
    """.test/config.yaml in a fresh directory, killed (SIGKILL) after a few batch jobs,
    then resumed the documented way: --unlock, then the same command."""
    workdir = tmp_path_factory.mktemp("workflow")
    log = workdir.parent / f"{workdir.name}-killed.log"
    command = [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--configfile", str(TEST_CONFIG), "--cores", "2"]
    with open(log, "w") as stream:
        first = subprocess.Popen(command, stdout=stream, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        deadline = time.monotonic() + 600
        while len(list(workdir.glob("results/fits/**/unit.json"))) < 8:
            assert first.poll() is None, "the run ended before eight fits were stored"
            assert time.monotonic() < deadline, "no eight fits within 10 minutes"
            time.sleep(0.1)
        os.killpg(first.pid, signal.SIGKILL)  # the Snakemake process and its jobs die at once
        first.wait(timeout=60)
    done = stored_fits(workdir)
    locked = snakemake(workdir, "--cores", "2")
    unlocked = snakemake(workdir, "--unlock")
    resumed = snakemake(workdir, "--cores", "2")
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    return {"workdir": workdir, "done_before_resume": done, "locked": locked,
            "unlocked": unlocked, "resume_log": resumed.stderr,
            "config": merged_config(TEST_CONFIG)}


def test_a_killed_run_resumes_after_unlock_without_redoing_finished_fits(test_run):
    assert test_run["locked"].returncode != 0 and "--unlock" in test_run["locked"].stderr
    assert test_run["unlocked"].returncode == 0, test_run["unlocked"].stderr[-3000:]
    assert test_run["done_before_resume"], "the kill left no finished fit to check"
    for folder, files in test_run["done_before_resume"].items():
        assert {p.name: (p.stat().st_mtime_ns, p.read_bytes())
                for p in folder.iterdir()} == files, f"{folder} was fitted again"


def test_a_log_setting_reruns_no_job(test_run, tmp_path):
    """fit.progress_every says how often fits log their progress: as a param it reran
    every fit job and all that follows them (13 jobs of a user's 3-dataset run)."""
    quiet = overlay(tmp_path, "quiet", {"fit": {"progress_every": 0}})
    dry = snakemake(test_run["workdir"], "-n", configfiles=(TEST_CONFIG, quiet))
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "Nothing to be done" in dry.stdout + dry.stderr, (dry.stdout + dry.stderr)[-3000:]


@pytest.mark.slow  # 30 s of runs killed and resumed
def test_an_interrupted_batch_resumes_from_its_finished_fits(tmp_path):
    """A batch of four one-second fits killed after two: the rerun fits only the rest."""
    config = overlay(tmp_path, "slow", {
        "method_modules": [".test/methods/toy.py"], "methods": ["toy"],
        "fit": {"batch_seconds": 1000, "method_options": {"toy": {"delay_s": 1.0}}},
        "simulation": {"run": ["mcar"]}, "real": NO_REAL_DATA})
    workdir = tmp_path / "run"
    target = "results/tables/sim_mcar.csv"
    command = [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--configfile", str(TEST_CONFIG), str(config), "--cores", "1", target]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list(workdir.glob("results/fits/**/unit.json"))) < 2:
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=60)
    done = stored_fits(workdir)
    assert 2 <= len(done) < 4
    assert snakemake(workdir, "--unlock", configfiles=(TEST_CONFIG, config)).returncode == 0
    resumed = snakemake(workdir, "--cores", "1", target, configfiles=(TEST_CONFIG, config))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = stored_fits(workdir)
    assert len(after) == 4 and all(after[folder] == files for folder, files in done.items())
    log = next(workdir.glob("logs/fit_simulation/core/batch_0.log")).read_text()
    assert f"4 fits, {len(done)} reused" in log
    # other batch sizes give other jobs (one fit each here), which refit nothing
    repacked = overlay(tmp_path, "repacked", {"fit": {"batch_seconds": 0.001}})
    done = snakemake(workdir, "--cores", "1", target,
                     configfiles=(TEST_CONFIG, config, repacked))
    assert done.returncode == 0, done.stderr[-3000:]
    assert stored_fits(workdir) == after
    logs = [p.read_text() for p in workdir.glob("logs/fit_simulation/core/batch_*.log")]
    assert len(logs) == 4 and all("1 fits, 1 reused" in log for log in logs)


@pytest.mark.slow  # a minute: three short runs of the runtime study
def test_real_batch_tables_of_an_old_packing_are_refitted_not_aggregated(tmp_path):
    """Batch jobs that finished while Snakemake was dead left no record; after a change of
    replicates their tables (of the old packing) counted as up to date and the runtime
    table listed one fit twice and lacked another, exit 0. The aggregation stops naming
    them; the same command again reruns their jobs and writes the right table."""
    real = {**NO_REAL_DATA, "runtime": {"datasets": ["suite_a"], "replicates": 2}}
    settings = {"simulation": {"run": []}, "fit": {"batch_seconds": 0.01}, "real": real}
    before = overlay(tmp_path, "before", settings)
    after = overlay(tmp_path, "after", {**settings, "real": {
        **real, "runtime": {"datasets": ["suite_a"], "replicates": 3}}})
    workdir, target = tmp_path / "run", "results/tables/runtime_leaderboard.csv"
    first = snakemake(workdir, "--cores", "1", target, configfiles=(TEST_CONFIG, before))
    assert first.returncode == 0, first.stderr[-3000:]
    # as after a killed Snakemake: the jobs' tables exist, nothing recorded, no aggregate
    shutil.rmtree(workdir / ".snakemake" / "metadata")
    shutil.rmtree(workdir / "results" / "tables")
    stopped = snakemake(workdir, "--cores", "1", target, configfiles=(TEST_CONFIG, after))
    assert stopped.returncode == 1, "aggregated tables of another packing"
    log = (workdir / "logs/aggregate_runtime/aggregate_runtime.log").read_text()
    assert "list other fits than this configuration plans for them" in log
    assert not (workdir / target).exists()
    again = snakemake(workdir, "--cores", "1", target, configfiles=(TEST_CONFIG, after))
    assert again.returncode == 0, again.stderr[-3000:]
    table = pd.read_csv(workdir / target)
    assert sorted(zip(table["method"], table["replicate"])) == sorted(
        (m, r) for m in ("cbmm", "lbfgsb") for r in range(3))


def expected_outputs(config):
    sim, real = config["simulation"], config["real"]
    tables = [f"results/tables/sim_{s}.csv" for s in sim["run"]]
    tables += ["results/tables/runtime_leaderboard.csv",
               "results/tables/discrimination_summary.csv", "results/tables/stability_raw.csv",
               "results/tables/math500_abilities.csv",
               "results/tables/math500_items.csv", "results/tables/runtime_summary.csv",
               "results/tables/speedup.csv", "results/tables/stability_summary.csv",
               "results/tables/math500_models.tex"]
    tables += [f"results/tables/stability_{p}.tex" for p in ("theta", "a", "b")]
    tables += [f"results/tables/rankings/{d}.csv" for d in real["interpretability"]["datasets"]]
    tables += [f"results/tables/{table}/{d}.csv" for d in real["efficiency"]["datasets"]
               for table in ("efficiency", "adaptive", "adaptive_summary", "item_audit")]
    return tables + [f"results/figures/{f}.{ext}" for f in figure_names(config)
                     for ext in ("pdf", "png")]


def figure_names(config):
    names = [f"sensitivity_{s}" for s in config["simulation"]["run"]]
    names += ["runtime", "discrimination", "rankflow", "math500_ability", "item_difficulty"]
    names += [f"{figure}_{d}" for d in config["real"]["efficiency"]["datasets"]
              for figure in ("efficiency", "item_audit")]
    return names + [f"rankflow_{d}" for d in config["real"]["interpretability"]["datasets"]]


def test_every_expected_output_exists(test_run):
    workdir = test_run["workdir"]
    missing = [p for p in expected_outputs(test_run["config"]) if not (workdir / p).is_file()]
    assert not missing
    for png in workdir.glob("results/figures/*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_holds_every_figure_and_table_with_its_captions(test_run):
    from cbmm.figures import FIGURES

    workdir, config = test_run["workdir"], test_run["config"]
    done = snakemake(workdir, "--report", str(workdir / "report.html"))
    assert done.returncode == 0, done.stderr[-3000:]
    html = (workdir / "report.html").read_text()
    shown = [p for p in expected_outputs(config) if not p.endswith(".pdf")]  # figures as PNG
    assert [p for p in shown if p.removeprefix("results/") not in html] == []
    # each figure's caption is its caption function's text, then its fits' statuses (one
    # per row of the simulation table), written by the render job
    sensitivity = FIGURES["sensitivity_mcar"].caption(
        {"n_replicates": config["simulation"]["replicates"]},
        definitions=config["figures"]["metric_definitions"])
    statuses = pd.read_csv(workdir / "results/tables/sim_mcar.csv")["status"]
    written = (workdir / "results/figures/sensitivity_mcar.caption.rst").read_text().strip()
    assert written.startswith(sensitivity + " ")
    assert (f"All {len(statuses)} fits shown converged" in written) == (
        statuses == "converged").all()
    words = sensitivity.split()
    for text in (" ".join(words[:8]), " ".join(words[-6:])):
        assert json.dumps(text)[1:-1] in html  # the report embeds it as a JSON string
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


def test_fits_are_batched_several_per_job(test_run):
    workdir = test_run["workdir"]
    batches = list(workdir.glob("results/batches/simulation/*/batch_*.csv"))
    tables = [pd.read_csv(path) for path in batches]
    sizes = [len(table) for table in tables]
    assert max(sizes) > 1  # several fits per job...
    # ... of every method sharing the job's conda env (cbmm and lbfgsb: envs/core.yaml)
    assert max(table["method"].nunique() for table in tables) == 2
    assert max(table["study"].nunique() for table in tables) > 1  # and of several studies
    assert len(batches) > 1
    assert sum(sizes) == len(list(workdir.glob("results/fits/simulation/**/unit.json")))


def test_real_fits_of_both_stopping_rules_share_a_batch(test_run):
    """A dataset's fits under the paper's rule and the converged rule are packed together
    (one start-up); each row keeps its rule and the rule's settings reached the fit."""
    workdir, config = test_run["workdir"], test_run["config"]
    tables = [pd.read_csv(path) for path in workdir.glob("results/batches/real/*/*/batch_*.csv")]
    assert any(set(table["stopping"]) == {"paper", "converged"} for table in tables)
    for table in tables:
        for row in table.itertuples():
            fit = json.loads((workdir / row.fit_dir / "fit.json").read_text())
            expected = config["real"]["converged"]["tol"] if row.stopping == "converged" \
                else config["fit"]["tol"]
            assert fit["tol"] == pytest.approx(expected), row.fit_dir


def test_every_job_logs_its_start_up(test_run):
    """Each script job logs the CPU of its start-up (benchmarks/bench_workflow.py sums
    them)."""
    workdir = test_run["workdir"]
    logs = list(workdir.glob("logs/**/*.log"))
    assert logs
    for log in logs:
        found = re.findall(r"start-up: ([0-9.]+) CPU-s", log.read_text())
        assert found and 0 < float(found[-1]) < 30, log
    # the render jobs' PDFs: fontTools' subsetting narrates at INFO, kept out of the logs
    renders = list(workdir.glob("logs/render/*.log"))
    assert renders and not any(re.search(r" INFO (Glyph IDs|\w+ pruned)", log.read_text())
                               for log in renders)


def test_a_batch_job_loads_manopt_without_the_torch_its_env_lacks():
    """pymanopt imports torch whenever it is installed; the Manopt baseline passes its own
    gradient and loads pymanopt without it, so a batch job starts as it would in
    envs/core.yaml, which has no torch; torch stays importable and Manopt fits."""
    pytest.importorskip("torch")
    pytest.importorskip("pymanopt")
    code = "\n".join([
        "import sys", f"sys.path.insert(0, {str(REPO / 'workflow' / 'scripts')!r})",
        "import cbmm, cbmm.simulate",
        "from cbmm_workflow.jobs import load_method_software",
        "units = [{'method': 'cbmm', 'options': {'accelerate': 'auto'}},",
        "         {'method': 'manopt', 'options': {}}]",
        "load_method_software(units)",
        "assert 'pymanopt' in sys.modules and 'torch' not in sys.modules",
        "assert 'scipy.optimize' in sys.modules  # the preload of accelerate='auto'",
        "y = cbmm.simulate.simulate(30, 20, seed=1).responses",
        "assert not cbmm.fit(y, 'manopt', max_iter=20).failed",
        "assert 'torch' not in sys.modules",
        "import torch",
    ])
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_fit_logs_show_the_progress_of_each_fit(test_run):
    """fit.progress_every (2 in the test config) reaches cbmm.fit's verbose: the job's log
    has a progress line for the fits that ran past two iterations."""
    workdir = test_run["workdir"]
    for rule in ("fit_simulation", "fit_real"):
        logs = "".join(p.read_text() for p in workdir.glob(f"logs/{rule}/**/*.log"))
        assert re.search(r"(cbmm|lbfgsb): iteration \d+, objective [0-9.e+-]+, relative change",
                         logs), rule


def test_sparsity_study_defines_recall_and_precision(test_run):
    table = pd.read_csv(test_run["workdir"] / "results/tables/sim_sparsity.csv")
    ok = ~table["status"].str.startswith("failed")
    assert table.loc[ok, ["recall_a", "precision_a"]].notna().all().all()


def test_simulation_metrics_match_the_stored_fit_and_its_truth(test_run):
    """Recompute one row of a table from the stored fit and the design's own draw."""
    workdir, config = test_run["workdir"], test_run["config"]
    table = pd.read_csv(workdir / "results/tables/sim_temperature.csv")
    row = table.iloc[-1]
    fit = cbmm.FitResult.load(
        workdir / f"results/fits/simulation/temperature/level_{fmt(row['level'])}/"
                  f"{row['method']}/rep_{row['replicate']}")
    defaults = config["simulation"]["defaults"]
    truth = cbmm.simulate.simulate(defaults["n_models"], defaults["n_items"],
                                   sigma=10 ** row["level"], seed=fit.seed)
    assert fit.sigma == pytest.approx(truth.sigma)
    expected = cbmm.metrics.fit_metrics(fit, truth)
    for name, value in expected.items():
        assert row[name] == pytest.approx(value, rel=1e-9, nan_ok=True), name
    assert row["status"] == fit.status and row["n_iter"] == fit.n_iter
    # every method fitted the same draw: the same seed for each method of a replicate
    seeds = {json.loads(p.read_text())["seed"] for p in workdir.glob(
        f"results/fits/simulation/temperature/level_{fmt(row['level'])}/*/"
        f"rep_{row['replicate']}/fit.json")}
    assert seeds == {fit.seed}


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
        source = pd.read_csv(TEST_DATA / "suites" / f"{dataset}.csv", index_col=0)
        assert set(rows["n_models"]) == {source.shape[0]}
        assert set(rows["n_items"]) == {source.shape[1]}


def test_real_data_tables(test_run):
    config, workdir = test_run["config"], test_run["workdir"]
    datasets = config["real"]["interpretability"]["datasets"]
    summary = pd.read_csv(workdir / "results/tables/discrimination_summary.csv")
    assert list(summary["dataset"]) == datasets
    assert not summary.isna().any().any()
    math500 = pd.read_csv(TEST_DATA / "math500" / "MATH_500.csv", index_col=0)
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


def test_abilities_held_out_fits_and_rankings_carry_intervals_and_statuses(test_run):
    """Beyond the paper: each dataset's abilities with Wald and bootstrap intervals, rank
    intervals and the fit's status, the held-out fit of every validated method, and the
    status of the fits behind the rankings and summaries."""
    config, workdir = test_run["config"], test_run["workdir"]
    uncertainty = config["real"]["uncertainty"]
    for dataset in uncertainty["datasets"]:
        table = pd.read_csv(workdir / f"results/tables/abilities/{dataset}.csv")
        matrix = pd.read_csv(TEST_DATA / ("math500/MATH_500.csv" if dataset == "MATH_500"
                                          else f"suites/{dataset}.csv"), index_col=0)
        assert sorted(table["model"]) == sorted(matrix.index.astype(str))
        assert (table["theta_lower"] < table["theta"]).all()
        assert (table["theta"] < table["theta_upper"]).all()
        np.testing.assert_allclose(table["theta_upper"] - table["theta"],
                                   1.959964 * table["theta_se"], rtol=1e-5)
        # no bootstrap interval for a model answering every item alike (every item
        # resample keeps it so)
        alike = matrix.apply(lambda row: row.dropna().nunique() == 1, axis=1)
        alike = table["model"].map(dict(zip(matrix.index.astype(str), alike)))
        assert table.loc[alike, ["rank_lower", "rank_upper", "theta_boot_lower",
                                 "theta_boot_upper"]].isna().all().all()
        assert (table.loc[~alike, "rank_lower"] <= table.loc[~alike, "rank_upper"]).all()
        assert list(table["rank"]) == sorted(table["rank"])  # the ablest first
        assert table["status"].nunique() == 1 and table["status"].iloc[0] == "converged"
        caption = (workdir / f"results/figures/abilities_{dataset}.caption.rst").read_text()
        assert f"({uncertainty['n_boot']} replicates)" in caption and "converged" in caption
    validation = config["real"]["validation"]
    for dataset in validation["datasets"]:
        heldout = pd.read_csv(workdir / f"results/tables/heldout/{dataset}.csv")
        assert sorted(heldout["method"].unique()) == sorted(validation["methods"])
        assert len(heldout) == validation["folds"] * len(validation["methods"])
        assert (heldout["log_loss"] < heldout["item_mean_log_loss"]).all()
    summary = pd.read_csv(workdir / "results/tables/discrimination_summary.csv")
    assert summary["status"].notna().all() and summary["status_paper_rule"].notna().all()
    for dataset in config["real"]["interpretability"]["datasets"]:
        ranking = pd.read_csv(workdir / f"results/tables/rankings/{dataset}.csv")
        row = summary.set_index("dataset").loc[dataset]
        assert set(ranking["status"]) == {row["status"]}


def test_efficiency_tables_hold_every_setting_of_the_study(test_run):
    config, workdir = test_run["config"], test_run["workdir"]
    study = config["real"]["efficiency"]
    for dataset in study["datasets"]:
        source = pd.read_csv(REPO / config["datasets"][dataset]["options"]["path"], index_col=0)
        held = round(0.2 * len(source))
        selection = pd.read_csv(workdir / f"results/tables/efficiency/{dataset}.csv")
        assert sorted(zip(selection["k"], selection["strategy"])) == sorted(
            (k, s) for k in study["k"]
            for s in [*study["strategies"], "random_mean", "tinybenchmarks"])
        tiny = selection.query("strategy == 'tinybenchmarks'")
        assert tiny["coverage"].isna().all() and tiny["mae"].between(0, 1).all()
        # beside each strategy's error, what cbmm.selection_error would have told of it
        chosen = selection["strategy"].isin(study["strategies"])
        assert selection.loc[chosen, "cv_mae"].between(0, 1).all()
        assert selection.loc[~chosen, "cv_mae"].isna().all()
        assert (selection["n_models"] == held).all() and selection["mae"].between(0, 1).all()
        tests = pd.read_csv(workdir / f"results/tables/adaptive/{dataset}.csv")
        adaptive = study["adaptive"]
        # MATH-500's tests again, balanced over its items' subjects (the schema's default)
        balances = ["none", "subject"] if dataset == "MATH_500" else ["none"]
        assert sorted(tests["content"].unique()) == balances
        assert len(tests) == (study["splits"] * held * len(adaptive["se_targets"])
                              * len(adaptive["max_exposures"]) * len(balances))
        assert (tests["n_items"] <= adaptive["max_items"]).all()
        # each test's interval around its prediction, scaled by one measure per split,
        # balance, SE target and exposure setting on the split's calibration models
        assert tests["lower"].le(tests["predicted"]).all()
        assert tests["predicted"].le(tests["upper"]).all()
        scales = tests.groupby(["split", "content", "se_target", "max_exposure"],
                               dropna=False)["interval_scale"]
        assert scales.nunique().eq(1).all() and (tests["interval_scale"] > 0).all()
        # the report's summary of the tests: the library's of the rows it shows
        summary = pd.read_csv(workdir / f"results/tables/adaptive_summary/{dataset}.csv")
        expected = summarise_adaptive(tests)
        pd.testing.assert_frame_equal(summary, expected, check_dtype=False, rtol=1e-8)
        assert len(summary) == len(balances) * len(adaptive["max_exposures"]) * len(
            adaptive["se_targets"])
        assert summary["accuracy_coverage"].between(0, 1).all()
        assert (selection["calibration_status"] == "converged").all()
        if dataset == "MATH_500":
            subjects = pd.read_csv(workdir / "resources/metadata/math500_items.csv",
                                   dtype={"item": str}).set_index("item")["subject"]
            share = subjects.value_counts(normalize=True)
            for given in tests.query("content == 'subject'")["items"].map(item_list):
                counts = subjects[given].value_counts().reindex(share.index, fill_value=0)
                assert (counts < share * len(given) + 1).all()  # no area above its quota
        audit = pd.read_csv(workdir / f"results/tables/item_audit/{dataset}.csv")
        assert list(audit["item"].astype(str)) == list(source.columns)
        caption = (workdir / f"results/figures/item_audit_{dataset}.caption.rst").read_text()
        assert audit["status"].nunique() == 1 and ((
            "The fit shown converged" in caption) == (audit["status"].iloc[0] == "converged"))
        # the audit's check of its ability against accuracy: the library's on the same fit
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cbmm.DegenerateDataWarning)
            fit = cbmm.fit(source, sigma=config["fit"]["sigma"])
        agreement = cbmm.efficient.ability_agreement(fit, source)
        assert audit["ability_rank_correlation"].to_numpy() == pytest.approx(
            agreement.observed, abs=1e-9)
        assert audit["implied_rank_correlation"].to_numpy() == pytest.approx(
            agreement.implied, abs=1e-9)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            library = cbmm.item_audit(fit, source)
        for column in ("negative_discrimination", "key_checked"):
            np.testing.assert_array_equal(audit[column], library[column])
        log = (workdir / f"logs/item_audit/{dataset}.log").read_text()
        assert key_check_summary(library) in log
        for column in ("wrong_way_dependence", "ordinary_dependence"):
            np.testing.assert_allclose(audit[column], library[column], atol=1e-9)


def test_interpretability_uses_the_converged_fit_beside_the_paper_rule(test_run):
    """The rankings come from the converged fit (lower loss than the paper-rule fit from the
    same start), and the summary's *_paper_rule columns are the paper-rule fit's numbers."""
    config, workdir = test_run["config"], test_run["workdir"]
    converged = config["real"]["converged"]
    fits = workdir / "results/fits/real/suite_a/cbmm"
    tight = json.loads(next(fits.glob("converged/s2_1/seed_0/fit.json")).read_text())
    paper = json.loads(next(fits.glob("paper/s2_1/seed_0/fit.json")).read_text())
    assert (tight["tol"], tight["max_iter"]) == (converged["tol"], converged["max_iter"])
    assert paper["tol"] == config["fit"]["tol"]
    assert tight["loss"] < paper["loss"]
    summary = pd.read_csv(workdir / "results/tables/discrimination_summary.csv")
    row = summary.set_index("dataset").loc["suite_a"]
    data = pd.read_csv(TEST_DATA / "suites" / "suite_a.csv", index_col=0)
    for fit_dir, suffix in ((fits / "converged/s2_1/seed_0", ""), (fits / "paper/s2_1/seed_0",
                                                                    "_paper_rule")):
        result = cbmm.FitResult.load(fit_dir)
        numbers = cbmm.metrics.descriptive_metrics(
            result.theta.reindex(data.index.astype(str)).to_numpy(), np.asarray(result.a),
            data.mean(axis=1).to_numpy(),
            top_fraction=config["real"]["interpretability"]["top_fraction"])
        for name, value in numbers.items():
            assert row[name + suffix] == pytest.approx(value, rel=1e-9), name + suffix


def test_job_logs_record_the_slurm_job_id(test_run):
    logs = list(test_run["workdir"].glob("logs/fit_*/**/*.log"))
    assert logs
    for log in logs:
        assert log.read_text().splitlines()[0] == "SLURM_JOB_ID=none"


# --------------------------------------------------------------------------- lint and dry runs

def test_lint_is_clean(tmp_path):
    result = snakemake(tmp_path, "--lint")
    assert result.returncode == 0, result.stderr
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr


def test_the_default_profile_is_picked_up_by_itself(tmp_path):
    """From another folder too: Snakemake looks beside the Snakefile."""
    result = snakemake(tmp_path / "run", "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Using workflow specific profile {REPO / 'profiles' / 'default'}" in result.stderr


def installed(methods):
    """The methods whose software is installed (checked in a child: R must not start here)."""
    check = ("import sys, cbmm\nfor m in sys.argv[1:]:\n    try:\n        cbmm.check_methods([m])\n"
             "        print(m)\n    except cbmm.MethodUnavailableError:\n        pass\n")
    result = subprocess.run([sys.executable, "-c", check, *methods], capture_output=True,
                            text=True, check=True)
    return result.stdout.split()


@pytest.mark.slow  # a DAG of some 1,800 jobs
def test_dry_run_of_the_paper_schedules_the_expected_jobs(tmp_path):
    """The default config (restricted to the installed methods, where one is missing): every
    simulated fit in a batch, batches within the cost target, real data behind the data jobs."""
    overlays = ()
    paper_methods = merged_config()["methods"]
    if installed(paper_methods) != paper_methods:
        overlays = (overlay(tmp_path, "installed", {"methods": installed(paper_methods)}),)
    config = merged_config(*overlays)
    result = snakemake(tmp_path / "run", "--dry-run", "--cores", "1", configfiles=overlays)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = job_counts(result.stdout)

    sim, real = config["simulation"], config["real"]
    n_sim = sum(len(sim["studies"][s]["levels"]) for s in sim["run"]) * sim["replicates"]
    assert n_sim == (5 + 5 + 7 + 9 + 9 + 6 + 6) * 50  # the paper's sizes
    # declared cost of every simulated fit, and the fewest jobs that can hold them: a batch
    # holds fits of the methods of one conda env, a fit above the target alone
    target = config["fit"]["batch_seconds"]
    least = 0
    envs = {}
    for method in config["methods"]:
        envs.setdefault(cbmm.registry.get_method(method).env, []).append(method)
    for methods in envs.values():
        costs = [cbmm.registry.get_method(method).seconds_per_million_cells
                 * design["n_models"] * design["n_items"] / 1e6
                 for study in sim["run"]
                 for design in (dict(sim["defaults"], **{sim["studies"][study]["factor"]: v})
                                for v in sim["studies"][study]["levels"])
                 for method in methods]
        least += sim["replicates"] * sum(cost > target for cost in costs)
        least += math.ceil(sim["replicates"] * sum(c for c in costs if c <= target) / target)
    n_fits = n_sim * len(config["methods"])
    # packing in order (next fit) needs at most twice the fewest jobs; py-irt and mirt fits,
    # each above the target, are one job each
    assert least <= counts["fit_simulation"] <= 2 * least < n_fits
    datasets = (set(real["runtime"]["datasets"]) | set(real["stability"]["datasets"])
                | set(real["interpretability"]["datasets"])
                | {p["dataset"] for p in real["interpretability"]["rankflow"]}
                | {real["interpretability"]["math500"]["dataset"]})
    expected = {
        "aggregate_simulation": 1, "render_sensitivity": 1,
        "build_dataset": len(datasets), "math500_items": 1, "math500_models": 1,
        "metrics_real": len(real["interpretability"]["datasets"]),
        "stability": len(real["stability"]["datasets"]), "math500_tables": 1,
        "uncertainty": len(real["uncertainty"]["datasets"]),
        "validate_method": len(real["validation"]["datasets"]) * len(
            real["validation"]["methods"]),
        "heldout_table": len(real["validation"]["datasets"]),
        **{f"render_abilities_{d}": 1 for d in real["uncertainty"]["datasets"]},
        "efficiency": len(real["efficiency"]["datasets"]),
        "item_audit": len(real["efficiency"]["datasets"]),
        **{f"render_efficiency_{d}": 1 for d in real["efficiency"]["datasets"]},
    }
    assert {rule: counts.get(rule) for rule in expected} == expected
    assert "fit_real" not in counts  # planned once the matrices are built (checkpoint)


@pytest.mark.slow
def test_quick_config_renders_every_figure_and_table(tmp_path):
    """The laptop config (it downloads the suites, so here only its DAG) schedules
    every render rule: all figures and tables of the paper."""
    quick = REPO / "config" / "quick.yaml"
    overlays = [quick]
    quick_methods = merged_config(quick)["methods"]
    if installed(quick_methods) != quick_methods:
        overlays.append(overlay(tmp_path, "installed", {"methods": installed(quick_methods)}))
    config = merged_config(*overlays)
    result = snakemake(tmp_path / "run", "--dry-run", "--cores", "1", configfiles=overlays)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = job_counts(result.stdout)
    n_studies = len(config["simulation"]["run"])
    assert n_studies == 7
    expected = {
        "render_sensitivity": 1, "render_runtime": 1, "render_math500": 1,
        "render_interpretability": 1, "aggregate_stability": 1, "aggregate_runtime": 1,
        "math500_tables": 1,
        **{f"render_efficiency_{d}": 1 for d in config["real"]["efficiency"]["datasets"]},
        **{f"render_rankflow_{d}": 1 for d in config["real"]["interpretability"]["datasets"]},
    }
    assert {rule: counts.get(rule) for rule in expected} == expected


# --------------------------------------------------------------------------- user dataset

NO_REAL_DATA = {"runtime": {"datasets": []}, "stability": {"datasets": []},
                "interpretability": {"datasets": [], "rankflow": [], "math500": {"dataset": None}},
                "uncertainty": {"datasets": []}, "validation": {"datasets": []},
                "efficiency": {"datasets": []}}


def test_a_user_dataset_added_by_config_gets_its_outputs(tmp_path):
    rng = np.random.default_rng(7)
    theta, a, b = rng.normal(size=40), rng.uniform(0.5, 1.5, 30), rng.normal(0, 0.5, 30)
    answers = (rng.random((40, 30)) < 1 / (1 + np.exp(-(np.outer(theta, a) + b)))).astype(float)
    answers[rng.random(answers.shape) < 0.05] = np.nan
    data = pd.DataFrame(answers, index=[f"lab/model-{i}" for i in range(40)],
                        columns=[f"q{j}" for j in range(30)])
    csv = tmp_path / "my_suite.csv"
    data.to_csv(csv, float_format="%.0f")
    mine = overlay(tmp_path, "mine", {
        "datasets": {"my_suite": {"source": "local", "options": {"path": str(csv)}}},
        "simulation": {"run": []},
        "real": {**NO_REAL_DATA, "interpretability": {
            "datasets": ["my_suite"], "rankflow": [], "math500": {"dataset": None}}},
    })
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, mine))
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
    fit = json.loads(next(workdir.glob(
        "results/fits/real/my_suite/cbmm/converged/*/seed_0/fit.json")).read_text())
    assert fit["n_models"] == 40 and fit["n_items"] == 30


def test_reports_on_two_user_datasets_carry_only_what_applies_to_them(tmp_path):
    """A user's two suites in the runtime and interpretability studies: the runtime caption
    names them (not the paper's six), each suite shows its own N, the fidelity report has no
    row about the paper's suites, and a rank-flow figure that cannot be drawn (a damaged
    rankings table) fails its own job only: the other suite's figure stays."""
    rng = np.random.default_rng(11)
    entries = {}
    for name, (n, j) in {"mine_a": (40, 30), "mine_b": (25, 45)}.items():
        theta, a, b = rng.normal(size=n), rng.uniform(0.5, 1.5, j), rng.normal(0, 0.5, j)
        answers = rng.random((n, j)) < 1 / (1 + np.exp(-(np.outer(theta, a) + b)))
        csv = tmp_path / f"{name}.csv"
        pd.DataFrame(answers.astype(float), index=[f"lab/{name}-{i}" for i in range(n)],
                     columns=[f"{k:02d}" for k in range(j)]).to_csv(csv, float_format="%.0f")
        entries[name] = {"source": "local", "options": {"path": str(csv)}}
    mine = overlay(tmp_path, "mine", {
        "datasets": entries, "methods": ["cbmm", "lbfgsb"], "simulation": {"run": []},
        "real": {**NO_REAL_DATA,
                 "runtime": {"datasets": ["mine_b", "mine_a"], "replicates": 1},
                 "interpretability": {"datasets": ["mine_a", "mine_b"], "rankflow": [],
                                      "rankflow_top": 10, "math500": {"dataset": None}}}})
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, mine))
    assert result.returncode == 0, result.stderr[-5000:]
    caption = (workdir / "results/figures/runtime.caption.rst").read_text()
    assert caption.startswith("Runtime on the 2 suites mine_b and mine_a, ordered by")
    assert "Leaderboard" not in caption and "six" not in caption
    ticks = [t.get_text() for t in plot_runtime(
        workdir / "results/tables/runtime_leaderboard.csv").axes[0].get_xticklabels()]
    assert ticks == ["mine_a\nN = 40, J = 30", "mine_b\nN = 25, J = 45"]  # ordered by J
    fidelity = pd.read_csv(workdir / "results/fidelity/fidelity.csv", keep_default_na=False)
    assert not fidelity["note"].str.startswith("not in this run").any()
    paper = load_published().set_index("id")
    assert (paper.loc[fidelity["id"], "dataset"] == "").all()
    # the report's front page says what ran (it listed "Simulation studies: ," before)
    report = snakemake(workdir, "--report", str(workdir / "report.html"),
                       configfiles=(TEST_CONFIG, mine))
    assert report.returncode == 0, report.stderr[-3000:]
    html = (workdir / "report.html").read_text()
    assert "No simulation study in this run." in html and "Simulation studies:" not in html
    assert "Real data: mine_a, mine_b." in html
    # a damaged rankings table: its figure's job fails, the other suite's figure is kept
    kept = {p: p.read_bytes() for p in workdir.glob("results/figures/rankflow_mine_a.*")}
    assert len(kept) == 3
    (workdir / "results/tables/rankings/mine_b.csv").write_text("model,accuracy\n")
    again = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, mine))
    assert again.returncode != 0 and "Error in rule render_rankflow_mine_b" in again.stderr
    assert {p: p.read_bytes() for p in workdir.glob("results/figures/rankflow_mine_a.*")} \
        == kept
    assert (workdir / "results/figures/discrimination.png").is_file()
    # the report: the plain one refuses to start without that figure, `finished` gives
    # what the run did finish
    refused = snakemake(workdir, "--report", str(workdir / "report.html"),
                        configfiles=(TEST_CONFIG, mine))
    assert refused.returncode != 0 and "rankflow_mine_b.png" in refused.stderr
    partial = snakemake(workdir, "--report", str(workdir / "finished.html"), "finished",
                        configfiles=(TEST_CONFIG, mine))
    assert partial.returncode == 0, partial.stderr[-3000:]
    html = (workdir / "finished.html").read_text()
    assert "rankflow_mine_a.png" in html and "discrimination.png" in html
    assert "rankflow_mine_b.png" not in html


def test_a_study_declared_only_in_the_config_gets_its_table_and_figure(tmp_path):
    """A study the paper does not have (its name unknown to cbmm.figures.STUDIES) is drawn
    by what it varies."""
    mine = overlay(tmp_path, "study", {
        "simulation": {"run": ["wide_mar"], "studies": {"wide_mar": {
            "factor": "n_items", "missing": "mar", "levels": [30, 70]}},
            "defaults": {"missing_rate": 0.2}},
        "real": NO_REAL_DATA})
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, mine))
    assert result.returncode == 0, result.stderr[-5000:]
    table = pd.read_csv(workdir / "results/tables/sim_wide_mar.csv")
    assert sorted(set(table["level"])) == [30.0, 70.0] and (table["study"] == "wide_mar").all()
    for ext in ("pdf", "png"):
        assert (workdir / f"results/figures/sensitivity_wide_mar.{ext}").is_file()
    caption = (workdir / "results/figures/sensitivity_wide_mar.caption.rst").read_text()
    assert caption.startswith("Sensitivity analysis under varying numbers of items J")
    fit = cbmm.FitResult.load(next(workdir.glob(
        "results/fits/simulation/wide_mar/level_70/cbmm/rep_0")))
    assert np.size(fit.a) == 70


# --------------------------------------------------------------------------- user methods

TOY = REPO / ".test" / "methods" / "toy.py"
FAULTY = REPO / ".test" / "methods" / "faulty.py"
FIGURE_TEXTS = """
import importlib.util, json, sys
import pandas as pd
for path in sys.argv[3:]:
    spec = importlib.util.spec_from_file_location("user_methods", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
from cbmm.figures import FIGURES
figure = FIGURES[sys.argv[1]].plot(pd.read_csv(sys.argv[2]))
legends = [ax.get_legend() for ax in figure.axes if ax.get_legend()] + list(figure.legends)
print(json.dumps({"legend": [t.get_text() for lg in legends for t in lg.get_texts()],
                  "texts": [t.get_text() for ax in figure.axes for t in ax.texts]}))
"""


def figure_texts(name, table, *modules):
    """Legend entries and texts of a figure drawn from a table in a fresh process that
    registers the user's methods first, as the render job does (this process keeps the
    built-in registry)."""
    done = subprocess.run([sys.executable, "-c", FIGURE_TEXTS, name, str(table), *map(str, modules)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def one_study(tmp_path, name, methods, **extra):
    """Overlay: the given methods on one simulation study and one suite's runtime study."""
    content = {"method_modules": [".test/methods/toy.py", ".test/methods/faulty.py"],
               "methods": methods, "simulation": {"run": ["mcar"]},
               "real": {**NO_REAL_DATA, "runtime": {"datasets": ["suite_a"], "replicates": 2,
                                                    "exclude_methods": []}}}
    for key, value in extra.items():
        content.setdefault(key, {}).update(value)
    return overlay(tmp_path, name, content)


def test_a_method_registered_by_the_user_runs_through_the_workflow(tmp_path):
    """A toy method from .test/methods/toy.py (config key method_modules) appears in the
    simulation table, the runtime table and the figures' legends, with its options checked."""
    config = one_study(tmp_path, "toy", ["cbmm", "toy"],
                       fit={"method_options": {"toy": {"prior": 1.0}}})
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, config))
    assert result.returncode == 0, result.stderr[-5000:]
    sim = pd.read_csv(workdir / "results/tables/sim_mcar.csv")
    toy = sim[sim["method"] == "toy"]
    assert len(toy) == 2 * 2 and (toy["status"] == "converged").all()
    assert (toy["spearman_theta"] > 0.5).all()  # log-odds of success do rank the models
    runtime = pd.read_csv(workdir / "results/tables/runtime_leaderboard.csv")
    assert set(runtime["method"]) == {"cbmm", "toy"}
    assert json.loads(next(workdir.glob(
        "results/fits/simulation/mcar/*/toy/rep_0/fit.json")).read_text())["method"] == "toy"
    for name, table in (("sensitivity_mcar", "sim_mcar"), ("runtime", "runtime_leaderboard")):
        assert (workdir / f"results/figures/{name}.png").is_file()
        legend = figure_texts(name, workdir / f"results/tables/{table}.csv", TOY)["legend"]
        assert "Toy IRT" in legend, (name, legend)


def test_simulated_answers_no_fit_takes_are_failed_rows_not_a_failed_job(tmp_path):
    """A 2 x 2 design draws answers all alike, or (30 % missing) a model without any:
    fit refuses them, and the job died with a traceback; they are failed rows."""
    tiny = overlay(tmp_path, "tiny", {"simulation": {
        "replicates": 6, "defaults": {"n_models": 2, "n_items": 2},
        "studies": {"size_fixN": {"levels": [2, 3]}}}})
    workdir = tmp_path / "run"
    done = snakemake(workdir, "--cores", "2", "results/tables/sim_size_fixN.csv",
                     "results/tables/sim_mcar.csv", configfiles=(TEST_CONFIG, tiny))
    assert done.returncode == 0, done.stderr[-5000:]
    statuses = pd.concat([pd.read_csv(workdir / f"results/tables/sim_{study}.csv")
                          for study in ("size_fixN", "mcar")])["status"]
    failed = statuses[statuses.str.startswith("failed")]
    assert failed.str.startswith("failed: the simulated answers: ").all()
    assert failed.str.contains("the answers cannot tell the models apart").any()
    assert failed.str.contains("with no observed entry").any()
    assert len(failed) < len(statuses)   # the other draws fitted


def test_crashing_and_hanging_methods_become_failed_results(tmp_path):
    """A method that kills its process (SIGSEGV) or never returns is recorded as failed
    ('NA'); the run completes and the figures mark it NA."""
    config = one_study(tmp_path, "faulty", ["cbmm", "crash", "hang"], fit={"timeout_s": 3})
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, config))
    assert result.returncode == 0, result.stderr[-5000:]
    sim = pd.read_csv(workdir / "results/tables/sim_mcar.csv")
    status = sim.groupby("method")["status"].agg(set).to_dict()
    assert not any(s.startswith("failed") for s in status["cbmm"])  # the paper's rule ends them
    assert all(s.startswith("failed:") and ("died" in s or "signal" in s) for s in status["crash"])
    assert status["hang"] == {"failed: timeout after 3 s"}
    # recorded, not crashed: no job log holds a traceback
    logs = list((workdir / "logs").rglob("*.log"))
    assert logs and not [p for p in logs if "Traceback" in p.read_text()]
    assert sim.loc[sim["method"] != "cbmm", list(SIMULATION_METRICS)].isna().all().all()
    runtime = pd.read_csv(workdir / "results/tables/runtime_leaderboard.csv")
    assert runtime.loc[runtime["method"] != "cbmm", "status"].str.startswith("failed").all()
    for name, table in (("sensitivity_mcar", "sim_mcar"), ("runtime", "runtime_leaderboard")):
        assert (workdir / f"results/figures/{name}.png").is_file()
        texts = figure_texts(name, workdir / f"results/tables/{table}.csv", FAULTY)["texts"]
        assert "NA" in texts, (name, texts)


def fit_files(workdir, pattern):
    """{folder: its files' bytes} of the stored fits matching ``pattern``."""
    return {unit.parent: {p.name: p.read_bytes() for p in unit.parent.iterdir()}
            for unit in Path(workdir).glob(f"{pattern}/unit.json")}


@pytest.mark.slow  # a minute of workflow runs
def test_stored_fits_are_refitted_when_their_method_code_changes_or_they_are_damaged(
        tmp_path):
    """The workflow reuses a stored fit only while it is the fit its settings and code give:
    an edited method module refits that method's fits (not the others), a deleted fit
    folder and a truncated abilities.csv are refitted by the next run, whose readers then
    succeed.  Time limits beyond what poll() can wait are honoured, not crashes."""
    module = tmp_path / "toy.py"
    module.write_text(TOY.read_text())
    config = overlay(tmp_path, "store", {
        "method_modules": [str(module)], "methods": ["cbmm", "toy"],
        "fit": {"timeout_s": 1e300, "batch_seconds": 1000},
        "simulation": {"run": ["mcar"]},
        "real": {**NO_REAL_DATA, "interpretability": {
            "datasets": ["suite_a"], "rankflow": [], "math500": {"dataset": None}}}})
    workdir = tmp_path / "run"

    def run():
        done = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, config))
        assert done.returncode == 0, done.stderr[-5000:]
        return done

    run()
    sim = "results/fits/simulation/mcar/*/{method}/rep_*"
    toy, cbmm_fits = fit_files(workdir, sim.format(method="toy")), \
        fit_files(workdir, sim.format(method="cbmm"))
    assert len(toy) == len(cbmm_fits) == 4
    # an edit of the user's module: its fits are refitted (new keys), cBMM's reused
    module.write_text(module.read_text() + "\n# an edit that changes nothing but the code\n")
    run()
    log = (workdir / "logs/fit_simulation/core/batch_0.log").read_text()
    assert "8 fits, 4 reused" in log, log
    assert fit_files(workdir, sim.format(method="cbmm")) == cbmm_fits
    after = fit_files(workdir, sim.format(method="toy"))
    assert all(json.loads(after[d]["unit.json"])["key"] != json.loads(toy[d]["unit.json"])["key"]
               for d in toy)
    # a deleted fit folder is rebuilt, and the job reading it runs again and succeeds
    converged = next(workdir.glob("results/fits/real/suite_a/cbmm/converged/*/seed_0"))
    shutil.rmtree(converged)
    ranking = workdir / "results/tables/rankings/suite_a.csv"
    ranked = ranking.stat().st_mtime_ns
    done = run()
    assert (converged / "unit.json").is_file() and ranking.stat().st_mtime_ns > ranked
    assert "of its fits missing or damaged (first: results/fits/real/suite_a" in done.stderr
    # a truncated abilities.csv beside an intact unit.json is refitted, not reused
    damaged = next(iter(after))
    abilities = damaged / "abilities.csv"
    abilities.write_bytes(abilities.read_bytes()[:20])
    run()
    assert cbmm.FitResult.load(damaged).theta.size == 60
    assert "stored fit damaged (abilities.csv" in "".join(
        p.read_text() for p in workdir.glob("logs/fit_simulation/**/*.log"))
    refitted = fit_files(workdir, sim.format(method="toy"))[damaged]
    assert [refitted[n] for n in ("abilities.csv", "items.csv")] == \
        [after[damaged][n] for n in ("abilities.csv", "items.csv")]  # the same fit again


# --------------------------------------------------------------------------- bad configs

# Every case is checked against the package in tests/test_workflow_plan.py; here one case
# per stage of the check (schema, method modules, dataset entries, method options, levels,
# references) goes through Snakemake, which must stop with the one line and no traceback.
STAGES = ["negative replicates", "method module that cannot be imported",
          "unknown dataset option", "ill-typed method option", "negative number of models",
          "unregistered dataset in a study"]


@pytest.mark.parametrize("case", STAGES)
def test_a_bad_config_stops_before_any_job_naming_the_key(case, tmp_path):
    content, expected = BAD_CONFIGS[case]
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "1",
                       configfiles=(TEST_CONFIG, overlay(tmp_path, "bad", content)))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if expected in line]
    assert len(lines) == 1, (expected, result.stderr[-3000:])
    assert "Traceback" not in result.stderr
    assert not (workdir / "results").exists() and not (workdir / "resources").exists()


@pytest.mark.parametrize("body,expected", [
    ("import sys\nsys.exit(0)\n", "it called sys.exit(0) while being imported"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
     "killed the Python process (SIGSEGV); fix or remove the module"),
])
def test_a_method_module_that_exits_or_crashes_at_import_stops_the_run_with_one_line(
        tmp_path, body, expected):
    """Not Snakemake exiting 0 having done nothing, nor dying with rc -11 and no word."""
    module = tmp_path / "bad_module.py"
    module.write_text(body)
    config = overlay(tmp_path, "bad", {"method_modules": [str(module)]})
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "1", configfiles=(TEST_CONFIG, config))
    assert result.returncode == 1, (result.returncode, result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines() if expected in line]
    assert lines == [f"- method_modules: cannot import '{module}': {expected}"
                     if "sys.exit" in expected else
                     f"- method_modules: importing '{module}' {expected}"], result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert not (workdir / "results").exists()


def test_an_efficiency_study_its_dataset_cannot_split_stops_its_job_with_one_line(tmp_path):
    """real.efficiency.test_share passes the schema's (0, 1) but leaves suite_a's models no
    calibration: the job names the key and the dataset in one line and writes nothing."""
    models = len(pd.read_csv(TEST_DATA / "suites" / "suite_a.csv", index_col=0))
    held = round(0.99 * models)
    assert models - held < 2
    config = overlay(tmp_path, "split", {"real": {
        **NO_REAL_DATA, "efficiency": {"datasets": ["suite_a"], "test_share": 0.99}}})
    workdir = tmp_path / "run"
    target = "results/tables/efficiency/suite_a.csv"
    result = snakemake(workdir, "--cores", "1", target, configfiles=(TEST_CONFIG, config))
    assert result.returncode != 0
    assert "Error in rule efficiency" in result.stderr
    log = (workdir / "logs/efficiency/suite_a.log").read_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1, log
    assert errors[0].endswith(f"real.efficiency, dataset 'suite_a': test_share 0.99 holds out "
                              f"{held} of the {models} models, which leaves {models - held} to "
                              "calibrate on; at least 2 are needed")
    assert "Traceback" not in log
    assert not (workdir / "results/efficiency").exists() and not (workdir / target).exists()
    # 2 calibration models split, but tinyBenchmarks' estimators need 3 (a traceback from
    # their refit on one model before)
    share = next(s / 100 for s in range(1, 100)
                 if models - held_out(models, s / 100) == 2)
    config = overlay(tmp_path, "two", {"real": {
        **NO_REAL_DATA, "efficiency": {"datasets": ["suite_a"], "test_share": share}}})
    result = snakemake(workdir, "--cores", "1", target, configfiles=(TEST_CONFIG, config))
    assert result.returncode != 0
    log = (workdir / "logs/efficiency/suite_a.log").read_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "Traceback" not in log, log
    assert "real.efficiency.tinybenchmarks, dataset 'suite_a': its " in errors[0]
    assert "leave 2 to calibrate on" in errors[0] and "need at least 3" in errors[0]


def test_an_efficiency_study_with_no_k_below_the_items_stops_its_job_with_one_line(tmp_path):
    """real.efficiency.k all at least suite_a's items: nothing to measure, said in one line
    naming the key, not an empty table."""
    items = pd.read_csv(TEST_DATA / "suites" / "suite_a.csv", index_col=0).shape[1]
    config = overlay(tmp_path, "k", {"real": {
        **NO_REAL_DATA, "efficiency": {"datasets": ["suite_a"], "k": [items, items + 5]}}})
    workdir = tmp_path / "run"
    target = "results/tables/efficiency/suite_a.csv"
    result = snakemake(workdir, "--cores", "1", target, configfiles=(TEST_CONFIG, config))
    assert result.returncode != 0
    log = (workdir / "logs/efficiency/suite_a.log").read_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and errors[0].endswith(
        f"real.efficiency.k, dataset 'suite_a': every k ({items}, {items + 5}) is at least "
        f"its {items} items; give some below {items}"), log
    assert not (workdir / target).exists()


def test_adaptive_tests_keep_the_2pl_intervals_where_the_config_turns_the_scale_off(tmp_path):
    """real.efficiency.adaptive.interval_scale: false: no scale, each test's interval is
    predict_accuracy's of its answers on its split's calibration."""
    config = overlay(tmp_path, "plain", {"real": {
        **NO_REAL_DATA, "efficiency": {"datasets": ["suite_a"],
                                       "adaptive": {"interval_scale": False}}}})
    workdir = tmp_path / "run"
    target = "results/tables/adaptive/suite_a.csv"
    result = snakemake(workdir, "--cores", "1", target, configfiles=(TEST_CONFIG, config))
    assert result.returncode == 0, result.stderr[-3000:]
    tests = pd.read_csv(workdir / target, dtype={"model": str})
    assert (tests["interval_scale"] == 1).all()
    settings = merged_config(TEST_CONFIG, config)
    efficiency = settings["real"]["efficiency"]
    table = read_matrix(workdir / "resources/matrices/suite_a.parquet")
    calibrated = calibrations(table, splits=efficiency["splits"],
                              test_share=efficiency["test_share"], seed=efficiency["seed"],
                              fit_options={"sigma": settings["fit"]["sigma"]})
    assert len(tests) == len(calibrated[0].held) * efficiency["splits"] * len(
        efficiency["adaptive"]["max_exposures"])
    assert (tests["calibration_status"]
            == tests["split"].map(lambda split: calibrated[split].result.status)).all()
    for _, test in tests.iterrows():
        expected = cbmm.predict_accuracy(table.loc[[test["model"]], item_list(test["items"])],
                                         calibrated[test["split"]].result)
        np.testing.assert_allclose(test[["predicted", "lower", "upper"]].astype(float),
                                   expected.iloc[0][["accuracy", "lower", "upper"]],
                                   rtol=1e-8)


def test_held_models_gives_a_small_dataset_the_splits_that_hold_out_that_many(tmp_path):
    """real.efficiency.held_models 40: suite_a's 80 models, 16 held out per split, get
    ceil(40 / 16) = 3 splits where the config asks for 2; the selection rows and the
    adaptive tests of each split are its held-out models."""
    config = overlay(tmp_path, "held", {"real": {
        **NO_REAL_DATA, "efficiency": {"datasets": ["suite_a"], "held_models": 40,
                                       "adaptive": {"interval_scale": False}}}})
    workdir = tmp_path / "run"
    targets = ["results/tables/efficiency/suite_a.csv", "results/tables/adaptive/suite_a.csv"]
    result = snakemake(workdir, "--cores", "1", *targets, configfiles=(TEST_CONFIG, config))
    assert result.returncode == 0, result.stderr[-3000:]
    table = read_matrix(workdir / "resources/matrices/suite_a.parquet")
    efficiency = merged_config(TEST_CONFIG, config)["real"]["efficiency"]
    assert efficiency["splits"] == 2 and len(table) == 80
    splits = model_splits(80, 3, efficiency["test_share"], efficiency["seed"])
    held = {split: sorted(table.index[rows]) for split, (_, rows) in enumerate(splits)}
    rows = pd.read_csv(workdir / "results/efficiency/suite_a/selection.csv", dtype={"model": str})
    tests = pd.read_csv(workdir / targets[1], dtype={"model": str})
    for frame in (rows, tests):
        assert {split: sorted(set(group["model"])) for split, group in
                frame.groupby("split")} == held
    log = (workdir / "logs/efficiency/suite_a.log").read_text()
    assert "suite_a: 3 splits of its 80 models, 16 held out in each" in log


# --------------------------------------------------------------------------- offline

def _closed_port_endpoint() -> str:
    """A URL on a port nothing listens on: offline, as far as a client can tell."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_a_failed_download_stops_only_its_job_with_one_line(tmp_path):
    """A dataset whose server cannot be reached fails its build job with one line naming
    it; the other jobs (here a simulation study) finish."""
    offline = overlay(tmp_path, "offline", {
        "release": {"base_url": _closed_port_endpoint(), "repo": "x/y",
                    "commit": "0" * 40},
        "datasets": {"remote": {"source": "release", "options": {
            "file": "data/remote.csv", "sha256": "0" * 64, "retries": 0}}},
        "simulation": {"run": ["mcar"]},
        "real": {**NO_REAL_DATA, "interpretability": {
            "datasets": ["remote"], "rankflow": [], "math500": {"dataset": None}}},
    })
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "2", configfiles=(TEST_CONFIG, offline))
    assert result.returncode != 0
    assert "Error in rule build_dataset" in result.stderr
    assert (workdir / "results/tables/sim_mcar.csv").is_file()  # the rest went on
    log = (workdir / "logs/build_dataset/remote.log").read_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "dataset 'remote'" in errors[0], log
    assert "Offline or behind a firewall?" in errors[0]
    # what to do: a pre-filled cache (the file's place in it) or a local copy
    assert "resources/cache/release/" in errors[0] and "source 'local'" in errors[0]
    assert "Traceback" not in log


def test_a_local_file_that_cannot_be_read_names_its_dataset(tmp_path):
    """A local dataset whose label column is not in its file: its build job's one line
    names the dataset as well as the file."""
    mine = overlay(tmp_path, "mine", {
        "datasets": {"mine": {"source": "local", "options": {
            "path": str(TEST_DATA / "suites" / "suite_a.csv"), "label_column": "nope"}}},
        "simulation": {"run": []},
        "real": {**NO_REAL_DATA, "interpretability": {
            "datasets": ["mine"], "rankflow": [], "math500": {"dataset": None}}},
    })
    workdir = tmp_path / "run"
    result = snakemake(workdir, "--cores", "1", configfiles=(TEST_CONFIG, mine))
    assert result.returncode != 0 and "Error in rule build_dataset" in result.stderr
    log = (workdir / "logs/build_dataset/mine.log").read_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and " ERROR dataset 'mine': " in errors[0], log
    assert "suite_a.csv" in errors[0] and "nope" in errors[0]
    assert "Traceback" not in log


def _failed_math500_job(tmp_path, rule: str, settings: dict) -> str:
    """Runs the MATH-500 metadata job ``rule`` with ``settings`` under
    real.interpretability.math500; checks that it failed with one ERROR line in its log, no
    traceback and no output, and returns that line's message."""
    config = overlay(tmp_path, rule, {"real": {"interpretability": {"math500": settings}}})
    workdir, output = tmp_path / "run", f"resources/metadata/{rule}.csv"
    result = snakemake(workdir, "--cores", "1", output, configfiles=(TEST_CONFIG, config))
    assert result.returncode != 0 and f"Error in rule {rule}" in result.stderr
    log = (workdir / f"logs/{rule}/{rule}.log").read_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "Traceback" not in log, log
    assert not (workdir / output).exists()
    return errors[0].split(" ERROR ", 1)[1]


def test_a_bad_math500_model_table_stops_its_job_with_one_line(tmp_path):
    """A model table without a column the metadata needs: one line naming the key, the
    file and the column."""
    table = pd.read_csv(REPO / "config" / "math500_models.csv").drop(columns="params_b")
    bad = tmp_path / "models.csv"
    table.to_csv(bad, index=False)
    error = _failed_math500_job(tmp_path, "math500_models", {"models": str(bad)})
    assert error.startswith(f"real.interpretability.math500.models: {bad}: missing column(s)")
    assert "params_b" in error


@pytest.mark.slow  # our client's retries (15 s) and the Hub client's
def test_a_math500_model_refresh_that_cannot_reach_the_hub_stops_with_one_line(
        tmp_path, monkeypatch):
    """refresh_models from a Hub that cannot be reached: one line naming the key and what
    to set."""
    monkeypatch.setenv("HF_ENDPOINT", _closed_port_endpoint())
    error = _failed_math500_job(tmp_path, "math500_models", {"refresh_models": True})
    assert error.startswith("real.interpretability.math500.refresh_models: model_info ")
    assert error.endswith("(offline: set it to false)")


@pytest.mark.slow  # about 2 minutes of the Hub client's retries and our own
def test_math500_items_that_cannot_be_fetched_stop_their_job_with_one_line(
        tmp_path, monkeypatch):
    """The MATH-500 items from a Hub that cannot be reached (the default source, offline):
    one line naming the key and what to set instead."""
    monkeypatch.setenv("HF_ENDPOINT", _closed_port_endpoint())
    error = _failed_math500_job(tmp_path, "math500_items", {"items": "hub"})
    assert error.startswith("real.interpretability.math500.items 'hub': ")
    assert "set real.interpretability.math500.items to a local copy" in error


@pytest.mark.slow  # a Snakemake run of 15 s: the default suite stays under its 15 minutes
def test_a_math500_matrix_whose_items_are_not_test_jsonl_lines_stops_with_one_line(tmp_path):
    """A user's MATH-500 matrix whose items are named otherwise than by their line in
    test.jsonl: the tables job and the efficiency job (balanced over subjects) died with
    tracebacks, the latter after its whole selection study; each is one line naming the
    key and the rule for the labels, and writes nothing."""
    matrix = pd.read_csv(TEST_DATA / "math500" / "MATH_500.csv", index_col=0)
    matrix.columns = [f"q{item}" for item in matrix.columns]
    path = tmp_path / "renamed.csv"
    matrix.to_csv(path)
    config = overlay(tmp_path, "renamed", {
        "datasets": {"MATH_500": {"source": "local", "options": {"path": str(path)}}},
        "real": {**NO_REAL_DATA,
                 "interpretability": {**NO_REAL_DATA["interpretability"],
                                      "datasets": ["MATH_500"],
                                      "math500": {"dataset": "MATH_500"}},
                 "efficiency": {"datasets": ["MATH_500"]}}})
    workdir = tmp_path / "run"
    targets = ["results/tables/math500_items.csv", "results/tables/efficiency/MATH_500.csv"]
    result = snakemake(workdir, "--cores", "2", "--keep-going", *targets,
                       configfiles=(TEST_CONFIG, config))
    assert result.returncode != 0
    for log, start, end in (
            ("math500_tables/math500_tables.log", "real.interpretability.math500 (",
             f"has no item metadata for {matrix.shape[1]} of the matrix's {matrix.shape[1]} "
             "items, e.g. ['q"),
            ("efficiency/MATH_500.log", "real.efficiency.adaptive.content, dataset "
             f"'MATH_500': {matrix.shape[1]} of its {matrix.shape[1]} items have no subject "
             "in ", "its items must be labelled by their line in MATH-500's test.jsonl")):
        text = (workdir / "logs" / log).read_text()
        errors = [line.split(" ERROR ", 1)[1] for line in text.splitlines() if " ERROR " in line]
        assert len(errors) == 1 and errors[0].startswith(start) and end in errors[0], text
        assert "Traceback" not in text
    assert "selection study" not in (workdir / "logs/efficiency/MATH_500.log").read_text()
    assert not any((workdir / target).exists() for target in targets)
