"""The command line, run as a real subprocess like a user would."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from cbmm.simulate import simulate


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "cbmm", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


@pytest.fixture(scope="module")
def table():
    sim = simulate(80, 30, missing="mcar", missing_rate=0.1, seed=4)
    return pd.DataFrame(sim.responses, index=[f"org/model-{i}" for i in range(80)],
                        columns=[f"item{j}" for j in range(30)])


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_fit_writes_results(tmp_path, table, suffix):
    path = tmp_path / f"responses{suffix}"
    if suffix == ".csv":
        table.to_csv(path)
    else:
        table.to_parquet(path)
    done = run("fit", "--responses", path, "--out", tmp_path / "out", "--tol", "1e-6",
               "--option", "accelerate=squarem")
    assert done.returncode == 0, done.stderr
    abilities = pd.read_csv(tmp_path / "out" / "abilities.csv")
    items = pd.read_csv(tmp_path / "out" / "items.csv")
    meta = json.loads((tmp_path / "out" / "fit.json").read_text())
    assert list(abilities["model"]) == list(table.index)
    assert list(items["item"]) == list(table.columns)
    assert meta["status"] == "converged" and meta["tol"] == 1e-6
    assert meta["info"]["accelerate"] == "squarem"
    assert abilities["theta"].std(ddof=0) == pytest.approx(1.0)


def test_bad_value_is_one_line_error_and_no_output(tmp_path, table):
    bad = table.copy()
    bad.iloc[3, 5] = 7
    path = tmp_path / "bad.csv"
    bad.to_csv(path)
    done = run("fit", "--responses", path, "--out", tmp_path / "out")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "bad.csv" in lines[0] and "row 3 ('org/model-3')" in lines[0]
    assert "column 5 ('item5')" in lines[0]
    assert not (tmp_path / "out").exists()


def test_non_numeric_cell_and_missing_file(tmp_path, table):
    bad = table.astype(object)
    bad.iloc[2, 1] = "yes"
    path = tmp_path / "text.csv"
    bad.to_csv(path)
    done = run("fit", "--responses", path, "--out", tmp_path / "out")
    assert done.returncode == 2
    assert "value 'yes' at row 2 ('org/model-2'), column 1 ('item1')" in done.stderr
    done = run("fit", "--responses", tmp_path / "nope.csv", "--out", tmp_path / "out")
    assert done.returncode == 2 and "no such file" in done.stderr
    assert not (tmp_path / "out").exists()


def test_simulate_then_fit_demo(tmp_path):
    done = run("simulate", "--n-models", 200, "--n-items", 100, "--out", tmp_path / "sim.csv",
               "--truth", tmp_path / "truth.npz")
    assert done.returncode == 0, done.stderr
    done = run("fit", "--responses", tmp_path / "sim.csv", "--out", tmp_path / "fit")
    assert done.returncode == 0, done.stderr
    truth = np.load(tmp_path / "truth.npz")
    theta = pd.read_csv(tmp_path / "fit" / "abilities.csv")["theta"].to_numpy()
    assert np.corrcoef(theta, truth["theta"])[0, 1] > 0.95


def test_help_documents_every_option():
    done = run("fit", "--help")
    assert done.returncode == 0
    for option in ("--responses", "--method", "--out", "--sigma", "--tol", "--max-iter",
                   "--seed", "--init-scale", "--option"):
        assert option in done.stdout
