"""Marginal maximum likelihood (method "mml", cbmm.marginal): its likelihood, information,
EM and standard errors, against finite differences, numerical integration, R's mirt (where
installed) and simulation truth."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import cbmm
from cbmm import marginal
from cbmm.posterior import GRID, prior_on_grid
from cbmm.marginal import (MAX_QUADRATURE_POINTS, _Answers, _e_step, observed_information,
                           quadrature, solve_marginal)
from cbmm.responses import as_responses
from cbmm.simulate import simulate
from method_software import needs


def _draw(n, j, *, seed, theta=None, a=None, b=None, missing=0.0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n) if theta is None else theta
    a = rng.uniform(0.5, 2.5, j) if a is None else a
    b = rng.normal(size=j) if b is None else b
    p = special.expit(np.outer(theta, a) + b)
    y = np.where(rng.random((n, j)) < p, 1, -1).astype(np.int8)
    y[rng.random((n, j)) < missing] = 0
    return as_responses(y, coding="signed"), theta, a, b


def _loglik(responses, alpha, beta, nodes, log_w):
    return _e_step(_Answers(responses), alpha, beta, nodes, log_w)[1]


def test_observed_information_is_the_negative_hessian_by_finite_differences():
    responses, _, a, b = _draw(300, 5, seed=1, missing=0.2)
    nodes, log_w = quadrature()
    alpha, beta = a * 0.8, b + 0.3   # any point: Louis' formula is exact everywhere
    information = observed_information(responses, alpha, beta, nodes, log_w)
    point = np.concatenate([alpha, beta])

    def loglik(x):
        return _loglik(responses, x[:5], x[5:], nodes, log_w)

    h = 1e-4
    for k, m in [(0, 0), (0, 5), (5, 5), (1, 3), (2, 8), (6, 9)]:
        e_k, e_m = np.eye(10)[k] * h, np.eye(10)[m] * h
        second = (loglik(point + e_k + e_m) - loglik(point + e_k - e_m)
                  - loglik(point - e_k + e_m) + loglik(point - e_k - e_m)) / (4 * h * h)
        assert information[k, m] == pytest.approx(-second, rel=1e-4, abs=1e-3)
    assert np.allclose(information, information.T)


@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_the_stopping_checks_information_is_the_observed_informations_diagonal(storage):
    """The stopping rule's standard errors (``_observed_diagonal``, by blocks of cells)
    are the observed information's: the complete-data information's diagonal was up to
    several times larger where models answer many items, and a gradient in its units
    passed as stationary."""
    responses, _, a, b = _draw(300, 9, seed=3, missing=0.2)
    responses = responses.to_sparse() if storage == "sparse" else responses
    nodes, log_w = quadrature(41)
    alpha, beta = a * 0.9, b - 0.2
    answers = _Answers(responses)
    post, _ = _e_step(answers, alpha, beta, nodes, log_w)
    expected = np.diag(observed_information(responses, alpha, beta, nodes, log_w))
    # by blocks (of models, or of answered cells): the blocks' sums are the whole's
    d_aa, d_bb = marginal._observed_diagonal(answers, post, answers.expected(post), alpha,
                                             beta, nodes, gathered=7 * nodes.size)
    np.testing.assert_allclose(np.concatenate([d_aa, d_bb]), expected, rtol=1e-8)


def test_the_reported_stationarity_is_in_the_observed_informations_units():
    """``scaled_gradient_marginal`` is each item's gradient over its observed standard error
    at the returned point (finite differences of the marginal likelihood over the observed
    information's diagonal), not over the complete-data information's, which is larger and
    made the same gradient look smaller where models answer many items."""
    responses, *_ = _draw(150, 60, seed=5)
    out = solve_marginal(responses, np.ones(60), np.zeros(60), population="normal",
                         n_quad=61, max_iter=3)   # stopped early: a gradient to measure
    nodes = np.asarray(out.info["population"]["nodes"])
    log_w = np.log(out.info["population"]["weights"])
    alpha, beta = np.asarray(out.a), np.asarray(out.b)
    observed = np.diag(observed_information(responses, alpha, beta, nodes, log_w))
    point, h = np.concatenate([alpha, beta]), 1e-5
    slopes = np.array([(_loglik(responses, *np.split(point + h * e, 2), nodes, log_w)
                        - _loglik(responses, *np.split(point - h * e, 2), nodes, log_w)) / (2 * h)
                       for e in np.eye(120)])
    slopes[:60] = np.where((alpha <= 0) & (slopes[:60] < 0), 0.0, slopes[:60])
    expected = np.max(np.abs(slopes) / np.sqrt(observed))
    assert out.info["scaled_gradient_marginal"] == pytest.approx(expected, rel=1e-4)
    # the complete-data units give less: the cheap bound the loop checks first
    answers = _Answers(responses)
    post, _ = _e_step(answers, alpha, beta, nodes, log_w)
    bound = marginal._scaled_gradient(answers, post, alpha, beta, nodes, exact=False)
    assert bound < expected and bound == pytest.approx(
        np.max(np.abs(slopes) / np.sqrt(np.concatenate(marginal._score_information(
            alpha, beta, *answers.expected(post), nodes)[2::2]))), rel=1e-4)


def test_posterior_mean_and_sd_match_numerical_integration():
    # one model, two answers, N(0, 1) population: EAP and posterior sd by quadrature
    alpha, beta = np.array([1.3, 0.7]), np.array([-0.4, 0.9])
    responses = as_responses(np.array([[1, -1], [1, 1]], dtype=np.int8), coding="signed")
    nodes, log_w = quadrature()
    post, _ = _e_step(_Answers(responses), alpha, beta, nodes, log_w)
    sds = np.sqrt(post @ nodes ** 2 - (post @ nodes) ** 2)
    for row, answers in enumerate(([1, 0], [1, 1])):
        def likelihood(t, answers=answers):
            p = special.expit(alpha * t + beta)
            return stats.norm.pdf(t) * np.prod(np.where(answers, p, 1 - p))

        mass = integrate.quad(likelihood, -12, 12)[0]
        mean = integrate.quad(lambda t: t * likelihood(t), -12, 12)[0] / mass
        second = integrate.quad(lambda t: t * t * likelihood(t), -12, 12)[0] / mass
        assert post[row] @ nodes == pytest.approx(mean, abs=2e-3)
        assert sds[row] == pytest.approx(np.sqrt(second - mean ** 2), abs=2e-3)


@pytest.mark.parametrize("population", ["normal", "histogram"])
def test_em_raises_the_likelihood_and_stops_at_a_stationary_point(population):
    responses, *_ = _draw(800, 12, seed=2, missing=0.1)
    out = solve_marginal(responses, np.ones(12), np.zeros(12), population=population)
    assert out.status == "converged"
    assert np.all(np.diff(out.loss_history) <= 1e-7 * abs(out.loss_history[0]))
    # the reported point: the gradient of the marginal likelihood (finite differences) is
    # within 1 % of a standard error of zero, on the reported scale, the population fitted
    nodes = np.asarray(out.info["population"]["nodes"])
    log_w = np.log(out.info["population"]["weights"])
    point = np.concatenate([out.a, out.b])
    curvature = np.diag(observed_information(responses, out.a, out.b, nodes, log_w))
    h = 1e-5
    for k in (0, 4, 12, 20):
        step = np.eye(24)[k] * h
        slope = (_loglik(responses, *np.split(point + step, 2), nodes, log_w)
                 - _loglik(responses, *np.split(point - step, 2), nodes, log_w)) / (2 * h)
        assert abs(slope) / np.sqrt(curvature[k]) < 0.01
    weights = np.asarray(out.info["population"]["weights"])
    assert weights @ nodes == pytest.approx(0.0, abs=1e-6)   # the scale: mean 0, sd 1
    assert weights @ nodes ** 2 == pytest.approx(1.0, abs=1e-6)


def test_dense_and_sparse_storage_give_the_same_fit():
    responses, *_ = _draw(400, 20, seed=3, missing=0.5)
    dense = solve_marginal(responses, np.ones(20), np.zeros(20))
    sparse = solve_marginal(responses.to_sparse(), np.ones(20), np.zeros(20))
    assert np.allclose(dense.a, sparse.a, atol=1e-10)
    assert np.allclose(dense.theta, sparse.theta, atol=1e-10)


def test_a_reversed_item_is_held_at_zero_without_a_standard_error():
    responses, theta, a, b = _draw(1500, 8, seed=4)
    y = responses.y.copy()
    y[:, 0] = -y[:, 0]     # weaker models right more often: a negative slope
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cbmm.fit(y, "mml", coding="signed", se=True)
    assert result.a[0] == 0.0
    assert np.isnan(result.a_se[0]) and np.isfinite(result.b_se[0])
    assert np.isfinite(result.a_se[1:]).all()


@pytest.mark.parametrize("population", ["normal", "histogram"])
def test_fit_recovers_the_truth_within_its_standard_errors(population):
    # many models, few items: where the joint fit's intervals fail
    responses, theta, a, b = _draw(4000, 15, seed=5, missing=0.1)
    result = cbmm.fit(responses, "mml", se=True, population=population)
    assert result.status == "converged"
    z_a = (np.asarray(result.a) - a) / np.asarray(result.a_se)
    z_b = (np.asarray(result.b) - b) / np.asarray(result.b_se)
    assert np.abs(z_a).max() < 4 and np.abs(z_b).max() < 4
    assert 0.6 < np.std(np.concatenate([z_a, z_b])) < 1.4
    z_theta = (np.asarray(result.theta) - theta) / np.asarray(result.theta_se)
    assert np.mean(np.abs(z_theta) < 1.96) == pytest.approx(0.95, abs=0.02)
    # the population's scale is kept: nothing was standardised away
    assert result.info["theta_sd_raw"] == 1.0 and result.info["theta_mean_raw"] == 0.0
    assert np.allclose(result.raw_parameters()[1], result.a)


def test_fit_settings_the_method_does_not_have_are_refused():
    responses, *_ = _draw(50, 5, seed=6)
    with pytest.raises(ValueError, match="option 'population' must be one of"):
        cbmm.fit(responses, "mml", population="uniform")


def test_all_correct_items_warn_and_models_do_not():
    responses, *_ = _draw(200, 6, seed=7)
    y = responses.y.copy()
    y[0] = 1   # a model with every answer right: its posterior mean is finite
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = cbmm.fit(y, "mml", coding="signed")
    assert np.isfinite(result.theta).all()
    y[:, 2] = 1
    y[:, 4] = -1
    with pytest.warns(cbmm.DegenerateDataWarning, match="easiness has no finite optimum"):
        result = cbmm.fit(y, "mml", coding="signed", se=True)
    # no finite maximum: a at 0 (EM left it at about 1e-16, with standard errors of
    # millions) and no standard errors; the other items keep theirs
    a, a_se, b_se = (np.asarray(v, dtype=float) for v in (result.a, result.a_se, result.b_se))
    assert (a[[2, 4]] == 0.0).all()
    assert np.isnan(a_se[[2, 4]]).all() and np.isnan(b_se[[2, 4]]).all()
    assert np.isfinite(a_se[[0, 1, 3, 5]]).all()
    # a new model right on those items alone has told nothing about its ability
    new = np.zeros((1, 6))
    new[0, 2], new[0, 4] = 1, -1
    scored = cbmm.score(new, result, prior="none", coding="signed")
    assert scored["status"].iloc[0] == "no information"


@needs("mirt")
def test_normal_population_agrees_with_r_mirt():
    """R's mirt fits the same model (N(0, 1), 61 nodes on [-6, 6], a >= 0)."""
    responses, *_ = _draw(1000, 10, seed=8, missing=0.2)
    ours = cbmm.fit(responses, "mml", population="normal", tol=1e-10)
    theirs = cbmm.fit(responses, "mirt", tol=1e-6)
    assert np.asarray(ours.a) == pytest.approx(np.asarray(theirs.raw_parameters()[1]), abs=2e-3)
    assert np.asarray(ours.b) == pytest.approx(np.asarray(theirs.raw_parameters()[2]), abs=2e-3)
    assert ours.info["marginal_loglik"] == pytest.approx(theirs.info["marginal_loglik"],
                                                         abs=1e-2)


def test_starts_are_compared_by_the_marginal_likelihood():
    responses, *_ = _draw(300, 40, seed=2)
    fitted = cbmm.fit(responses, "mml", n_starts=3)
    starts = fitted.info["starts"]
    assert [s["start"] for s in starts] == ["spectral", "random 1", "random 2"]
    best = fitted.info["best_start"]
    # each start's objective is minus its own fit's marginal log-likelihood: the best one's
    # is the result's, and a fit from that start alone reaches it
    assert starts[best]["objective"] == pytest.approx(-fitted.info["marginal_loglik"],
                                                      rel=1e-12)
    assert min(s["objective"] for s in starts) == starts[best]["objective"]
    assert fitted.status == "converged" and fitted.info["starts_agreeing"] == 3
    with pytest.raises(ValueError, match="n_starts=2 needs a method whose starts can be "
                                         "compared .* 'pyirt' reports no objective"):
        cbmm.fit(responses, "pyirt", n_starts=2)


def test_a_start_alone_at_the_best_marginal_likelihood_is_multimodal():
    """A user's method that reports its objective (here one whose likelihood depends on
    its start's slopes, at least 2 apart) is judged as mml and mirt are."""
    def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None):
        n, j = responses.shape
        level = round(float(np.sum(a0)) * 10)
        return cbmm.SolverOutput(theta=np.linspace(-1, 1, n), a=np.ones(j), b=np.zeros(j),
                                 loss_history=[], n_iter=1, status="converged", runtime_s=0.0,
                                 info={"marginal_loglik": -1000.0 - 2.0 * level})

    from cbmm.marginal import negative_marginal_loglik

    cbmm.register_method("starts_apart_test_method", solve, objective=negative_marginal_loglik)
    responses, *_ = _draw(50, 10, seed=3)
    with pytest.warns(cbmm.ConvergenceWarning, match="only 1 of 3 starts"):
        fitted = cbmm.fit(responses, "starts_apart_test_method", n_starts=3, start="random",
                          isolate=False)
    assert fitted.status == "multimodal"
    objectives = [s["objective"] for s in fitted.info["starts"]]
    assert len(set(objectives)) == 3 and fitted.info["starts_agreeing"] == 1


@needs("mirt")
def test_mirts_starts_each_keep_their_own_abilities():
    """mirt's abilities were a view of R's memory, which R may reuse once the vector is
    collected: on MATH-500 the starts of n_starts=3, fitted in one process, scrambled one
    another's (the best's rank correlation with the models' accuracy -0.19; 0.996 alone)."""
    from cbmm.registry import get_method

    responses, *_ = _draw(200, 15, seed=4)
    theta0, a0, b0 = cbmm.initial_values(200, 15, seed=0)
    out = get_method("mirt").solve(responses, theta0, a0, b0, sigma=1.0, tol=1e-4,
                                   max_iter=200)
    assert all(v.flags["OWNDATA"] for v in (out.theta, out.a, out.b))
    fitted = cbmm.fit(responses, "mirt", n_starts=3, start="random")
    best = fitted.info["best_start"]
    starts = cbmm.api._starts("random", None, 3, responses, 0, 1.0, 1.0, cbmm.prior.Penalty())
    alone = cbmm.fit(responses, "mirt", start=starts[best][1], n_starts=1)
    np.testing.assert_allclose(np.asarray(fitted.theta), np.asarray(alone.theta), atol=1e-8)
    assert all(s["rank_correlation"] > 0.99 for s in fitted.info["starts"])


def _skewed_population(n, j, seed):
    """Three quarters weak models bunched together, a quarter spread above them (a
    leaderboard's shape), standardised; steep items."""
    rng = np.random.default_rng(seed)
    strong = rng.random(n) < 0.25
    theta = np.where(strong, rng.normal(1.5, 1.0, n), rng.normal(-0.5, 0.5, n))
    theta = (theta - theta.mean()) / theta.std()
    return theta, rng.uniform(1, 4, j), rng.normal(0, 1.5, j)


def _a_coverage(method, n_rep, seed, **options):
    theta, a, b = _skewed_population(3000, 20, seed)
    shares = []
    for rep in range(n_rep):
        responses, *_ = _draw(3000, 20, seed=seed + 1 + rep, theta=theta, a=a, b=b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = cbmm.fit(responses, method, se=True, **options)
        bounds = result.confint()["a"]
        shares.append(np.mean((bounds["lower"] <= a) & (a <= bounds["upper"])))
    return np.mean(shares)


def test_marginal_intervals_hold_where_the_joint_fits_do_not():
    """3,000 models x 20 items, a skewed population: the joint fit's discriminations are
    biased by its abilities' noise (coverage 0.29 over 4 draws), the marginal fit's are not
    (0.94)."""
    assert _a_coverage("mml", 4, seed=10) >= 0.85
    assert _a_coverage("cbmm", 4, seed=10) <= 0.6


@pytest.mark.slow
def test_marginal_intervals_cover_at_their_level_by_simulation():
    assert 0.9 <= _a_coverage("mml", 20, seed=20) <= 0.99


def test_steep_items_refine_the_grid():
    theta = np.random.default_rng(11).normal(size=3000)
    a = np.array([10.0, 12.0, 1.0, 2.0, 8.0, 0.5])
    b = np.array([0.5, -1.0, 0.0, 0.3, 1.0, -0.2])
    responses, *_ = _draw(3000, 6, seed=12, theta=theta, a=a, b=b)
    result = cbmm.fit(responses, "mml", se=True, population="normal")
    assert result.info["n_quad"] > 61
    assert np.abs((np.asarray(result.a) - a) / np.asarray(result.a_se)).max() < 4
    # the sum over the grid approaches the integral: the finest grid's likelihood
    loglik = {q: cbmm.fit(responses, "mml", population="normal", n_quad=q)
              .info["marginal_loglik"] for q in (61, 401)}
    exact = loglik[401]
    assert abs(result.info["marginal_loglik"] - exact) < 0.1 * abs(loglik[61] - exact)


def test_coverage_check_of_the_marginal_fit():
    responses, *_ = _draw(1500, 10, seed=13)
    table = cbmm.coverage_check(responses, "mml", n_rep=3)
    # 3 x 10 intervals of a and of b: at least three binomial sd below 0.95; the 3 x 1,500
    # abilities' EAP +- 1.96 posterior sd cover their truth as the population says
    # (binomial sd 0.003; a band of 0.02 leaves room for the items' own error)
    assert (table.loc[["a", "b"], "coverage"] >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / 30)).all()
    assert abs(table.loc["theta", "coverage"] - 0.95) <= 0.02
    assert abs(table.loc["a", "bias_se"]) < 1.0 and abs(table.loc["theta", "bias_se"]) < 0.1


def test_set_aside_leaves_the_models_in_the_population():
    """Models that answered every item alike are the population's tails: a marginal fit
    keeps them (setting them aside cut a's coverage to none in a user's trial) and sets
    aside only the items answered alike."""
    responses, theta, a, b = _draw(3000, 20, seed=14)
    y = responses.y.copy()
    y[:, 3] = 1
    with pytest.warns(cbmm.DegenerateDataWarning, match="1 item"):
        result = cbmm.fit(y, "mml", coding="signed", se=True, degenerate="set_aside")
    assert result.info["set_aside"] == {"models": [], "items": [3]}
    assert result.degenerate_models == []
    kept = np.arange(20) != 3
    bounds = result.confint()["a"]
    inside = (bounds["lower"] <= a) & (a <= bounds["upper"])
    assert inside[kept].mean() >= 0.85


def test_runaway_items_make_the_fit_unbounded_and_keep_the_others_intervals():
    responses, *_ = _draw(20, 50, seed=7)   # 20 models: items the abilities split perfectly
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cbmm.fit(responses, "mml", se=True)
    assert result.status == "unbounded"
    runaway = result.info["runaway_items"]
    assert runaway and all(np.asarray(result.a)[runaway] > 50)
    assert np.isnan(np.asarray(result.a_se)[runaway]).all()
    alike = responses.degenerate_items()   # answered all alike: no finite maximum
    others = np.setdiff1d(np.arange(50), np.union1d(runaway, alike))
    assert np.isfinite(np.asarray(result.b_se)[others]).all()
    assert np.isnan(np.asarray(result.b_se)[alike]).all()
    assert np.isfinite(np.asarray(result.theta_se)).all()
    messages = [str(w.message) for w in caught]
    assert any("runaway_items" in m for m in messages)
    assert not any(issubclass(w.category, RuntimeWarning) for w in caught)   # no overflow


def test_the_grid_of_a_histogram_without_a_maximum_stays_within_its_cap():
    """Where items run away the histogram's scale keeps growing, and each cycle's extension
    of the grid back to +-6 sd grew it, at its ever finer spacing, without bound (this draw:
    4,339 nodes, 59 s); it stops at MAX_QUADRATURE_POINTS."""
    responses, *_ = _draw(20, 50, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cbmm.fit(responses, "mml")
    assert result.status == "unbounded"
    nodes = np.asarray(result.info["population"]["nodes"])
    assert result.info["n_quad"] == nodes.size <= MAX_QUADRATURE_POINTS
    assert np.allclose(np.diff(nodes), nodes[1] - nodes[0])


def test_model_bootstrap_replicates_stay_on_the_populations_scale():
    """An mml fit's items are on its population's scale, whose posterior means have sd
    below 1; its bootstrap replicates must be too, so they centre on the estimate (each was
    standardised to its posterior means' sd 1, which shrank every a by about 0.95, and 74 %
    of the replicates' a fell below the fit's)."""
    responses, *_ = _draw(1500, 20, seed=17)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = cbmm.fit(responses, "mml")
        boot = cbmm.bootstrap(responses, method="mml", n_boot=16, resample="models", seed=3)
    assert np.std(np.asarray(full.theta)) < 0.97   # posterior means: shrunk
    ratio = boot.draws["a"] / np.asarray(full.a)
    assert np.median(ratio) == pytest.approx(1.0, abs=0.015)


def test_coverage_check_does_not_count_alike_models_against_a_marginal_fit():
    responses, *_ = _draw(1500, 8, seed=15)   # many all-alike models, drawn from the 2PL
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        cbmm.coverage_check(responses, "mml", n_rep=2)


def test_too_coarse_a_grid_is_refused():
    responses, *_ = _draw(100, 5, seed=16)
    with pytest.raises(ValueError, match="option 'n_quad' must be >= 21"):
        cbmm.fit(responses, "mml", n_quad=5)


@pytest.fixture(scope="module")
def skewed_calibration():
    """An mml fit of 2,000 models of the skewed population, and 2,000 new models of it
    (the truth's abilities and answers)."""
    theta, a, b = _skewed_population(4000, 20, seed=30)
    calibration, *_ = _draw(2000, 20, seed=31, theta=theta[:2000], a=a, b=b)
    new, *_ = _draw(2000, 20, seed=32, theta=theta[2000:], a=a, b=b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cbmm.fit(calibration, "mml", se=True)
    return fit, calibration, new, theta[2000:]


def _signed(responses):
    return responses.to_dense().y.astype(float)


def test_population_prior_gives_new_models_the_fits_own_abilities(skewed_calibration):
    """score(prior="population") and predict_accuracy place a calibration model where the
    mml fit did (its EAP on the fit's own nodes, by marginal's E-step); the N(0, 1) prior
    does not (the population is skewed)."""
    fit, calibration, _, _ = skewed_calibration
    answers = _signed(calibration)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cbmm.DegenerateDataWarning)
        ours = cbmm.score(answers, fit, prior="population", coding="signed", item_error=False)
        carried = cbmm.score(answers, fit, prior="population", coding="signed")
        normal = cbmm.score(answers, fit, prior="normal", coding="signed")
    theta, theta_se = np.asarray(fit.theta), np.asarray(fit.theta_se)
    assert np.abs(ours["theta"].to_numpy() - theta).max() < 1e-9
    assert np.abs(ours["se"].to_numpy() - theta_se).max() < 1e-9  # the fit's, items fixed
    assert (carried["theta"] == ours["theta"]).all() and (carried["se"] > ours["se"]).all()
    assert np.abs(normal["theta"].to_numpy() - theta).max() > 0.1
    predicted = cbmm.predict_accuracy(np.where(answers > 0, 1.0, 0.0)[:50], fit)
    assert np.abs(predicted["theta"].to_numpy() - theta[:50]).max() < 1e-9
    # and near EM's own posterior means on the histogram's nodes, which the prior smooths:
    # within 0.02 where the answers bound the ability on both sides (two of each kind)
    nodes, weights = (np.asarray(fit.info["population"][k]) for k in ("nodes", "weights"))
    with np.errstate(divide="ignore"):
        post, _ = _e_step(_Answers(calibration), np.asarray(fit.a) / fit.sigma,
                          np.asarray(fit.b) / fit.sigma, nodes, np.log(weights))
    bounded = ((answers > 0).sum(axis=1) >= 2) & ((answers < 0).sum(axis=1) >= 2)
    assert np.abs(post @ nodes - theta)[bounded].max() < 0.06


def test_population_prior_places_new_models_better_than_the_normal_one(skewed_calibration):
    """2,000 new models of the skewed population: their posterior means under the fitted
    histogram are closer to the truth than the N(0, 1) MAP or the ML estimates."""
    fit, _, new, truth = skewed_calibration
    answers = _signed(new)
    errors = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cbmm.DegenerateDataWarning)
        for prior in ("none", "normal", "population"):
            scores = cbmm.score(answers, fit, prior=prior, coding="signed")
            finite = np.isfinite(scores["theta"].to_numpy())
            errors[prior] = np.sqrt(np.mean((scores["theta"].to_numpy() - truth)[finite] ** 2))
    assert errors["population"] < 0.95 * min(errors["none"], errors["normal"])


def test_the_histograms_grid_keeps_covering_six_sds_of_the_population(skewed_calibration):
    """Standardising the grid each cycle shrinks it where the histogram's sd on it exceeds 1;
    the grid is extended back, so the population's tails are not piled on its end nodes
    (the leaderboard shapes' steep items came out short until it was)."""
    fit = skewed_calibration[0]
    nodes = np.asarray(fit.info["population"]["nodes"])
    weights = np.asarray(fit.info["population"]["weights"])
    assert nodes[0] <= -6.0 and nodes[-1] >= 6.0
    assert np.allclose(np.diff(nodes), nodes[1] - nodes[0])
    assert fit.info["n_quad"] == nodes.size
    assert weights @ nodes == pytest.approx(0.0, abs=1e-6)
    assert weights @ nodes ** 2 == pytest.approx(1.0, abs=1e-6)


def test_the_banks_population_is_the_fitted_one_not_the_shrunk_posterior_means(
        skewed_calibration):
    """select_items' levels and the settled items are judged over the bank's population:
    for an mml calibration, quantiles of its fitted population, not the posterior means,
    whose variance falls short of the population's by the mean posterior variance (the
    law of total variance, exact at EM's fixed point)."""
    from scipy.special import ndtri

    from cbmm.efficient.bank import ItemBank

    fit, calibration, _, _ = skewed_calibration
    population = ItemBank.of(fit).population()
    assert population.size == len(fit.theta)
    assert population.std() == pytest.approx(1.0, abs=0.01)
    # EM's posteriors on the histogram's nodes (the fit reports them under the histogram
    # smoothed, cbmm.posterior.prior_on_grid)
    nodes, weights = (np.asarray(fit.info["population"][k]) for k in ("nodes", "weights"))
    with np.errstate(divide="ignore"):
        post, _ = _e_step(_Answers(calibration), np.asarray(fit.a) / fit.sigma,
                          np.asarray(fit.b) / fit.sigma, nodes, np.log(weights))
    means = post @ nodes
    assert means.var() + np.mean(post @ nodes ** 2 - means ** 2) == pytest.approx(1.0, abs=0.01)
    assert means.std() < 0.97 and np.std(np.asarray(fit.theta)) < 0.97
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        normal = cbmm.fit(calibration, "mml", population="normal")
    count = len(normal.theta)
    quantiles = ndtri((np.arange(count) + 0.5) / count)
    assert np.abs(ItemBank.of(normal).population() - quantiles).max() < 0.01


def test_the_histograms_prior_on_the_score_grid_keeps_each_bins_weight():
    """A histogram whose spacing is no multiple of the score grid's (0.07 against 0.025):
    its prior on the grid has the histogram's mean and variance (spread evenly over its
    bins: the variance plus h^2 / 12), as integrating the bins over the grid's cells
    gives; taking each grid point's bin's weight gave bins 2 or 3 points, a third of
    their weight more or less."""
    rng = np.random.default_rng(40)
    nodes = np.arange(-6.0, 6.0 + 1e-9, 0.07)
    weights = np.where(np.abs(nodes) < 2.5, rng.random(nodes.size), 0.0)
    weights /= weights.sum()
    population = {"kind": "histogram", "nodes": nodes.tolist(), "weights": weights.tolist()}
    prior = np.exp(prior_on_grid(population))
    prior /= prior.sum()
    mean = weights @ nodes
    assert prior @ GRID == pytest.approx(mean, abs=1e-4)
    assert prior @ (GRID - mean) ** 2 == pytest.approx(
        weights @ (nodes - mean) ** 2 + 0.07 ** 2 / 12, abs=1e-4)


def test_population_travels_with_the_saved_fit_and_its_items_frame(skewed_calibration,
                                                                   tmp_path):
    fit, calibration, _, _ = skewed_calibration
    answers = _signed(calibration)[:40]
    fit.save(tmp_path / "fit")
    expected = cbmm.score(answers, fit, prior="population", coding="signed")
    from cbmm.efficient.bank import ItemBank

    levels = ItemBank.of(fit).population()
    for items in (tmp_path / "fit", fit.items_frame(), cbmm.FitResult.load(tmp_path / "fit")):
        scores = cbmm.score(answers, items, prior="population", coding="signed")
        assert np.allclose(scores["theta"], expected["theta"], atol=1e-12)
        # the population's quantiles (select_items' levels and settled items), as many as
        # its models whatever the route (items_frame() gave 200 where the fit gave 2,000,
        # and on MATH-500 select_items chose 41 of 100 items differently)
        assert np.array_equal(ItemBank.of(items).population(), levels)
    bare = fit.items_frame()
    bare.attrs.pop("population")  # a table without it: the N(0, 1) prior
    scores = cbmm.score(answers, bare, prior="population", coding="signed")
    assert np.abs(scores["theta"] - expected["theta"]).max() > 0.05
    # the saved items.csv read as a plain table has lost it too, and cannot tell: it warns
    with pytest.warns(UserWarning, match="without the calibration's population"):
        plain = cbmm.score(answers, pd.read_csv(tmp_path / "fit" / "items.csv"),
                           prior="population", coding="signed")
    assert np.allclose(plain["theta"], scores["theta"], atol=1e-12)


def test_an_edited_population_is_named_in_the_error(skewed_calibration, tmp_path):
    import json

    fit, calibration, _, _ = skewed_calibration
    fit.save(tmp_path / "fit")
    meta_path = tmp_path / "fit" / "fit.json"
    meta = json.loads(meta_path.read_text())
    meta["info"]["population"]["weights"][0] = -1.0
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"fit\.json: edited after it was written"):
        cbmm.score(_signed(calibration)[:5], tmp_path / "fit", prior="population",
                   coding="signed")
    del meta["manifest_sha256"]  # a save from before the seal: the population is checked
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"fit\.json: the calibration's population .*weights"):
        cbmm.score(_signed(calibration)[:5], tmp_path / "fit", prior="population",
                   coding="signed")


def test_score_command_places_models_in_an_mml_fits_population(tmp_path):
    import pandas as pd

    from cbmm.cli import main

    theta, a, b = _skewed_population(600, 15, seed=40)
    responses, *_ = _draw(600, 15, seed=41, theta=theta, a=a, b=b)
    frame = pd.DataFrame(np.where(_signed(responses) > 0, 1, 0),
                         index=[f"m{i}" for i in range(600)], columns=[f"q{j}" for j in range(15)])
    frame.to_csv(tmp_path / "answers.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["fit", "--responses", str(tmp_path / "answers.csv"), "--method", "mml",
                     "--out", str(tmp_path / "fit")]) == 0
        assert main(["score", "--responses", str(tmp_path / "answers.csv"), "--items",
                     str(tmp_path / "fit"), "--prior", "population", "--out",
                     str(tmp_path / "scores.csv")]) == 0
    fitted = pd.read_csv(tmp_path / "fit" / "abilities.csv", index_col="model")
    scores = pd.read_csv(tmp_path / "scores.csv", index_col="model")
    # within the histogram's bins (spacing 0.2 here): the fit puts a bin's mass on its node,
    # the score spreads it over the bin (the models that answered every item alike, bounded
    # on one side only, go outward by the prior's flat share)
    alike = frame.nunique(axis=1) == 1
    difference = scores["theta"] - fitted.loc[scores.index, "theta"]
    assert difference[~alike.to_numpy()].abs().max() < 0.02


@pytest.mark.parametrize("edit, named", [
    (lambda meta: meta.update(info=None), "field 'info' is null, expected an object"),
    (lambda meta: meta.pop("n_iter"), "no field 'n_iter'"),
    (lambda meta: meta.update(status=5), "field 'status' is 5, expected text"),
    (lambda meta: meta.update(loss="abc"), "field 'loss' is \"abc\", expected a number"),
    (lambda meta: meta["info"].pop("population"), "a 'mml' fit without its population"),
])
def test_a_damaged_fit_json_is_one_line_naming_it_in_every_command(edit, named, tmp_path,
                                                                   capsys):
    """Fields of fit.json edited to another kind of value, or deleted, were tracebacks
    (exit 1) in predict, adaptive, audit and select, or (the population of an mml fit, or
    info as a list) silently scored under N(0, 1)."""
    import json

    import pandas as pd

    from cbmm.cli import main

    responses, *_ = _draw(300, 12, seed=42)
    frame = pd.DataFrame(np.where(_signed(responses) > 0, 1, 0),
                         index=[f"m{i}" for i in range(300)], columns=[f"q{j}" for j in range(12)])
    frame.to_csv(tmp_path / "answers.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cbmm.fit(frame, "mml").save(tmp_path / "fit")
    meta_path = tmp_path / "fit" / "fit.json"
    meta = json.loads(meta_path.read_text())
    edit(meta)
    meta.pop("manifest_sha256")  # a save from before the seal reaches the fields' checks
    meta_path.write_text(json.dumps(meta))
    answers, fit = str(tmp_path / "answers.csv"), str(tmp_path / "fit")
    for command in (["score", "--responses", answers, "--items", fit, "--prior", "population"],
                    ["predict", "--responses", answers, "--items", fit],
                    ["adaptive", "--responses", answers, "--items", fit],
                    ["audit", "--responses", answers, "--items", fit],
                    ["select", "--items", fit, "--k", "5"]):
        out = tmp_path / f"{command[0]}.csv"
        assert main([*command, "--out", str(out)]) == 2, command
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and str(meta_path) in error[0] and named in error[0], \
            (command, error)
        assert not out.exists()


def test_a_new_model_beyond_the_calibration_is_placed_by_its_answers():
    """The fitted histogram ends at the calibration models; with it alone as the prior, new
    models 1.4 sd above the best of them came out 1 sd short with standard errors of 0.27
    (95 % intervals covering none). The prior's flat share 1 / (n + 1) lets their answers
    place them: near the truth, their intervals covering most of them."""
    rng = np.random.default_rng(50)
    n, j, k = 140, 200, 60
    theta, a, b = rng.normal(size=n), rng.uniform(0.8, 2.5, j), rng.normal(size=j)
    calibration, *_ = _draw(n, j, seed=51, theta=theta, a=a, b=b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cbmm.fit(calibration, "mml")
    # the truth on the fit's scale (a linear map, from the items)
    scale = np.median(np.asarray(fit.a) / a)
    shift = np.median((np.asarray(fit.b) - b) / a)
    truth = (theta.max() + 1.2 - shift) / scale
    answers = np.zeros((80, j))
    for row in answers:
        asked = rng.choice(j, k, replace=False)
        p = special.expit(a[asked] * (theta.max() + 1.2) + b[asked])
        row[asked] = np.where(rng.random(k) < p, 1, -1)
    scores = cbmm.score(answers, fit, prior="population", coding="signed")
    estimate, se = scores["theta"].to_numpy(), scores["se"].to_numpy()
    assert truth > np.asarray(fit.theta).max() + 0.5
    assert abs(np.mean(estimate) - truth) < 0.5
    assert np.mean(np.abs(estimate - truth) <= 1.96 * se) > 0.8


def test_a_marginal_fits_warning_names_only_the_items_without_an_optimum():
    """Its models' abilities are posterior means, finite whatever their answers: the warning
    counted '0 model(s) with all answers correct or wrong' where one was."""
    y = np.asarray(simulate(60, 20, seed=4).responses, dtype=float)
    y[:, 0] = 0.0  # an item every model got wrong
    y[0] = 0.0     # and a model that got every item wrong
    with pytest.warns(cbmm.DegenerateDataWarning) as caught:
        cbmm.fit(y, method="mml")
    text = [str(w.message) for w in caught if "all-correct or all-wrong" in str(w.message)]
    assert text == [text[0]] and text[0].startswith("1 item(s) answered all-correct or "
                                                    "all-wrong: the items' easiness")
    assert "model(s)" not in text[0]
