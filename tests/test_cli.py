"""The command line, run as a real subprocess like a user would."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import cbmm
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
    # the library's fit of the same table and settings, written as read
    import cbmm

    fit = cbmm.fit(table, tol=1e-6, accelerate="squarem")
    np.testing.assert_allclose(abilities["theta"], fit.theta, rtol=1e-12)
    np.testing.assert_allclose(items["a"], fit.a, rtol=1e-12)
    np.testing.assert_allclose(items["b"], fit.b, rtol=1e-12)


def test_bootstrap_writes_the_librarys_intervals_at_the_level_and_resampling_asked(tmp_path,
                                                                                   table):
    import cbmm

    table.to_csv(tmp_path / "good.csv")
    done = run("bootstrap", "--responses", tmp_path / "good.csv", "--out", tmp_path / "boot",
               "--n-boot", 12, "--level", 0.8, "--resample", "models", "--seed", 3)
    assert done.returncode == 0, done.stderr
    assert "12 replicates resampling models (0 failed)" in done.stdout
    meta = json.loads((tmp_path / "boot" / "bootstrap.json").read_text())
    assert (meta["n_boot"], meta["resample"], meta["level"]) == (12, "models", 0.8)
    expected = cbmm.bootstrap(table, n_boot=12, level=0.8, resample="models", seed=3)
    items = pd.read_csv(tmp_path / "boot" / "items.csv", index_col="item")
    for name, frame in (("a", expected.a), ("b", expected.b)):
        np.testing.assert_allclose(items[f"{name}_lower"], frame["lower"], rtol=1e-12)
        np.testing.assert_allclose(items[f"{name}_upper"], frame["upper"], rtol=1e-12)

    # the full data's fit by the paper's procedure (--start and --n-starts were refused)
    done = run("bootstrap", "--responses", tmp_path / "good.csv", "--out", tmp_path / "paper",
               "--n-boot", 3, "--start", "random", "--n-starts", 1, "--tol", 1e-4)
    assert done.returncode == 0, done.stderr
    fit = json.loads((tmp_path / "paper" / "bootstrap.json").read_text())["fit"]
    assert (fit["info"]["start"], fit["info"]["n_starts"], fit["tol"]) == ("random", 1, 1e-4)


def test_bad_value_is_one_line_error_and_no_output(tmp_path, table):
    bad = table.copy()
    bad.iloc[3, 5] = 7
    path = tmp_path / "bad.csv"
    bad.to_csv(path)
    done = run("fit", "--responses", path, "--out", tmp_path / "out")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "bad.csv" in lines[0] and "line 5 (model 'org/model-3', item 'item5')" in lines[0]
    assert not (tmp_path / "out").exists()


def test_non_numeric_cell_and_missing_file(tmp_path, table):
    bad = table.astype(object)
    bad.iloc[2, 1] = "yes"
    path = tmp_path / "text.csv"
    bad.to_csv(path)
    done = run("fit", "--responses", path, "--out", tmp_path / "out")
    assert done.returncode == 2
    assert "value 'yes' at line 4 (model 'org/model-2', item 'item1')" in done.stderr
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


# ------------------------------------------------------------- bad input, outputs, errors

def run_with(code, *args, cwd=None, env=None):
    """Run ``code`` (which may register toy methods) and then the CLI's main()."""
    script = (f"import sys, os, time, signal, cbmm\n{code}\nfrom cbmm.cli import main\n"
              "sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env)


INTERRUPTED_READ = """
import io, pandas
real_read_csv = pandas.read_csv
class Interrupted(io.RawIOBase):  # a Ctrl-C that arrives while pandas reads the file
    def __init__(self, path):
        self.file = open(path, "rb")
    def readable(self):
        return True
    def readinto(self, buffer):
        os.kill(os.getpid(), signal.SIGINT)
        return self.file.readinto(buffer)
pandas.read_csv = lambda path, *a, **k: real_read_csv(io.BufferedReader(Interrupted(path)), *a, **k)
"""


@pytest.mark.parametrize("command", [["fit", "--out", "fit"], ["validate", "--out", "v.csv"]])
def test_a_ctrl_c_while_a_table_is_read_is_an_interruption_not_a_bad_file(workdir, command):
    """pandas' parser turns it into "Calling read(nbytes) on source failed", a ParserError:
    the command blamed the file (exit 2)."""
    done = run_with(INTERRUPTED_READ, command[0], "--responses", "good.csv", *command[1:],
                    cwd=workdir)
    assert (done.returncode, done.stderr) == (130, "error: interrupted\n")
    assert not (workdir / command[-1]).exists()


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def workdir(tmp_path, table):
    table.to_csv(tmp_path / "good.csv")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    (tmp_path / "taken.csv").write_text("old")
    (tmp_path / "allone.csv").write_text("model,q1,q2\nm1,1,1\nm2,1,\n")
    (tmp_path / "prev").mkdir()
    for name in ("abilities.csv", "items.csv", "fit.json"):
        (tmp_path / "prev" / name).write_text("old")
    (tmp_path / "boot").mkdir()
    for name in ("abilities.csv", "items.csv", "prob_better.csv", "bootstrap.json"):
        (tmp_path / "boot" / name).write_text("old")
    return tmp_path


FIT = ["fit", "--responses", "good.csv"]
SIM = ["simulate", "--n-models", "20", "--n-items", "10"]
BAD_ARGUMENTS = [
    (["fit"], "required: --responses, --out"),
    (["fit", "--responses", "nope.csv", "--out", "o"], "--responses nope.csv: no such file"),
    (["fit", "--responses", "adir", "--out", "o"], "--responses adir: is a folder"),
    (FIT + ["--out", "o", "--sigma", "0"],
     "argument --sigma: expected a number in [1e-300, 1e+300], got '0'"),
    (FIT + ["--out", "o", "--sigma", "1e301"], "argument --sigma: expected a number in [1e-300"),
    (FIT + ["--out", "o", "--tol", "inf"], "argument --tol: expected a number > 0, got 'inf'"),
    (FIT + ["--out", "o", "--timeout", "inf"],
     "argument --timeout: expected 'auto', a number > 0 (none for no limit), got 'inf'"),
    (FIT + ["--out", "o", "--timeout", "off"], "(none for no limit), got 'off'"),
    (FIT + ["--out", "boot", "--force"],
     "--out boot: holds another result's prob_better.csv, bootstrap.json; write into another"),
    (["bootstrap", "--responses", "good.csv", "--out", "prev", "--force"],
     "--out prev: holds another result's fit.json; write into another folder"),
    (FIT + ["--out", "o", "--n-starts", "x"], "--n-starts: expected an integer >= 1 (none for "
     "the method's default), got 'x'"),
    (FIT + ["--out", "o", "--sigma", "abc"], "got 'abc'"),
    (FIT + ["--out", "o", "--sigma", "nan"], "--sigma"),
    (FIT + ["--out", "o", "--tol", "inf"], "--tol"),
    (FIT + ["--out", "o", "--max-iter", "1.5"], "argument --max-iter: expected an integer >= 1"),
    (FIT + ["--out", "o", "--seed", "-1"], "argument --seed: expected an integer >= 0"),
    (FIT + ["--out", "o", "--seed", "abc"], "--seed"),
    (FIT + ["--out", "o", "--init-scale", "0"], "--init-scale"),
    (FIT + ["--out", "o", "--verbose", "-2"], "--verbose"),
    (FIT + ["--out", "o", "--timeout", "soon"], "--timeout"),
    (FIT + ["--out", "o", "--timeout", "5", "--no-isolate"], "--timeout needs the worker"),
    (FIT + ["--out", "o", "--method", "nope"], "unknown method 'nope'"),
    (FIT + ["--out", "o", "--method", "lbfgsb", "--option", "maxcor=abc"],
     "--option maxcor=abc: option 'maxcor' must be an integer >= 1, got 'abc'"),
    (FIT + ["--out", "o", "--method", "lbfgsb", "--option", "maxcor=2.5"], "maxcor"),
    (FIT + ["--out", "o", "--option", "bogus=1"],
     "--option bogus: method 'cbmm' has no such option; its options are: accelerate"),
    (FIT + ["--out", "o", "--option", "accelerate=anderson"], "accelerate"),
    (FIT + ["--out", "o", "--option", "novalue"], "expected KEY=VALUE"),
    (FIT + ["--out", "afile"], "--out afile: exists and is not a folder"),
    (FIT + ["--out", "prev"], "already holds abilities.csv, items.csv, fit.json; pass --force"),
    (FIT + ["--out", "afile/sub"], "afile is not a folder"),
    (FIT + ["--out", ""], "argument --out: expected a path, got ''"),
    (FIT + ["--out", " "], "argument --out: expected a path"),
    (SIM + ["--out", "s.csv", "--n-models", "-5"], "argument --n-models: expected an integer >= 2"),
    (SIM + ["--out", "s.csv", "--n-models", "1"], "--n-models"),
    (SIM + ["--out", "s.csv", "--n-models", "2.5"], "--n-models"),
    (SIM + ["--out", "s.csv", "--n-items", "0"], "--n-items"),
    (SIM + ["--out", "s.csv", "--sigma", "-1"], "--sigma"),
    (SIM + ["--out", "s.csv", "--sigma", "inf"], "--sigma"),
    (SIM + ["--out", "s.csv", "--sigma", "1e-320"],
     "argument --sigma: expected a number in [1e-300, 1e+300], got '1e-320'"),
    (["score", "--responses", "good.csv", "--items", "prev", "--out", "s.csv", "--sigma",
      "1e-320"], "argument --sigma: expected a number in [1e-300, 1e+300], got '1e-320'"),
    (SIM + ["--out", "s.csv", "--sparsity", "1"],
     "argument --sparsity: expected a number in [0, 1)"),
    (SIM + ["--out", "s.csv", "--missing", "bogus"], "--missing"),
    (SIM + ["--out", "s.csv", "--missing-rate", "2"], "--missing-rate"),
    (SIM + ["--out", "s.csv", "--missing-rate", "nan"], "--missing-rate"),
    (SIM + ["--out", "s.csv", "--seed", "-1"], "--seed"),
    (SIM + ["--out", "s.csv", "--missing", "mcar", "--missing-rate", "0.99"],
     "item(s) without an observed answer, which no fit takes; lower --missing-rate"),
    (SIM + ["--out", "s.npz"], "writes a CSV table; name the file .csv"),
    (SIM + ["--out", "s.csv", "--missing-rate", "0.5"],
     "--missing-rate 0.5: --missing none draws no missing cell; choose --missing mcar, mar or "
     "mnar"),
    (["fit", "--responses", "allone.csv", "--out", "o"],  # said 'responses: every ...'
     "allone.csv: every observed answer is correct: the answers cannot tell the models apart"),
    (SIM + ["--out", "s.csv", "--missing", "mar"],  # drew nothing missing, exit 0
     "--missing mar needs --missing-rate above 0"),
    (["validate", "--responses", "good.csv", "--out", "v.csv", "--se"],  # doubled the time
     "unrecognized arguments: --se"),
    (FIT + ["--out", "o", "--option", "prior=none", "--option", "prior=normal"],
     "--option prior: given twice"),
    (FIT + ["--out", "o", "--sigma", "1", "--sigma", "2"],
     "cbmm fit: argument --sigma: given twice; give it once"),
    (SIM + ["--out", "s.csv", "--seed", "1", "--seed=1"], "argument --seed: given twice"),
    (["data", "import", "good.csv", "--out", "x.parquet", "--name", "a", "--name", "b"],
     "argument --name: given twice"),
    (SIM + ["--out", "sdir/"], "argument --out: 'sdir/' names a folder; give a file name"),
    (SIM + ["--out", "s.csv", "--truth", "t.csv"], "--truth t.csv: this writes a NumPy .npz"),
    (SIM + ["--out", "s.csv", "--truth", "t/.."], "argument --truth: 't/..' names a folder"),
    (SIM, "required: --out"),
    (SIM + ["--out", "adir"], "--out adir: is a folder"),
    (SIM + ["--out", "taken.csv"], "--out taken.csv: exists; pass --force"),
    (SIM + ["--out", "afile/s.csv"], "afile is not a folder"),
    (SIM + ["--out", "t", "--truth", "t"], "--out and --truth name the same file"),
    (SIM + ["--out", "t.csv", "--truth", "adir"], "--truth adir: is a folder"),
    (["fit", "--responses", "prev/items.csv", "--out", "prev", "--force"],
     "--responses and --out name the same file prev/items.csv"),
    (["bootstrap", "--responses", "boot/prob_better.csv", "--out", "boot", "--force"],
     "--responses and --out name the same file boot/prob_better.csv"),
    (SIM + ["--out", "-"], "--out -: this command writes a file, not to standard output"),
    (FIT + ["--out", "-"], "--out -: this command writes a folder of files, not to standard "
                           "output; name it"),
    (["methods", "extra"], "unrecognized arguments: extra"),
    ([], "required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["data", "build"], "required"),
    (["data", "summary", "nope.parquet"], "nope.parquet"),
]


@pytest.fixture
def main_in(monkeypatch, capsys):
    """``cbmm.cli.main`` called in this process from a folder: (status, stdout, stderr).

    The same function the ``cbmm`` command runs, without a Python start-up per case;
    the subprocess tests above cover the process boundary.
    """
    from cbmm.cli import main

    def call(args, cwd):
        monkeypatch.chdir(cwd)
        status = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return status, out, err

    return call


@pytest.mark.parametrize("args,message", BAD_ARGUMENTS, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_bad_input_is_one_line_exit_2_and_nothing_written(workdir, main_in, args, message):
    before = files_under(workdir)
    status, _, err = main_in(args, workdir)
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error: " in lines[0] and message in lines[0]
    assert files_under(workdir) == before
    assert (workdir / "taken.csv").read_text() == "old"
    assert (workdir / "prev" / "fit.json").read_text() == "old"


def test_bad_input_through_the_command(workdir):
    for args in (FIT + ["--out", "o", "--option", "maxcor=abc", "--method", "lbfgsb"],
                 SIM + ["--out", "s.csv", "--n-models", "-5"], ["fit"]):
        done = run(*args, cwd=workdir)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (workdir / "o").exists() and not (workdir / "s.csv").exists()


def test_force_replaces_earlier_results(workdir, main_in):
    assert main_in(FIT + ["--out", "prev", "--force"], workdir)[0] == 0
    assert json.loads((workdir / "prev" / "fit.json").read_text())["status"] == "converged"
    assert main_in(SIM + ["--out", "taken.csv", "--force"], workdir)[0] == 0
    assert (workdir / "taken.csv").read_text().startswith("model,")


def test_simulate_writes_both_files_into_new_folders(workdir, main_in):
    assert main_in(SIM + ["--out", "a/b/sim.csv", "--truth", "c/d/truth"], workdir)[0] == 0
    truth = np.load(workdir / "c" / "d" / "truth")  # the name given, no suffix added
    assert truth["theta"].shape == (20,)
    assert pd.read_csv(workdir / "a" / "b" / "sim.csv", index_col=0).shape == (20, 10)


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_outputs_honour_the_umask(workdir, main_in, umask, mode):
    import os
    import stat

    old = os.umask(umask)
    try:
        assert main_in(FIT + ["--out", "fit"], workdir)[0] == 0
        assert main_in(SIM + ["--out", "sim.csv"], workdir)[0] == 0
    finally:
        os.umask(old)
    for path in ["sim.csv", "fit/fit.json", "fit/abilities.csv", "fit/items.csv"]:
        assert stat.S_IMODE((workdir / path).stat().st_mode) == mode, path


TOY_METHODS = """
def crash(responses, theta0, a0, b0, **kw):
    os.kill(os.getpid(), signal.SIGSEGV)
def hang(responses, theta0, a0, b0, **kw):
    time.sleep(120)
def words(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0.astype(str), a0, b0, [], 1, "converged", 0.0)
def uncounted(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0, a0, b0, [], None, "converged", 0.0)
cbmm.register_method("crash", crash)
cbmm.register_method("hang", hang)
cbmm.register_method("words", words)
cbmm.register_method("uncounted", uncounted)
"""


@pytest.mark.parametrize("method,extra,status", [
    ("crash", [], "failed: worker process killed by signal SIGSEGV"),
    ("hang", ["--timeout", "1"], "failed: timeout after 1 s"),
    ("words", [], "failed: the solver returned theta of dtype <U"),
    ("uncounted", [], "failed: the solver returned n_iter=None, not a count of iterations"),
])
def test_a_crashing_or_hanging_method_is_a_recorded_failure(workdir, method, extra, status):
    done = run_with(TOY_METHODS, *FIT, "--out", "fit", "--method", method, *extra, cwd=workdir)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{method}: {status}" in done.stdout
    meta = json.loads((workdir / "fit" / "fit.json").read_text())
    assert meta["status"].startswith(status) and meta["loss"] is None
    assert pd.read_csv(workdir / "fit" / "abilities.csv")["theta"].isna().all()


def test_a_bootstrap_whose_fit_failed_exits_1_as_fit_does(workdir):
    done = run_with(TOY_METHODS, "bootstrap", "--responses", "good.csv", "--out", "boot2",
                    "--method", "crash", "--n-boot", "2", cwd=workdir)
    assert done.returncode == 1, done.stderr
    assert done.stderr == ("warning: crash: failed: worker process killed by signal SIGSEGV: no "
                           "estimate (NaN)\n"
                           "error: bootstrap: the fit of the full data failed (failed: worker "
                           "process killed by signal SIGSEGV)\n")
    assert not (workdir / "boot2").exists()


def test_strict_fit_exits_3_where_the_status_is_no_answer(workdir, main_in):
    """``--strict``: the result is written either way; the exit status says whether it is
    an answer (a scheduled run must not take max_iter for a fit)."""
    status, out, err = main_in(["fit", "--responses", "good.csv", "--out", "short",
                                "--max-iter", "2", "--n-starts", "1", "--strict"], workdir)
    assert status == 3 and "cbmm: max_iter" in out, err
    assert cbmm.FitResult.load(workdir / "short").status == "max_iter"
    status, _, err = main_in(["fit", "--responses", "good.csv", "--out", "short",
                              "--max-iter", "2", "--n-starts", "1", "--force"], workdir)
    assert status == 0, err  # without --strict, as before
    status, out, err = main_in(["fit", "--responses", "good.csv", "--out", "whole",
                                "--strict"], workdir)
    assert (status, cbmm.FitResult.load(workdir / "whole").status) == (0, "converged"), err


def test_validate_summarises_the_fit_beside_its_best_baseline(workdir, main_in):
    status, out, err = main_in(["validate", "--responses", "good.csv", "--out", "v.csv",
                                "--folds", "3"], workdir)
    assert status == 0, err
    table = pd.read_csv(workdir / "v.csv")
    losses = {name: table[f"{name}_log_loss"].mean()
              for name in ("item_mean", "model_mean", "additive")}
    best = min(losses, key=losses.get)
    words = {"item_mean": "item-mean", "model_mean": "model-mean", "additive": "additive (Rasch)"}
    assert out == (f"3 folds: held-out log loss {table['log_loss'].mean():.4f}, AUC "
                   f"{table['auc'].mean():.4f}; best baseline {words[best]}: log loss "
                   f"{losses[best]:.4f}, AUC {table[f'{best}_auc'].mean():.4f} -> v.csv\n")
    # a warning line exactly when the fit loses to that baseline
    assert ("warning: the cbmm fit predicts held-out answers worse than" in err) == (
        table["log_loss"].mean() > losses[best])


def test_validate_verbose_logs_each_fold_to_stderr(workdir):
    done = run("validate", "--responses", workdir / "good.csv", "--out", workdir / "v.csv",
               "--folds", "2", "--verbose", "1000")
    assert done.returncode == 0, done.stderr
    statuses = pd.read_csv(workdir / "v.csv")["status"]
    assert [line.split(", ")[0] for line in done.stderr.splitlines()
            if line.startswith("cross_validate:")] == [
        f"cross_validate: fold {k} of 2 fitted ({s})" for k, s in enumerate(statuses, 1)]


def test_validate_warns_when_the_fit_loses_to_a_baseline(tmp_path, main_in):
    sim = simulate(60, 60, seed=1, missing="mcar", missing_rate=0.8)
    pd.DataFrame(sim.responses).to_csv(tmp_path / "sparse.csv")
    status, out, err = main_in(["validate", "--responses", "sparse.csv", "--out", "v.csv",
                                "--folds", "3", "--n-starts", "1"], tmp_path)  # as the library's
    assert status == 0 and "best baseline additive (Rasch)" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "warning: the cbmm fit predicts held-out answers worse than the additive (Rasch) "
        "baseline (log loss ")


def test_validate_fails_with_exit_1_when_every_fold_failed(workdir):
    done = run_with(TOY_METHODS, "validate", "--responses", "good.csv", "--out", "v.csv",
                    "--method", "crash", "--folds", "2", cwd=workdir)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ("2 folds: the crash fit failed in all 2 folds (failed: worker "
                           "process killed by signal SIGSEGV) -> v.csv\n")
    assert done.stderr == ("warning: 2 of 2 folds' fits are not answers (2 failed): a failed "
                           "fold scores NaN\n")
    table = pd.read_csv(workdir / "v.csv")  # written, as `cbmm fit` writes a failed result
    assert table["log_loss"].isna().all() and table["additive_log_loss"].notna().all()


def test_validate_holds_each_folds_fit_to_its_timeout(workdir, main_in):
    """--timeout limits each fold's fit, as `cbmm fit`'s (before, validate had no
    --timeout: a hanging method's folds waited for the default limit)."""
    done = run_with(TOY_METHODS, "validate", "--responses", "good.csv", "--out", "v.csv",
                    "--method", "hang", "--folds", "2", "--timeout", "1", cwd=workdir)
    assert done.returncode == 1, done.stderr
    assert "the hang fit failed in all 2 folds (failed: timeout after 1 s)" in done.stdout
    status, _, err = main_in(["validate", "--responses", "good.csv", "--out", "w.csv",
                              "--timeout", "5", "--no-isolate"], workdir)
    assert status == 2 and "--timeout needs the worker" in err
    assert not (workdir / "w.csv").exists()
    status, _, err = main_in(["validate", "--responses", "good.csv", "--out", "w.csv",
                              "--folds", "2", "--no-isolate"], workdir)
    assert status == 0, err


def test_validate_fails_when_manopt_diverges_in_every_fold(workdir, main_in):
    pytest.importorskip("pymanopt")
    status, out, err = main_in(["validate", "--responses", "good.csv", "--out", "v.csv",
                                "--folds", "2", "--method", "manopt", "--option",
                                "step_size=1e300"], workdir)
    assert status == 1
    assert out.startswith("2 folds: the manopt fit failed in all 2 folds (failed: ")
    assert err.startswith("warning: 2 of 2 folds' fits are not answers (2 failed)")


def test_verbose_progress_and_warnings_are_one_line_each(tmp_path):
    sim = simulate(60, 20, seed=3)
    responses = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(60)])
    responses.iloc[:, 4] = 1.0  # an all-correct item: a DegenerateDataWarning
    responses.to_csv(tmp_path / "r.csv")
    done = run("fit", "--responses", tmp_path / "r.csv", "--out", tmp_path / "fit",
               "--verbose", "2", "--max-iter", "4", "--n-starts", "1", "--option",
               "accelerate=none")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    progress = [line for line in lines if line.startswith("cbmm: ")]
    assert [line.split(",")[0] for line in progress] == [
        "cbmm: iteration 2", "cbmm: iteration 4", "cbmm: max_iter (4 iterations"]
    # the progress tracks the objective (loss plus the default prior's penalty); the last line
    # gives both, and the progress's last value is the objective's
    last = float(progress[1].split("objective ")[1].split(",")[0])
    assert f"objective {last:.10g}, " in progress[2]
    warnings_ = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings_) == 2
    assert "1 item(s) answered all-correct" in warnings_[0]
    assert "stopped at max_iter=4" in warnings_[1]


def test_internal_errors_are_one_line_with_the_type(monkeypatch, capsys, tmp_path):
    from cbmm import cli
    from cbmm import simulate as simulate_module

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(simulate_module, "simulate", broken)
    assert cli.main(["simulate", "--out", str(tmp_path / "s.csv")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["internal error: KeyError: 'a bug' (rerun with CBMM_DEBUG=1 for the traceback)"]
    monkeypatch.setenv("CBMM_DEBUG", "1")
    with pytest.raises(KeyError):
        cli.main(["simulate", "--out", str(tmp_path / "s.csv")])
    assert not list(tmp_path.iterdir())


def test_version_and_methods_listing():
    import cbmm

    done = run("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"cbmm {cbmm.__version__}"
    done = run("methods")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert any(line.startswith("cbmm     cBMM       available") for line in lines)
    assert ("    --option accelerate=...  one of 'none', 'squarem', 'auto', default 'auto': auto "
            "(default): MM, then projected quasi-Newton") in done.stdout
    assert "    --option prior=...  one of 'none', 'normal', default 'normal'" in done.stdout
    assert "--option maxcor=...  an integer >= 1" in done.stdout


def test_coding_and_layout_flags(tmp_path, table, main_in):
    signed = table.replace({0.0: -1.0}).fillna(0.0)
    signed.to_csv(tmp_path / "signed.csv")
    # NaN records kept (not observed): ids appear in the wide order, so the start is the same
    long = table.stack(future_stack=True).rename("correct").rename_axis(["model", "item"])
    long = long.reset_index()
    long.to_csv(tmp_path / "long.csv", index=False)
    table.to_csv(tmp_path / "wide.csv")
    assert main_in(["fit", "--responses", "wide.csv", "--out", "wide"], tmp_path)[0] == 0
    status, _, err = main_in(["fit", "--responses", "signed.csv", "--out", "s1"], tmp_path)
    assert status == 2 and "coding" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s1").exists()
    assert main_in(["fit", "--responses", "signed.csv", "--coding", "signed", "--out", "signed"],
                   tmp_path)[0] == 0
    assert main_in(["fit", "--responses", "long.csv", "--layout", "long", "--out", "long"],
                   tmp_path)[0] == 0
    expected = pd.read_csv(tmp_path / "wide" / "abilities.csv")
    for out in ("signed", "long"):
        got = pd.read_csv(tmp_path / out / "abilities.csv").set_index("model")
        np.testing.assert_allclose(got.loc[expected["model"], "theta"], expected["theta"],
                                   rtol=1e-9, atol=1e-12)
    status, _, err = main_in(["score", "--responses", "long.csv", "--items", "wide",
                              "--out", "scores.csv"], tmp_path)
    assert status == 0, err
    scores = pd.read_csv(tmp_path / "scores.csv").set_index("model")
    assert set(scores.index) == set(table.index) and (scores["status"] == "converged").all()


def test_fit_settings_take_their_bounds_from_fits_declarations(tmp_path, table):
    """What fit accepts, the command line accepts: the ends of sigma's range, no time limit
    and a time limit beyond what poll() can wait."""
    table.to_csv(tmp_path / "r.csv")
    for k, extra in enumerate((["--sigma", "1e300"], ["--sigma", "1e-300"],
                               ["--timeout", "none"], ["--timeout", "1e300"],
                               ["--max-iter", str(10 ** 30)])):
        done = run("fit", "--responses", tmp_path / "r.csv", "--out", tmp_path / f"o{k}",
                   "--n-starts", "1", *extra)
        assert done.returncode == 0, (extra, done.stderr)


def test_a_long_table_with_its_own_column_names(tmp_path, table):
    records = table.rename_axis("llm").rename_axis("question", axis=1).stack().rename("score")
    records.reset_index().to_csv(tmp_path / "log.csv", index=False)
    done = run("fit", "--responses", tmp_path / "log.csv", "--out", tmp_path / "o")
    assert done.returncode == 2
    assert "a long table? its columns must be named model, item, correct" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    done = run("fit", "--responses", tmp_path / "log.csv", "--out", tmp_path / "o",
               "--model-column", "llm", "--item-column", "question", "--correct-column", "score")
    assert done.returncode == 0, done.stderr
    abilities = pd.read_csv(tmp_path / "o" / "abilities.csv")
    assert sorted(abilities["model"]) == sorted(table.index)


def test_warnings_point_at_fit_json_not_at_python_attributes(tmp_path):
    sim = simulate(60, 20, seed=3)
    responses = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(60)])
    responses.iloc[:, 4] = 1.0  # an all-correct item: no finite optimum without the prior
    responses.to_csv(tmp_path / "r.csv")
    done = run("fit", "--responses", tmp_path / "r.csv", "--out", tmp_path / "fit",
               "--option", "prior=none", "--n-starts", "1")
    warnings_ = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert any("degenerate_items and degenerate_models of the result, in fit.json when saved"
               in line for line in warnings_), warnings_
    assert not [line for line in warnings_ if "FitResult" in line or "info['" in line]
    meta = json.loads((tmp_path / "fit" / "fit.json").read_text())
    assert meta["degenerate_items"] == ["4"]


# ------------------------------------------------------------- data commands' outputs

def contents_under(folder):
    """Every path under ``folder`` with its bytes (a link: where it points)."""
    return {str(p.relative_to(folder)): (f"-> {p.readlink()}" if p.is_symlink() else
                                         None if p.is_dir() else p.read_bytes())
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def datadir(tmp_path, table):
    """small.csv, a link to it, outputs of an earlier run and a registry with one local entry."""
    table.iloc[:12, :9].to_csv(tmp_path / "small.csv")
    (tmp_path / "link.parquet").symlink_to("small.csv")
    (tmp_path / "sub").mkdir()
    for name in ("old.parquet", "old.summary.json", "lone.summary.json", "old.json"):
        (tmp_path / name).write_text("old")
    (tmp_path / "reg.yaml").write_text(json.dumps(
        {"datasets": {"S": {"source": "local", "options": {"path": "small.csv"}},
                      "L": {"source": "local", "options": {"path": "link.parquet"}}}}))
    return tmp_path


IMPORT = ["data", "import", "small.csv"]
BUILD = ["data", "build", "--name", "S", "--registry", "reg.yaml", "--cache-dir", "cache"]
COMPARE = ["data", "compare", "small.csv", "small.csv"]
DATA_BAD_OUTPUTS = [
    (IMPORT + ["--out", "small.csv"], "the input file and --out name the same file small.csv"),
    (IMPORT + ["--out", "small.csv", "--force"], "the input file and --out name the same file"),
    (IMPORT + ["--out", "sub/../small.csv"], "the input file and --out name the same file"),
    (IMPORT + ["--out", "link.parquet", "--force"],
     "the input file and --out name the same file link.parquet"),
    (IMPORT + ["--out", "imp/small.csv"],
     "--out imp/small.csv: expected a file name ending in .parquet (the format written), "
     "not .csv"),
    (IMPORT + ["--out", "imp/small"], "ending in .parquet (the format written), not no suffix"),
    (IMPORT + ["--out", "old.parquet"], "--out old.parquet: exists; pass --force to replace it"),
    (IMPORT + ["--out", "lone.parquet"],
     "--out lone.parquet: its companion lone.summary.json: exists; pass --force"),
    (IMPORT + ["--out", "somedir/"],
     "argument --out: 'somedir/' names a folder; give a file name"),
    (IMPORT + ["--out", "sub/."], "argument --out: 'sub/.' names a folder; give a file name"),
    (IMPORT + ["--out", "sub"], "--out sub: is a folder; expected a file name"),
    (BUILD + ["--out", "old.parquet"], "--out old.parquet: exists; pass --force to replace it"),
    (BUILD + ["--out", "new.csv"], "--out new.csv: expected a file name ending in .parquet"),
    (BUILD + ["--out", "small.csv"], "the registry's local path and --out name the same file"),
    (BUILD[:3] + ["L"] + BUILD[4:] + ["--out", "link.parquet", "--force"],
     "the registry's local path and --out name the same file link.parquet"),
    (BUILD + ["--out", "out/"], "argument --out: 'out/' names a folder"),
    (COMPARE + ["--out", "small.csv"], "the rebuilt matrix and --out name the same file small.csv"),
    (["data", "compare", "old.parquet", "small.csv", "--out", "link.parquet", "--force"],
     "the release matrix and --out name the same file link.parquet"),
    (COMPARE + ["--out", "c.csv"],
     "--out c.csv: expected a file name ending in .json (the format written), not .csv"),
    (COMPARE + ["--out", "old.json"], "--out old.json: exists; pass --force to replace it"),
]


@pytest.mark.parametrize("args,message", DATA_BAD_OUTPUTS, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else None)
def test_data_outputs_are_checked_before_any_work(datadir, main_in, args, message):
    before = contents_under(datadir)
    status, out, err = main_in(args, datadir)
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert out == "" and contents_under(datadir) == before


def test_data_import_and_compare_onto_their_input_through_the_command(datadir):
    """The user's trial: both once overwrote small.csv (with Parquet, with JSON), exit 0."""
    before = contents_under(datadir)
    for args in (IMPORT + ["--out", "small.csv"], COMPARE + ["--out", "small.csv"]):
        done = run(*args, cwd=datadir)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert "and --out name the same file small.csv" in done.stderr
    assert contents_under(datadir) == before


def test_data_math500_items_checks_its_output_like_the_other_commands(tmp_path, main_in):
    """A user's trial: `math500-items --source test.jsonl --out test.jsonl` replaced its
    input with the CSV, and any --out was replaced without --force."""
    source = tmp_path / "test.jsonl"
    source.write_text("".join(json.dumps({"subject": "Algebra", "level": 1 + k % 5,
                                          "unique_id": f"test/algebra/{k}.json"}) + "\n"
                              for k in range(500)))
    (tmp_path / "items.csv").write_text("old")
    before = contents_under(tmp_path)
    for args, message in (
            (["--out", "test.jsonl"], "--source and --out name the same file test.jsonl"),
            (["--out", "items.csv"], "--out items.csv: exists; pass --force to replace it"),
            (["--out", "items.parquet"], "this command writes a CSV table; name the file .csv"),
            (["--out", "new.csv", "--sha256", "xyz"], "'xyz' is not a hex SHA-256")):
        status, out, err = main_in(["data", "math500-items", "--source", "test.jsonl", *args],
                                   tmp_path)
        assert status == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert contents_under(tmp_path) == before
    status, _, err = main_in(["data", "math500-items", "--source", "test.jsonl", "--out",
                              "items.csv", "--force"], tmp_path)
    assert status == 0, err
    items = pd.read_csv(tmp_path / "items.csv")
    assert items.shape == (500, 4) and items["level"].tolist()[:6] == [1, 2, 3, 4, 5, 1]
    status, _, err = main_in(["data", "math500-models", "--table", "items.csv", "--out",
                              "items.csv"], tmp_path)
    assert status == 2 and "--table and --out name the same file items.csv" in err


def test_data_import_takes_the_reading_options_of_fit(tmp_path, main_in):
    """Its error advised --coding and --model-column, which it did not take."""
    from cbmm.data import read_matrix

    (tmp_path / "signed.csv").write_text("model,q1,q2\nm1,1,-1\nm2,0,1\nm3,-1,1\n")
    status, _, err = main_in(["data", "import", "signed.csv", "--out", "s.parquet"], tmp_path)
    assert status == 2 and "ambiguous coding" in err and "--coding" in err
    status, _, err = main_in(["data", "import", "signed.csv", "--out", "s.parquet", "--coding",
                              "signed"], tmp_path)
    assert status == 0, err
    matrix = read_matrix(tmp_path / "s.parquet")
    assert matrix.loc["m1"].tolist() == [1, 0] and pd.isna(matrix.loc["m2", "q1"])
    (tmp_path / "log.csv").write_text("name,question,ok\nm1,q1,1\nm2,q1,0\nm1,q2,0\n"
                                      "m2,q2,1\n")
    status, _, err = main_in(["data", "import", "log.csv", "--out", "l.parquet",
                              "--model-column", "name", "--item-column", "question",
                              "--correct-column", "ok"], tmp_path)
    assert status == 0, err
    assert read_matrix(tmp_path / "l.parquet").to_numpy().tolist() == [[1, 0], [0, 1]]


def test_data_force_replaces_the_outputs_and_their_summary(datadir, main_in, table):
    from cbmm.data import read_matrix

    expected = table.iloc[:12, :9]
    for args, written in ((IMPORT, "old.parquet"), (BUILD, "old.parquet"),
                          (COMPARE, "old.json")):
        status, _, err = main_in(args + ["--out", written, "--force"], datadir)
        assert status == 0, err
        if written.endswith(".parquet"):
            np.testing.assert_array_equal(read_matrix(datadir / written).to_numpy(),
                                          expected.to_numpy())
            summary = json.loads((datadir / "old.summary.json").read_text())
            assert (summary["n_models"], summary["n_items"]) == (12, 9)
        else:
            assert json.loads((datadir / written).read_text())["cells"]["agreement"] == 1.0
    assert (datadir / "small.csv").read_bytes() == contents_under(datadir)["small.csv"]
    assert pd.read_csv(datadir / "small.csv", index_col=0).shape == (12, 9)


@pytest.mark.parametrize("args,flag,default", [
    (["data", "build", "--name", "IFEval", "--out", "x.parquet", "--cache-dir", "c"],
     "--registry", "config/datasets.yaml"),
    (["data", "math500-models", "--out", "m.csv"], "--table", "config/math500_models.csv"),
])
def test_data_default_config_outside_the_repository_says_where_it_looked(tmp_path, main_in, args,
                                                                        flag, default):
    status, _, err = main_in(args, tmp_path)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert (f"{flag} not given, and its default {default} is not in the current folder "
            f"{tmp_path} (the default is relative to it); run from the repository root or pass "
            f"{flag} PATH") in err
    assert list(tmp_path.iterdir()) == []


def test_data_build_reads_the_default_registry_from_the_repository_root(main_in, tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    status, _, err = main_in(["data", "build", "--name", "nope", "--out", tmp_path / "x.parquet",
                              "--cache-dir", tmp_path / "c"], root)
    assert status == 2 and "no dataset 'nope' in the registry; known: [" in err
    assert "'IFEval'" in err and list(tmp_path.iterdir()) == []
