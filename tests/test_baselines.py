"""The baselines behind cbmm.fit: L-BFGS-B, Manopt, py-irt and mirt.

Truth comes from simulation (Spearman recovery), from a tightly converged
cBMM fit (same objective), from finite differences (gradients) and from
closed forms (parametrisation maps, Lipschitz constant).  Tests that need R's
mirt skip with the reason when it is not installed.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

import cbmm
from cbmm.methods._bilinear import balance_scale, orient_sign
from cbmm.engine import Objective
from cbmm.stopping import RelativeLossRule
from cbmm.methods.manopt import lipschitz_item_block, proximal_gradient
from cbmm.methods.pyirt import to_cbmm_parameters
from cbmm.registry import get_method
from method_software import needs


def simulate(n, j, *, sigma=1.0, missing=0.0, seed=0):
    """theta ~ N(0,1), a ~ U(0.5,1), b ~ N(0,0.5^2), y ~ Bernoulli(expit((theta a + b)/sigma))."""
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(n)
    a = rng.uniform(0.5, 1.0, j)
    b = rng.normal(0.0, 0.5, j)
    y = (rng.random((n, j)) < expit((np.outer(theta, a) + b) / sigma)).astype(float)
    y[rng.random((n, j)) < missing] = np.nan
    return y, theta, a, b


#: Statuses of a fit that the method's own stopping rule ended (short of a stationary
#: point or not): the paper's rule is what these tests check.
STOPPED_BY_RULE = ("converged", "not_stationary")


def paper_fit(y, method, **settings):
    """``cbmm.fit`` as the paper runs it (random start, its rule, no prior), then ``settings``."""
    return cbmm.fit(y, method, **{**cbmm.paper_settings(method), **settings})


@pytest.fixture(scope="module")
def problem():
    return simulate(500, 200, seed=2024)


@pytest.fixture(scope="module")
def tight_cbmm(problem):
    y = problem[0]
    return paper_fit(y, "cbmm", tol=1e-10, max_iter=100000, accelerate="squarem")


def _recovery(result, theta, a):
    return spearmanr(result.theta, theta)[0], spearmanr(result.a, a)[0]


# ---------------------------------------------------------------------------
# Shared objective (used by L-BFGS-B and Manopt)
# ---------------------------------------------------------------------------

def test_objective_matches_the_cross_entropy_and_finite_differences():
    y01, *_ = simulate(40, 15, sigma=0.7, missing=0.2, seed=3)
    y = cbmm.as_responses(y01).y
    rng = np.random.default_rng(1)
    theta, a, b = rng.standard_normal(40), rng.uniform(0.2, 2, 15), rng.standard_normal(15)
    value, g_theta, g_a, g_b = Objective(y, 0.7).loss_and_gradient(theta, a, b)

    p = expit((np.outer(theta, a) + b) / 0.7)
    seen = ~np.isnan(y01)
    gamma = np.nan_to_num(y01)
    expected = -np.sum((gamma * np.log(p) + (1 - gamma) * np.log1p(-p))[seen])
    assert value == pytest.approx(expected, rel=1e-12)

    x = np.concatenate([theta, a, b])
    grad = np.concatenate([g_theta, g_a, g_b])

    def f(v):
        return Objective(y, 0.7).loss_and_gradient(v[:40], v[40:55], v[55:])[0]

    h = 1e-6
    numeric = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)


def test_lipschitz_constant_is_exact_where_the_logistic_curvature_peaks():
    # At a = b = 0 every p_ij = 1/2, so item j's Hessian in (a_j, b_j) equals
    # the bound M_j / (4 sigma^2): L must be its largest eigenvalue.
    y01, *_ = simulate(30, 6, missing=0.3, seed=5)
    y = cbmm.as_responses(y01).y
    sigma = 0.8
    theta = np.random.default_rng(2).standard_normal(30)
    objective = Objective(y, sigma)
    h = 1e-5
    largest = 0.0
    for item in range(6):
        hessian = np.empty((2, 2))
        for col, which in enumerate(("a", "b")):
            grads = []
            for sign in (1, -1):
                a, b = np.zeros(6), np.zeros(6)
                (a if which == "a" else b)[item] = sign * h
                _, _, g_a, g_b = objective.loss_and_gradient(theta, a, b)
                grads.append(np.array([g_a[item], g_b[item]]))
            hessian[:, col] = (grads[0] - grads[1]) / (2 * h)
        largest = max(largest, np.linalg.eigvalsh(hessian).max())
    assert lipschitz_item_block(theta, y != 0, sigma) == pytest.approx(largest, rel=1e-6)


def test_proximal_gradient_enforces_nonnegativity_and_descends():
    y01, theta, *_ = simulate(200, 30, seed=7)
    y = cbmm.as_responses(y01).y
    rng = np.random.default_rng(0)
    a0, b0 = rng.normal(0, 1, 30), rng.normal(0, 1, 30)  # about half the slopes negative
    objective = Objective(y, 1.0)
    step = 1.0 / lipschitz_item_block(theta, y != 0, 1.0)
    a, _, history, times, steps, converged = proximal_gradient(
        objective, theta, a0, b0, step=step, sparsity=0.0, tol=1e-8, max_iter=5000, start=0.0)
    assert (a >= 0).all() and (a0 < 0).any()
    assert converged and steps == len(history) - 1 == len(times)
    assert np.all(np.diff(history) <= 1e-9 * history[0])  # monotone (step = 1/L)
    # with an l1 weight the slopes shrink
    a_sparse, *_ = proximal_gradient(objective, theta, a0, b0, step=step, sparsity=20.0,
                                     tol=1e-8, max_iter=5000)
    assert a_sparse.sum() < a.sum() and np.count_nonzero(a_sparse == 0) > np.count_nonzero(a == 0)


def test_balance_scale_keeps_the_scores_and_equalises_the_norms():
    rng = np.random.default_rng(4)
    theta, a = rng.standard_normal(300), 0.05 * rng.uniform(0.1, 1, 40)
    balanced_theta, balanced_a = balance_scale(theta, a)
    np.testing.assert_allclose(np.outer(balanced_theta, balanced_a), np.outer(theta, a),
                               rtol=1e-12)
    assert np.linalg.norm(balanced_theta) == pytest.approx(np.linalg.norm(balanced_a))
    assert np.all(np.sign(balanced_a) == np.sign(a))  # a >= 0 stays feasible
    same_theta, same_a = balance_scale(theta, np.zeros(40))  # no scale to balance
    np.testing.assert_array_equal(same_theta, theta)
    np.testing.assert_array_equal(same_a, np.zeros(40))


def test_orient_sign_keeps_the_mirror_image_closer_to_a_nonnegative():
    rng = np.random.default_rng(5)
    theta = rng.standard_normal(50)
    a = np.concatenate([-rng.uniform(0.5, 1, 8), rng.uniform(0, 0.2, 2)])  # mostly negative
    flipped_theta, flipped_a, flipped = orient_sign(theta, a)
    assert flipped
    np.testing.assert_array_equal(np.outer(flipped_theta, flipped_a), np.outer(theta, a))
    # projecting onto a >= 0 moves the kept representative less than the other one
    assert (np.linalg.norm(np.minimum(flipped_a, 0)) < np.linalg.norm(np.minimum(a, 0)))
    kept_theta, kept_a, again = orient_sign(flipped_theta, flipped_a)
    assert not again
    np.testing.assert_array_equal(kept_theta, flipped_theta)
    np.testing.assert_array_equal(kept_a, flipped_a)


def test_relative_loss_rule_waits_for_the_gradient_safeguard():
    rule = RelativeLossRule(tol=1e-4, safeguard=0.1)
    rule.start(1000.0, gradient_norm=50.0)
    assert not rule.stop(900.0, 10.0)  # loss still moving
    assert not rule.stop(899.99, 10.0)  # relative change 1.1e-5 < tol, gradient 0.2 x start's
    assert rule.held_back == 1 and not rule.stopped
    assert not rule.stop(850.0, 4.0)  # moving again
    assert rule.stop(849.99, 4.0)  # change 1.2e-5 < tol at 0.08 x the start's gradient
    assert rule.stopped and rule.held_back == 1
    assert rule.gradient_ratio == pytest.approx(4.0 / 50.0)


# ---------------------------------------------------------------------------
# L-BFGS-B and Manopt
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["lbfgsb", pytest.param("manopt", marks=needs("manopt"))])
def test_gradient_baselines_recover_truth_and_reach_the_cbmm_optimum(method, problem,
                                                                      tight_cbmm):
    y, theta, a, _ = problem
    result = paper_fit(y, method)
    assert result.status in STOPPED_BY_RULE
    rho_theta, rho_a = _recovery(result, theta, a)
    assert rho_theta >= 0.95 and rho_a >= 0.6
    assert abs(result.loss - tight_cbmm.loss) <= 1e-3 * tight_cbmm.loss
    assert np.all(np.asarray(result.a) >= 0)
    # the shared start went in, and the history is the method's own sequence
    theta0, a0, b0 = cbmm.initial_values(*y.shape, seed=0)
    y_pm = cbmm.as_responses(y).y
    assert result.loss_history[0] == pytest.approx(cbmm.loss(theta0, a0, b0, y_pm), rel=1e-10)
    assert len(result.info["time_history"]) == len(result.loss_history)
    # stopped when the relative loss change fell below tol at a small gradient: the
    # iterations where it fell below earlier are exactly those the safeguard held back
    history = np.array(result.loss_history[:result.n_iter + 1])
    changes = np.abs(np.diff(history)) / history[:-1]
    assert changes[-1] < 1e-4
    assert np.count_nonzero(changes[:-1] < 1e-4) == result.info["held_back"]
    assert result.info["gradient_ratio"] <= result.info["gradient_safeguard"]


@pytest.mark.filterwarnings("ignore::cbmm.ConvergenceWarning")
@pytest.mark.parametrize("method", ["lbfgsb", pytest.param("manopt", marks=needs("manopt"))])
def test_gradient_baselines_solve_the_same_problem_at_every_temperature(method):
    # loss (3) depends on (a / sigma, b / sigma) alone; in the raw variables L-BFGS-B
    # stopped at sigma = 1e-30 on the intercept-only saddle (theta constant) and called it
    # converged, and at 1e-200 both failed
    y, *_ = simulate(60, 30, seed=3)
    settings = dict(n_starts=1, tol=1e-12, max_iter=5000)
    unit = cbmm.fit(y, method, **settings)
    assert cbmm.paper_settings(method)["parametrisation"] == "raw"  # the paper's variables
    for sigma in (1e-200, 1e-30, 1e30, 1e200):
        fitted = cbmm.fit(y, method, sigma=sigma, **settings)
        assert fitted.status == unit.status
        assert fitted.info["objective"] == pytest.approx(unit.info["objective"], rel=1e-12)
        np.testing.assert_allclose(fitted.theta, unit.theta, atol=1e-9)
        np.testing.assert_allclose(fitted.a / sigma, unit.a, atol=1e-9)
        np.testing.assert_allclose(fitted.b / sigma, unit.b, atol=1e-9)


@pytest.mark.parametrize("method, options", [
    ("lbfgsb", {}), pytest.param("manopt", {}, marks=needs("manopt")),
    pytest.param("pyirt", {"record_history": True}, marks=needs("pyirt")),
    pytest.param("pyirt", {"record_history": False}, marks=needs("pyirt")),
])
def test_progress_is_reported_once_per_iteration(method, options):
    y, *_ = simulate(80, 20, seed=12)
    data = cbmm.as_responses(y)
    spec = get_method(method)
    calls = []
    theta0, a0, b0 = cbmm.initial_values(80, 20, seed=3)
    out = spec.solve(data, theta0, a0, b0, sigma=1.0, tol=1e-4, max_iter=6, seed=3,
                     progress=lambda iteration, loss: calls.append((iteration, loss)),
                     **spec.check_options(options))
    assert [iteration for iteration, _ in calls] == list(range(1, out.n_iter + 1))
    if method == "pyirt":
        assert out.n_iter == 6  # py-irt always runs every epoch
    else:  # the loss after each iteration, as recorded in the history
        assert [loss for _, loss in calls] == out.loss_history[1:out.n_iter + 1]


# Designs on which the baselines used to stop at the saddle theta a^T = 0 (Spearman(theta)
# near 0) or, for Manopt, return the mirror image (theta reversed, a == 0 after the
# proximal step); see docs/baselines.md.  Each tuple: simulate() arguments and the seed of
# the data and of the fit.  The smallest ones (N = 300, J = 100 at the paper's lowest
# temperature; both failures on seeds 0, 2, 3) run by default; the paper's own designs at
# the paper's size, with the workflow's seeds, run with -m slow.
LOW_TEMPERATURE = 10 ** -0.75
SMALL_STALLS = [
    pytest.param({"n_models": 300, "n_items": 100, "sigma": LOW_TEMPERATURE}, seed,
                 id=f"300x100-{seed}")
    for seed in (0, 2, 3)
] + [pytest.param({"n_models": 1000, "n_items": 200}, 2450711755, id="size_fixN-200-rep0")]
PAPER_STALLS = [
    pytest.param({"n_models": 1000, "n_items": 1000}, 1493172944, id="size_fixN-1000-rep2"),
    pytest.param({"n_models": 5000, "n_items": 1000}, 2981693983, id="size_fixJ-5000-rep1"),
    pytest.param({"n_models": 1000, "n_items": 1000, "sigma": LOW_TEMPERATURE}, 1410014404,
                 id="temperature--0.75-rep0"),
    pytest.param({"n_models": 1000, "n_items": 1000, "sigma": 10 ** -0.5}, 1419934491,
                 id="temperature--0.5-rep0"),
    pytest.param({"n_models": 1000, "n_items": 1000, "missing": "mcar", "missing_rate": 0.5},
                 378800390, id="mcar-0.5-rep1"),
    pytest.param({"n_models": 1000, "n_items": 1000, "sparsity": 0.3}, 2001834722,
                 id="sparsity-0.3-rep0"),
]
#: Spearman(theta^, theta) may fall short of cBMM's by at most this much.
RECOVERY_MARGIN = 0.01
#: Final loss at most this far (relatively) above cBMM's at the same tolerance.
LOSS_MARGIN = 1e-3
#: Stationarity at most this multiple of cBMM's at the same tolerance.
STATIONARITY_FACTOR = 10.0


def _check_competent(method, design, seed):
    from cbmm.simulate import simulate as simulate_design

    simulation = simulate_design(**design, seed=seed)
    sigma = simulation.sigma
    reference = paper_fit(simulation.responses, "cbmm", sigma=sigma, seed=seed)
    result = paper_fit(simulation.responses, method, sigma=sigma, seed=seed)
    # stopped by its rule; on data with perfect scorers, judged unbounded like cBMM
    assert result.status in STOPPED_BY_RULE + ("unbounded",)
    assert (result.status == "unbounded") == (reference.status == "unbounded")
    rho = spearmanr(result.theta, simulation.theta)[0]
    rho_cbmm = spearmanr(reference.theta, simulation.theta)[0]
    assert rho >= rho_cbmm - RECOVERY_MARGIN
    assert spearmanr(result.theta, reference.theta)[0] > 0.99  # oriented like cBMM's
    a = np.asarray(result.a)
    assert (a >= 0).all() and np.mean(a) > 0.5 * np.mean(np.asarray(reference.a))
    assert result.loss <= reference.loss * (1 + LOSS_MARGIN)
    assert result.info["stationarity"] <= STATIONARITY_FACTOR * reference.info["stationarity"]


@pytest.mark.filterwarnings("ignore::cbmm.DegenerateDataWarning")  # perfect scorers at low sigma
@pytest.mark.parametrize("design, seed", SMALL_STALLS)
@pytest.mark.parametrize("method", ["lbfgsb", pytest.param("manopt", marks=needs("manopt"))])
def test_gradient_baselines_leave_the_saddle_and_keep_the_orientation(method, design, seed):
    _check_competent(method, design, seed)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::cbmm.DegenerateDataWarning")
@pytest.mark.parametrize("design, seed", PAPER_STALLS)
@pytest.mark.parametrize("method", ["lbfgsb", pytest.param("manopt", marks=needs("manopt"))])
def test_gradient_baselines_are_competent_on_the_paper_designs_that_stalled(method, design,
                                                                             seed):
    _check_competent(method, design, seed)


@needs("manopt")
def test_manopt_orients_a_mirrored_solution_before_the_proximal_step(problem, tight_cbmm):
    # From the mirror image of the shared start, conjugate gradient converges to the mirror
    # image of the solution (slopes negative); projecting that onto a >= 0 would give a == 0.
    y, theta, *_ = problem
    data = cbmm.as_responses(y)
    theta0, a0, b0 = cbmm.initial_values(*y.shape, seed=0)
    spec = get_method("manopt")
    out = spec.solve(data, -theta0, -a0, b0, sigma=1.0, tol=1e-4, max_iter=1000, seed=0,
                     progress=None, **spec.check_options(spec.paper_options))
    assert out.info["flipped"] and out.status == "converged"
    assert (out.a >= 0).all() and np.mean(out.a) > 0.5 * np.mean(np.asarray(tight_cbmm.a))
    assert spearmanr(out.theta, theta)[0] >= spearmanr(tight_cbmm.theta, theta)[0] - 0.01
    assert cbmm.loss(out.theta, out.a, out.b, data.y) <= tight_cbmm.loss * (1 + 1e-3)


@pytest.mark.parametrize("method", ["lbfgsb", pytest.param("manopt", marks=needs("manopt"))])
def test_gradient_baselines_stop_at_max_iter(method, problem):
    result = paper_fit(problem[0], method, max_iter=2)
    assert result.status == "max_iter" and result.n_iter == 2


@pytest.mark.parametrize("method", ["lbfgsb", pytest.param("manopt", marks=needs("manopt"))])
def test_negative_discrimination_is_clamped_at_zero(method):
    y, *_ = simulate(300, 40, seed=11)
    y[:, 0] = 1 - y[:, 0]  # item 0 is answered better by weaker models: unconstrained a_0 < 0
    result = paper_fit(y, method)
    assert not result.failed
    a = np.asarray(result.a)
    assert (a >= 0).all() and a[0] == pytest.approx(0.0, abs=1e-6)
    if method == "manopt":
        assert result.info["negative_a_before_prox"] >= 1 and result.info["prox_steps"] >= 1


@needs("manopt")
def test_manopt_options_are_validated(problem):
    # bad option values are bad input (ValueError), checked before the fit starts
    with pytest.raises(ValueError, match=r"'sparsity' must be >= 0"):
        paper_fit(problem[0], "manopt", sparsity=-1.0)
    with pytest.raises(ValueError, match=r"'step_size' must be > 0"):
        paper_fit(problem[0], "manopt", step_size=0.0)


# ---------------------------------------------------------------------------
# py-irt
# ---------------------------------------------------------------------------

def test_pyirt_parametrisation_maps_to_the_same_logits():
    rng = np.random.default_rng(0)
    ability, diff, disc = rng.standard_normal(7), rng.standard_normal(5), rng.uniform(0.1, 3, 5)
    sigma = 1.7
    theta, a, b = to_cbmm_parameters(ability, diff, disc, sigma)
    np.testing.assert_allclose((np.outer(theta, a) + b) / sigma,
                               disc * (ability[:, None] - diff), rtol=1e-12, atol=1e-12)


@needs("pyirt")
def test_pyirt_starts_from_the_shared_start_quietly_and_reproducibly(tmp_path, monkeypatch,
                                                                     capfd):
    import torch

    monkeypatch.chdir(tmp_path)
    y, *_ = simulate(60, 25, sigma=1.3, missing=0.1, seed=4)
    torch_state = torch.random.get_rng_state()
    first = paper_fit(y, "pyirt", sigma=1.3, max_iter=15, seed=3)
    again = paper_fit(y, "pyirt", sigma=1.3, max_iter=15, seed=3)
    other = paper_fit(y, "pyirt", sigma=1.3, max_iter=15, seed=4)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert list(tmp_path.iterdir()) == []
    assert torch.equal(torch.random.get_rng_state(), torch_state)

    assert first.n_iter == 15 and len(first.loss_history) == 16
    theta0, a0, b0 = cbmm.initial_values(60, 25, seed=3, sigma=1.3)
    start = cbmm.loss(theta0, a0, b0, cbmm.as_responses(y).y, 1.3)
    assert first.loss_history[0] == pytest.approx(start, rel=1e-5)  # float32 inside py-irt
    assert first.loss_history[-1] == pytest.approx(first.loss, rel=1e-9)
    np.testing.assert_array_equal(first.theta, again.theta)
    assert not np.array_equal(first.theta, other.theta)


@needs("pyirt")
def test_pyirt_takes_any_seed_and_is_told_what_it_takes_for_degenerate_data(tmp_path,
                                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    y, *_ = simulate(40, 20, seed=5)
    y[:, 3] = 1.0  # every model right: no finite easiness without a prior
    with pytest.warns(cbmm.DegenerateDataWarning) as caught:
        huge = paper_fit(y, "pyirt", max_iter=3, seed=2**64 + 5)
    # fit takes any non-negative seed (torch's generator takes it modulo 2**64): it was a
    # failed fit, "Overflow when unpacking long long"
    assert not huge.failed, huge.status
    again = paper_fit(y, "pyirt", max_iter=3, seed=2**64 + 5)
    assert np.isfinite(huge.theta).all()
    np.testing.assert_array_equal(huge.theta, again.theta)
    advice = " ".join(str(w.message) for w in caught)
    # py-irt has no prior option: the warning named prior='normal', which fit then refused
    assert "prior='normal'" not in advice and "method='cbmm'" in advice


@needs("pyirt")
def test_pyirt_takes_a_start_with_a_flat_item():
    """A start of a0 = 0 (the spectral start's for an all-wrong item, as on 40 models x 60
    items of MATH-500) has no log for py-irt's discrimination: it was a failed fit (NaN
    logits), our bug, not py-irt's."""
    import warnings

    y, *_ = simulate(40, 20, seed=5)
    y[:, 3] = 0.0  # every model wrong
    theta0, a0, b0 = cbmm.initial_values(40, 20, seed=1)
    a0[3] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cbmm.fit(y, "pyirt", start=(theta0, a0, b0), max_iter=20)
    assert result.status == "max_iter" and np.isfinite(result.loss)


@pytest.mark.slow
@needs("pyirt")
def test_pyirt_recovers_truth(problem):
    y, theta, a, _ = problem
    result = paper_fit(y, "pyirt", max_iter=500)  # half the paper's budget keeps CI short
    assert result.n_iter == 500 and not result.failed
    rho_theta, rho_a = _recovery(result, theta, a)
    # py-irt is known to be weaker on the discriminations (the paper's finding)
    assert rho_theta >= 0.95 and rho_a >= 0.4


# ---------------------------------------------------------------------------
# mirt
# ---------------------------------------------------------------------------

@needs("mirt")
def test_mirt_recovers_truth_on_the_sigma_scale():
    sigma = 1.5
    y, theta, a, _ = simulate(500, 200, sigma=sigma, missing=0.05, seed=2024)
    result = paper_fit(y, "mirt", sigma=sigma)
    reference = paper_fit(y, "cbmm", sigma=sigma, tol=1e-8, max_iter=100000,
                         accelerate="squarem")
    assert result.status == "converged" and 0 < result.n_iter < 1000
    rho_theta, rho_a = _recovery(result, theta, a)
    assert rho_theta >= 0.95 and rho_a >= 0.6
    # a = sigma * a1: same scale as the joint MLE (a wrong map would be off by 1.5x)
    ratio = np.median(np.asarray(result.a) / np.asarray(reference.a))
    assert 0.8 < ratio < 1.2
    assert abs(result.loss - reference.loss) <= 1e-3 * reference.loss
    assert result.info["r_output"] == ""


@needs("mirt")
def test_mirt_error_becomes_a_failed_result_with_its_message():
    import pandas as pd

    y, *_ = simulate(100, 10, seed=1)
    y[:, 3] = 1.0
    with pytest.warns(cbmm.DegenerateDataWarning):
        result = paper_fit(y, "mirt")
    assert result.failed
    assert result.status.startswith("failed: mirt: ")
    assert "only one response category" in result.status
    assert np.isnan(result.theta).all() and np.isnan(result.a).all() and np.isnan(result.loss)
    # the message names the user's item, not the name R was given
    labelled = pd.DataFrame(y, columns=[str(j + 100) for j in range(10)])
    with pytest.warns(cbmm.DegenerateDataWarning):
        result = paper_fit(labelled, "mirt")
    assert "item '103' (column 4)" in result.status and "item4" not in result.status


def test_mirt_messages_name_the_users_items():
    import pandas as pd

    from cbmm.methods.mirt import user_item_names

    labels = pd.Index([str(k) for k in range(100)])
    text = "items have only one response category: item97, item1; see item100"
    assert user_item_names(text, labels) == (
        "items have only one response category: item '96' (column 97), item '0' (column 1); "
        "see item '99' (column 100)")
    assert user_item_names("item101 and itemized", labels) == "item101 and itemized"
    assert user_item_names(text, None) == (
        "items have only one response category: column 96 (from 0), column 0 (from 0); "
        "see column 99 (from 0)")


def test_mirt_seed_mapping_covers_every_integer_seed():
    from cbmm.methods.mirt import R_SEED_MODULUS, r_seed

    assert R_SEED_MODULUS == 2**31 - 1  # largest R integer (-2**31 is NA_integer_)
    seeds = [0, 7, 2**31 - 2, 2**31 - 1, 2**31, 2**32 - 1, 2**63 + 12345, 2**80 + 3,
             np.uint32(3_000_000_000), np.int64(2**40 + 7), np.uint64(2**64 - 1)]
    for seed in seeds:
        value = r_seed(seed)
        assert type(value) is int and 0 <= value < R_SEED_MODULUS
        assert value == int(seed) % R_SEED_MODULUS == r_seed(int(seed))
    assert r_seed(12345) == 12345  # seeds R accepts are passed unchanged
    for not_a_seed in (None, True, 1.5, np.random.default_rng(0)):
        assert r_seed(not_a_seed) is None


def test_mirt_seed_above_2_31_seeds_r_deterministically():
    import importlib.util

    if importlib.util.find_spec("rpy2") is None:
        pytest.skip("rpy2 not installed: R's set.seed cannot be called")
    from cbmm.methods.mirt import _start_r, seed_r

    try:
        ro = _start_r()
    except Exception as exc:  # noqa: BLE001 (rpy2 raises various errors without R)
        pytest.skip(f"R cannot be started through rpy2: {exc}")
    seed = 2**31 + 17  # a workflow seed (uint32) that R's set.seed rejects as it is
    with pytest.raises(OverflowError, match="32-bit"):
        ro.r["set.seed"](seed)

    def draws(value):
        used = seed_r(value)
        return used, list(ro.r("runif(4)"))

    used, first = draws(seed)
    assert draws(seed) == (used, first)
    assert draws(np.uint64(seed)) == (used, first)
    assert draws(seed + 1)[1] != first
    assert draws(seed + 2**40)[1] != first
    ro.r(f"set.seed({seed % (2**31 - 1)})")  # the documented value, set by hand in R
    assert list(ro.r("runif(4)")) == first


@needs("mirt")
def test_mirt_fits_with_a_seed_above_2_31():
    y, theta, *_ = simulate(200, 30, seed=9)  # no all-correct/all-wrong rows or columns
    seed = 2**31 + 2**20
    result = paper_fit(y, "mirt", seed=seed)
    again = paper_fit(y, "mirt", seed=seed)
    assert not result.failed, result.status
    assert result.info["r_seed"] == seed % (2**31 - 1)
    reference = paper_fit(y, "cbmm", tol=1e-8, max_iter=100000, accelerate="squarem")
    assert spearmanr(result.theta, theta)[0] >= spearmanr(reference.theta, theta)[0] - 0.02
    np.testing.assert_array_equal(result.theta, again.theta)


# ---------------------------------------------------------------------------
# Missing software
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("method, module, install", [
    ("manopt", "pymanopt", "pip install"),
    ("pyirt", "py_irt.training", "pip install"),
    ("mirt", "rpy2", "pip install 'rpy2>=3.5,<3.6'"),
])
def test_missing_software_gives_a_clear_error(method, module, install, monkeypatch):
    y, *_ = simulate(20, 5, seed=0)
    monkeypatch.setitem(sys.modules, module, None)  # import of the library now fails
    with pytest.raises(cbmm.MethodUnavailableError) as fit_error:
        paper_fit(y, method)
    with pytest.raises(cbmm.MethodUnavailableError) as check_error:
        cbmm.check_methods(["lbfgsb", method])
    for message in (str(fit_error.value), str(check_error.value)):
        assert module in message and install in message
        assert "leave it out of `methods:`" in message
    assert "lbfgsb" not in str(check_error.value)


def test_missing_r_package_mirt_names_the_r_install_command(tmp_path):
    import importlib.util
    import os
    import subprocess

    if importlib.util.find_spec("rpy2") is None:
        pytest.skip("rpy2 not installed: the R side cannot be checked")
    empty = tmp_path / "rlib"
    empty.mkdir()
    env = {**os.environ, "R_LIBS_USER": str(empty), "R_LIBS": str(empty)}
    probe = subprocess.run(
        [sys.executable, "-c", ("import cbmm\ntry:\n    cbmm.check_methods(['mirt'])\n"
                                "except cbmm.MethodUnavailableError as e:\n    print(e)\n"
                                "else:\n    print('FOUND')")],
        check=False, env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    if "FOUND" in probe.stdout:
        pytest.skip("mirt is installed in R's site/system library: its absence cannot be "
                    "simulated through R_LIBS_USER")
    if "R package mirt" not in probe.stdout:
        pytest.skip(f"R itself is unavailable here: {probe.stdout.strip()}")
    assert "install.packages(\"mirt\")" in probe.stdout
    assert "leave it out of `methods:`" in probe.stdout
