"""Simulation designs (rates, masks, determinism) and metrics on hand-computed cases."""

import math

import numpy as np
import pytest
from scipy.special import expit

from cbmm.metrics import descriptive_metrics, simulation_metrics
from cbmm.simulate import Simulation, mar_intercept, simulate


@pytest.mark.parametrize("pattern", ["mcar", "mar"])
@pytest.mark.parametrize("rate", [0.1, 0.5, 0.8])
def test_missing_rate_is_achieved(pattern, rate):
    sim = simulate(400, 300, missing=pattern, missing_rate=rate, seed=3)
    assert abs(sim.missing_rate - rate) <= 0.01


def test_mar_missingness_grows_with_row_and_column_index():
    sim = simulate(400, 300, missing="mar", missing_rate=0.4, seed=1)
    missing = np.isnan(sim.responses)
    assert missing[:100, :100].mean() < 0.4 < missing[-100:, -100:].mean()
    alpha = sim.design["mar_alpha"]
    sp = (np.linspace(0, 1, 400)[:, None] + np.linspace(0, 1, 300)[None, :]) / 2
    assert expit(alpha + 2 * sp).mean() == pytest.approx(0.4, abs=1e-9)
    assert mar_intercept(400, 300, 0.4) == pytest.approx(alpha)


def test_mnar_masks_only_incorrect_answers_in_gated_columns():
    complete = simulate(300, 200, seed=11)
    sim = simulate(300, 200, missing="mnar", missing_rate=0.3, seed=11)
    missing = np.isnan(sim.responses)
    # same seed: the responses underneath are the same draw
    np.testing.assert_array_equal(sim.responses[~missing], complete.responses[~missing])
    assert np.all(complete.responses[missing] == 0)
    gated = missing.any(axis=0)
    assert gated.sum() == sim.design["mnar_gated_items"]
    # in a gated column every incorrect answer is masked, elsewhere none is
    assert np.all(np.isnan(sim.responses[:, gated]) == (complete.responses[:, gated] == 0))
    assert not missing[:, ~gated].any()


def test_same_seed_same_output_and_other_seed_differs():
    a = simulate(50, 40, missing="mcar", missing_rate=0.3, sparsity=0.2, seed=5)
    b = simulate(50, 40, missing="mcar", missing_rate=0.3, sparsity=0.2, seed=5)
    c = simulate(50, 40, missing="mcar", missing_rate=0.3, sparsity=0.2, seed=6)
    np.testing.assert_array_equal(a.responses, b.responses)
    np.testing.assert_array_equal(a.theta, b.theta)
    assert not np.array_equal(a.theta, c.theta)


def test_truth_distribution_and_exact_sparsity():
    sim = simulate(2000, 1000, sparsity=0.3, seed=2)
    assert np.sum(sim.a == 0) == 300
    nonzero = sim.a[sim.a != 0]
    assert nonzero.min() >= 0.5 and nonzero.max() <= 1.0
    assert sim.b.std() == pytest.approx(0.5, rel=0.1)
    assert sim.theta.std() == pytest.approx(1.0, rel=0.1)
    # responses follow Phi(x / sigma): compare mean accuracy with the model's
    assert np.nanmean(sim.responses) == pytest.approx(expit(sim.scores).mean(), abs=0.005)


def test_save_load_roundtrip(tmp_path):
    sim = simulate(30, 20, missing="mcar", missing_rate=0.2, seed=1, sigma=0.5)
    sim.save(tmp_path / "s.npz")
    back = Simulation.load(tmp_path / "s.npz")
    np.testing.assert_array_equal(np.isnan(back.responses), np.isnan(sim.responses))
    np.testing.assert_array_equal(np.nan_to_num(back.responses), np.nan_to_num(sim.responses))
    assert back.sigma == 0.5 and back.design == sim.design


def test_simulation_metrics_hand_computed():
    theta = np.array([-1.0, 0.0, 1.0])  # already canonical: mean 0, sd sqrt(2/3)
    theta = theta / theta.std()
    a = np.array([1.0, 0.0])
    b = np.array([0.0, 1.0])
    # estimate: same theta, a off on item 0, b off by 0.5 on item 1
    a_hat = np.array([2.0, 0.0])
    b_hat = np.array([0.0, 1.5])
    m = simulation_metrics(theta, a_hat, b_hat, theta, a, b, sigma=1.0)
    x = np.outer(theta, a) + b
    x_hat = np.outer(theta, a_hat) + b_hat
    diff = ((x_hat - x) ** 2).sum()
    assert m["rel_error_x"] == pytest.approx(diff / (x ** 2).sum())
    assert m["rel_error_x_unsquared"] == pytest.approx(math.sqrt(diff / (x ** 2).sum()))
    assert m["rmse_b"] == pytest.approx(math.sqrt(0.25 / 2))
    p, q = expit(x_hat), expit(x)
    hell = ((np.sqrt(p) - np.sqrt(q)) ** 2 + (np.sqrt(1 - p) - np.sqrt(1 - q)) ** 2).mean()
    assert m["hellinger_x"] == pytest.approx(hell)
    assert m["hellinger_x_released"] == pytest.approx(np.sqrt(((np.sqrt(p) - np.sqrt(q)) ** 2).mean()))
    assert m["spearman_theta"] == pytest.approx(1.0)
    assert m["recall_a"] == 1.0 and m["precision_a"] == 1.0


def test_recall_precision_of_zero_pattern():
    theta = np.linspace(-1, 1, 5)
    a = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    a_hat = np.array([0.0, 0.3, 0.9, 0.0, 1.2, 1e-9])  # FP at 1, FN at 3, tiny = zero
    m = simulation_metrics(theta, a_hat, np.zeros(6), theta, a, np.zeros(6))
    assert m["recall_a"] == pytest.approx(2 / 3)  # TP = 2 (items 2, 4), FN = 1
    assert m["precision_a"] == pytest.approx(2 / 3)  # FP = 1


def test_failed_fit_gives_nan_metrics():
    m = simulation_metrics([np.nan] * 3, [np.nan] * 2, [np.nan] * 2, [0, 1, 2], [1, 1], [0, 0])
    assert all(math.isnan(v) for v in m.values())


def test_descriptive_metrics():
    theta = np.array([3.0, 2.0, 1.0, 0.0, -1.0])
    accuracy = np.array([0.9, 0.95, 0.5, 0.4, 0.1])
    a = np.array([1.0, 3.0])
    m = descriptive_metrics(theta, a, accuracy)
    assert m["cv_a"] == pytest.approx(1.0 / 2.0)  # sd 1, mean 2
    assert m["spearman_all"] == pytest.approx(0.9)  # one swapped pair among 5
    assert m["spearman_top20"] == pytest.approx(-1.0)  # top 2 by accuracy are swapped
