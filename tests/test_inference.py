"""Standard errors, intervals, the bootstrap and held-out validation.

Independent expectations: the observed information by central differences of the fused
gradient, the constrained covariance by the bordered-matrix inverse (no gauge algebra of
ours), the delta method by an explicit Jacobian, coverage of the simulated truth, the
item-mean baseline computed by hand, and real data split in halves.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from data_fixtures import SHARED_DATA, needs_shared

import cbmm
from cbmm.inference import standard_errors
from cbmm.prior import Penalty
from cbmm.simulate import simulate
from cbmm.validation import additive_effects, best_baseline, held_out_scores, predicted_probabilities


def quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


def numeric_hessian(data, theta, a, b, penalty):
    """Hessian of loss (3) + penalty by central differences of the analytic gradient."""
    n, j = data.shape

    def gradient(v):
        t, aa, bb = np.split(v, [n, n + j])
        _, gt, ga, gb = cbmm.loss_and_gradient(t, aa, bb, data.y)
        extra = penalty.gradient(t, aa, bb)
        return np.concatenate([gt + extra[0], ga + extra[1], gb + extra[2]])

    point = np.concatenate([theta, a, b])
    h = 1e-5
    columns = [(gradient(point + h * e) - gradient(point - h * e)) / (2 * h)
               for e in np.eye(point.size)]
    hessian = np.column_stack(columns)
    return (hessian + hessian.T) / 2


@pytest.mark.parametrize("prior", ["none", "normal"])
def test_standard_errors_equal_the_constrained_inverse_of_the_numeric_information(prior):
    n, j = 200, 50
    draw = simulate(n, j, seed=1, missing="mcar", missing_rate=0.2, sparsity=0.2)
    data = cbmm.as_responses(draw.responses)
    penalty = Penalty.of(prior)
    fit = quiet(cbmm.fit, data, prior=prior, tol=1e-12, max_iter=20000, n_starts=1)
    assert fit.status == "converged" and (np.asarray(fit.a) == 0).any()  # a bound is active
    theta, a, b = (np.asarray(v) for v in (fit.raw_parameters() if prior == "normal"
                                           else (fit.theta, fit.a, fit.b)))
    got = standard_errors(data, theta, a, b, 1.0, penalty)
    hessian = numeric_hessian(data, theta, a, b, penalty)
    free = np.ones(n + 2 * j, dtype=bool)
    free[n:n + j] = a > 0  # a_j = 0 is held at its bound
    if prior == "none":  # constrained to mean 0, sd 1: the bordered inverse
        border = np.zeros((2, n + 2 * j))
        border[0, :n], border[1, :n] = 1.0, 2 * theta
        border = border[:, free]
        k = free.sum()
        full = np.block([[hessian[np.ix_(free, free)], border.T],
                         [border, np.zeros((2, 2))]])
        covariance = np.linalg.inv(full)[:k, :k]
        variances = np.full(n + 2 * j, np.nan)
        variances[free] = np.diag(covariance)
    else:  # identified by the prior: invert, then the delta method to the canonical form
        covariance = np.zeros((n + 2 * j, n + 2 * j))
        covariance[np.ix_(free, free)] = np.linalg.inv(hessian[np.ix_(free, free)])
        m, s = theta.mean(), theta.std()
        tc = (theta - m) / s
        jac = np.zeros_like(covariance)
        jac[:n, :n] = (np.eye(n) - 1 / n - np.outer(tc, tc) / n) / s
        jac[n:n + j, n:n + j] = s * np.eye(j)
        jac[n:n + j, :n] = np.outer(a, tc / n)
        jac[n + j:, n + j:] = np.eye(j)
        jac[n + j:, n:n + j] = m * np.eye(j)
        jac[n + j:, :n] = np.outer(a, np.full(n, 1 / n))
        variances = np.diag(jac @ covariance @ jac.T).copy()
        variances[n:n + j][a <= 0] = np.nan
    expected = np.sqrt(variances)
    for got_part, want in zip(got, np.split(expected, [n, n + j])):
        np.testing.assert_allclose(got_part, want, rtol=2e-4, equal_nan=True)



def test_the_prior_bias_bound_is_the_l1_norm_of_the_numeric_covariances_rows(monkeypatch):
    """The bound on the ability prior's bias of theta_i, in standard errors, is
    p ||(P C P)_i||_1 / sqrt((P C P)_ii): C the abilities' block of the inverse of the
    central-difference Hessian, P the explicit projector off span(1, theta).  Computed for
    evenly spaced models beyond PRIOR_BIAS_MODELS, with the same values there; none without
    a prior."""
    import cbmm.inference as inference

    n, j = 120, 40
    draw = simulate(n, j, seed=3, missing="mcar", missing_rate=0.3)
    data = cbmm.as_responses(draw.responses)
    penalty = Penalty.of("normal")
    fit = quiet(cbmm.fit, data, tol=1e-12, max_iter=20000)
    theta, a, b = (np.asarray(v) for v in fit.raw_parameters())
    *_, (bias, _) = standard_errors(data, theta, a, b, 1.0, penalty, prior_bias=True)
    hessian = numeric_hessian(data, theta, a, b, penalty)
    free = np.concatenate([np.ones(n, bool), a > 0, np.ones(j, bool)])
    covariance = np.linalg.inv(hessian[np.ix_(free, free)])[:n, :n]
    basis = np.column_stack([np.ones(n), theta])
    projector = np.eye(n) - basis @ np.linalg.pinv(basis)
    canonical = projector @ covariance @ projector
    precision = penalty.curvature()[0]
    want = precision * np.abs(canonical).sum(axis=1) / np.sqrt(np.diag(canonical))
    np.testing.assert_allclose(bias, want, rtol=1e-3)

    monkeypatch.setattr(inference, "PRIOR_BIAS_MODELS", 7)
    *_, (sampled, _) = standard_errors(data, theta, a, b, 1.0, penalty, prior_bias=True)
    rows = np.flatnonzero(np.isfinite(sampled))
    np.testing.assert_array_equal(rows, np.linspace(0, n - 1, 7).astype(int))
    np.testing.assert_allclose(sampled[rows], bias[rows], rtol=1e-12)
    full = simulate(300, 100, seed=4).responses
    plain = quiet(cbmm.fit, full, se=True, prior="none")
    assert plain.status == "converged" and "prior_bias" not in plain.info
    *_, (none, groups) = standard_errors(cbmm.as_responses(full), plain.theta, plain.a,
                                         plain.b, 1.0, None, prior_bias=True)
    assert np.isnan(none).all() and (groups == -1).all()


def _linked_groups(n, j, bridges, seed):
    """Two groups of n models (theta ~ N(-1.5, 1) and N(1.5, 1)), each on its own j items,
    and `bridges` models that answered all 2j: answers and the canonical truth."""
    rng = np.random.default_rng(seed)
    theta = np.concatenate([rng.normal(-1.5, 1, n), rng.normal(1.5, 1, n),
                            rng.normal(0, 1.8, bridges)])
    a, b = rng.uniform(0.5, 2, 2 * j), rng.normal(0, 1, 2 * j)
    logits = np.outer(theta, a) + b
    answers = (rng.random(logits.shape) < 1 / (1 + np.exp(-logits))).astype(float)
    answers[:n, j:] = np.nan
    answers[n:2 * n, :j] = np.nan
    return answers, (theta - theta.mean()) / theta.std()


def test_groups_linked_by_one_model_are_said_to_rest_on_the_prior():
    """Two groups on their own items, linked by one model that answered both: the fit is
    `converged`, its 95 % intervals hold the simulated truth far less often (the prior pulls
    the groups together), and it says so in an IntervalWarning with most models beyond one
    standard error in info['prior_bias']; linked by 30 such models, neither."""
    def run(bridges):
        inside, shares, caught = [], [], []
        for seed in range(3):
            answers, truth = _linked_groups(80, 60, bridges, seed)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                fitted = cbmm.fit(answers, se=True)
            assert fitted.status == "converged"
            inside.extend(np.abs(fitted.theta - truth) <= 1.96 * fitted.theta_se)
            shares.append(fitted.info["prior_bias"]["share_beyond"])
            caught.append([str(w.message) for w in seen if w.category is cbmm.IntervalWarning])
        return np.mean(inside), shares, caught

    coverage, shares, caught = run(1)
    assert coverage < 0.8 and min(shares) > 0.5, (coverage, shares)
    assert all(len(c) == 1 and c[0].startswith("the prior, not the answers, could bias")
               for c in caught)
    coverage, shares, caught = run(30)
    assert coverage > 0.9 and max(shares) < 0.1 and not any(caught), (coverage, shares)


def test_a_small_group_placed_by_the_prior_is_said_however_few_and_kept_per_model(tmp_path):
    """20 of 180 models on their own 100 items, linked to the rest by 2 models that answered
    all 200: fewer than a quarter of the models are beyond one standard error, but the 20
    form one group whose estimates move together (chains of correlations above
    PRIOR_BIAS_CORRELATION), and the fit warns naming it.  A random sparse design (each
    model answers 30 % of the items) has no such group.  The per-model bounds are the fit's prior_bias, in
    abilities_frame, kept by save and load and spread over set-aside models."""
    rng = np.random.default_rng(1)
    theta = rng.normal(0, 1, 180)
    a, b = rng.uniform(0.5, 2, 200), rng.normal(0, 1, 200)
    answers = (rng.random((180, 200)) < 1 / (1 + np.exp(-(np.outer(theta, a) + b)))).astype(float)
    answers[:20, :100] = np.nan
    answers[22:, 100:] = np.nan   # models 20 and 21 answered both
    frame = pd.DataFrame(answers, index=[f"m{i}" for i in range(180)])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fitted = cbmm.fit(frame, se=True)
    record = fitted.info["prior_bias"]
    said = [str(w.message) for w in seen if w.category is cbmm.IntervalWarning]
    assert record["share_beyond"] < cbmm.intervals.PRIOR_BIASED_SHARE, record
    assert record["exceeds_limit"] and record["largest_group"] >= record["group_limit"] == 5
    assert set(record["group_models"]) <= {f"m{i}" for i in range(22)}
    assert len(said) == 1 and f"a group of {record['largest_group']}" in said[0]
    beyond = (fitted.prior_bias > cbmm.intervals.PRIOR_BIAS).sum()
    assert beyond == record["models_beyond"]
    fitted.save(tmp_path / "fit")
    loaded = cbmm.FitResult.load(tmp_path / "fit")
    pd.testing.assert_series_equal(loaded.prior_bias, fitted.prior_bias, check_names=False)
    assert loaded.info["prior_bias"] == record

    sparse = answers.copy()
    sparse[:] = (rng.random((180, 200)) < 1 / (1 + np.exp(-(np.outer(theta, a) + b))))
    sparse[rng.random(sparse.shape) < 0.7] = np.nan
    record = quiet(cbmm.fit, sparse, se=True).info["prior_bias"]
    assert record["largest_group"] < 3 and not record["exceeds_limit"], record

    kept = frame.copy()
    kept.iloc[0] = 1.0   # all correct: set aside
    set_aside = quiet(cbmm.fit, kept, se=True, degenerate="set_aside")
    assert np.isnan(set_aside.prior_bias["m0"]) and set_aside.prior_bias.index.equals(kept.index)
    assert np.isfinite(set_aside.prior_bias.drop("m0")).all()


def test_scores_against_a_weakly_linked_calibration_say_so(tmp_path):
    """score and predict_accuracy against a calibration whose answers leave its abilities to
    the prior (its FitResult or saved folder) relay its IntervalWarning; against one linked
    by 30 models, no IntervalWarning."""
    for bridges, expected in ((1, True), (30, False)):
        answers, _ = _linked_groups(80, 60, bridges, 0)
        calibration = quiet(cbmm.fit, answers, se=True)
        calibration.save(tmp_path / f"fit{bridges}")
        for source in (calibration, tmp_path / f"fit{bridges}"):
            for use in (cbmm.score, cbmm.predict_accuracy):
                with warnings.catch_warnings(record=True) as seen:
                    warnings.simplefilter("always")
                    use(answers[:5], source)
                said = [str(w.message) for w in seen if w.category is cbmm.IntervalWarning
                        and "the calibration left" in str(w.message)]
                assert bool(said) is expected, (bridges, use, said)

def test_wald_intervals_cover_the_simulated_truth():
    covered = {"theta": [], "a": [], "b": []}
    for seed in range(20):
        draw = simulate(300, 100, seed=500 + seed)
        fit = quiet(cbmm.fit, draw.responses, se=True, seed=seed)
        assert fit.status == "converged"
        truth = cbmm.canonicalize(draw.theta, draw.a, draw.b)
        for (name, table), true in zip(fit.confint(0.95).items(), truth):
            covered[name].append((table["lower"] <= true) & (true <= table["upper"]))
    share = {name: float(np.mean(np.concatenate(v))) for name, v in covered.items()}
    assert 0.93 <= share["theta"] <= 0.97, share
    assert 0.93 <= share["b"] <= 0.97, share
    assert share["a"] >= 0.90, share


def test_confint_save_and_load_carry_the_standard_errors(tmp_path):
    draw = simulate(120, 40, seed=2)
    frame = pd.DataFrame(draw.responses, index=[f"m{i}" for i in range(120)],
                         columns=[f"q{j}" for j in range(40)])
    fit = quiet(cbmm.fit, frame, se=True)
    bounds = fit.confint(0.9)
    z = 1.6448536269514722
    np.testing.assert_allclose(bounds["theta"]["upper"] - fit.theta, z * fit.theta_se)
    assert (bounds["a"]["lower"] >= 0).all()
    assert list(bounds["b"].index) == list(frame.columns)
    fit.save(tmp_path / "fit")
    loaded = cbmm.FitResult.load(tmp_path / "fit")
    for name in ("theta_se", "a_se", "b_se"):
        np.testing.assert_allclose(getattr(loaded, name), getattr(fit, name), rtol=1e-15)
    with pytest.raises(ValueError, match="se=True"):
        quiet(cbmm.fit, frame).confint()
    with pytest.raises(ValueError, match="level"):
        fit.confint(1.5)


def test_no_standard_errors_where_there_is_no_finite_optimum():
    y = np.ones((30, 8))
    y[np.arange(30) % 2 == 0, :4] = 0  # half the models fail the first four items
    fit = quiet(cbmm.fit, y, prior="none", se=True)
    assert fit.status == "unbounded"
    assert np.isnan(np.asarray(fit.theta_se)).all()


def test_split_halves_agree_within_their_intervals_on_simulated_data():
    draw = simulate(200, 300, seed=11)
    rng = np.random.default_rng(0)
    within = []
    for _ in range(3):
        items = rng.permutation(300)
        halves = [quiet(cbmm.fit, draw.responses[:, part], se=True)
                  for part in (items[:150], items[150:])]
        gap = np.abs(halves[0].theta - halves[1].theta)
        within.append(np.mean(gap <= 1.96 * np.hypot(halves[0].theta_se, halves[1].theta_se)))
    assert 0.92 <= np.mean(within) <= 0.98


@needs_shared
def test_split_halves_of_real_math500_agree_within_their_intervals():
    """Real data, where the 2PL is only an approximation: the two halves' abilities differ
    by at most 1.96 sqrt(se_A^2 + se_B^2) for about 95 % of the models."""
    table = pd.read_csv(SHARED_DATA / "math500" / "MATH_500.csv", index_col=0)
    rng = np.random.default_rng(2026)
    within = []
    for _ in range(5):
        items = rng.permutation(table.columns)
        halves = [quiet(cbmm.fit, table[list(part)], se=True)
                  for part in (items[:250], items[250:])]
        assert all(h.status in ("converged", "multimodal") for h in halves)
        gap = np.abs(halves[0].theta - halves[1].theta)
        within.append(np.mean(gap <= 1.96 * np.hypot(halves[0].theta_se, halves[1].theta_se)))
    assert 0.90 <= np.mean(within) <= 0.99, within


# --------------------------------------------------------------------------- bootstrap

def test_bootstrap_intervals_ranks_and_pairwise_probabilities():
    draw = simulate(80, 120, seed=4)
    frame = pd.DataFrame(draw.responses, index=[f"m{i}" for i in range(80)])
    result = quiet(cbmm.bootstrap, frame, n_boot=40, seed=1)
    assert result.n_failed == 0 and result.draws["theta"].shape == (40, 80)
    truth = cbmm.canonicalize(draw.theta, draw.a, draw.b)[0]
    inside = (result.theta["lower"] <= truth) & (truth <= result.theta["upper"])
    assert inside.mean() >= 0.85  # item resampling: the abilities' uncertainty
    # percentile intervals: the replicates' 2.5 % and 97.5 % quantiles, by NumPy here
    # (coverage alone held with every replicate's range as the interval)
    draws = result.draws["theta"]
    np.testing.assert_allclose(result.theta["lower"], np.quantile(draws, 0.025, axis=0))
    np.testing.assert_allclose(result.theta["upper"], np.quantile(draws, 0.975, axis=0))
    np.testing.assert_array_equal(result.theta["estimate"], result.fit.theta)
    # ranks: 1 for the ablest, the estimate's rank inside its (whole-rank) interval
    assert result.rank["estimate"].min() == 1 and result.rank["estimate"].max() == 80
    assert ((result.rank["lower"] <= result.rank["estimate"])
            & (result.rank["estimate"] <= result.rank["upper"])).mean() >= 0.95
    # each replicate's ranks by SciPy (1 the ablest), their quantiles widened to whole ranks
    from scipy.stats import rankdata

    ranks = np.array([rankdata(-row) for row in draws])
    np.testing.assert_array_equal(result.rank["lower"],
                                  np.floor(np.quantile(ranks, 0.025, axis=0)))
    np.testing.assert_array_equal(result.rank["upper"],
                                  np.ceil(np.quantile(ranks, 0.975, axis=0)))
    assert (result.rank[["lower", "upper"]] % 1 == 0).all().all()
    # pairwise: complementary where no replicate ties, and the share it says
    p = result.prob_better.to_numpy()
    off = ~np.eye(80, dtype=bool)
    np.testing.assert_allclose(p[off] + p.T[off], 1.0)
    assert p[3, 7] == pytest.approx(np.mean(draws[:, 3] > draws[:, 7]))
    assert list(result.prob_better.index) == list(frame.index)
    # the item parameters' spread over item resamples is not their uncertainty
    assert result.a[["lower", "upper"]].isna().all().all()
    assert result.b[["lower", "upper"]].isna().all().all()


def test_identical_answers_give_identical_parameters_and_ties():
    """Models (items) answering alike have the same block of the objective, so the same
    optimum: equal estimates, tied ranks and P(better) one half, whatever the start."""
    y = simulate(120, 60, missing="mcar", missing_rate=0.2, seed=11).responses
    y[[10, 20]] = y[3]                    # copies of a model, missing cells included
    y[[5, 6]] = np.where(np.isnan(y[5]), np.nan, 0.0)  # two models with every answer wrong
    y[:, [8, 9]] = y[:, [7]]              # copies of an item
    for start in ("spectral", "random"):
        fit = quiet(cbmm.fit, y, start=start, n_starts=3, se=True, seed=4)
        assert fit.status == "converged"
        theta = np.asarray(fit.theta)
        assert theta[3] == theta[10] == theta[20] and theta[5] == theta[6]
        assert fit.a[7] == fit.a[8] == fit.a[9] and fit.b[7] == fit.b[8] == fit.b[9]
        np.testing.assert_allclose(fit.theta_se[[10, 20]], fit.theta_se[3], rtol=1e-9)
    boot = quiet(cbmm.bootstrap, y, n_boot=20, seed=3)
    assert (boot.draws["theta"][:, 10] == boot.draws["theta"][:, 3]).all()
    assert boot.prob_better.iloc[3, 10] == boot.prob_better.iloc[20, 3] == 0.5
    assert boot.prob_better.iloc[5, 6] == 0.5
    ranks = boot.rank["estimate"].to_numpy()
    assert ranks[3] == ranks[10] == ranks[20] and ranks[3] % 1 == 0  # the mean of three ranks
    assert ranks[5] == ranks[6] == 119.5  # the two weakest models
    # all wrong in every item resample: no interval (the bootstrap cannot measure it)
    for frame in (boot.theta, boot.rank):
        assert frame.iloc[[5, 6], 1:].isna().all().all()
        assert frame.drop(index=frame.index[[5, 6]])[["lower", "upper"]].notna().all().all()


def test_model_resampling_intervals_cover_the_item_parameters():
    draw = simulate(300, 30, seed=8)
    result = quiet(cbmm.bootstrap, draw.responses, n_boot=60, resample="models", seed=2,
                   level=0.9)
    _, a, b = cbmm.canonicalize(draw.theta, draw.a, draw.b)
    for name, table, truth in (("a", result.a, a), ("b", result.b, b)):
        inside = (table["lower"] <= truth) & (truth <= table["upper"])
        assert inside.mean() >= 0.8, inside.mean()
        # the level asked for: the replicates' 5 % and 95 % quantiles, by NumPy here
        np.testing.assert_allclose(table["lower"], np.quantile(result.draws[name], 0.05, axis=0))
        np.testing.assert_allclose(table["upper"], np.quantile(result.draws[name], 0.95, axis=0))


def test_bootstrap_replicates_are_reproducible_and_resample_models(tmp_path):
    draw = simulate(100, 40, seed=6)
    one = quiet(cbmm.bootstrap, draw.responses, n_boot=5, resample="models", seed=3)
    two = quiet(cbmm.bootstrap, draw.responses, n_boot=5, resample="models", seed=3,
                isolate=False)
    np.testing.assert_array_equal(one.draws["a"], two.draws["a"])
    # a model left out of a replicate has no theta there
    assert np.isnan(one.draws["theta"]).any() and not np.isnan(one.draws["a"]).any()
    # intervals for the item parameters, none for the abilities
    assert one.theta[["lower", "upper"]].isna().all().all()
    assert one.rank[["lower", "upper"]].isna().all().all() and one.prob_better.isna().all().all()
    assert one.a[["lower", "upper"]].notna().all().all()
    one.save(tmp_path / "boot")
    abilities = pd.read_csv(tmp_path / "boot" / "abilities.csv")
    with pytest.raises(ValueError, match="a bootstrap's folder .bootstrap.json., not a fit's"):
        cbmm.FitResult.load(tmp_path / "boot")
    assert list(abilities.columns) == ["model", "theta", "theta_lower", "theta_upper", "rank",
                                       "rank_lower", "rank_upper"]
    with pytest.raises(ValueError, match="n_boot"):
        cbmm.bootstrap(draw.responses, n_boot=1)
    # the full data's fit takes any fit's settings, its starts too (they were refused)
    paper = quiet(cbmm.bootstrap, draw.responses, n_boot=2, **cbmm.paper_settings("cbmm"))
    assert paper.fit.info["start"] == "random" and paper.fit.info["n_starts"] == 1
    assert paper.fit.tol == cbmm.paper_settings("cbmm")["tol"]
    with_se = quiet(cbmm.bootstrap, draw.responses, n_boot=2, se=True)
    assert with_se.fit.has_se


# ------------------------------------------------------------------- cross-validation

def test_cross_validation_holds_every_cell_out_once_and_beats_the_item_means():
    draw = simulate(150, 60, seed=3, missing="mcar", missing_rate=0.2)
    table = quiet(cbmm.cross_validate, draw.responses, folds=4, seed=5)
    observed = int(np.isfinite(draw.responses).sum())
    assert list(table["fold"]) == [0, 1, 2, 3]
    assert observed - 60 - 150 <= table["n_cells"].sum() <= observed
    assert (table["log_loss"] < table["item_mean_log_loss"]).all()
    assert (table["auc"] > table["item_mean_auc"]).all()
    assert (table["status"] == "converged").all()
    with pytest.raises(ValueError, match=f"^folds={observed + 1}: more than the {observed} "
                                         "observed cells$"):
        cbmm.cross_validate(draw.responses, folds=observed + 1)


def test_the_additive_baseline_maximises_its_penalised_likelihood():
    # scipy's BFGS on the same objective, written out here: log likelihood of
    # logit p_ij = u_i + v_j over the answered cells minus ridge / 2 * (|u|^2 + |v|^2)
    from scipy.optimize import minimize

    rng = np.random.default_rng(1)
    n, j = 7, 5
    answered = rng.random((n, j)) < 0.75
    answered[6] = False  # a model without an answer: the ridge alone, 0
    correct = rng.random((n, j)) < 0.5
    correct[0] = True  # an all-correct model
    correct[:, 1] = False  # an all-wrong item
    rows, cols = np.nonzero(answered)
    y = correct[rows, cols]
    for ridge in (1.0, 0.05):
        def objective(x):
            eta = x[:n][rows] + x[n:][cols]
            return np.sum(np.logaddexp(0.0, np.where(y, -eta, eta))) + ridge / 2 * np.sum(x ** 2)

        expected = minimize(objective, np.zeros(n + j), method="BFGS", options={"gtol": 1e-11}).x
        u, v = additive_effects(rows, cols, y, (n, j), ridge=ridge, tol=1e-12)
        np.testing.assert_allclose(np.r_[u, v], expected, atol=1e-6)
        assert u[6] == pytest.approx(0.0, abs=1e-12) and u[0] == u.max() and v[1] == v.min()
    # a smaller ridge lets an all-correct model go further out, yet finite
    assert 3.0 < u[0] < 20.0


def test_on_2pl_answers_with_spread_discriminations_the_fit_beats_every_baseline():
    # simulate()'s discriminations spread little (sd 0.13): nearly the additive model,
    # which predicts them as well; with a from 0.2 to 3 the 2PL's slopes matter
    rng = np.random.default_rng(4)
    theta, a, b = rng.normal(size=200), rng.uniform(0.2, 3.0, 60), rng.normal(size=60)
    answers = (rng.random((200, 60)) < 1 / (1 + np.exp(-(np.outer(theta, a) + b)))).astype(float)
    answers[rng.random(answers.shape) < 0.2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", cbmm.HeldOutWarning)
        table = cbmm.cross_validate(answers, folds=4, seed=5)
    assert (table["status"] == "converged").all()
    for name in ("item_mean", "model_mean", "additive"):
        assert (table["log_loss"] < table[f"{name}_log_loss"]).all(), name
    assert best_baseline(table)[0] == "additive"


def test_when_answers_depend_on_the_model_only_the_model_means_predict_them():
    rng = np.random.default_rng(2)
    p = rng.uniform(0.1, 0.9, 300)
    answers = (rng.random((300, 100)) < p[:, None]).astype(float)
    table = quiet(cbmm.cross_validate, answers, folds=3, seed=0)
    entropy = -np.mean(p * np.log(p) + (1 - p) * np.log1p(-p))  # the best possible
    mixed = -np.mean(p * np.log(p.mean()) + (1 - p) * np.log1p(-p.mean()))  # one p for all
    # ~67 training answers per model: the estimation costs about 1 / (2 * 67) nats
    for name in ("model_mean", "additive"):
        assert entropy < table[f"{name}_log_loss"].mean() < entropy + 0.02, name
    assert table["item_mean_log_loss"].mean() == pytest.approx(mixed, abs=0.01)
    assert best_baseline(table)[0] in ("model_mean", "additive")
    assert table["model_mean_auc"].mean() > table["item_mean_auc"].mean() + 0.2


def test_a_fit_that_loses_to_a_baseline_says_so_and_names_it():
    # 60 x 60 at 80 % missing: 12 answers per item, too few for two parameters each
    draw = simulate(60, 60, seed=1, missing="mcar", missing_rate=0.8)
    with pytest.warns(cbmm.HeldOutWarning) as caught:
        # one start: with three, so few answers fit a fold's abilities several ways
        # (starts 1.2 standard errors apart within 0.2 of the best objective: multimodal),
        # and the warning says that instead
        table = cbmm.cross_validate(draw.responses, folds=3, seed=0, n_starts=1)
    assert (table["status"] == "converged").all()
    name, means = best_baseline(table)
    assert name == "additive"
    assert means["log_loss"] == pytest.approx(table["additive_log_loss"].mean())
    assert means["log_loss"] == min(table[f"{b}_log_loss"].mean()
                                    for b in ("item_mean", "model_mean", "additive"))
    message = str([w for w in caught if w.category is cbmm.HeldOutWarning][0].message)
    assert message.startswith(
        f"the cbmm fit predicts held-out answers worse than the additive (Rasch) baseline "
        f"(log loss {table['log_loss'].mean():.4f} vs {means['log_loss']:.4f}): too few "
        "answers per item or per model for the 2PL (12.2 per item, 12.2 per model on "
        "average)?")


def test_held_out_answers_against_a_set_aside_models_certainty_are_named_as_the_cause():
    # five models with one right answer each: the fold that holds it out trains them on
    # wrong answers alone, set_aside predicts p = 0, and the answer costs 34.5 nats (the
    # warning blamed too few answers per item)
    y = simulate(80, 30, seed=1).responses.astype(float)
    y[:5] = 0.0
    y[np.arange(5), np.arange(5)] = 1.0
    with pytest.warns(cbmm.HeldOutWarning) as caught:
        cbmm.cross_validate(y, folds=3, seed=0, degenerate="set_aside")
    message = str([w for w in caught if w.category is cbmm.HeldOutWarning][0].message)
    assert message.endswith(
        "5 held-out answer(s) contradict a certain prediction (p = 0 or 1) of a model or item "
        "set aside (degenerate='set_aside': its training answers all alike), each scored at "
        "the floor, 34.5 nats; degenerate='keep' (the default) gives them finite parameters")


def test_folds_left_empty_by_the_training_rule_are_refused():
    """A cell that is its model's or item's last training answer stays in training; on a
    diagonal matrix every cell is, so each fold would refit all the data and score
    nothing (it printed nan and 'converged')."""
    diagonal = np.full((4, 4), np.nan)
    np.fill_diagonal(diagonal, [0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"no cell can be held out: each of the 4 observed "
                                         r"answers is its model's only answer or its item's"):
        cbmm.cross_validate(diagonal, folds=2)
    # one item: no number of folds helps (the message said "use fewer folds" at 2 too)
    one_item = np.array([[1], [0], [1], [1], [0.]])
    with pytest.raises(ValueError, match=r"no cell can be held out: .*5 model\(s\) x 1 item"):
        cbmm.cross_validate(one_item, folds=2)
    # cells some folds cannot hold: fewer folds do help
    sparse = np.full((6, 6), np.nan)
    sparse[0, :] = sparse[:, 0] = 1
    sparse[0, 0], sparse[1, 1], sparse[2, 0] = 0, 0, 0
    with pytest.raises(ValueError, match=r"folds=5: fold\(s\) .* hold no cell once each model "
                                         r"and item keeps a training answer \(too sparse for so "
                                         r"many folds\); use fewer folds$"):
        cbmm.cross_validate(sparse, folds=5)


def test_a_fold_or_draw_whose_answers_are_all_alike_is_a_failure_not_an_error():
    """fit refuses answers that cannot tell the models apart; a fold's training answers or
    a simulated draw can be such on tiny data, which is no fault of the user's answers."""
    answers = np.array([[1, 1], [1, 1], [1, 0], [1, 1]], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = cbmm.cross_validate(answers, folds=2, seed=0)
    # the fold whose training cells are all correct: the one holding the only wrong answer
    held_wrong = int(np.flatnonzero(table["status"].str.startswith("failed"))[0])
    assert table["status"][held_wrong] == ("failed: its training answers: every observed "
                                           "answer is correct: the answers cannot tell the "
                                           "models apart; nothing to fit")
    assert np.isnan(table["log_loss"][held_wrong])
    assert np.isfinite(table["item_mean_log_loss"]).all()   # the baselines still scored
    # the other fold's training answers: two models answered the first item alone, two
    # the second alone, so no answer compares the pairs
    assert table["status"][1 - held_wrong] == "disconnected"
    # two wrong answers among ten: a draw from the fit can be all correct (seed 0: one of
    # 20), counted as a failed draw; the call raised "every observed answer is correct"
    answers = np.ones((5, 2))
    answers[0, 0] = answers[1, 1] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checked = cbmm.coverage_check(answers, n_rep=20, seed=0)
    assert (checked["failed"] >= 1).all() and (checked["n_rep"] == 20).all()


def test_folds_whose_fit_is_not_an_answer_are_counted_by_status():
    draw = simulate(60, 30, seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = cbmm.cross_validate(draw.responses, folds=2, max_iter=2)
    assert (table["status"] == "max_iter").all()
    messages = {w.category: str(w.message) for w in caught}
    assert messages[cbmm.ConvergenceWarning] == (
        "2 of 2 folds' fits are not answers (2 max_iter): a fold whose fit stopped short of "
        "an answer scores the fit where it stopped")
    # stopped after two iterations, it loses to a baseline, and the warning says why
    assert messages[cbmm.HeldOutWarning].endswith(
        "some folds' fits are not answers (see the status column)")


def test_held_out_scores_match_their_definitions():
    truth = np.array([True, False, True, True, False])
    p = np.array([0.9, 0.2, 0.6, 0.4, 0.4])
    scores = held_out_scores(truth, p)
    assert scores["log_loss"] == pytest.approx(
        -np.mean([np.log(0.9), np.log(0.8), np.log(0.6), np.log(0.4), np.log(0.6)]))
    assert scores["brier"] == pytest.approx(np.mean((p - truth) ** 2))
    # positives 0.9, 0.6, 0.4 against negatives 0.2, 0.4: 5 wins and one tie of 6 pairs
    assert scores["auc"] == pytest.approx(5.5 / 6)


def test_set_aside_items_predict_their_side():
    fit = cbmm.FitResult(theta=np.array([-1.0, 1.0]), a=np.array([np.nan, 2.0]),
                         b=np.array([np.inf, 0.0]), loss=0.0, loss_history=[], n_iter=0,
                         status="converged", runtime_s=0.0, method="cbmm")
    p = predicted_probabilities(fit, np.array([0, 1, 1]), np.array([0, 0, 1]))
    np.testing.assert_allclose(p, [1.0, 1.0, 1 / (1 + np.exp(-2.0))])


def test_set_aside_models_predict_the_intercept_of_items_without_discrimination():
    """A set-aside model's ability is -inf; on an item with a = 0 its logit is b (the
    product -inf * 0 was NaN, which made a converged fold's scores NaN)."""
    fit = cbmm.FitResult(theta=np.array([-np.inf, np.inf, 0.5]), a=np.array([0.0, 1.0]),
                         b=np.array([0.3, -0.2]), loss=0.0, loss_history=[], n_iter=0,
                         status="converged", runtime_s=0.0, method="cbmm")
    p = predicted_probabilities(fit, np.array([0, 1, 0, 1, 2]), np.array([0, 0, 1, 1, 1]))
    np.testing.assert_allclose(p, [1 / (1 + np.exp(-0.3))] * 2 + [0.0, 1.0, 1 / (1 + np.exp(-0.3))])


def test_a_converged_fold_with_set_aside_models_is_scored():
    rng = np.random.default_rng(4)
    theta, a, b = rng.normal(size=60), rng.uniform(0.5, 2, 40), rng.normal(size=40)
    y = (rng.random((60, 40)) < 1 / (1 + np.exp(-(np.outer(theta, a) + b)))).astype(float)
    y[:, 5], y[3, :], y[4, :-1] = 1, 0, 1
    table = quiet(cbmm.cross_validate, y, degenerate="set_aside")
    converged = table[table["status"] == "converged"]
    assert len(converged) and converged[["log_loss", "brier", "auc"]].notna().all().all(), table


@pytest.mark.parametrize("method", ["lbfgsb", "manopt"])
def test_every_loss_method_runs_through_cross_validation(method):
    pytest.importorskip("pymanopt") if method == "manopt" else None
    draw = simulate(60, 30, seed=1)
    table = quiet(cbmm.cross_validate, draw.responses, method, folds=2)
    assert (table["method"] == method).all() and table["log_loss"].notna().all()


# --------------------------------------------------------------------------- coverage check

def test_coverage_check_holds_where_the_2pl_is_estimable_and_fails_with_few_steep_items():
    """On a simulated 400 x 150 the intervals cover at their level, centred (asymptotic
    theory); with 3,000 models answering 10 steep items the joint estimate of the items
    is biased by more than its standard error (the incidental-parameter problem: the
    standard errors shrink with more models, the bias does not) and the check says so."""
    estimable = simulate(400, 150, seed=3).responses
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # intervals that hold: no warning
        well = cbmm.coverage_check(estimable, n_rep=8)
        eighty = cbmm.coverage_check(estimable, n_rep=8, level=0.8)
    assert list(well.index) == ["theta", "a", "b"]
    assert (well["n_rep"] == 8).all() and (well["failed"] == 0).all()
    # asymptotic theory: each level's intervals hold the truth at that level, within three
    # binomial sd of the 8 x 400 abilities' and 8 x 150 items' intervals (a band of
    # [0.9, 0.99] passed intervals judged at 98 % while reported as 95 %)
    intervals = pd.Series({"theta": 8 * 400, "a": 8 * 150, "b": 8 * 150})
    for level, table in ((0.95, well), (0.8, eighty)):
        band = 3 * np.sqrt(level * (1 - level) / intervals)
        assert ((table["coverage"] - level).abs() <= band).all(), (level, table)
    # the same draws at either level: their z-ratios do not depend on it
    pd.testing.assert_frame_equal(eighty[["bias_se", "sd_z"]], well[["bias_se", "sd_z"]])
    assert (well["bias_se"].abs() < 0.3).all() and well["sd_z"].between(0.85, 1.15).all()
    assert (well["worst"] <= well["coverage"]).all()
    rng = np.random.default_rng(0)
    theta, b = rng.standard_normal(3000), rng.normal(0, 2, 10)
    answers = (rng.random((3000, 10)) < 1 / (1 + np.exp(-(4.0 * theta[:, None] + b)))) * 1.0
    with pytest.warns(UserWarning) as caught:
        steep = cbmm.coverage_check(answers, n_rep=4)
    assert steep.loc["a", "coverage"] < 0.8 and abs(steep.loc["a", "bias_se"]) > 0.8, steep
    short = steep.index[steep["coverage"] < 0.9]  # the table, said in words as well
    said = [str(w.message) for w in caught if str(w.message).startswith("coverage_check: the")]
    assert said == ["coverage_check: the 95% intervals of " + ", ".join(
        f"{name} held the truth in {steep.loc[name, 'coverage']:.2f}" for name in short)
        + " of the cases: on data of this shape they claim more than the fit knows (where "
        "many models answer few items, the joint fit's items are biased: method='mml'; "
        "docs/trust.md, where they do not hold)"]
    assert (steep["not_optimum"] == 0).all()
    with pytest.raises(ValueError, match="n_rep"):
        cbmm.coverage_check(answers, n_rep=1)
    with pytest.raises(ValueError, match="method 'pyirt' gives no standard errors"):
        cbmm.coverage_check(answers, "pyirt")  # at once, not after py-irt's fit of the data
    with pytest.warns(cbmm.ConvergenceWarning, match="2 of 2 draws' fits stopped short"):
        short = cbmm.coverage_check(answers, n_rep=2, max_iter=2)
    assert (short["not_optimum"] == 2).all()



def test_seeded_resamples_folds_and_draws_do_not_depend_on_the_order_given():
    """bootstrap, cross_validate and coverage_check draw over the labels' order, as
    select_items does: permuting the rows and columns moves their results by the solver's
    tolerance only (drawn by position, a bootstrap bound moved by 0.5 of a 1.35 width)."""
    draw = simulate(60, 40, missing="mcar", missing_rate=0.1, seed=3)
    frame = pd.DataFrame(draw.responses, index=[f"m{i}" for i in range(60)],
                         columns=[f"q{k}" for k in range(40)])
    rng = np.random.default_rng(0)
    shuffled = frame.iloc[rng.permutation(60), rng.permutation(40)]
    given, permuted = (quiet(cbmm.bootstrap, f, n_boot=30) for f in (frame, shuffled))
    moved = (permuted.theta.reindex(given.theta.index) - given.theta)[["lower", "upper"]]
    assert moved.abs().to_numpy().max() < 0.05
    given, permuted = (quiet(cbmm.cross_validate, f) for f in (frame, shuffled))
    assert list(given["n_cells"]) == list(permuted["n_cells"])
    np.testing.assert_allclose(given[["log_loss", "brier", "auc"]],
                               permuted[["log_loss", "brier", "auc"]], atol=1e-4)
    given, permuted = (quiet(cbmm.coverage_check, f, n_rep=3) for f in (frame, shuffled))
    np.testing.assert_allclose(given[["coverage", "worst"]], permuted[["coverage", "worst"]])


def test_a_verbose_bootstrap_logs_its_replicates_progress(caplog):
    """A long bootstrap said nothing between its fit and its end (246 s at the paper's
    shape); with verbose it logs after every tenth of its replicates, from the forked
    worker too."""
    import logging

    draw = simulate(80, 20, seed=4)
    with caplog.at_level(logging.INFO, logger="cbmm"):
        quiet(cbmm.bootstrap, draw.responses, n_boot=20, isolate=False, verbose=100)
    lines = [r.getMessage() for r in caplog.records if "replicates (" in r.getMessage()]
    assert [line.split(" (")[0] for line in lines] == [
        f"bootstrap: {k} of 20 replicates" for k in range(2, 21, 2)]
    # the forked worker's lines, in a process of its own (pytest's log capture would keep
    # them in the worker)
    import subprocess
    import sys

    script = ("import warnings, cbmm; from cbmm.simulate import simulate; "
              "warnings.simplefilter('ignore'); "
              "cbmm.bootstrap(simulate(80, 20, seed=4).responses, n_boot=20, verbose={})")
    for verbose, expected in ((100, True), (0, False)):
        run = subprocess.run([sys.executable, "-c", script.format(verbose)], capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert ("\nbootstrap: 20 of 20 replicates (0 failed)" in run.stderr) == expected


def test_verbose_cross_validation_and_coverage_check_log_each_fit(caplog):
    """cross_validate's folds and coverage_check's draws said nothing until the end
    (minutes at the paper's shape); with verbose each logs its fits as they finish."""
    import logging

    draw = simulate(60, 30, seed=5)
    with caplog.at_level(logging.INFO, logger="cbmm"):
        folds = quiet(cbmm.cross_validate, draw.responses, folds=3, verbose=1000)
        checked = quiet(cbmm.coverage_check, draw.responses, n_rep=2, verbose=1000)
    lines = [r.getMessage().split(", ")[0] for r in caplog.records
             if r.getMessage().startswith(("cross_validate:", "coverage_check:"))]
    assert lines == ([f"cross_validate: fold {k} of 3 fitted ({status})"
                      for k, status in enumerate(folds["status"], start=1)]
                     + [f"coverage_check: draw {k} of 2 fitted (converged)" for k in (1, 2)])
    assert checked["failed"].eq(0).all()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="cbmm"):
        quiet(cbmm.cross_validate, draw.responses, folds=2)
    assert not [r for r in caplog.records if r.getMessage().startswith("cross_validate:")]


def test_alike_models_count_and_their_expected_number_match_a_brute_force():
    from cbmm.coverage import _alike_models

    rows = np.array([0, 0, 1, 1, 1, 2])
    values = np.array([1, 1, 1, -1, 1, -1], dtype=np.int8)
    p = np.array([0.9, 0.8, 0.5, 0.4, 0.3, 0.2])
    alike, expected, spread = _alike_models(rows, values, p, 4)  # model 3 answered nothing
    chance = [0.9 * 0.8 + 0.1 * 0.2, 0.5 * 0.4 * 0.3 + 0.5 * 0.6 * 0.7, 1.0]
    assert alike == 2  # models 0 (all right) and 2 (its one answer)
    assert expected == pytest.approx(sum(chance))
    assert spread == pytest.approx(np.sqrt(sum(c * (1 - c) for c in chance)))


def test_coverage_check_warns_where_the_fit_cannot_reproduce_its_alike_models():
    """20 of 200 models at abilities of +-4 answer every item alike; the prior pulls them
    in, the scale (sd 1 over the models) follows, and a's intervals covered the truth
    0.63 of the time (trial of 2026-11-29) while the check, drawing from the fit, said
    0.95. It cannot see that, but it can see the fit expecting fewer alike models."""
    from scipy.special import expit

    rng = np.random.default_rng(5)
    theta = rng.standard_normal(200)
    theta[:10], theta[10:20] = -4, 4
    a, b = rng.uniform(1.5, 3.0, 80), rng.normal(0, 1, 80)
    answers = (rng.random((200, 80)) < expit(np.outer(theta, a) + b)).astype(float)
    with pytest.warns(UserWarning, match=r"coverage_check: \d+ models answered every item "
                                         r"alike, where the fit expects [\d.]+ ± [\d.]+"):
        cbmm.coverage_check(answers, n_rep=2)
    # the same models set aside: reproduced exactly, no warning; a plain design: none
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", category=cbmm.DegenerateDataWarning)
        cbmm.coverage_check(answers, n_rep=2, degenerate="set_aside")
        cbmm.coverage_check(simulate(200, 80, seed=1).responses, n_rep=2)


def test_a_bootstrap_larger_than_the_memory_is_refused_before_it_starts():
    """10 million replicates of MATH-500's shape need 170 GiB: the worker died of it
    ('exited with status 1', an internal error in the CLI)."""
    y = simulate(20, 10, seed=0).responses
    with pytest.raises(ValueError, match=r"n_boot=10000000000: the replicates' estimates "
                                         r"\(10000000000 x \(20 \+ 2 x 10\) numbers, held "
                                         r"twice\) take 5960.5 GiB, more than this machine's"):
        cbmm.bootstrap(y, n_boot=10**10)


def _two_pl(n, j, seed):
    """Answers of n models to j items from a 2PL drawn here (not cbmm.simulate), and the
    true abilities on the canonical scale (mean 0, sd 1 over the models)."""
    rng = np.random.default_rng(seed)
    theta, a, b = rng.standard_normal(n), rng.uniform(0.5, 2, j), rng.normal(0, 1, j)
    answers = (rng.random((n, j)) < 1 / (1 + np.exp(-(np.outer(theta, a) + b)))).astype(float)
    return answers, (theta - theta.mean()) / theta.std()


def test_a_fit_of_few_models_says_its_ability_intervals_fall_short():
    """With 10 models on 300 items the abilities' 95 % intervals hold the simulated truth
    far less often than 95 % (each item rests on 10 answers), with `converged` fits: fit,
    coverage_check (whose draws cannot show it) and the bootstrap's item resample say so
    in an IntervalWarning; 60 models on 50 items cover near 95 % and get none."""
    def coverage(n, j, replicates):
        inside, caught = [], []
        for seed in range(replicates):
            answers, truth = _two_pl(n, j, seed)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                fitted = cbmm.fit(answers, se=True)
            assert fitted.status == "converged"
            caught.append(any(w.category is cbmm.IntervalWarning for w in seen))
            inside.extend(np.abs(fitted.theta - truth) <= 1.96 * fitted.theta_se)
        return np.mean(inside), caught

    few, caught = coverage(10, 300, 20)
    assert few < 0.90 and all(caught)
    many, caught = coverage(60, 50, 4)
    assert many > 0.90 and not any(caught)
    answers, _ = _two_pl(10, 300, 0)
    with pytest.warns(cbmm.IntervalWarning, match="fit of 10 models"):
        cbmm.coverage_check(answers, n_rep=2)
    with pytest.warns(cbmm.IntervalWarning, match="fit of 10 models"):
        cbmm.bootstrap(answers, n_boot=2)


def test_two_models_get_no_ability_interval_and_confint_of_a_non_answer_warns():
    """Two abilities of mean 0 and sd 1 are -1 and +1 whatever the answers: no standard
    error (it was 0, an interval of zero width); the items keep theirs."""
    answers, _ = _two_pl(2, 40, 1)
    with pytest.warns(cbmm.ConvergenceWarning, match="the 2 models' abilities are -1 and"):
        fitted = cbmm.fit(answers, se=True)
    assert sorted(fitted.theta) == pytest.approx([-1, 1])
    assert np.isnan(fitted.theta_se).all() and np.isfinite(fitted.b_se).all()
    # nor a bound on the prior's bias (it divided by the zero standard error)
    assert fitted.prior_bias is None and "prior_bias" not in fitted.info
    answers, _ = _two_pl(60, 50, 2)
    stopped = quiet(cbmm.fit, answers, se=True, max_iter=1)
    assert stopped.status == "max_iter"
    with pytest.warns(cbmm.ConvergenceWarning, match="intervals of a max_iter fit .*not an"):
        stopped.confint()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet(cbmm.fit, answers, se=True).confint()  # an answer: no warning
