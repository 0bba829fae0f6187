"""The public fit() API: recovery of simulated truth, labels, canonical form,
errors on bad input, degenerate items and failed methods."""

import dataclasses
import json
import logging
import math
import re
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import cbmm
from cbmm.metrics import simulation_metrics
from cbmm.registry import _METHODS
from cbmm.simulate import simulate


@pytest.fixture(scope="module")
def sim_full():
    return simulate(1000, 1000, seed=2024)


def test_recovery_fully_observed(sim_full):
    result = cbmm.fit(sim_full.responses)
    assert result.status == "converged"
    m = simulation_metrics(result.theta, result.a, result.b, sim_full.theta, sim_full.a,
                           sim_full.b)
    assert m["spearman_theta"] >= 0.99
    assert m["spearman_a"] >= 0.85
    assert m["rmse_b"] <= 0.12


def test_recovery_with_half_missing_mcar():
    sim = simulate(1000, 1000, missing="mcar", missing_rate=0.5, seed=7)
    result = cbmm.fit(sim.responses)
    m = simulation_metrics(result.theta, result.a, result.b, sim.theta, sim.a, sim.b)
    assert m["spearman_theta"] >= 0.98


def test_result_is_canonical_and_reproduces_the_fitted_scores(sim_full):
    small = sim_full.responses[:200, :100]
    result = cbmm.fit(small, seed=3)
    theta = np.asarray(result.theta)
    assert theta.mean() == pytest.approx(0.0, abs=1e-12)
    assert theta.std() == pytest.approx(1.0, rel=1e-12)
    assert np.all(np.asarray(result.a) >= 0)
    raw = cbmm.fit(small, seed=3, precision="float64")
    # canonicalisation leaves X, hence the loss, unchanged
    assert result.loss == pytest.approx(cbmm.loss(theta, np.asarray(result.a),
                                                  np.asarray(result.b),
                                                  cbmm.as_responses(small).y), rel=1e-12)
    assert raw.loss == pytest.approx(result.loss, rel=1e-4)


def test_same_seed_same_result_and_init_scale_changes_start(sim_full):
    small = sim_full.responses[:100, :80]
    r1 = cbmm.fit(small, seed=5)
    r2 = cbmm.fit(small, seed=5)
    np.testing.assert_array_equal(r1.theta, r2.theta)
    r3 = cbmm.fit(small, seed=5, init_scale=4.0)
    assert r3.loss_history[0] != r1.loss_history[0]


def test_dataframe_labels_are_kept():
    sim = simulate(30, 12, seed=1)
    frame = pd.DataFrame(sim.responses, index=[f"model-{i}" for i in range(30)],
                         columns=[f"q{j}" for j in range(12)])
    result = cbmm.fit(frame)
    assert list(result.theta.index) == list(frame.index)
    assert list(result.a.index) == list(frame.columns)
    assert list(result.b.index) == list(frame.columns)


def test_signed_coding_equals_binary_coding():
    sim = simulate(40, 20, missing="mcar", missing_rate=0.2, seed=3)
    signed = np.where(np.isnan(sim.responses), 0, 2 * sim.responses - 1)
    np.testing.assert_array_equal(cbmm.as_responses(signed, coding="signed").y,
                                  cbmm.as_responses(sim.responses).y)


@pytest.mark.parametrize("bad,message", [
    (np.array([[1, 0, 2], [0, 1, 1]], float), r"value 2\.0 at row 0, column 2"),
    (np.array([[1, 0, np.inf], [0, 1, 1]], float), r"infinite value at row 0, column 2"),
    (np.array([1, 0, 1], float), r"2-D"),
    (np.array([[1, 0, 1]], float), r"at least 2 models"),
    (np.array([[1, np.nan], [0, np.nan]], float), r"item column\(s\) with no observed entry: 1"),
    (np.array([[np.nan, np.nan], [0, 1]], float), r"model row\(s\) with no observed entry: 0"),
])
def test_bad_input_names_the_problem(bad, message):
    with pytest.raises(ValueError, match=message):
        cbmm.fit(bad)


def test_bad_input_labels_in_message():
    frame = pd.DataFrame([[1, 0.5], [0, 1]], index=["gpt", "llama"], columns=["i1", "i2"])
    with pytest.raises(ValueError, match=r"row 0 \('gpt'\), column 1 \('i2'\)"):
        cbmm.fit(frame)


@pytest.mark.parametrize("kwargs,message", [
    ({"sigma": 0}, "sigma must be a number in"), ({"sigma": -1.0}, "sigma"),
    ({"sigma": "x"}, "sigma must be a number in [1e-300, 1e+300], got 'x'"),
    ({"sigma": float("nan")}, "sigma"), ({"sigma": True}, "sigma"), ({"tol": 0}, "tol"),
    ({"tol": "1e-4"}, "tol"), ({"init_scale": 0}, "init_scale"),
    ({"max_iter": 0}, "max_iter must be an integer >= 1, got 0"),
    ({"max_iter": 1.5}, "max_iter must be an integer >= 1, got 1.5"),
    ({"max_iter": True}, "max_iter"),
    ({"seed": -1}, "seed must be a non-negative integer, got -1"),
    ({"seed": "abc"}, "seed must be a non-negative integer, got 'abc'"),
    ({"seed": 1.5}, "seed"), ({"seed": None}, "seed"), ({"seed": np.int64(-3)}, "seed"),
    ({"verbose": -1}, "verbose"), ({"verbose": 0.5}, "verbose"),
    ({"timeout_s": -1}, "timeout_s"), ({"timeout_s": "soon"}, "timeout_s"),
    ({"timeout_s": float("nan")}, "timeout_s"),
    ({"timeout_s": 5, "isolate": False}, "timeout_s needs isolate=True"),
    ({"isolate": "yes"}, "isolate"),
    ({"method": "nope"}, "unknown method 'nope'"), ({"method": 123}, "unknown method 123"),
    ({"bogus_option": 1}, "bogus_option"),
    ({"accelerate": "anderson"}, "accelerate"), ({"precision": "half"}, "precision"),
    ({"engine": "gpu"}, "engine"), ({"engine": None}, "engine"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cbmm.fit(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), **kwargs)


@pytest.mark.parametrize("seed", [0, 2**63, 2**64 + 5, np.int64(7), np.uint64(2**63 + 1)])
def test_any_non_negative_integer_seed_works(seed):
    responses = simulate(20, 8, seed=1).responses
    result = cbmm.fit(responses, seed=seed, **cbmm.paper_settings("cbmm"))
    assert not result.failed and result.seed == int(seed)
    assert type(result.seed) is int  # JSON-serialisable
    start = cbmm.initial_values(20, 8, seed=int(seed))
    assert result.loss_history[0] == pytest.approx(
        cbmm.loss(*start, cbmm.as_responses(responses).y), rel=1e-6)
    assert json.loads(json.dumps(result.summary()))["seed"] == int(seed)


def test_numpy_scalars_are_accepted_for_numbers_and_options():
    responses = simulate(20, 8, seed=1).responses
    plain = cbmm.fit(responses, method="lbfgsb", sigma=2.0, max_iter=50, maxcor=10)
    numpy = cbmm.fit(responses, method="lbfgsb", sigma=np.float32(2.0), max_iter=np.int32(50),
                     maxcor=np.int64(10))
    np.testing.assert_array_equal(plain.theta, numpy.theta)


def test_max_iter_gives_a_convergence_warning():
    responses = simulate(50, 20, seed=3).responses
    with pytest.warns(cbmm.ConvergenceWarning, match="max_iter=2"):
        result = cbmm.fit(responses, max_iter=2)
    assert result.status == "max_iter" and result.n_iter == 2
    assert result.info["status_reason"] == ("stopped at max_iter=2 before its stopping rule "
                                            "was met")
    with warnings.catch_warnings():
        warnings.simplefilter("error", cbmm.ConvergenceWarning)
        assert cbmm.fit(responses).status == "converged"


def test_verbose_logs_every_n_iterations_with_the_fits_own_losses(caplog):
    responses = simulate(200, 60, seed=5).responses
    caplog.set_level(logging.INFO, logger="cbmm")
    result = cbmm.fit(responses, verbose=3, precision="float64",
                      **{**cbmm.paper_settings("cbmm"), "tol": 1e-6})
    lines = [r.getMessage() for r in caplog.records if r.name == "cbmm"]
    progress = [re.match(r"cbmm: iteration (\d+), objective (\S+), relative change (\S+), "
                         r"(\S+) s$", m) for m in lines[:-1]]
    assert all(progress) and len(progress) == result.n_iter // 3
    history = result.loss_history
    for match in progress:
        k, loss, change = int(match.group(1)), float(match.group(2)), float(match.group(3))
        assert k % 3 == 0
        assert loss == pytest.approx(history[k], rel=1e-9)
        assert change == pytest.approx(abs(history[k] - history[k - 1]) / history[k - 1],
                                       rel=1e-2)
    assert lines[-1].startswith(f"cbmm: {result.status} ({result.n_iter} iterations")
    caplog.clear()
    cbmm.fit(responses, tol=1e-6)
    assert not [r for r in caplog.records if r.name == "cbmm"]


def test_verbose_without_logging_configured_writes_to_stderr():
    code = ("import cbmm; from cbmm.simulate import simulate; "
            "cbmm.fit(simulate(30, 10, seed=1).responses, verbose=1)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0
    assert re.search(r"^cbmm: iteration 1, objective \S+, relative change nan, \S+ s$",
                     done.stderr, re.M)
    # under the default prior the progress lines' objective is loss (3) plus the penalty:
    # the last line gives both
    assert re.search(r"^cbmm: converged \(\d+ iterations, loss \S+, objective \S+, \S+ s\)$",
                     done.stderr, re.M)


def test_degenerate_items_and_models_are_reported():
    sim = simulate(60, 30, seed=4)
    responses = sim.responses.copy()
    responses[:, 3] = 0.0  # all wrong
    responses[:, 7] = 1.0  # all right
    responses[5, :] = 1.0  # a model that solves everything it was asked
    responses[5, 3] = np.nan
    with pytest.warns(cbmm.DegenerateDataWarning, match="2 item"):
        result = cbmm.fit(responses)
    assert result.degenerate_items == [3, 7]
    assert result.degenerate_models == [5]
    assert np.isfinite(np.asarray(result.b)).all()
    b = np.asarray(result.b)
    assert b[7] > np.max(np.delete(b, [3, 7])) and b[3] < np.min(np.delete(b, [3, 7]))


@pytest.mark.parametrize("values,coding,message", [
    ([[1, 1, 1], [1, np.nan, 1]], None, "every observed answer is correct: the answers"),
    # a 0/1 file read in the signed coding: its 0s are missing, every answer left is correct
    ([[1, 1, 1], [1, 0, 1]], "signed", "every observed answer is correct \\(coding='signed' "
     "reads a 0/1 file's every 0 as missing\\)"),
    ([[0, 0], [0, np.nan], [0, 0]], None, "every observed answer is wrong"),
    ([[1, 0], [1, 0], [np.nan, 0]], None, "every item was answered alike"),
])
def test_answers_that_cannot_tell_models_apart_are_refused(values, coding, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cbmm.CodingWarning)
        with pytest.raises(cbmm.ResponseError, match=message):
            cbmm.fit(np.array(values, dtype=float), coding=coding)


def test_a_file_name_is_not_taken_for_a_matrix(tmp_path):
    with pytest.raises(cbmm.ResponseError, match=r"got the file name '.*m.csv', not a matrix; "
                                                  r"read the file first: cbmm.data.read_table"):
        cbmm.fit(tmp_path / "m.csv")


def test_failure_inside_a_method_becomes_failed_result():
    def exploding(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None):
        raise np.linalg.LinAlgError("singular\n matrix")

    cbmm.register_method("exploding_test_method", exploding)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = cbmm.fit(simulate(20, 10, seed=0).responses, method="exploding_test_method")
    finally:
        del _METHODS["exploding_test_method"]
    assert result.status == "failed: singular matrix"
    assert result.failed and math.isnan(result.loss)
    assert np.isnan(np.asarray(result.theta)).all()


def test_failure_constructor_labels_and_reason():
    responses = cbmm.as_responses(pd.DataFrame([[1, 0], [0, 1], [1, 1]], index=list("xyz"),
                                               columns=["i", "j"]))
    failed = cbmm.FitResult.failure(RuntimeError("EM\n  diverged"), responses=responses,
                                    method="mirt", runtime_s=2.5, sigma=2.0, seed=3)
    assert failed.status == "failed: EM diverged" and failed.failed
    assert failed.info == {"exception": "RuntimeError"}
    assert list(failed.theta.index) == list("xyz") and list(failed.b.index) == ["i", "j"]
    assert np.isnan(failed.theta).all() and math.isnan(failed.loss)
    assert failed.runtime_s == 2.5 and failed.sigma == 2.0 and failed.seed == 3
    assert cbmm.FitResult.failure("timeout after 5 s", responses=(4, 2), method="x").status \
        == "failed: timeout after 5 s"
    assert cbmm.FitResult.failure(ValueError(), responses=(4, 2), method="x").status \
        == "failed: ValueError"
    assert all(np.isnan(v).all() for v in failed.raw_parameters())


def test_missing_software_is_reported_by_check_methods():
    def unavailable():
        raise cbmm.MethodUnavailableError("needs frobnicate: pip install frobnicate")

    cbmm.register_method("needs_frobnicate", lambda *a, **k: None, availability=unavailable)
    try:
        with pytest.raises(cbmm.MethodUnavailableError, match="pip install frobnicate") as raised:
            cbmm.check_methods(["cbmm", "needs_frobnicate", "not_a_method"])
        assert raised.value.methods == ["needs_frobnicate", "not_a_method"]  # the ones named
        with pytest.raises(cbmm.MethodUnavailableError, match="pip install frobnicate"):
            cbmm.fit(np.array([[1.0, 0.0], [0.0, 1.0]]), method="needs_frobnicate")
        with pytest.raises(cbmm.MethodUnavailableError) as raised:  # one name, as a str
            cbmm.check_methods("needs_frobnicate")
        assert raised.value.methods == ["needs_frobnicate"]
    finally:
        del _METHODS["needs_frobnicate"]
    cbmm.check_methods(["cbmm"])
    cbmm.check_methods("cbmm")  # its letters were checked as method names
    cbmm.check_methods(name for name in ["cbmm", "lbfgsb"])  # any iterable of names
    for not_names in (b"cbmm", [b"cbmm"], ["cbmm", 3]):  # bytes were checked as numbers
        with pytest.raises(ValueError, match="check_methods takes method names"):
            cbmm.check_methods(not_names)


def test_a_platform_without_fork_fits_in_process_with_an_isolation_warning(monkeypatch):
    """Where fork is missing (Windows) the fit runs in this process and says so in an
    IsolationWarning, a RuntimeWarning as it was and a CbmmWarning as every warning of the
    library, with the same estimate as a fit in this process asked for."""
    monkeypatch.setattr(cbmm.api, "FORK_AVAILABLE", False)
    answers = simulate(40, 20, seed=4).responses
    with pytest.warns(cbmm.IsolationWarning, match="cannot fork") as seen:
        fitted = cbmm.fit(answers)
    assert all(issubclass(w.category, (RuntimeWarning, cbmm.CbmmWarning)) for w in seen
               if w.category is cbmm.IsolationWarning)
    np.testing.assert_array_equal(fitted.theta, cbmm.fit(answers, isolate=False).theta)


def test_save_and_load_roundtrip(tmp_path):
    sim = simulate(25, 10, seed=2)
    frame = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(25)])
    result = cbmm.fit(frame)
    result.save(tmp_path / "fit")
    loaded = cbmm.FitResult.load(tmp_path / "fit")
    np.testing.assert_allclose(loaded.theta, result.theta, rtol=1e-15)
    np.testing.assert_allclose(loaded.b, result.b, rtol=1e-15)
    assert loaded.status == result.status and loaded.n_iter == result.n_iter
    assert sorted(p.name for p in (tmp_path / "fit").iterdir()) == [
        "abilities.csv", "fit.json", "items.csv"]
    assert loaded.info["theta_sd_raw"] == result.info["theta_sd_raw"]
    for mine, theirs in zip(loaded.raw_parameters(), result.raw_parameters()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-15)


def test_raw_parameters_undo_the_canonical_form():
    sim = simulate(40, 15, seed=6)
    result = cbmm.fit(sim.responses, isolate=False)
    theta, a, b = result.raw_parameters()
    assert theta.mean() == pytest.approx(result.info["theta_mean_raw"], abs=1e-12)
    assert theta.std() == pytest.approx(result.info["theta_sd_raw"], rel=1e-12)
    np.testing.assert_allclose(np.outer(theta, a) + b, result.scores(), rtol=1e-10, atol=1e-10)
    for mine, theirs in zip(cbmm.canonicalize(theta, a, b), (result.theta, result.a, result.b)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)
    # labelled parameters keep their labels (they came back as bare arrays)
    labelled = (pd.Series(theta, index=[f"m{i}" for i in range(40)], name="theta"),
                pd.Series(a, index=[f"q{j}" for j in range(15)]), b)
    for mine, given in zip(cbmm.canonicalize(*labelled), labelled):
        assert type(mine) is type(given)
    assert list(cbmm.canonicalize(*labelled)[0].index) == list(labelled[0].index)
    assert cbmm.canonicalize(*labelled)[0].name == "theta"
    stripped = dataclasses.replace(result, info={})
    with pytest.raises(ValueError, match="records no raw scale"):
        stripped.raw_parameters()


def test_accelerated_variant_gets_closer_to_the_optimum():
    sim = simulate(300, 300, seed=9)
    paper = cbmm.paper_settings("cbmm")
    best = cbmm.fit(sim.responses, **{**paper, "tol": 1e-12, "max_iter": 100000,
                                      "accelerate": "squarem"}).loss
    plain = cbmm.fit(sim.responses, **paper)
    fast = cbmm.fit(sim.responses, **{**paper, "accelerate": "squarem"})
    assert best <= fast.loss <= plain.loss
    assert (fast.loss - best) < (plain.loss - best)


def test_results_compare_by_identity_not_by_their_arrays():
    """``==``, ``in`` and hashing on a result and its copy: a bool, never "the truth value
    of a Series is ambiguous" (the dataclasses' field-by-field __eq__ raised it)."""
    import copy
    import pickle

    sim = simulate(60, 20, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cbmm.fit(pd.DataFrame(sim.responses), n_starts=1)
        boot = cbmm.bootstrap(sim.responses, n_boot=3, seed=0)
        test = cbmm.adaptive_test(lambda item: 1, fit, max_items=3)
    for result in (fit, boot, test, sim, cbmm.as_responses(sim.responses)):
        twin = copy.deepcopy(result)
        assert result == result and result != twin and (result == pickle.loads(
            pickle.dumps(result))) is False
        assert result in [twin, result] and twin not in [result]
        assert len({result, twin}) == 2
    assert fit.theta.equals(copy.deepcopy(fit).theta)  # the fields compare as pandas does


def test_every_warning_of_the_library_is_a_cbmm_warning():
    """One category filters them all: each named class, and those the library gave as a
    plain UserWarning (an audit of answers to part of the items, here)."""
    named = [getattr(cbmm, name) for name in cbmm.__all__ if name.endswith("Warning")]
    assert len(named) >= 9
    assert all(issubclass(category, cbmm.CbmmWarning) for category in named)
    items = pd.DataFrame({"a": [1.0, 1.5, 0.8], "b": [0.0, 0.5, -0.5]}, index=["x", "y", "z"])
    answers = pd.DataFrame({"x": [1.0, 0.0, 1.0, 0.0], "y": [1.0, 1.0, 0.0, 0.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", cbmm.CbmmWarning)
        with pytest.raises(cbmm.CbmmWarning, match="1 of the 3 calibrated items have no "
                                                   "answer"):
            cbmm.item_audit(items, answers)
