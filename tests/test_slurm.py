"""The workflow on a real single-node SLURM cluster, through the slurm profile.

One scenario, run once per module (fixture ``scenario``) and checked by the
tests below:

1. a tiny configuration (one simulation study, one real dataset whose CSV has
   an invalid cell) runs with ``profiles/slurm`` on the cluster of
   ``tests/slurm_cluster.py``; the dataset's job fails, the simulations finish;
2. the CSV is repaired and the same command is run again (resume);
3. the same configuration runs locally (``profiles/default``).

The settings a cluster without accounting needs (``--slurm-no-account``,
``--slurm-status-command squeue``) and faster status polling are given on
the command line, as a user of such a cluster would.

Skipped where the cluster cannot run (not root, no SLURM and no apt-get, a
system SLURM configuration present); with ``CBMM_REQUIRE_SLURM=1`` (CI) the
same conditions fail instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import slurm_cluster

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SLURM_PROFILE = REPO / "profiles" / "slurm"
LOCAL_PROFILE = REPO / "profiles" / "default"
TEST_CONFIG = REPO / ".test" / "config.yaml"
SUITE = REPO / ".test" / "data" / "suites" / "suite_a.csv"
STUDY = "size_fixN"
TARGETS = [f"results/tables/sim_{STUDY}.csv", "results/tables/rankings/suite.csv"]
#: Seconds one snakemake invocation may take; generous for a loaded 2-core CI runner.
RUN_TIMEOUT_S = 600
#: The injected data error: a response outside {0, 1, empty} in the first data row.
BAD_VALUE, BAD_COLUMN = "7", 3
SLURM_JOB_LINE = re.compile(r"^SLURM_JOB_ID=(\S+)$", re.MULTILINE)


def _require_or_skip(reason: str):
    if os.environ.get("CBMM_REQUIRE_SLURM") == "1":
        pytest.fail(f"CBMM_REQUIRE_SLURM=1 but the SLURM test cannot run: {reason}")
    pytest.skip(reason)


def _ensure_slurm_installed():
    """Skip (or, in CI, fail) unless a single-node cluster can be started here."""
    reason = slurm_cluster.unavailable_reason()
    if reason:
        _require_or_skip(reason)
    try:
        slurm_cluster.install_slurm()
    except slurm_cluster.SlurmSetupError as exc:
        _require_or_skip(f"installing SLURM failed: {exc}")


@pytest.fixture(scope="module")
def cluster():
    _ensure_slurm_installed()
    with slurm_cluster.single_node_slurm() as running:
        yield running


def test_daemons_stop_by_pid():
    """Stopping a cluster leaves none of its daemons and removes its conf link.

    First in the module: it runs before the shared ``cluster`` fixture starts
    (two clusters cannot share the runtime configuration link).
    """
    _ensure_slurm_installed()
    running = slurm_cluster.start_slurm_cluster()
    pids = {name: p.pid for name, p in running.processes.items()}
    assert set(pids) == {"munged", "slurmctld", "slurmd"}
    assert running.node_state() == "idle"
    slurm_cluster.stop_slurm_cluster(running)
    for name, pid in pids.items():
        assert not Path(f"/proc/{pid}").exists(), f"{name} (pid {pid}) still running"
    assert not slurm_cluster.RUNTIME_CONF.is_symlink()
    assert not running.root.exists()


def _write_config(path: Path, dataset_csv: Path) -> Path:
    """Overlay on .test/config.yaml: one simulation study and one local dataset."""
    overlay = {
        "methods": ["cbmm"],
        "datasets": {"suite": {"source": "local", "options": {"path": str(dataset_csv)}}},
        "simulation": {"replicates": 2, "run": [STUDY]},
        "real": {
            "runtime": {"datasets": []},
            "stability": {"datasets": []},
            "interpretability": {"datasets": ["suite"], "rankflow": []},
        },
    }
    path.write_text(yaml.safe_dump(overlay))
    return path


def _snakemake(workdir: Path, config: Path, env: dict, *options: str
               ) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
        "--directory", str(workdir),
        "--configfile", str(TEST_CONFIG), str(config),
        *options, *TARGETS,
    ]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)


def _slurm_run(cluster, workdir: Path, config: Path) -> subprocess.CompletedProcess:
    env = cluster.env
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return _snakemake(
        workdir, config, env,
        "--workflow-profile", str(SLURM_PROFILE),
        # A cluster without accounting (slurmdbd): no account, squeue for status.
        "--slurm-no-account", "--slurm-status-command", "squeue",
        # Poll every few seconds instead of every 40 s: the jobs take seconds.
        "--slurm-init-seconds-before-status-checks", "2",
        "--seconds-between-status-checks", "3",
        "--cores", str(cluster.cpus),
    )


def _mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns
            for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def scenario(cluster, tmp_path_factory):
    base = tmp_path_factory.mktemp("slurm_workflow")
    dataset = base / "suite.csv"
    good = SUITE.read_text()
    rows = good.splitlines()
    cells = rows[1].split(",")
    cells[BAD_COLUMN] = BAD_VALUE
    rows[1] = ",".join(cells)
    dataset.write_text("\n".join(rows) + "\n")
    config = _write_config(base / "config.yaml", dataset)

    on_slurm = base / "slurm"
    failed = _slurm_run(cluster, on_slurm, config)
    failed_log_path = on_slurm / "logs" / "build_dataset" / "suite.log"
    failed_log = failed_log_path.read_text() if failed_log_path.is_file() else ""
    sim_fits_after_failure = _mtimes(on_slurm / "results" / "fits" / "simulation")
    dataset.write_text(good)
    resumed = _slurm_run(cluster, on_slurm, config)

    local = base / "local"
    local_run = _snakemake(local, config, dict(os.environ),
                           "--workflow-profile", str(LOCAL_PROFILE), "--cores", "2")
    assert local_run.returncode == 0, local_run.stderr[-5000:]
    jobs = cluster.run("squeue", "--states=all", "--noheader", "--format=%i|%T|%C").stdout
    return {
        "failed": failed, "failed_log": failed_log, "resumed": resumed,
        "slurm": on_slurm, "local": local,
        "sim_fits_after_failure": sim_fits_after_failure,
        "squeue": {line.split("|")[0]: line.split("|")[1:] for line in jobs.split()},
    }


def _log_job_ids(workdir: Path, rule: str) -> dict[str, str]:
    """SLURM_JOB_ID recorded by each log of ``rule``, keyed by log path."""
    ids = {}
    for log in sorted((workdir / "logs" / rule).rglob("*.log")):
        match = SLURM_JOB_LINE.search(log.read_text())
        assert match, f"{log} has no SLURM_JOB_ID line"
        ids[str(log.relative_to(workdir))] = match.group(1)
    return ids


def test_failing_job_is_reported_and_others_finish(scenario):
    failed = scenario["failed"]
    assert failed.returncode != 0
    assert "Error in rule build_dataset" in failed.stderr, failed.stderr[-5000:]
    # The job's own log names the file, the cell (row and column labels) and the value.
    header, first_row = SUITE.read_text().splitlines()[:2]
    log = scenario["failed_log"]
    for expected in (f"suite.csv: value {BAD_VALUE}", repr(header.split(",")[BAD_COLUMN]),
                     repr(first_row.split(",")[0])):
        assert expected in log, (expected, log)
    # keep-going: the simulation batch is independent of the broken dataset
    assert len(scenario["sim_fits_after_failure"]) > 0


def test_rerun_resumes_without_redoing_finished_jobs(scenario):
    resumed = scenario["resumed"]
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    sim_fits = scenario["slurm"] / "results" / "fits" / "simulation"
    assert _mtimes(sim_fits) == scenario["sim_fits_after_failure"]
    assert "rule fit_simulation:" not in resumed.stderr
    # build_dataset is a checkpoint (the real-data fits are batched by the built size)
    assert "checkpoint build_dataset:" in resumed.stderr
    for target in TARGETS:
        assert (scenario["slurm"] / target).is_file(), target


def test_fits_ran_as_batched_slurm_jobs(scenario):
    config = yaml.safe_load(TEST_CONFIG.read_text())
    sim_ids = _log_job_ids(scenario["slurm"], "fit_simulation")
    real_ids = _log_job_ids(scenario["slurm"], "fit_real")
    fits = len(config["simulation"]["studies"][STUDY]["levels"]) * 2  # levels x replicates
    stored = list((scenario["slurm"] / "results" / "fits" / "simulation").rglob("unit.json"))
    assert len(stored) == fits
    # the study's fits are packed into batch jobs (fit.batch_seconds): fewer jobs than fits
    assert 1 <= len(sim_ids) < fits
    # the converged fit and its paper-rule twin share one batch job
    assert len(real_ids) == 1
    real_rows = pd.concat([pd.read_csv(path) for path in
                           (scenario["slurm"] / "results" / "batches" / "real").rglob("*.csv")])
    assert sorted(real_rows["stopping"]) == ["converged", "paper"]
    for log, job_id in {**sim_ids, **real_ids}.items():
        assert job_id.isdigit(), f"{log}: SLURM_JOB_ID={job_id}"
        assert scenario["squeue"].get(job_id, ["unknown"])[0] == "COMPLETED", \
            (log, job_id, scenario["squeue"])
    # one cluster job per batch...
    assert len(set(sim_ids.values())) == len(sim_ids)
    # ...and outside SLURM the logs say so.
    local_ids = _log_job_ids(scenario["local"], "fit_simulation")
    assert set(local_ids.values()) == {"none"}


def test_slurm_fits_equal_local_fits(scenario):
    slurm_fits = scenario["slurm"] / "results" / "fits"
    local_fits = scenario["local"] / "results" / "fits"
    fit_files = sorted(p.relative_to(local_fits) for p in local_fits.rglob("fit.json"))
    assert fit_files == sorted(p.relative_to(slurm_fits) for p in slurm_fits.rglob("fit.json"))
    assert len(fit_files) == 2 * 2 + 2  # simulated (levels x replicates) and real
    for fit_json in fit_files:
        fit_dir = fit_json.parent
        for name in ("abilities.csv", "items.csv"):
            # Same seeds, same single-threaded code: equal up to the CSV round trip.
            pd.testing.assert_frame_equal(
                pd.read_csv(slurm_fits / fit_dir / name),
                pd.read_csv(local_fits / fit_dir / name), check_exact=False, rtol=1e-12)
        on_slurm = json.loads((slurm_fits / fit_json).read_text())
        locally = json.loads((local_fits / fit_json).read_text())
        for key in ("status", "n_iter", "loss", "seed", "method"):
            assert on_slurm[key] == locally[key], (fit_json, key)
