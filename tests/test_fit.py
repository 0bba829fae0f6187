"""The public fit() API: recovery of simulated truth, labels, canonical form,
errors on bad input, degenerate items and failed methods."""

import math
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


@pytest.mark.parametrize("kwargs,name", [
    ({"sigma": 0}, "sigma"), ({"sigma": -1.0}, "sigma"), ({"tol": 0}, "tol"),
    ({"init_scale": 0}, "init_scale"), ({"max_iter": 0}, "max_iter"),
    ({"method": "nope"}, "unknown method 'nope'"), ({"bogus_option": 1}, "bogus_option"),
    ({"accelerate": "anderson"}, "accelerate"), ({"precision": "half"}, "precision"),
    ({"engine": "gpu"}, "engine"),
])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        cbmm.fit(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), **kwargs)


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


def test_missing_software_is_reported_by_check_methods():
    def unavailable():
        raise cbmm.MethodUnavailableError("needs frobnicate: pip install frobnicate")

    cbmm.register_method("needs_frobnicate", lambda *a, **k: None, availability=unavailable)
    try:
        with pytest.raises(cbmm.MethodUnavailableError, match="pip install frobnicate"):
            cbmm.check_methods(["cbmm", "needs_frobnicate", "not_a_method"])
        with pytest.raises(cbmm.MethodUnavailableError, match="pip install frobnicate"):
            cbmm.fit(np.array([[1.0, 0.0], [0.0, 1.0]]), method="needs_frobnicate")
    finally:
        del _METHODS["needs_frobnicate"]
    cbmm.check_methods(["cbmm"])


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


def test_accelerated_variant_gets_closer_to_the_optimum():
    sim = simulate(300, 300, seed=9)
    best = cbmm.fit(sim.responses, tol=1e-12, max_iter=100000, accelerate="squarem").loss
    plain = cbmm.fit(sim.responses)
    fast = cbmm.fit(sim.responses, accelerate="squarem")
    assert best <= fast.loss <= plain.loss
    assert (fast.loss - best) < (plain.loss - best)
