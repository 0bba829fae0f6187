"""Simulation designs (rates, masks, determinism) and metrics on hand-computed cases."""

import math

import numpy as np
import pytest
from scipy.special import expit

import cbmm
from cbmm import canonicalize
from cbmm.metrics import (
    METRIC_DEFINITIONS,
    SIMULATION_METRICS,
    descriptive_metrics,
    fit_metrics,
    hellinger,
    relative_error,
    simulation_metrics,
)
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
    assert m["rel_error_x_published"] == pytest.approx(math.sqrt(diff / (x ** 2).sum()))
    assert m["rmse_b"] == pytest.approx(math.sqrt(0.25 / 2))
    assert m["rmse_b_published"] == pytest.approx(math.sqrt(0.25 / 2))  # raw = canonical here
    p, q = expit(x_hat), expit(x)
    hell = ((np.sqrt(p) - np.sqrt(q)) ** 2 + (np.sqrt(1 - p) - np.sqrt(1 - q)) ** 2).mean()
    assert m["hellinger_x"] == pytest.approx(hell)
    root_diff = np.sqrt(p) - np.sqrt(q)
    assert m["hellinger_x_published"] == pytest.approx(np.sqrt((root_diff ** 2).mean()))
    assert m["spearman_theta"] == pytest.approx(1.0)
    assert m["recall_a"] == 1.0 and m["precision_a"] == 1.0


def test_relative_error_closed_form():
    # X = [[3, 4]], X^ = [[0, 0]]: ||X^ - X|| / ||X|| = 1; X^ = X / 2: 1/2 and its square 1/4
    x = np.array([[3.0, 4.0]])
    assert relative_error(np.zeros_like(x), x) == pytest.approx(1.0)
    assert relative_error(x / 2, x, "published") == pytest.approx(0.5)
    assert relative_error(x / 2, x, "text") == pytest.approx(0.25)
    with pytest.raises(ValueError, match="definition must be one of"):
        relative_error(x, x, "squared")


def test_hellinger_closed_forms():
    # p^ = 1/4, p = 1: published sqrt((1/2 - 1)^2) = 1/2; text (1/2 - 1)^2 + (sqrt(3)/2 - 0)^2 = 1
    p_hat, p = np.full((2, 2), 0.25), np.ones((2, 2))
    assert hellinger(p_hat, p, "text") == pytest.approx(1.0)
    # the published definition clips p to 1 - 1e-12 first: sqrt(1 - 1e-12) differs from 1 by 5e-13
    assert hellinger(p_hat, p, "published") == pytest.approx(0.5, abs=1e-12)
    # one cell apart: mean over the 4 cells of (sqrt .64 - sqrt .36)^2 = 0.04 / 4
    q = np.full((2, 2), 0.36)
    q_hat = q.copy()
    q_hat[0, 0] = 0.64
    assert hellinger(q_hat, q, "published") == pytest.approx(math.sqrt(0.04 / 4))
    assert hellinger(q_hat, q, "text") == pytest.approx((0.04 + 0.04) / 4)
    # p^ = 0, p = 1 are clipped to 1e-12 and 1 - 1e-12 first
    assert hellinger(np.zeros(1), np.ones(1), "published") == pytest.approx(
        math.sqrt(1 - 1e-12) - 1e-6, rel=1e-12)


def test_rmse_b_published_undoes_the_canonical_form():
    """rmse_b_published compares the raw b^ the solver returned (raw b = b - a * mean / sd)."""
    rng = np.random.default_rng(0)
    theta, a, b = rng.normal(size=50), rng.uniform(0.5, 1.0, 8), rng.normal(0, 0.5, 8)
    # a raw estimate on another location and scale:
    # theta_r = 3 theta + 2, a_r = a / 3, b_r = b - 2 a / 3
    theta_r, a_r, b_r = 3 * theta + 2, a / 3, b - 2 * a / 3 + 0.1
    raw = simulation_metrics(theta_r, a_r, b_r, theta, a, b)
    expected = math.sqrt(np.mean((b_r - b) ** 2))
    assert raw["rmse_b_published"] == pytest.approx(expected)
    # the same fit given in canonical form with its raw scale recorded
    theta_c, a_c, b_c = canonicalize(theta_r, a_r, b_r)
    canonical = simulation_metrics(theta_c, a_c, b_c, theta, a, b,
                                   raw_scale=(theta_r.mean(), theta_r.std()))
    assert canonical["rmse_b_published"] == pytest.approx(expected)
    # the scale-free rmse_b is the same for both and differs from the raw one
    assert canonical["rmse_b"] == pytest.approx(raw["rmse_b"])
    assert canonical["rmse_b"] == pytest.approx(math.sqrt(0.01))
    assert abs(raw["rmse_b_published"] - raw["rmse_b"]) > 0.1


def test_fit_metrics_reads_the_raw_scale_of_a_fit():
    sim = simulate(120, 60, seed=4)
    result = cbmm.fit(sim.responses, seed=4)
    via_fit = fit_metrics(result, sim)
    direct = simulation_metrics(result.theta, result.a, result.b, sim.theta, sim.a, sim.b,
                                raw_scale=(result.info["theta_mean_raw"],
                                           result.info["theta_sd_raw"]))
    assert via_fit == pytest.approx(direct)
    # recomputed from the solver's raw output (the published definition)
    mean, sd = result.info["theta_mean_raw"], result.info["theta_sd_raw"]
    b_raw = np.asarray(result.b) - np.asarray(result.a) * mean / sd
    assert via_fit["rmse_b_published"] == pytest.approx(math.sqrt(np.mean((b_raw - sim.b) ** 2)))


def test_every_figure_definition_names_a_metric_column():
    for columns in METRIC_DEFINITIONS.values():
        assert set(columns.values()) <= set(SIMULATION_METRICS)
    assert METRIC_DEFINITIONS["published"].keys() == METRIC_DEFINITIONS["text"].keys()


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


def test_spearman_equals_scipy_with_ties_and_nan_for_constant_input():
    from scipy.stats import spearmanr

    from cbmm.metrics import spearman

    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(3, 40))
        x = rng.integers(0, 4, n).astype(float)        # heavy ties
        y = np.round(rng.normal(size=n), 1)
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert np.isnan(spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert np.isnan(spearman([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]))
