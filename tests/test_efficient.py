"""Efficient evaluation (cbmm.efficient): closed forms on tiny banks, simulated banks whose
truth is known, adaptive tests driven by simulated answers with fixed seeds, the audit on
planted mislabels."""

import itertools
import warnings
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats
from scipy.special import expit

import cbmm
from cbmm.efficient import study
from cbmm.efficient.audit import FALSE_DISCOVERY_RATE, NEGLIGIBLE_SLOPE
from cbmm.efficient.bank import ItemBank, Posterior, aligned_answers
from cbmm.efficient.prediction import (RESIDUAL_PRIOR_ITEMS, RIDGE_PENALTIES, SELECTION_FOLDS,
                                       Reference, predicted_accuracy)
from cbmm.efficient.refit import QuietFit
from cbmm.efficient.selection import PREDICTIVE_PENALTY, forward_selection
from cbmm.efficient.tinybenchmarks import (_kmeans, _lloyd, anchor_points, tinybenchmarks_estimates,
                                           tinybenchmarks_predictions)
from cbmm.simulate import simulate


def bank_table(a, b, prefix="q"):
    return pd.DataFrame({"a": np.asarray(a, float), "b": np.asarray(b, float)},
                        index=[f"{prefix}{j}" for j in range(len(a))])


def quiet_fit(table, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cbmm.fit(table, **options)


def two_skills(seed, n_models, first):
    """Answers of ``n_models`` to 60 items, of two skills (correlation 0.3): the first
    ``first`` items measure the first skill, the others the second."""
    rng = np.random.default_rng(seed)
    skills = rng.multivariate_normal([0, 0], [[1, 0.3], [0.3, 1]], n_models)
    a, b = rng.uniform(0.8, 2.0, 60), rng.normal(0, 1, 60)
    skill = (np.arange(60) >= first).astype(int)
    answers = rng.random((n_models, 60)) < expit(skills[:, skill] * a + b)
    return pd.DataFrame(answers.astype(float), columns=[f"q{j}" for j in range(60)])


@pytest.fixture(scope="module")
def simulated():
    """1000 models x 200 items of the paper's generator; the first 800 calibrate."""
    sim = simulate(1000, 200, seed=11)
    table = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(1000)],
                         columns=[f"q{j}" for j in range(200)])
    return sim, table, quiet_fit(table.iloc[:800])


# ------------------------------------------------------------------ closed forms

def test_a_model_that_answered_every_item_is_predicted_its_own_accuracy(simulated):
    _, table, result = simulated
    held = table.iloc[800:]
    predicted = cbmm.predict_accuracy(held, result)
    np.testing.assert_allclose(predicted["accuracy"], held.mean(axis=1), rtol=0, atol=1e-12)
    assert (predicted["lower"] == predicted["accuracy"]).all()
    assert (predicted["upper"] == predicted["accuracy"]).all()
    assert (predicted["n_items"] == 200).all()


def test_items_without_discrimination_give_the_shrunk_difference_estimator():
    # a = 0, b = 0: every probability is 1/2 whatever the ability, so the prediction is
    # (c + u (1/2 + n/(n + c0) (c/n - 1/2))) / J and its variance u/4 + u^2 (1/4)/(n + c0)
    items = bank_table(np.zeros(10), np.zeros(10))
    answers = pd.DataFrame([[1, 1, 1, 0] + [np.nan] * 6, [np.nan] * 10],
                           index=["four", "none"], columns=items.index)
    predicted = cbmm.predict_accuracy(answers, items, level=0.9)
    n, c, u, j = 4, 3, 6, 10
    expected = (c + u * (0.5 + n / (n + RESIDUAL_PRIOR_ITEMS) * (c / n - 0.5))) / j
    assert predicted.loc["four", "accuracy"] == pytest.approx(expected, abs=1e-12)
    half = 1.6448536269514722 * np.sqrt(u / 4 + u ** 2 * 0.25 / (n + RESIDUAL_PRIOR_ITEMS)) / j
    assert predicted.loc["four", "lower"] == pytest.approx(expected - half, abs=1e-12)
    assert predicted.loc["four", "upper"] == pytest.approx(expected + half, abs=1e-12)
    # no answer: the prior's prediction, 1/2, and the prior's ability N(0, 1)
    assert predicted.loc["none", "accuracy"] == pytest.approx(0.5, abs=1e-12)
    assert predicted.loc["none", "theta"] == pytest.approx(0.0, abs=1e-9)
    assert predicted.loc["none", "se"] == pytest.approx(1.0, abs=1e-6)
    assert predicted.loc["none", "n_items"] == 0


def test_the_ability_is_the_posterior_mean_under_the_normal_prior():
    items = bank_table([1.5, 0.7, 2.0], [0.3, -1.0, 0.5])
    answers = pd.DataFrame([[1, 0, np.nan]], columns=items.index)

    def density(t):
        return (np.exp(-t * t / 2) * expit(1.5 * t + 0.3) * (1 - expit(0.7 * t - 1.0)))

    mass = integrate.quad(density, -12, 12)[0]
    mean = integrate.quad(lambda t: t * density(t), -12, 12)[0] / mass
    second = integrate.quad(lambda t: t * t * density(t), -12, 12)[0] / mass
    predicted = cbmm.predict_accuracy(answers, items)
    assert predicted["theta"].iloc[0] == pytest.approx(mean, abs=1e-5)
    assert predicted["se"].iloc[0] == pytest.approx(np.sqrt(second - mean ** 2), abs=1e-5)
    # the unanswered item's expected probability under that posterior, plus the offset
    expected_p3 = integrate.quad(lambda t: expit(2.0 * t + 0.5) * density(t), -12, 12)[0] / mass
    answered_p = [integrate.quad(lambda t, f=f: f(t) * density(t), -12, 12)[0] / mass
                  for f in (lambda t: expit(1.5 * t + 0.3), lambda t: expit(0.7 * t - 1.0))]
    offset = 2 / (2 + RESIDUAL_PRIOR_ITEMS) * (1 - sum(answered_p)) / 2
    assert predicted["accuracy"].iloc[0] == pytest.approx((1 + expected_p3 + offset) / 3,
                                                          abs=1e-5)


@pytest.mark.parametrize("share_answered", [0.9, 0.1])  # dense, and sparse (a short test)
def test_the_posterior_from_sufficient_statistics_is_the_product_of_the_answers_likelihoods(
        share_answered):
    from cbmm.efficient.bank import GRID

    rng = np.random.default_rng(4)
    slopes, intercepts = rng.uniform(0.0, 4, 400), rng.normal(0, 3, 400)
    bank = ItemBank.of(bank_table(slopes, intercepts))
    answers = np.where(rng.random((30, 400)) < share_answered,
                       rng.choice(np.array([-1, 1], dtype=np.int8), (30, 400)), 0).astype(np.int8)
    answers[[0, 17, -1]] = 0  # models that answered nothing: the prior, at either end too
    x = np.multiply.outer(GRID, slopes) + intercepts  # grid x items
    log_likelihood = np.where(answers[:, None, :] > 0, -np.logaddexp(0, -x),
                              np.where(answers[:, None, :] < 0, -np.logaddexp(0, x), 0)).sum(-1)
    log_density = log_likelihood - GRID ** 2 / 2
    expected = np.exp(log_density - log_density.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(Posterior(answers, bank).weights, expected, atol=1e-12)


def test_a_posterior_without_some_items_is_the_posterior_of_the_other_answers():
    rng = np.random.default_rng(3)
    bank = ItemBank.of(bank_table(rng.uniform(0.5, 3, 300), rng.normal(0, 2, 300)))
    answers = rng.choice(np.array([-1, 0, 1], dtype=np.int8), size=(40, 300), p=[.45, .1, .45])
    items = rng.choice(300, 120, replace=False)  # many: weights that underflowed before
    rest = answers.copy()
    rest[:, items] = 0
    np.testing.assert_allclose(Posterior(answers, bank).mean_without(answers, bank, items),
                               Posterior(rest, bank).mean, atol=1e-10)


def test_temperature_scales_the_items():
    items = bank_table([1.0, 2.0], [0.5, -0.5])
    scaled = bank_table([3.0, 6.0], [1.5, -1.5])  # the same items at sigma = 3
    answers = pd.DataFrame([[1, np.nan]], columns=items.index)
    plain = cbmm.predict_accuracy(answers, items)
    sigma3 = cbmm.predict_accuracy(answers, _with_sigma(scaled, 3.0))
    pd.testing.assert_frame_equal(plain, sigma3, rtol=1e-10)


def _with_sigma(items, sigma):
    """A FitResult holding ``items`` at temperature ``sigma``."""
    return cbmm.FitResult(theta=np.zeros(2), a=items["a"], b=items["b"], loss=0.0,
                          loss_history=[], n_iter=0, status="converged", runtime_s=0.0,
                          method="cbmm", sigma=sigma)


def test_item_information_is_a2_p_q_averaged_over_the_models():
    items = bank_table([2.0, 0.5], [0.0, 1.0])
    answers = pd.DataFrame([[1, 0], [0, 1], [1, 1]], columns=items.index)
    audit = cbmm.item_audit(items, answers)
    theta = cbmm.predict_accuracy(answers, items)["theta"].to_numpy()
    for item, (a, b) in items.iterrows():
        p = expit(a * theta + b)
        assert audit.loc[item, "information"] == pytest.approx(np.mean(a * a * p * (1 - p)))
    assert audit.loc["q0", "difficulty"] == pytest.approx(0.0)
    assert audit.loc["q1", "difficulty"] == pytest.approx(-2.0)


def test_a_near_step_item_has_no_information_away_from_its_threshold():
    """a = 1e300 is a step at its threshold: a2 p q underflows to 0 away from it (it gave
    inf * 0 = NaN and a RuntimeWarning); the other items' information is a2 p q as ever."""
    from cbmm.efficient.bank import ItemBank

    bank = ItemBank.of(bank_table([1e300, 1.5, 0.0], [-3e299, 0.5, 1.0]))  # step at 0.3
    theta = np.array([-2.0, 0.0, 1.0, 2.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        information = bank.information(theta)
    np.testing.assert_array_equal(information[:, 0], 0.0)
    p = expit(1.5 * theta + 0.5)
    np.testing.assert_allclose(information[:, 1], 1.5 ** 2 * p * (1 - p), rtol=1e-12)
    np.testing.assert_array_equal(information[:, 2], 0.0)


def loo_ridge_by_refitting(features, target, new):
    """Ridge regression with an unpenalised intercept, refitted without each row to choose
    the penalty of least leave-one-out error: predictions at ``new`` and those errors."""
    def ridge(x, y, penalty):
        centre, mean = x.mean(axis=0), y.mean()
        xc = x - centre
        weights = np.linalg.solve(xc.T @ xc + penalty * np.eye(x.shape[1]), xc.T @ (y - mean))
        return lambda z: mean + (z - centre) @ weights

    best = None
    for penalty in RIDGE_PENALTIES:
        errors = np.array([target[i] - ridge(np.delete(features, i, 0), np.delete(target, i),
                                             penalty)(features[i])
                           for i in range(len(target))])
        if best is None or errors @ errors < best[0]:
            best = (errors @ errors, penalty, errors)
    return ridge(features, target, best[1])(new), best[2]


def test_a_reference_corrects_by_the_ridge_regression_leave_one_out_chooses():
    rng = np.random.default_rng(3)
    items = bank_table(rng.uniform(0.5, 2, 12), rng.normal(0, 1, 12))
    truth = expit(rng.normal(size=(40, 1)) * items["a"].to_numpy() + items["b"].to_numpy())
    reference = pd.DataFrame((rng.random((40, 12)) < truth).astype(float),
                             columns=items.index)
    reference.iloc[0, 7] = np.nan  # a reference model that skipped an item: left out
    new = pd.DataFrame([[1, 0, 1, 1, 0] + [np.nan] * 7, [0, 1, 1, 0, 0] + [np.nan] * 7,
                        [1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0]],
                       index=["five", "other five", "all"], columns=items.index, dtype=float)
    predicted = cbmm.predict_accuracy(new, items, reference=reference)
    # the reference's errors: prediction from all its answers minus that from the five
    complete = reference.iloc[1:]
    pd.testing.assert_frame_equal(predicted,
                                  cbmm.predict_accuracy(new, items, reference=complete))
    shown = items.index[:5]
    missed = (cbmm.predict_accuracy(complete, items)["accuracy"]
              - cbmm.predict_accuracy(complete[shown], items)["accuracy"]).to_numpy()
    coded = np.sign(complete[shown].to_numpy() - 0.5)
    correction, errors = loo_ridge_by_refitting(
        coded, missed, np.sign(new.loc[["five", "other five"], shown].to_numpy() - 0.5))
    alone = cbmm.predict_accuracy(new, items)
    expected = alone["accuracy"].iloc[:2] + correction
    np.testing.assert_allclose(predicted["accuracy"].iloc[:2], expected, rtol=0, atol=1e-12)
    # the jackknife's quantile of the errors over each reference model's 2PL sd from the five
    # (Lei et al.'s locally weighted scores), times each predicted model's own sd
    bank = ItemBank.of(items)

    def sd_2pl(frame):
        return predicted_accuracy(aligned_answers(frame, bank)[0], bank)["sd"]

    scores = np.abs(errors) / sd_2pl(complete[shown])
    half = np.sort(scores)[int(np.ceil(40 * 0.95)) - 1] * sd_2pl(new.iloc[:2])
    correct = new.iloc[:2].sum(axis=1)  # within what the answers allow: 3 to 10 of 12
    np.testing.assert_allclose(predicted["upper"].iloc[:2],
                               np.minimum(expected + half, (correct + 7) / 12), atol=1e-12)
    np.testing.assert_allclose(predicted["lower"].iloc[:2],
                               np.maximum(expected - half, correct / 12), atol=1e-12)
    assert predicted["upper"].iloc[1] - predicted["lower"].iloc[1] == pytest.approx(2 * half[1])
    # a model that answered every item is its accuracy, reference or not
    assert predicted.loc["all", "accuracy"] == predicted.loc["all", "upper"] == 7 / 12
    pd.testing.assert_series_equal(predicted["theta"], alone["theta"])


def test_a_reference_model_may_leave_a_few_items_unanswered(simulated):
    """Real matrices lose cells (AlpacaEval's 53 x 805: 43 models lack 1-29 answers each):
    a model that answered 95 % of the items is a reference model, its unanswered items
    counted by the 2PL, not as wrong and not as a reason to leave it out."""
    _, table, result = simulated
    held, reference = table.iloc[800:900], table.iloc[:800]
    keep = cbmm.select_items(result, 40, seed=0)
    gappy = reference.mask(np.random.default_rng(5).random(reference.shape) < 0.02)
    assert gappy.notna().all(axis=1).sum() < 19  # every model answered every item: 4
    full = cbmm.predict_accuracy(held[keep], result, reference=reference)
    gaps = cbmm.predict_accuracy(held[keep], result, reference=gappy)
    # the reference models' accuracy with their 2 % unanswered counted as wrong would pull
    # the corrections down by 0.011 on average (0.015 at most)
    assert abs((gaps["accuracy"] - full["accuracy"]).mean()) < 0.002
    assert (gaps["accuracy"] - full["accuracy"]).abs().max() < 0.005
    # past 5 % unanswered (11 of 200 items) a model is left out: the 10 others stay
    assert gappy.iloc[790:].isna().sum(axis=1).max() <= 10
    gappy.iloc[:790, :11] = np.nan
    with pytest.raises(ValueError, match="reference: 10 model\\(s\\) answered at least "
                                         "95% of the calibrated items \\(790 other"):
        cbmm.predict_accuracy(held[keep], result, reference=gappy)


def test_a_model_predicted_is_refused_as_a_reference_model(simulated):
    _, table, result = simulated
    held = table.iloc[800:850]
    shown = held.where(np.broadcast_to(np.arange(200) < 40, held.shape))
    reference = pd.concat([table.iloc[:800], held.iloc[:2]])
    with pytest.raises(ValueError, match=r"^reference: 2 of the models predicted are among its "
                                         r"models, with the same answers \(m800, m801\)"):
        cbmm.predict_accuracy(shown, result, reference=reference)
    # the row numbers of unlabelled arrays are not models: the answers differ
    predicted = cbmm.predict_accuracy(shown.to_numpy(), result,
                                      reference=table.iloc[:800].to_numpy())
    expected = cbmm.predict_accuracy(shown, result, reference=table.iloc[:800])
    np.testing.assert_allclose(predicted.to_numpy(), expected.to_numpy(), rtol=1e-12)


def test_a_reference_of_the_calibrations_own_models_warns_without_a_selection(simulated,
                                                                               tmp_path):
    _, table, result = simulated
    held = table.iloc[900:].iloc[:, :40]
    with pytest.warns(cbmm.efficient.InSampleReferenceWarning,
                      match="^reference: 800 of its models are the calibration's own"):
        cbmm.predict_accuracy(held, result, reference=table.iloc[:800])
    # the folder of the saved fit knows its models too, and the level is the one asked for
    result.save(tmp_path / "fit")
    with pytest.warns(cbmm.efficient.InSampleReferenceWarning,
                      match="^reference: 800 of its models .* the jackknife's 80% intervals"):
        cbmm.predict_accuracy(held, tmp_path / "fit", reference=table.iloc[:800], level=0.8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cbmm.efficient.InSampleReferenceWarning)
        cbmm.predict_accuracy(held, result, reference=table.iloc[800:900])  # other models
        cbmm.predict_accuracy(held, result, reference=table.iloc[:800], selection="random",
                              refit=True)


def test_a_reference_of_the_wrong_items_or_too_few_models_is_named(simulated):
    _, table, result = simulated
    held = table.iloc[800:805, :30]
    with pytest.raises(ValueError, match="reference: 1 item column\\(s\\) not among the "
                                         "calibrated items: \\['extra'\\]"):
        cbmm.predict_accuracy(held, result, reference=table.iloc[:100].assign(extra=1.0))
    with pytest.raises(ValueError, match="reference: 18 model\\(s\\) answered at least 95% "
                                         "of the calibrated items; a 0.95 interval needs at "
                                         "least 19"):
        cbmm.predict_accuracy(held, result, reference=table.iloc[:18])
    # models that did not answer the items predicted would show no error: left out
    with pytest.raises(ValueError, match="reference: 0 model\\(s\\) answered at least 95% "
                                         "of the calibrated items \\(100 other\\(s\\) "
                                         "skipped more"):
        cbmm.predict_accuracy(held, result, reference=table.iloc[:100, :30])
    assert len(cbmm.predict_accuracy(held, result, reference=table.iloc[:19])) == 5
    # items chosen on 19 models: each fold's width comes from the other 15 or 16
    assert len(cbmm.predict_accuracy(held, result, reference=table.iloc[:19],
                                     selection="predictive")) == 5
    with pytest.raises(ValueError, match="selection must be None or one of \\['stratified', "
                                         "'random', 'information', 'anchor', 'predictive'\\], "
                                         "got 'x'"):
        cbmm.predict_accuracy(held, result, reference=table.iloc[:19], selection="x")
    with pytest.raises(ValueError, match="selection says how the items were chosen on the "
                                         "reference's answers: give the reference"):
        cbmm.predict_accuracy(held, result, selection="predictive")
    # (n + 1) * level must reach the n-th error: 9 models for 0.9, 4 for 0.8 (in floating
    # point 0.9 / 0.1 is a hair above 9)
    for level, needed in ((0.8, 4), (0.9, 9), (0.95, 19)):
        assert len(cbmm.predict_accuracy(held, result, reference=table.iloc[:needed],
                                         level=level)) == 5
        with pytest.raises(ValueError, match=f"needs at least {needed}$"):
            cbmm.predict_accuracy(held, result, reference=table.iloc[:needed - 1], level=level)


# -------------------------------------------------------------------- selection

@pytest.mark.parametrize("strategy", cbmm.efficient.STRATEGIES)
def test_every_strategy_keeps_k_distinct_calibrated_items_reproducibly(simulated, strategy):
    _, table, result = simulated
    answers = {"responses": table.iloc[:800]} if strategy == "predictive" else {}
    chosen = cbmm.select_items(result, 25, strategy, seed=3, **answers)
    assert len(chosen) == 25 and chosen.is_unique and set(chosen) <= set(table.columns)
    assert list(chosen) == list(cbmm.select_items(result, 25, strategy, seed=3, **answers))
    everything = cbmm.select_items(result, 200, strategy, **answers)
    assert sorted(everything) == sorted(table.columns)


@pytest.mark.parametrize("strategy", cbmm.efficient.STRATEGIES)
def test_a_seed_chooses_the_same_items_whatever_the_order_of_the_columns(simulated, strategy):
    _, table, result = simulated
    items = pd.DataFrame({"a": result.a, "b": result.b})
    order = np.random.default_rng(1).permutation(len(items))
    for seed in (0, 5):
        chosen = [cbmm.select_items(
            items.iloc[columns], 25, strategy, seed=seed,
            **({"responses": table.iloc[:800, columns]} if strategy == "predictive" else {}))
            for columns in (slice(None), order)]
        assert set(chosen[0]) == set(chosen[1])


def test_item_labels_come_back_as_the_calibration_gives_them(simulated, tmp_path):
    _, table, _ = simulated
    numbered = table.iloc[:300, :60].set_axis(range(60), axis=1)
    result = quiet_fit(numbered)
    for strategy in cbmm.efficient.STRATEGIES:
        answers = {"responses": numbered} if strategy == "predictive" else {}
        chosen = cbmm.select_items(result, 10, strategy, **answers)
        assert numbered[chosen].shape == (300, 10) and result.a[chosen].notna().all()
    assert list(cbmm.item_audit(result, numbered).index) == list(range(60))
    asked = []
    test = cbmm.adaptive_test(lambda item: asked.append(item) or numbered.iloc[0][item],
                              result, max_items=5, se_target=1e-9)
    assert test.items == asked and set(asked) <= set(range(60))
    assert list(test.trace["item"]) == asked
    # a saved fit's labels are its text; the same seed chooses the same items
    result.save(tmp_path / "fit")
    saved = cbmm.FitResult.load(tmp_path / "fit")
    assert list(cbmm.select_items(saved, 10, "anchor", seed=2)) == [
        str(item) for item in cbmm.select_items(result, 10, "anchor", seed=2)]
    # the folder is that fit, its models' abilities included (N(0, 1) quantiles stood in)
    for strategy in ("stratified", "information", "anchor"):
        assert list(cbmm.select_items(tmp_path / "fit", 10, strategy, seed=2)) == list(
            cbmm.select_items(saved, 10, strategy, seed=2)), strategy


def test_predictive_selection_is_forward_selection_by_the_ridge_leave_one_out_error():
    rng = np.random.default_rng(0)
    values = (rng.random((30, 9)) < rng.uniform(0.2, 0.8, 9)).astype(float)
    values[rng.random(values.shape) < 0.1] = np.nan  # accuracy over the items answered
    table = pd.DataFrame(values, columns=[f"q{j}" for j in range(9)])
    items = bank_table(np.ones(9), np.zeros(9))
    coded, accuracy = np.nan_to_num(2 * values - 1), np.nanmean(values, axis=1)
    # an unanswered item at the mean of the models that answered it
    centred = np.nan_to_num(2 * values - 1 - np.nanmean(2 * values - 1, axis=0))

    def leave_one_out(chosen, penalty, target):  # the ridge's hat matrix, intercept
        x = centred[:, chosen]  # unpenalised
        hat = x @ np.linalg.solve(x.T @ x + penalty * np.eye(len(chosen)), x.T)
        hat += 1 / len(x)
        errors = (target - hat @ target) / (1 - np.diag(hat))
        return errors @ errors

    def brute_force(penalty, k=5, target=accuracy):
        expected = []
        for _ in range(k):
            expected.append(min(set(range(9)) - set(expected),
                                key=lambda j: leave_one_out(expected + [j], penalty, target)))
        return expected

    chosen = cbmm.select_items(items, 5, "predictive", responses=table)
    assert list(chosen) == [f"q{j}" for j in brute_force(PREDICTIVE_PENALTY)]
    # nested: a smaller selection is the start of a larger one
    assert list(cbmm.select_items(items, 2, "predictive", responses=table)) == list(chosen[:2])
    # another penalty, as the benchmark compares them
    order = forward_selection(coded.astype(np.int8), penalty=0.5)
    assert list(itertools.islice(order, 5)) == brute_force(0.5)
    # items every model answered alike, or none did, tell the regression nothing: they
    # come after all the others, in their order, and asking for them is warned of
    alike = table.assign(right=1.0, none=np.nan)[["right", *table.columns, "none"]]
    items = bank_table(np.ones(11), np.zeros(11)).set_axis(alike.columns)
    with warnings.catch_warnings():  # the accuracy is over the answered items, "right" too
        warnings.simplefilter("error")
        assert list(cbmm.select_items(items, 9, "predictive", responses=alike)) == \
            [f"q{j}" for j in brute_force(PREDICTIVE_PENALTY, k=9, target=np.nanmean(
                alike.drop(columns="none"), axis=1))]
    with pytest.warns(UserWarning, match="k=11: the responses' answers differ between "
                                         "models on 9 of the calibrated items"):
        everything = cbmm.select_items(items, 11, "predictive", responses=alike)
    assert list(everything[9:]) == ["right", "none"]
    # so does one that every model that answered it answered alike, where some did not
    gappy = alike.assign(right=[np.nan] + [1.0] * (len(alike) - 1))
    with pytest.warns(UserWarning, match="differ between models on 9 of"):
        assert list(cbmm.select_items(items, 11, "predictive", responses=gappy)[9:]) == \
            ["right", "none"]


def test_predictive_selection_learns_nothing_from_which_items_a_model_did_not_answer():
    # item q0 is noise, and the weaker half of the calibration models did not answer it:
    # coded as a value, "not answered" marks the weaker models (it was chosen 9th of 10),
    # though a new model answers the items it is given
    rng = np.random.default_rng(5)
    theta = rng.normal(size=400)
    a, b = rng.uniform(0.8, 2.0, 30), rng.normal(0, 1, 30)
    a[0], b[0] = 0.0, 2.0  # right 88 % of the time, whoever answers
    values = (rng.random((400, 30)) < expit(np.outer(theta, a) + b)).astype(float)
    values[theta < np.median(theta), 0] = np.nan
    table = pd.DataFrame(values, columns=[f"q{j}" for j in range(30)])
    items = bank_table(np.ones(30), np.zeros(30))
    chosen = cbmm.select_items(items, 10, "predictive", responses=table)
    assert "q0" not in chosen
    # what its own answers tell, among the models that gave them: as much as noise
    answered = table.dropna()
    again = cbmm.select_items(items, 10, "predictive", responses=answered)
    assert "q0" not in again


def test_predictive_selection_over_fewer_models_than_a_reference_needs_warns():
    rng = np.random.default_rng(6)
    items = bank_table(np.ones(30), np.zeros(30))
    table = pd.DataFrame((rng.random((19, 30)) < 0.5).astype(float),
                         columns=[f"q{j}" for j in range(30)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cbmm.select_items(items, 5, "predictive", responses=table)  # 19: enough for 0.95
    table.iloc[5:, :] = np.nan  # 5 models answered any item
    with pytest.warns(UserWarning, match="5 model\\(s\\) answered a calibrated item; .* at "
                                         "least 19 .*\\(strategy 'stratified'\\)"):
        cbmm.select_items(items, 5, "predictive", responses=table)


def test_predictive_items_see_a_second_skill_and_their_width_is_cross_validated():
    # two skills (correlation 0.3): 40 items of the first, 20 of the second. Items chosen
    # on the 1,000 calibration models' answers predict the accuracy of held-out models
    # better than those chosen by the one-dimensional fit. Chosen to predict those models,
    # they make their leave-one-out errors look small: the jackknife's intervals fall
    # short, the cross-validated ones (selection="predictive") cover
    maes, covered = {"predictive": [], "stratified": []}, {"predictive": [], None: []}
    for seed in range(3):
        table = two_skills(seed, 1500, first=40)
        calibration, held = table.iloc[:1000], table.iloc[1000:]
        result, truth = quiet_fit(calibration), held.mean(axis=1)
        chosen = {}
        for strategy in maes:
            given = {"responses": calibration} if strategy == "predictive" else {}
            chosen[strategy] = cbmm.select_items(result, 10, strategy, seed=seed, **given)
            predicted = cbmm.predict_accuracy(held[chosen[strategy]], result,
                                              reference=calibration)
            maes[strategy].append((predicted["accuracy"] - truth).abs().mean())
        for selection in covered:
            predicted = cbmm.predict_accuracy(held[chosen["predictive"]], result,
                                              reference=calibration,
                                              selection=selection)
            covered[selection].append(
                ((predicted["lower"] <= truth) & (truth <= predicted["upper"])).mean())
    assert np.mean(maes["predictive"]) < 0.9 * np.mean(maes["stratified"])
    # 1,500 intervals of nominal 95 %: within three binomial sd, and the jackknife's fewer
    band = 3 * np.sqrt(0.95 * 0.05 / 1500)
    assert abs(np.mean(covered["predictive"]) - 0.95) <= band
    assert np.mean(covered[None]) < np.mean(covered["predictive"])


def check_cross_validated_width(predicted, answers, result, calibration, choose, rtol=1e-10):
    """Asserts that ``predicted`` (``predict_accuracy`` of ``answers``, 12 of 200 items,
    with ``calibration`` as the reference and a ``selection``) has the interval computed
    by hand: the fixed random cut into SELECTION_FOLDS folds of the models in their
    labels' order, each fold's models predicted from the items ``choose(others)`` gives
    (a fit and 12 items) with the other folds as the reference; the quantile of their
    errors over their 2PL sds, times each predicted model's sd, or the jackknife's where
    wider; the point prediction the jackknife's.  Returns the cross-validated widths and
    the jackknife's, of the intervals not clipped."""
    ordered = calibration.sort_index(kind="stable")
    n = len(ordered)
    fold = np.random.default_rng(0).permutation(n) % SELECTION_FOLDS
    scores = []
    for f in range(SELECTION_FOLDS):
        others, own = ordered[fold != f], ordered[fold == f]
        fitted, items = choose(others)
        errors = (cbmm.predict_accuracy(own[items], fitted, reference=others)["accuracy"]
                  - own.mean(axis=1))
        scores.append(np.abs(errors) / sd_2pl(own[items], fitted))
    quantile = np.sort(np.concatenate(scores))[int(np.ceil((n + 1) * 0.95)) - 1]
    # the intervals not clipped to the accuracies the 12 answers allow
    low = answers.sum(axis=1) / 200
    inside = (predicted["lower"] > low) & (predicted["upper"] < low + 188 / 200)
    assert inside.sum() >= 5
    jackknife = cbmm.predict_accuracy(answers, result, reference=calibration)
    # the point prediction is the reference's, as without selection
    np.testing.assert_allclose(predicted["accuracy"], jackknife["accuracy"], rtol=1e-12)
    jackknife = (jackknife["upper"] - jackknife["lower"])[inside].to_numpy()
    crossed = 2 * quantile * sd_2pl(answers, result)[inside.to_numpy()]
    np.testing.assert_allclose((predicted["upper"] - predicted["lower"])[inside],
                               np.maximum(crossed, jackknife), rtol=rtol)
    return crossed, jackknife


def sd_2pl(frame, fit):
    """The sd of the 2PL's prediction of each row's accuracy (``predicted_accuracy``)."""
    bank = ItemBank.of(fit)
    return predicted_accuracy(aligned_answers(frame, bank)[0], bank)["sd"]


class RecordedStarts(QuietFit):
    """The library's refit, recording the start each call is given."""

    def __init__(self, settings):
        super().__init__(settings)
        self.starts = []

    def __call__(self, data, start=None):
        self.starts.append(start)
        return super().__call__(data, start)


def test_the_librarys_refits_start_at_the_calibration_and_land_where_a_cold_fit_does(
        simulated):
    _, table, _ = simulated
    calibration = table.iloc[:400]
    # calibrated at temperature 2, refitted at 1: the start scaled to the same probabilities
    result = quiet_fit(calibration, sigma=2.0)
    bank, refit = ItemBank.of(result), RecordedStarts({"sigma": 1.0})
    values = np.where(calibration.to_numpy() > 0, 1, -1).astype(np.int8)
    folds = Reference(values, bank, refit=refit, labels=calibration.index)
    folds.selection_errors(12, "information")
    assert len(refit.starts) == SELECTION_FOLDS
    fold = np.random.default_rng(0).permutation(400) % SELECTION_FOLDS
    for f, (_, refitted, _) in enumerate(folds.folds()):
        others = calibration.sort_index(kind="stable")[fold != f]
        theta0, a0, b0 = refit.starts[f]
        # the calibration's items, scaled to temperature 1, and the models' posterior means
        np.testing.assert_allclose(a0, result.a.to_numpy() / 2)
        np.testing.assert_allclose(b0, result.b.to_numpy() / 2)
        expected = cbmm.efficient.bank.Posterior(
            np.where(others.to_numpy() > 0, 1, -1).astype(np.int8), bank).mean
        np.testing.assert_allclose(theta0, expected)
        # one start, landing within the fits' tolerance of three cold ones
        cold = quiet_fit(others)
        assert refitted.bank.sigma == 1.0
        assert np.abs(refitted.bank.a - cold.a.to_numpy()).max() < 0.02
        assert np.abs(refitted.bank.b - cold.b.to_numpy()).max() < 0.02
    # a calibration that set an item aside (a NaN, b -inf in the fit; in the bank as every
    # model answered it) starts its refits there too, which set it aside again
    aside = calibration.assign(q0=0.0)
    fitted = quiet_fit(aside, degenerate="set_aside")
    assert np.isnan(fitted.a["q0"])
    refit = RecordedStarts({"degenerate": "set_aside"})
    folds = Reference(np.where(aside.to_numpy() > 0, 1, -1).astype(np.int8),
                      ItemBank.of(fitted), refit=refit, labels=aside.index)
    folds.selection_errors(12, "stratified")
    assert all(np.isfinite(part).all() for start in refit.starts for part in start)
    for _, refitted, _ in folds.folds():  # set aside again: as in the calibration
        assert refitted.bank.a[0] == 0 and refitted.bank.b[0] == ItemBank.of(fitted).b[0]
    # py-irt and mirt fit from one start of their own (py-irt's slopes on the log scale)
    assert QuietFit({"method": "lbfgsb"}).starts_warm
    assert not QuietFit({"method": "pyirt"}).starts_warm
    assert not QuietFit({"method": "mirt"}).starts_warm
    # a refit of the user's is given the data alone (a function of one argument)
    calls = []
    Reference(values, bank, refit=lambda data: calls.append(data.shape) or quiet_fit(data),
              labels=calibration.index).selection_errors(12, "information")
    assert calls == [(int((fold != f).sum()), 200) for f in range(SELECTION_FOLDS)]


def test_the_cross_validated_width_is_the_folds_error_quantile(simulated):
    _, table, result = simulated
    calibration, held = table.iloc[:800], table.iloc[800:810]
    chosen = cbmm.select_items(result, 12, "predictive", responses=calibration)
    # a table of the items records no settings to refit: each fold is predicted by the fit
    # itself (a FitResult's folds are refitted, as with refit=True: below)
    items = result.items_frame()
    predicted = cbmm.predict_accuracy(held[chosen], items, reference=calibration,
                                      selection="predictive")
    # by hand: each fold predicted from 12 items chosen on the others' answers
    crossed, jackknife = check_cross_validated_width(
        predicted, held[chosen], result, calibration,
        lambda others: (result, cbmm.select_items(result, 12, "predictive", responses=others)))
    assert (crossed > jackknife).all()  # the predictive items' in-sample errors are small
    # the reference's rows in another order: the same folds, the same intervals
    pd.testing.assert_frame_equal(predicted, cbmm.predict_accuracy(
        held[chosen], items, reference=calibration.iloc[::-1], selection="predictive"))
    refitted = cbmm.predict_accuracy(held[chosen], result, reference=calibration,
                                     selection="predictive")
    pd.testing.assert_frame_equal(refitted, cbmm.predict_accuracy(
        held[chosen], result, reference=calibration, selection="predictive", refit=True))
    assert not refitted.equals(predicted)


def test_items_chosen_on_the_fit_get_their_width_cross_validated_on_refits(simulated):
    _, table, _ = simulated
    calibration, held = table.iloc[:400], table.iloc[800:810]
    result = quiet_fit(calibration)
    chosen = cbmm.select_items(result, 12, "information")
    with pytest.raises(ValueError, match="selection='information' chooses the items again "
                                         "on the calibration refitted .* a table of items "
                                         "records no settings .* give refit"):
        cbmm.predict_accuracy(held[chosen], result.items_frame(), reference=calibration,
                              selection="information")
    # a FitResult records its settings: refitted by them, as with refit=True
    pd.testing.assert_frame_equal(
        cbmm.predict_accuracy(held[chosen], result, reference=calibration,
                              selection="information"),
        cbmm.predict_accuracy(held[chosen], result, reference=calibration,
                              selection="information", refit=True))
    predicted = cbmm.predict_accuracy(held[chosen], result, reference=calibration,
                                      selection="information", refit=quiet_fit)
    # by hand: each fold predicted from 12 items chosen by the strategy on a fit without it
    def refitted(others):
        fitted = quiet_fit(others)
        return fitted, cbmm.select_items(fitted, 12, "information")
    check_cross_validated_width(predicted, held[chosen], result, calibration, refitted,
                                rtol=1e-8)
    # stratified items, whose cross-validated errors are the smaller here: the jackknife's
    stratified = cbmm.select_items(result, 12, "stratified")
    alone = cbmm.predict_accuracy(held[stratified], result, reference=calibration)
    values = calibration.to_numpy()
    folds = Reference(np.where(values > 0, 1, -1).astype(np.int8), ItemBank.of(result),
                      refit=quiet_fit, labels=calibration.index)
    rank = int(np.ceil(401 * 0.95)) - 1
    low = held[stratified].sum(axis=1) / 200
    inside = ((alone["lower"] > low) & (alone["upper"] < low + 188 / 200)).to_numpy()
    crossed = 2 * np.sort(folds.selection_scores(12, "stratified"))[rank] * \
        sd_2pl(held[stratified], result)
    assert inside.sum() >= 5
    assert (crossed[inside] < (alone["upper"] - alone["lower"]).to_numpy()[inside]).all()
    pd.testing.assert_frame_equal(alone, cbmm.predict_accuracy(
        held[stratified], result, reference=calibration, selection="stratified",
        refit=quiet_fit))
    # the reference's rows in another order: the same folds and refits, the same intervals
    pd.testing.assert_frame_equal(predicted, cbmm.predict_accuracy(
        held[chosen], result, reference=calibration.iloc[::-1], selection="information",
        refit=quiet_fit))
    # refit=True: the settings the fit records, here the defaults quiet_fit used, warm-started
    # at the calibration: the same up to the refits' tolerance, which the sds carry
    pd.testing.assert_frame_equal(predicted, cbmm.predict_accuracy(
        held[chosen], result, reference=calibration, selection="information", refit=True),
        rtol=1e-4)
    with pytest.raises(ValueError, match="refit=True refits as the calibration was fitted"):
        cbmm.predict_accuracy(held[chosen], result.items_frame().set_index("item"),
                              reference=calibration, selection="information", refit=True)


def test_selection_error_is_the_cross_validated_error_of_predictions_made_by_hand(simulated):
    """Each fold of the calibration models (the fixed random cut in their labels' order)
    predicted by predict_accuracy from k items chosen by the strategy on a refit of the
    others, with the others as its reference: the curve is those errors' summaries."""
    _, table, _ = simulated
    calibration = table.iloc[:400]
    result = quiet_fit(calibration)
    curve = cbmm.selection_error(result, calibration, [40, 12], "information", refit=quiet_fit)
    assert list(curve.index) == [12, 40] and curve.index.name == "k"
    ordered = calibration.sort_index(kind="stable")
    fold = np.random.default_rng(0).permutation(400) % SELECTION_FOLDS
    refits = [quiet_fit(ordered[fold != f]) for f in range(SELECTION_FOLDS)]
    for k in (12, 40):
        errors = []
        for f, fitted in enumerate(refits):
            others, own = ordered[fold != f], ordered[fold == f]
            items = cbmm.select_items(fitted, k, "information")
            errors.append(cbmm.predict_accuracy(own[items], fitted, reference=others)["accuracy"]
                          - own.mean(axis=1))
        errors = np.abs(np.concatenate(errors))
        np.testing.assert_allclose(curve.loc[k, ["mae", "rmse", "q90", "mae_se"]].astype(float),
                                   [errors.mean(), np.sqrt(np.mean(errors ** 2)),
                                    np.quantile(errors, 0.9), errors.std(ddof=1) / 20],
                                   rtol=1e-8)
        assert curve.loc[k, "n_models"] == 400
    assert curve.loc[40, "mae"] < curve.loc[12, "mae"]
    # a strategy whose items depend on the seed (a sample; k-means' start): each fold's
    # items drawn again with seeds 0, 1, 2, and the draws' errors summarised together
    for strategy in ("stratified", "anchor"):
        curve = cbmm.selection_error(result, calibration, [12], strategy, refit=quiet_fit,
                                     draws=3)
        errors = [pd.concat([
            cbmm.predict_accuracy(ordered[fold == f][items], fitted,
                                  reference=ordered[fold != f])["accuracy"]
            - ordered[fold == f].mean(axis=1)
            for f, fitted in enumerate(refits)
            for items in [cbmm.select_items(fitted, 12, strategy, seed=seed)]]).abs()
            for seed in range(3)]
        assert not errors[0].equals(errors[1])  # other items: a draw, not a copy
        pooled = np.concatenate(errors)
        per_model = pd.concat(errors, axis=1).mean(axis=1)  # its three draws', by model
        np.testing.assert_allclose(
            curve.loc[12, ["mae", "rmse", "q90", "mae_se"]].astype(float),
            [pooled.mean(), np.sqrt(np.mean(pooled ** 2)), np.quantile(pooled, 0.9),
             per_model.std(ddof=1) / 20], rtol=1e-8, err_msg=strategy)
        assert curve.loc[12, "n_models"] == 400


def test_selection_error_estimates_the_error_on_new_models(simulated):
    """Cross-validated on the 800 calibration models, the error of 40 items predicts the
    error on the 200 held-out models, for items chosen on the fit and on the answers."""
    _, table, result = simulated
    calibration, held = table.iloc[:800], table.iloc[800:]
    truth = held.mean(axis=1)
    for strategy, options in (("stratified", {}), ("predictive", {"responses": calibration})):
        curve = cbmm.selection_error(result, calibration, [40], strategy, refit=True)
        new = []
        for seed in range(4 if strategy == "stratified" else 1):  # predictive's: no draws
            chosen = cbmm.select_items(result, 40, strategy, seed=seed, **options)
            predicted = cbmm.predict_accuracy(held[chosen], result, reference=calibration)
            new.append((predicted["accuracy"] - truth).abs())
        new = pd.concat(new, axis=1).mean(axis=1)  # each held-out model's, over the draws
        # the held-out MAE's own sampling error over 200 models is about 5 % (measured:
        # within 1 % for both)
        assert curve.loc[40, "mae"] == pytest.approx(new.mean(), rel=0.1)
        # and the two differ by what their standard errors allow
        new_se = new.std(ddof=1) / np.sqrt(new.size)
        assert abs(curve.loc[40, "mae"] - new.mean()) < 3 * np.hypot(curve.loc[40, "mae_se"],
                                                                     new_se)
        assert 0 < curve.loc[40, "mae_se"] < new_se  # 800 models' against 200's


def test_selection_error_names_what_it_cannot_measure(simulated):
    _, table, result = simulated
    calibration = table.iloc[:400]
    with pytest.raises(ValueError, match=r"ks\[1\] must be an integer in \[1, 199\], got 200"):
        cbmm.selection_error(result, calibration, [10, 200], "predictive")
    for empty in ([], 10, "10"):
        with pytest.raises(ValueError, match="ks must be a non-empty sequence"):
            cbmm.selection_error(result, calibration, empty, "predictive")
    # any iterable of numbers of items, a generator too
    pd.testing.assert_frame_equal(
        cbmm.selection_error(result, calibration, (k for k in (10, 5)), "predictive"),
        cbmm.selection_error(result, calibration, [5, 10], "predictive"))
    # until: the rows up to the first k that meets it, the same as the whole curve's (the
    # nested selections chosen in stages, here 10 items where the curve chose 150)
    whole = cbmm.selection_error(result, calibration, [5, 10, 150], "predictive")
    assert whole.loc[10, "mae"] < whole.loc[5, "mae"]
    pd.testing.assert_frame_equal(
        cbmm.selection_error(result, calibration, [5, 10, 150], "predictive",
                             until=whole.loc[10, "mae"]), whole.loc[[5, 10]])
    with pytest.raises(ValueError, match="strategy='stratified' chooses the items again .* "
                                         "give refit"):
        cbmm.selection_error(result.items_frame(), calibration, [10])
    # the documented defaults work where the fit records its settings: the folds refitted,
    # predictive's too (the CLI's curve was refitted, the library's was not)
    pd.testing.assert_frame_equal(cbmm.selection_error(result, calibration, [10], draws=1),
                                  cbmm.selection_error(result, calibration, [10], refit=True,
                                                       draws=1))
    refitted = cbmm.selection_error(result, calibration, [10], "predictive", refit=True)
    pd.testing.assert_frame_equal(
        cbmm.selection_error(result, calibration, [10], "predictive"), refitted)
    assert not cbmm.selection_error(result.items_frame(), calibration, [10],
                                    "predictive").equals(refitted)
    with pytest.raises(ValueError, match="strategy must be one of"):
        cbmm.selection_error(result, calibration, [10], "best", refit=True)
    with pytest.raises(ValueError, match="draws must be an integer >= 1, got 0"):
        cbmm.selection_error(result, calibration, [10], "random", refit=True, draws=0)
    # a strategy that does not sample its items has one selection per fold, whatever draws
    pd.testing.assert_frame_equal(
        cbmm.selection_error(result, calibration, [10], "predictive", draws=3),
        cbmm.selection_error(result, calibration, [10], "predictive", draws=1))
    gappy = calibration.iloc[:30].copy()
    gappy.iloc[12:, :11] = np.nan  # 12 models answered 95 % of the 200 items; 19 are needed
    with pytest.raises(ValueError, match="reference: 12 model\\(s\\) answered at least 95% "
                                         "of the calibrated items \\(18 other\\(s\\) "
                                         "skipped more"):
        cbmm.selection_error(result, gappy, [10], "predictive")


def test_widths_for_several_numbers_of_predictive_items_match_one_number_at_a_time(
        simulated):
    _, table, result = simulated
    calibration, held = table.iloc[:800], table.iloc[800:806]
    chosen = cbmm.select_items(result, 12, "predictive", responses=calibration)
    mixed = held[chosen].copy()
    mixed.iloc[:3, 6:] = np.nan  # three models answered the first 6 items only
    together = cbmm.predict_accuracy(mixed, result, reference=calibration,
                                     selection="predictive")
    for rows, k in ((slice(0, 3), 6), (slice(3, 6), 12)):
        alone = cbmm.predict_accuracy(held[chosen[:k]].iloc[rows], result,
                                      reference=calibration, selection="predictive")
        pd.testing.assert_frame_equal(together.iloc[rows], alone, rtol=1e-10)
    # asked for fewer items first, the folds choose again for more: as a fresh start does
    bank = ItemBank.of(result)
    values = calibration.to_numpy()
    coded = np.where(np.isnan(values), 0, np.where(values > 0, 1, -1)).astype(np.int8)
    grown = Reference(coded, bank)
    np.testing.assert_array_equal(grown.selection_errors(6),
                                  Reference(coded, bank).selection_errors(6))
    np.testing.assert_array_equal(grown.selection_errors(12),
                                  Reference(coded, bank).selection_errors(12))


def test_stratified_draws_one_item_per_stratum_of_expected_share_correct(simulated):
    _, _, result = simulated
    share = pd.Series(expit(np.outer(result.theta, result.a) + result.b.to_numpy()).mean(0),
                      index=result.a.index).sort_values(kind="stable")
    chosen = cbmm.select_items(result, 8, "stratified", seed=0)
    strata = [share.index[25 * s:25 * (s + 1)] for s in range(8)]
    assert [sum(item in stratum for item in chosen) for stratum in strata] == [1] * 8


def test_stratified_leaves_items_every_calibration_model_answered_alike_to_the_fit(simulated):
    # the simulated calibration with 10 items answered right by every model and 10 wrong:
    # the prior alone sets their parameters, and their answers are known in advance
    _, table, _ = simulated
    calibration = table.iloc[:200].copy()
    calibration.iloc[:, :10], calibration.iloc[:, 10:20] = 1, 0
    result = quiet_fit(calibration)
    alike = set(calibration.columns[:20])
    for seed in range(5):
        chosen = cbmm.select_items(result, 60, "stratified", seed=seed)
        assert len(chosen) == 60 and chosen.is_unique and not alike & set(chosen)
    # beyond the 180 others, they fill the places left: all the others, then the alike
    chosen = cbmm.select_items(result, 190, "stratified", seed=0)
    assert set(calibration.columns) - set(chosen) <= alike and len(alike & set(chosen)) == 10


def test_information_picks_the_most_informative_item_at_the_median_ability():
    items = bank_table([1.0, 3.0, 3.0, 0.5], [0.0, 0.0, 6.0, 0.0])
    chosen = cbmm.select_items(items, 1, "information")
    # without calibration abilities the population is N(0, 1): its median is 0, where
    # item q1 has information 9/4 (q0 1/4, q2 about 0.02, q3 1/16)
    assert list(chosen) == ["q1"]


def test_anchors_of_identical_items_still_number_k():
    items = bank_table([1.0] * 6 + [2.0, 2.5], [0.0] * 6 + [1.0, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chosen = cbmm.select_items(items, 5, "anchor", seed=1)
    assert len(chosen) == 5 and chosen.is_unique



@pytest.mark.parametrize("seed", [0, 1, 2])
def test_anchors_are_the_central_item_of_each_group_of_alike_items(seed):
    # three groups of five items, far apart in difficulty, spread symmetrically within:
    # k-means finds the groups, and each group's middle item is nearest its centre
    offsets = np.array([-0.5, -0.2, 0.0, 0.2, 0.5])
    b = np.concatenate([centre + offsets for centre in (-5.0, 0.0, 5.0)])
    items = bank_table(np.ones(15), b)
    chosen = cbmm.select_items(items, 3, "anchor", seed=seed)
    assert sorted(chosen) == ["q12", "q2", "q7"]

@pytest.mark.parametrize("kwargs,message", [
    ({"k": 0}, "k must be an integer in \\[1, 200\\], got 0"),
    ({"k": 201}, "k must be an integer in \\[1, 200\\], got 201"),
    ({"k": 5, "strategy": "best"}, "strategy must be one of"),
    ({"k": 5, "seed": -1}, "seed must be a non-negative integer"),
    ({"k": 5, "strategy": "predictive"}, "responses \\(the calibration models' answers\\) "
                                          "are needed by the predictive strategy"),
    ({"k": 5, "responses": [[1.0] * 200]}, "and read by no other"),
    ({"k": 5, "strategy": "predictive", "responses": [[1.0] * 200]},
     "responses: 1 model\\(s\\) answered a calibrated item; the predictive strategy "
     "needs at least 2"),
])
def test_select_items_names_a_bad_argument(simulated, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cbmm.select_items(simulated[2], **kwargs)


# ------------------------------------------------------------- simulated truth

def test_predicted_accuracy_of_held_out_models_beats_the_item_mean_and_covers(simulated):
    _, table, result = simulated
    held = table.iloc[800:]
    truth = held.mean(axis=1)
    errors, mean_errors, covered, z = [], [], [], []
    for seed in range(3):
        chosen = cbmm.select_items(result, 40, seed=seed)
        predicted = cbmm.predict_accuracy(held[chosen], result)
        error = predicted["accuracy"] - truth
        errors.append(error.abs().mean())
        mean_errors.append((held[chosen].mean(axis=1) - truth).abs().mean())
        covered.append(((predicted["lower"] <= truth) & (truth <= predicted["upper"])).mean())
        z.append(error / ((predicted["upper"] - predicted["lower"]) / (2 * 1.959963984540054)))
    # the generator's items discriminate little (a ~ U(0.5, 1)): the number correct is
    # nearly sufficient, so the model adds little to the items' own mean, but it adds
    assert np.mean(errors) < np.mean(mean_errors)
    # 600 intervals of nominal 95 %: at least that within three binomial sd, and a little
    # conservative where the 2PL holds exactly (the residual offset's prior variance
    # allows for a misfit these data do not have); errors of the size the intervals say
    assert 0.95 - 3 * np.sqrt(0.95 * 0.05 / 600) <= np.mean(covered) <= 0.99
    assert 0.75 < np.std(np.concatenate(z)) < 1.1


def test_a_reference_learns_what_a_one_dimensional_model_misses():
    # two skills (correlation 0.3), half of the items each: models that answered 20 items of
    # the first skill only. The 2PL predicts the second half as if it were the same
    # skill; the calibration models' answers show how far that misses
    maes, covered = {"alone": [], "reference": []}, []
    for seed in range(3):
        table = two_skills(seed, 1200, first=30)
        result = quiet_fit(table.iloc[:800])
        held, truth = table.iloc[800:, :20], table.iloc[800:].mean(axis=1)
        for name, reference in (("alone", None), ("reference", table.iloc[:800])):
            predicted = cbmm.predict_accuracy(held, result, reference=reference)
            maes[name].append((predicted["accuracy"] - truth).abs().mean())
        covered.append(((predicted["lower"] <= truth) & (truth <= predicted["upper"])).mean())
    assert np.mean(maes["reference"]) < 0.95 * np.mean(maes["alone"])
    # 1,200 intervals of nominal 95 %: within three binomial sd below, a little above
    assert 0.95 - 3 * np.sqrt(0.95 * 0.05 / 1200) <= np.mean(covered) <= 0.98


def test_a_reference_costs_nothing_where_the_2pl_holds(simulated):
    _, table, result = simulated
    held, truth = table.iloc[800:], table.iloc[800:].mean(axis=1)
    errors = {"alone": [], "reference": []}
    for seed in range(3):
        chosen = cbmm.select_items(result, 40, seed=seed)
        for name, reference in (("alone", None), ("reference", table.iloc[:800])):
            predicted = cbmm.predict_accuracy(held[chosen], result, reference=reference)
            errors[name].append((predicted["accuracy"] - truth).abs().mean())
    assert np.mean(errors["reference"]) <= 1.02 * np.mean(errors["alone"])


def test_predictions_align_items_by_label_in_long_tables(simulated):
    _, table, result = simulated
    wide = table.iloc[800:805, ::-7]  # a subset of the items, in another order
    long = wide.stack().rename("correct").rename_axis(["model", "item"]).reset_index()
    pd.testing.assert_frame_equal(cbmm.predict_accuracy(long, result).sort_index(),
                                  cbmm.predict_accuracy(wide, result).sort_index())
    with pytest.raises(ValueError, match="not among the calibrated items: \\['extra'\\]"):
        cbmm.predict_accuracy(wide.assign(extra=1.0), result)
    with pytest.raises(ValueError, match="level must be a number in \\(0, 1\\)"):
        cbmm.predict_accuracy(wide, result, level=1.0)


# --------------------------------------------------------------- adaptive tests

def true_bank(n_items=300, seed=5):
    rng = np.random.default_rng(seed)
    return bank_table(rng.uniform(0.8, 2.5, n_items), rng.normal(0, 1.2, n_items))


def simulated_model(items, theta, seed):
    rng = np.random.default_rng(seed)
    p = expit(items["a"] * theta + items["b"])
    answers = (rng.random(len(items)) < p).astype(int)
    return dict(zip(items.index, answers))


def test_adaptive_errors_match_the_reported_standard_errors():
    # the bank is the truth, so the posterior sd is the error's sd
    items = true_bank()
    z = []
    for model, theta in enumerate(np.random.default_rng(0).normal(size=80)):
        answers = simulated_model(items, theta, seed=model)
        test = cbmm.adaptive_test(answers.__getitem__, items, se_target=0.3, seed=model)
        assert (test.stop == "se_target" and test.se <= 0.3) \
            or (test.stop == "max_items" and len(test.items) == 50)
        assert test.answers == [answers[item] for item in test.items]
        z.append((test.theta - theta) / test.se)
    assert abs(np.mean(z)) < 0.3 and 0.75 < np.std(z) < 1.25


def posterior_information(items, answered):
    """Each item's information a^2 p q averaged over the posterior of the ability given
    ``answered`` ({item: 0/1}) under the N(0, 1) prior, by numerical integration."""
    def likelihood(theta):
        value = np.exp(-theta ** 2 / 2)
        for item, answer in answered.items():
            p = expit(items.at[item, "a"] * theta + items.at[item, "b"])
            value *= p if answer else 1 - p
        return value

    def information(theta, a, b):
        p = expit(a * theta + b)
        return a ** 2 * p * (1 - p) * likelihood(theta)

    mass = integrate.quad(likelihood, -10, 10, points=[0])[0]
    return pd.Series([integrate.quad(information, -10, 10, args=(a, b), points=[0])[0] / mass
                      for a, b in zip(items["a"], items["b"])], index=items.index)


def test_without_the_progressive_start_the_first_item_is_the_most_informative_a_priori():
    items = true_bank()
    test = cbmm.adaptive_test(lambda item: 1, items, max_items=1, candidates=1, progressive=0)
    assert test.items == [posterior_information(items, {}).idxmax()]
    assert test.stop == "max_items"
    assert list(test.trace.columns) == ["item", "answer", "theta", "se"]


def test_after_the_progressive_start_the_item_is_the_most_informative_a_posteriori():
    items = true_bank(40)
    answers = simulated_model(items, 0.7, seed=2)
    test = cbmm.adaptive_test(answers.__getitem__, items, max_items=4, candidates=1,
                              progressive=3, seed=4)
    answered = {item: answers[item] for item in test.items[:3]}
    information = posterior_information(items, answered).drop(test.items[:3])
    assert test.items[3] == information.idxmax()


def test_the_progressive_start_draws_the_first_item_uniformly_from_the_pool():
    # the first item's score is a uniform draw alone: every item of the pool alike (one
    # bank for the 2,000 tests: its grid computed once)
    items = ItemBank.of(true_bank())
    pool = list(items.labels[:10])
    firsts = Counter(cbmm.adaptive_test(lambda item: 1, items, pool=pool, max_items=1,
                                        candidates=1, seed=seed).items[0]
                     for seed in range(2000))
    assert set(firsts) == set(pool)
    counts = np.array([firsts[item] for item in pool])
    assert stats.chisquare(counts).pvalue > 1e-3


def test_the_same_seed_gives_the_same_test():
    items = true_bank()
    answers = simulated_model(items, 0.4, seed=1)
    first = cbmm.adaptive_test(answers.__getitem__, items, seed=7)
    assert first.items == cbmm.adaptive_test(answers.__getitem__, items, seed=7).items
    assert first.items != cbmm.adaptive_test(answers.__getitem__, items, seed=8).items


def test_one_generator_draws_anew_for_each_test_of_a_series():
    # models that answer alike get the same test from one int seed, but not from one stream
    items = true_bank()
    answers = simulated_model(items, 0.4, seed=1)
    alike = [cbmm.adaptive_test(answers.__getitem__, items, seed=3).items for _ in range(5)]
    assert all(test == alike[0] for test in alike)
    draws = np.random.default_rng(3)
    series = [cbmm.adaptive_test(answers.__getitem__, items, seed=draws).items
              for _ in range(5)]
    assert len({test[0] for test in series}) > 1  # even the first item differs
    again = np.random.default_rng(3)
    assert series == [cbmm.adaptive_test(answers.__getitem__, items, seed=again).items
                      for _ in range(5)]


def test_exposure_control_caps_each_items_share_of_the_tests():
    items = true_bank()
    exposure = cbmm.ItemExposure(max_rate=0.1, planned_tests=30)
    for model in range(30):
        answers = simulated_model(items, 1.5, seed=model)  # alike models want alike items
        cbmm.adaptive_test(answers.__getitem__, items, se_target=0.2, exposure=exposure,
                           seed=model)
    assert exposure.tests == 30 and exposure.rates().max() <= 0.1
    unlimited = {}
    for model in range(30):
        answers = simulated_model(items, 1.5, seed=model)
        for item in cbmm.adaptive_test(answers.__getitem__, items, se_target=0.2,
                                       seed=model).items:
            unlimited[item] = unlimited.get(item, 0) + 1
    assert max(unlimited.values()) / 30 > 0.5


def test_exposure_share_counts_the_uses_left_per_planned_test():
    exposure = cbmm.ItemExposure(max_rate=0.5, planned_tests=2)
    bank = ["a", "b", "c", "d"]
    assert exposure.share(bank) == 2  # one use each, 4 uses for 2 tests
    exposure.record(["a", "b", "c"])
    assert exposure.share(bank) == 1 and list(exposure.allowed(bank)) == [0, 0, 0, 1]
    exposure.record(["d"])
    # past the planned tests the limit grows with the tests run: floor(0.5 * 3) = 1 use
    assert exposure.share(bank) == 1 and not exposure.allowed(bank).any()
    assert cbmm.ItemExposure(max_rate=0.1).share(bank) == 4  # no plan: no share


def test_a_planned_series_shares_a_binding_cap_equally():
    # 20 items at 25 % of 40 tests: 200 uses, 5 per test. Tests that would take all 20
    # items (an SE target out of reach) get 5 each, until the uses left lie on fewer
    # than 5 items, not 20 each for the first 10 tests and none for the other 30.
    items = true_bank(n_items=20)
    exposure = cbmm.ItemExposure(max_rate=0.25, planned_tests=40)
    lengths, allowed, stops = [], [], []
    for model, theta in enumerate(np.linspace(-2, 2, 40)):
        allowed.append(int(exposure.allowed(items.index).sum()))
        test = cbmm.adaptive_test(simulated_model(items, theta, seed=model).__getitem__,
                                  items, se_target=1e-3, max_items=20, exposure=exposure,
                                  seed=model)
        lengths.append(len(test.items))
        stops.append(test.stop)
    assert lengths == [min(5, free) for free in allowed] and min(lengths) > 0
    assert stops == ["exposure share" if free >= 5 else "no item left" for free in allowed]
    assert sum(lengths) >= 195 and exposure.rates().max() <= 0.25


def test_a_capped_series_shares_the_items_it_draws_from_not_the_whole_bank():
    # 40 tests that may give only 20 of the bank's 80 items, each item in at most 25 % of
    # them: 200 uses, 5 per test. Shared over the bank (80 items: 20 per test) the first
    # 10 tests took them all and the other 30 gave no item.
    items = true_bank(n_items=80)
    pool = list(items.index[::4])
    with pytest.raises(ValueError, match="items must be a list of item labels"):
        cbmm.ItemExposure(0.25, 40, items="q0")
    exposure = cbmm.ItemExposure(max_rate=0.25, planned_tests=40, items=pool)
    lengths = []
    for model, theta in enumerate(np.linspace(-2, 2, 40)):
        test = cbmm.adaptive_test(simulated_model(items, theta, seed=model).__getitem__,
                                  items, pool=pool, se_target=1e-3, max_items=20,
                                  exposure=exposure, seed=model)
        assert set(test.items) <= set(pool)
        lengths.append(len(test.items))
    assert min(lengths) >= 4 and lengths.count(5) >= 30 and sum(lengths) >= 195


def test_a_pool_limits_the_items_and_an_empty_pool_stops_the_test():
    items = true_bank()
    pool = list(items.index[:7])
    test = cbmm.adaptive_test(lambda item: 0, items, pool=pool, se_target=0.01)
    assert sorted(test.items) == sorted(pool) and test.stop == "no item left"
    # the accuracy counts the 7 wrong answers as observed
    assert test.upper <= 1 - 7 / len(items) + 1e-12


def test_content_balancing_keeps_every_area_within_one_item_of_its_share():
    # areas of 50 %, 30 % and 20 % of the bank; the most informative items all in the
    # smallest, where an unbalanced test goes
    items = true_bank(n_items=300)
    area = np.array(["big", "mid", "small"])[np.arange(300) % 10 // 5 + (np.arange(300) % 10 >= 8)]
    items.loc[area == "small", "a"] = 4.0
    share = {name: np.mean(area == name) for name in ("big", "mid", "small")}
    assert share == {"big": 0.5, "mid": 0.3, "small": 0.2}
    content = pd.Series(area, index=items.index)
    for model, theta in enumerate([-1.0, 0.0, 0.5]):
        answers = simulated_model(items, theta, seed=model)
        test = cbmm.adaptive_test(answers.__getitem__, items, se_target=1e-3, max_items=40,
                                  progressive=0, content=content.to_dict(), seed=model)
        given = content[test.items].to_numpy()
        for n in range(1, 41):  # the upper quota: below share * n + 1 after n items
            counts = Counter(given[:n])
            assert all(counts[name] < share[name] * n + 1 for name in share)
        assert Counter(given) == {"big": 20, "mid": 12, "small": 8}
        plain = cbmm.adaptive_test(answers.__getitem__, items, se_target=1e-3, max_items=40,
                                   progressive=0, seed=model)
        assert (content[plain.items] == "small").mean() > 0.5


def test_the_next_item_is_drawn_among_the_candidates_of_highest_information():
    # the first item, at the N(0, 1) prior: the information a^2 p (1 - p) averaged over the
    # prior, by SciPy's quadrature here
    from scipy.integrate import quad
    from scipy.stats import norm

    items = true_bank(n_items=40)
    information = np.array([quad(lambda t: a * a * expit(a * t + b) * (1 - expit(a * t + b))
                                 * norm.pdf(t), -12, 12)[0]
                            for a, b in zip(items["a"], items["b"])])
    ranked = list(items.index[np.argsort(-information)])
    bank = ItemBank.of(items)
    first = {k: [cbmm.adaptive_test(lambda item: 1, bank, max_items=1, min_items=1,
                                    progressive=0, candidates=k, seed=seed).items[0]
                 for seed in range(40)] for k in (1, 3)}
    assert set(first[1]) == {ranked[0]}
    assert set(first[3]) == set(ranked[:3])   # each of the three drawn, no other


def test_a_maximum_beyond_the_bank_gives_at_most_every_item():
    # the default 50 on a bank of 12: each item once, then no item left
    items = true_bank(n_items=12)
    test = cbmm.adaptive_test(lambda item: 1, items, se_target=1e-3)
    assert sorted(test.items) == sorted(items.index) and test.stop == "no item left"


def test_content_balancing_moves_on_when_an_area_runs_out():
    items = true_bank(n_items=30)
    content = {label: "rare" if j < 3 else "common" for j, label in enumerate(items.index)}
    pool = list(items.index[:3]) + list(items.index[10:20])  # 3 rare, 10 common
    test = cbmm.adaptive_test(lambda item: 1, items, pool=pool, content=content,
                              se_target=1e-3, max_items=13)
    assert sorted(test.items) == sorted(pool) and test.stop == "max_items"


@pytest.mark.parametrize("respond,kwargs,message", [
    (lambda item: 2, {}, "respond\\('q\\d+'\\) returned 2; expected 1 \\(correct\\) or 0"),
    (lambda item: 1, {"se_target": 0}, "se_target must be a finite number > 0"),
    (lambda item: 1, {"max_items": 0}, "max_items must be an integer >= 1, got 0"),
    (lambda item: 1, {"pool": ["nope"]}, "pool: 1 item\\(s\\) not among the calibrated"),
    (lambda item: 1, {"pool": "q1"}, "pool must be a list of item labels, got the text 'q1'"),
    (lambda item: 1, {"progressive": -1}, "progressive must be a non-negative integer"),
    (lambda item: 1, {"content": {"q0": "x"}},
     "content: 299 calibrated item\\(s\\) without a content area: \\['q1', 'q2'"),
    (lambda item: 1, {"content": 5}, "content must map item labels to content areas"),
    (lambda item: 1, {"content": pd.Series(["x", "y"], index=["q0", "q0"])},
     "content: 1 item\\(s\\) listed more than once: \\['q0'\\]"),
    (lambda item: 1, {"interval_scale": -1.0}, "interval_scale must be a finite number >= 0"),
    ("yes", {}, "respond must be a function"),
    (lambda item: 1, {"pool": []}, "pool: empty; give the items the test may draw from"),
    # a Series of answers: its type and how to use it, not its 300 lines
    (pd.Series(1, index=[f"q{k}" for k in range(300)]), {},
     r"respond must be a function of an item label, got Series \(answers by item\? "
     r"respond=answers.get\)$"),
])
def test_adaptive_test_names_bad_input(respond, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cbmm.adaptive_test(respond, true_bank(), **kwargs)


def levels_of_ability(seed, n_models, sd, per_level=25):
    """Answers to items at four levels of difficulty, 25 each, where each model's
    ability differs between the levels by N(0, sd^2) around its own (sd 0: the 2PL)."""
    rng = np.random.default_rng(seed)
    level = np.repeat(np.arange(4), per_level)
    a = rng.uniform(0.8, 2.0, level.size)
    b = np.array([2.0, 0.7, -0.7, -2.0])[level] + rng.normal(0, 0.3, level.size)
    theta = rng.standard_normal((n_models, 1)) + sd * rng.standard_normal((n_models, 4))
    answers = rng.random((n_models, level.size)) < expit(theta[:, level] * a + b)
    return pd.DataFrame(answers.astype(float), index=[f"m{i}" for i in range(n_models)],
                        columns=[f"q{j}" for j in range(level.size)])


def adaptive_coverage(table, result, scale, options):
    """The share of the models of ``table`` whose accuracy the interval of their
    adaptive test (answered from the table) holds."""
    covered = []
    for seed, (_, answers) in enumerate(table.iterrows()):
        test = cbmm.adaptive_test(lambda item: answers[item], result, interval_scale=scale,
                                  seed=seed, **options)
        covered.append(test.lower <= answers.mean() <= test.upper)
    return np.mean(covered)


@pytest.mark.parametrize("sd,seeds", [(1.5, (0, 1)), (0.0, (0,))])
def test_the_interval_scale_makes_adaptive_tests_intervals_hold(sd, seeds):
    # models whose ability differs by the items' difficulty (sd 1.5 between levels): the
    # 20 items most informative for a model are of its own level and say little of the
    # others, and the 2PL's 95 % intervals fall short (0.82 and 0.84; scaled by 1.53
    # and 1.58, 0.95 and 0.96); where the 2PL holds (sd 0) they are wide for want of
    # the misfit they allow for (0.98; scaled by 0.83, 0.935). The scale measured on
    # the calibration models mends both
    options = {"se_target": 0.05, "max_items": 20}
    plain, scaled, scales = [], [], []
    for seed in seeds:
        table = levels_of_ability(seed, 1000, sd)
        result = quiet_fit(table.iloc[:600])
        scales.append(cbmm.adaptive_interval_scale(result, table.iloc[:600],
                                                   refit=QuietFit(), seed=seed, **options))
        plain.append(adaptive_coverage(table.iloc[600:], result, 1.0, options))
        scaled.append(adaptive_coverage(table.iloc[600:], result, scales[-1], options))
    tests = 400 * len(seeds)
    assert 0.95 - 3 * np.sqrt(0.95 * 0.05 / tests) <= np.mean(scaled) <= 0.985
    if sd:
        assert min(scales) > 1.3 and np.mean(plain) < 0.9
    else:
        assert max(scales) < 1.0 and np.mean(plain) > np.mean(scaled)


def test_the_interval_scale_multiplies_the_half_width_before_the_bounds():
    items = true_bank()
    model = simulated_model(items, 0.4, seed=3)
    tests = [cbmm.adaptive_test(lambda item: model[item], items, interval_scale=scale,
                                se_target=0.3, seed=1) for scale in (1.0, 2.5, 0.0)]
    assert tests[0].items == tests[1].items and tests[0].accuracy == tests[1].accuracy
    half = tests[0].upper - tests[0].accuracy
    n_items, correct = len(items), sum(tests[0].answers)
    unanswered = n_items - len(tests[0].answers)
    # as wide as the bounds the answers allow let it be: C / J to (C + u) / J
    assert tests[1].upper == pytest.approx(min(tests[0].accuracy + 2.5 * half,
                                               (correct + unanswered) / n_items), abs=1e-12)
    assert tests[1].lower == pytest.approx(max(tests[0].accuracy - 2.5 * half,
                                               correct / n_items), abs=1e-12)
    assert tests[2].lower == tests[2].upper == tests[2].accuracy


@pytest.mark.parametrize("kwargs,message", [
    ({"exposure": 0.1}, "options: \\['exposure'\\] not among the tests' options"),
    ({"max_exposure": 1.5}, "max_exposure must be None or a number in \\(0, 1\\], got 1.5"),
    ({"refit": None}, "refit must be a function of the data returning the fit, or True"),
    ({"level": 0.999}, "reference: 60 model\\(s\\) answered at least 95% of the calibrated "
                       "items; a 0.999 interval needs at least 999"),
])
def test_the_interval_scale_names_bad_input(simulated, kwargs, message):
    _, table, result = simulated
    with pytest.raises(ValueError, match=message):
        cbmm.adaptive_interval_scale(result, table.iloc[:60], **{"refit": QuietFit(),
                                                                 **kwargs})


# -------------------------------------------------------------- tinyBenchmarks

@pytest.mark.parametrize("seed", [0, 1])
def test_kmeans_draws_scipys_kmeans_plus_plus_start_in_k_passes(seed):
    from scipy.cluster.vq import kmeans2

    features = np.random.default_rng(9).normal(size=(400, 3))
    centres, cluster = _kmeans(features, 12, seed)
    expected, expected_cluster = kmeans2(features, 12, minit="++",
                                         seed=np.random.default_rng(seed))
    np.testing.assert_allclose(centres, expected, atol=1e-12)
    np.testing.assert_array_equal(cluster, expected_cluster)


def test_lloyds_iterations_are_scipys_kmeans2_with_an_empty_cluster_kept_in_place():
    from scipy.cluster.vq import kmeans2

    features = np.random.default_rng(4).normal(size=(300, 4))
    start = np.vstack([features[:5], np.full(4, 50.0)])  # the last centre gets no row
    centres, label = _lloyd(features, np.einsum("ij,ij->i", features, features), start)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns of the empty cluster
        expected, expected_label = kmeans2(features, start, minit="matrix")
    np.testing.assert_allclose(centres, expected, atol=1e-12)
    np.testing.assert_array_equal(label, expected_label)
    np.testing.assert_array_equal(centres[-1], start[-1])


def test_anchor_points_are_cluster_medoids_weighted_by_cluster_share():
    # two groups of identical items in (slope, intercept): one anchor each, weights 3/4, 1/4
    bank = ItemBank.of(bank_table([1, 1, 1, 2.5], [0, 0, 0, 1.0]))
    anchors, weights = anchor_points(None, bank, 2, "irt", seed=0)
    assert sorted(zip(anchors >= 3, weights)) == [(False, 0.75), (True, 0.25)]
    answers = np.array([[1.0, 0, 0, 1], [0, 1, 1, 0]])
    anchor, _ = tinybenchmarks_estimates(answers, bank, anchors, weights)
    first = anchors[anchors < 3][0]
    np.testing.assert_allclose(anchor, 0.75 * answers[:, first] + 0.25 * answers[:, 3])


def test_p_irt_adds_the_probabilities_at_the_maximum_likelihood_ability():
    from scipy.optimize import minimize_scalar

    items = true_bank(n_items=40)
    bank = ItemBank.of(items)
    answers = np.array([[1.0, 0, 1, 1, 0, 1, 0, 0] + [np.nan] * 32])
    anchors, weights = np.arange(8), np.full(8, 1 / 8)
    _, p_irt = tinybenchmarks_estimates(answers, bank, anchors, weights)
    y, a, b = answers[0, :8], items["a"].to_numpy()[:8], items["b"].to_numpy()[:8]
    theta = minimize_scalar(lambda t: -np.sum(y * np.log(expit(a * t + b))
                                              + (1 - y) * np.log(expit(-a * t - b))),
                            bounds=(-6, 6), method="bounded").x
    rest = expit(items["a"].to_numpy()[8:] * theta + items["b"].to_numpy()[8:]).sum()
    assert p_irt[0] == pytest.approx((y.sum() + rest) / 40, abs=2e-4)  # the grid's 0.01
    # every item an anchor: both estimates are the model's accuracy
    full = (np.random.default_rng(0).random((3, 40)) < 0.6).astype(float)
    anchor, p_irt = tinybenchmarks_estimates(full, bank, np.arange(40), np.full(40, 1 / 40))
    np.testing.assert_allclose(anchor, full.mean(axis=1))
    np.testing.assert_allclose(p_irt, full.mean(axis=1))


def test_the_study_predicts_by_tinybenchmarks_gp_irt_beside_the_strategies(simulated):
    _, table, _ = simulated
    small = table.iloc[::4]  # 250 models
    calibrated = study.calibrations(small, splits=1, seed=2)
    rows = study.selection_study(small, calibrated, ks=[20], strategies=["stratified"],
                                 seed=3, draws=2, tinybenchmarks=True)
    tiny = rows.query("strategy == 'tinybenchmarks'")
    held, result = calibrated[0].held, calibrated[0].result
    rest = np.setdiff1d(np.arange(len(small)), held)
    # each draw its own validation fifth and k-means start, seeded as the strategies' draws
    (k, predicted), = tinybenchmarks_predictions(small.to_numpy(float), rest, held,
                                                  ItemBank.of(result), [20], seed=3)
    (_, second), = tinybenchmarks_predictions(small.to_numpy(float), rest, held,
                                               ItemBank.of(result), [20], seed=4)
    np.testing.assert_allclose(tiny.query("draw == 0")["predicted"], predicted["gp-IRT"])
    np.testing.assert_allclose(tiny.query("draw == 1")["predicted"], second["gp-IRT"])
    assert not np.allclose(predicted["gp-IRT"], second["gp-IRT"])
    # its validation fit starts from the calibration: the same predictions as a cold refit
    (_, cold), = tinybenchmarks_predictions(small.to_numpy(float), rest, held,
                                            ItemBank.of(result), [20], seed=3,
                                            refit=lambda data: cbmm.fit(data))
    for estimator, values in predicted.items():
        np.testing.assert_allclose(values, cold[estimator], atol=1e-3, err_msg=estimator)
    assert predicted["gp-IRT"] is predicted["gp-IRT (irt)"] or \
        predicted["gp-IRT"] is predicted["gp-IRT (correctness)"]
    assert tiny["lower"].isna().all() and len(tiny) == 2 * len(held)
    summary = study.summarise_selection(rows).set_index("strategy")
    assert np.isnan(summary.loc["tinybenchmarks", "coverage"])
    truth = small.iloc[held].mean(axis=1).to_numpy()
    assert summary.loc["tinybenchmarks", "mae"] == pytest.approx(
        (np.abs(predicted["gp-IRT"] - truth).mean() + np.abs(second["gp-IRT"] - truth).mean()) / 2)
    assert summary.loc["tinybenchmarks", "n_models"] == len(held)


# ------------------------------------------------------------------------ audit

def planted(n_models, n_items, share, seed):
    """The paper's generator with ``share`` of the items' answers reversed."""
    sim = simulate(n_models, n_items, sparsity=0.05, seed=seed)
    rng = np.random.default_rng(seed)
    reversed_items = rng.choice(n_items, int(share * n_items), replace=False)
    responses = sim.responses.copy()
    responses[:, reversed_items] = 1 - responses[:, reversed_items]
    table = pd.DataFrame(responses, columns=[f"q{j}" for j in range(n_items)])
    return sim, table, {f"q{j}" for j in reversed_items}


def test_the_audit_finds_planted_mislabelled_items():
    sim, table, planted_items = planted(1000, 200, 0.05, seed=2)
    audit = cbmm.item_audit(quiet_fit(table), table)
    flagged = set(audit.index[audit["negative_discrimination"]])
    recall = len(flagged & planted_items) / len(planted_items)
    precision = len(flagged & planted_items) / max(len(flagged), 1)
    assert recall >= 0.9 and precision >= 0.8
    assert audit.loc[sorted(flagged), "reason"].str.contains("likely a wrong answer key").all()
    # reversed keys depend on one another as ordinary items do
    dependence = audit.attrs["wrong_way_dependence"]
    assert np.isfinite(dependence.observed) and not dependence.shared
    assert dependence.n_items == len(flagged) and audit["shared_z"].isna().all()
    # the generator's a = 0 items that kept their key carry no information, but for the
    # false discoveries the rate allows (2 of 10 on this seed, 0.025 of the flags over 20
    # seeds; the precision above) and an estimate above the negligible slope (1)
    zero = sorted({f"q{j}" for j in np.flatnonzero(sim.a == 0)} - planted_items)
    assert audit.loc[zero, "no_information"].mean() >= 0.7


def test_the_audit_controls_the_false_discovery_rate_and_finds_reversals_among_few_models():
    from scipy.stats import false_discovery_control

    # 80 models and 1,000 items: a family-wise bound over the ~95 items tested found a
    # quarter of the reversals
    _, table, planted_items = planted(80, 1000, 0.05, seed=0)
    fit = quiet_fit(table)
    audit = cbmm.item_audit(fit, table)
    # the flag tests the items whose a is held at 0 (the score is there for every item
    # some models answered correctly and some wrongly)
    assert audit["slope_z"].notna().equals(~audit["not_identified"])
    tested = (audit["a"] / fit.sigma < NEGLIGIBLE_SLOPE) & ~audit["not_identified"]
    adjusted = false_discovery_control(stats.norm.cdf(audit.loc[tested, "slope_z"]), method="bh")
    np.testing.assert_array_equal(audit.loc[tested, "negative_discrimination"],
                                  adjusted <= FALSE_DISCOVERY_RATE)
    assert not audit.loc[~tested, "negative_discrimination"].any()
    np.testing.assert_array_equal(audit.loc[tested, "negative_discrimination"],
                                  audit.loc[tested, "slope_z"] <= audit.attrs["slope_bound"])
    flagged = set(audit.index[audit["negative_discrimination"]])
    assert len(flagged & planted_items) >= 0.6 * len(planted_items)
    assert len(flagged & planted_items) >= 0.9 * len(flagged)
    # a score short of the bound is named, not called no dependence
    short = audit[tested & ~audit["negative_discrimination"] & (audit["slope_z"] < -1.645)]
    assert len(short) and short["reason"].str.contains(
        r"somewhat more often \(z = -\d\.\d\), short of the flag's bound over the "
        rf"{tested.sum()} items tested").all()
    assert not audit.loc[tested & (audit["slope_z"] > 0), "reason"].str.contains(
        "somewhat").any()


def test_the_family_wise_name_of_0_2_0_still_imports_and_says_it_has_no_effect():
    from cbmm.efficient import audit

    with pytest.warns(DeprecationWarning, match="no effect.*false discovery rate"):
        from cbmm.efficient.audit import FAMILY_ERROR
    assert FAMILY_ERROR == audit.FALSE_DISCOVERY_RATE
    with pytest.raises(AttributeError, match="NO_SUCH_NAME"):
        audit.NO_SUCH_NAME


def test_the_slope_score_is_the_score_test_of_a_logistic_regression_on_the_abilities():
    sim = simulate(120, 40, sparsity=0.1, seed=6)
    values = sim.responses.astype(float)
    values[np.random.default_rng(6).random(values.shape) < 0.2] = np.nan
    table = pd.DataFrame(values, columns=[f"q{j}" for j in range(40)])
    fit = quiet_fit(table)
    audit = cbmm.item_audit(fit, table)
    bank = ItemBank.of(fit)
    answers, _ = aligned_answers(table, bank)
    theta = Posterior(answers, bank).mean
    for j in range(0, 40, 7):
        seen = answers[:, j] != 0
        y, t = (answers[seen, j] > 0).astype(float), theta[seen]

        def log_likelihood(alpha, beta, y=y, t=t):
            eta = alpha + beta * t
            return float((y * eta - np.logaddexp(0, eta)).sum())

        # at the intercept's estimate under a zero slope: the score and the information
        # left for the slope once the intercept is estimated, by central differences
        alpha, h = np.log(y.mean() / (1 - y.mean())), 1e-4
        score = (log_likelihood(alpha, h) - log_likelihood(alpha, -h)) / (2 * h)

        def second(da, db):
            return (log_likelihood(alpha + h * (da[0] + db[0]), h * (da[1] + db[1]))
                    - log_likelihood(alpha + h * (da[0] - db[0]), h * (da[1] - db[1]))
                    - log_likelihood(alpha - h * (da[0] - db[0]), -h * (da[1] - db[1]))
                    + log_likelihood(alpha - h * (da[0] + db[0]), -h * (da[1] + db[1]))
                    ) / (4 * h * h)

        i_aa, i_bb, i_ab = -second((1, 0), (1, 0)), -second((0, 1), (0, 1)), -second((1, 0), (0, 1))
        z = score / np.sqrt(i_bb - i_ab ** 2 / i_aa)
        assert audit["slope_z"].iloc[j] == pytest.approx(z, rel=1e-4, abs=1e-6), j


def test_the_audit_says_on_which_items_the_answers_could_show_a_wrong_key():
    from cbmm.efficient.audit import key_check_summary

    # 80 models: a regime where many keys cannot be checked
    sim = simulate(80, 600, sparsity=0.05, seed=0)
    items = [f"q{j}" for j in range(600)]
    original = pd.DataFrame(sim.responses, columns=items)
    before = cbmm.item_audit(quiet_fit(original), original)
    checked = before["key_checked"]
    # the generator's a = 0 items: no key of theirs can show
    assert not checked[[items[j] for j in np.flatnonzero(sim.a == 0)]].any()
    assert 0.2 < checked.mean() < 0.8
    assert key_check_summary(before).startswith(
        f"the answers could show a wrong key on {checked.sum()} of 600 items")
    # reversed, every checked key is flagged
    reversed_items = np.random.default_rng(0).choice(600, 30, replace=False)
    table = original.copy()
    table.iloc[:, reversed_items] = 1 - table.iloc[:, reversed_items]
    after = cbmm.item_audit(quiet_fit(table), table)
    reversed_checked = [items[j] for j in reversed_items if checked.iloc[j]]
    assert len(reversed_checked) >= 5
    assert after.loc[reversed_checked, "negative_discrimination"].all()


def test_the_abilities_agree_with_accuracy_as_the_fit_implies_where_the_2pl_holds():
    sim, table, _ = planted(1000, 200, 0.0, seed=2)
    fit = quiet_fit(table)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cbmm.efficient.AbilityAgreementWarning)
        audit = cbmm.item_audit(fit, table)
    agreement = audit.attrs["ability_agreement"]
    assert agreement == cbmm.efficient.ability_agreement(fit, table)  # seeded: the same
    # observed: Spearman's rank correlation of the posterior-mean abilities with accuracy
    bank = ItemBank.of(fit)
    answers, _ = aligned_answers(table, bank)
    expected = stats.spearmanr(Posterior(answers, bank).mean, table.mean(axis=1)).statistic
    assert agreement.observed == pytest.approx(expected, abs=1e-12)
    assert agreement.n_models == 1000 and agreement.agrees
    assert abs(agreement.observed - agreement.implied) < 0.02
    assert (audit["ability_rank_correlation"] == agreement.observed).all()
    assert (audit["implied_rank_correlation"] == agreement.implied).all()


def unrelated_skills(n_models, n_items, reversed_share, seed):
    """Answers to items of two independent skills in equal shares (slope 1.5 on one each),
    with ``reversed_share`` of the items' answers reversed."""
    rng = np.random.default_rng(seed)
    skills = rng.normal(size=(n_models, 2))
    half = n_items // 2
    logits = np.hstack([np.outer(skills[:, 0], np.full(half, 1.5)),
                        np.outer(skills[:, 1], np.full(n_items - half, 1.5))])
    answers = rng.random((n_models, n_items)) < expit(logits + rng.normal(size=n_items))
    answers = answers.astype(float)
    reversed_items = rng.choice(n_items, int(reversed_share * n_items), replace=False)
    answers[:, reversed_items] = 1 - answers[:, reversed_items]
    return pd.DataFrame(answers, columns=[f"q{j}" for j in range(n_items)])


def test_the_audit_says_when_one_dimension_does_not_describe_the_answers():
    # (two_skills' skills, correlated 0.3, still rank the models alike: 0.96-0.985 against
    # 0.984-0.989 implied over three seeds, and the audit trusts its flags there)
    table = unrelated_skills(600, 80, 0.1, seed=0)
    with pytest.warns(cbmm.efficient.AbilityAgreementWarning, match="one dimension"):
        audit = cbmm.item_audit(quiet_fit(table), table)
    agreement = audit.attrs["ability_agreement"]
    # the fit's ability is one skill, or a mix; accuracy counts both
    assert not agreement.agrees and agreement.observed < agreement.implied - 0.1
    flagged = audit.loc[audit["negative_discrimination"], "reason"]
    assert len(flagged) and flagged.str.contains("no evidence of a wrong key").all()
    assert not flagged.str.contains("likely a wrong answer key").any()


def test_the_audit_says_when_the_wrong_way_items_share_a_skill_of_their_own():
    # 85 items of one skill and 15 of another correlated -0.4 with it: the 15 discriminate
    # the wrong way, yet the ability still ranks the models as their accuracy does; and
    # four of the first skill's items have reversed keys
    rng = np.random.default_rng(0)
    skills = rng.multivariate_normal([0, 0], [[1, -0.4], [-0.4, 1]], size=600)
    slopes = np.zeros((100, 2))
    slopes[:85, 0], slopes[85:, 1] = rng.uniform(0.8, 2.0, 85), rng.uniform(0.8, 2.0, 15)
    logits = skills @ slopes.T + rng.normal(size=100)
    answers = (rng.random((600, 100)) < expit(logits)).astype(float)
    answers[:, :4] = 1 - answers[:, :4]
    table = pd.DataFrame(answers, columns=[f"q{j}" for j in range(100)])
    with pytest.warns(cbmm.efficient.WrongWayDependenceWarning, match="of their own"):
        audit = cbmm.item_audit(quiet_fit(table), table)
    assert audit.attrs["ability_agreement"].agrees  # the agreement alone would trust them
    second, reversed_keys = [f"q{j}" for j in range(85, 100)], ["q0", "q1", "q2", "q3"]
    assert set(audit.index[audit["negative_discrimination"]]) == {*second, *reversed_keys}
    dependence = audit.attrs["wrong_way_dependence"]
    assert dependence.shared and dependence.n_items == 19
    assert (audit["wrong_way_dependence"] == dependence.observed).all()
    assert (audit["ordinary_dependence"] == dependence.ordinary).all()
    # item by item: the second skill's go with one another, the reversed keys do not
    assert (audit.loc[second, "shared_z"] > audit.loc[second, "shared_bound"]).all()
    assert (audit.loc[reversed_keys, "shared_z"]
            <= audit.loc[reversed_keys, "shared_bound"]).all()
    assert audit.loc[second, "reason"].str.contains(
        "no evidence of a wrong key of its own here, since it goes with the other wrong-way "
        "items").all()
    assert audit.loc[reversed_keys, "reason"].str.contains(
        "possibly a wrong answer key: unlike 15 of the wrong-way items").all()
    assert audit.loc[~audit["negative_discrimination"], "shared_z"].isna().all()
    # the information map, drawn from the written table, says it too
    import matplotlib.pyplot as plt

    from cbmm.figures.item_audit import plot_item_audit

    figure = plot_item_audit(audit.reset_index())
    texts = [text.get_text() for text in figure.axes[0].texts]
    labels = figure.axes[0].get_legend_handles_labels()[1]
    plt.close(figure)
    assert any("a dimension of their own)" in text for text in texts)
    assert any(f"a wrong key could show on {audit['key_checked'].sum()} of {len(audit)} items"
               in text for text in texts)
    assert "negative discrimination (19)" in labels and not any(
        "mislabelled" in label for label in labels)


def test_the_residual_dependence_is_the_top_eigenvalue_of_the_residual_correlations():
    from scipy.optimize import minimize

    from cbmm.efficient.audit import _dependence

    def by_hand(correct, theta):  # each item's own logistic regression, then correlations
        residuals = []
        for y in correct.T:
            def loss(c, y=y):
                eta = c[0] + c[1] * theta
                p = expit(eta)
                return np.sum(np.logaddexp(0, eta) - y * eta), [np.sum(p - y),
                                                                 np.sum((p - y) * theta)]
            c = minimize(loss, np.zeros(2), jac=True, method="BFGS", tol=1e-12).x
            p = expit(c[0] + c[1] * theta)
            residuals.append((y - p) / np.sqrt(p * (1 - p)))
        return np.linalg.eigvalsh(np.corrcoef(residuals))[-1]

    rng = np.random.default_rng(1)
    for n_models, n_items in [(300, 12), (700, 520)]:  # a dense and a sparse solver
        theta = rng.normal(size=n_models)
        shared = rng.normal(size=n_models)  # a second skill in some of the items
        logits = np.outer(theta, rng.uniform(-1, 2, n_items)) + rng.normal(size=n_items)
        logits[:, ::3] += np.outer(shared, np.ones(len(range(0, n_items, 3))))
        correct = rng.random((n_models, n_items)) < expit(logits)
        answers = np.where(correct, 1, -1).astype(np.int8)
        assert _dependence(answers, theta) == pytest.approx(
            by_hand(correct.astype(float), theta), rel=1e-4)
    # two copies of an item are one: their dependence is 2
    copies = np.repeat(answers[:, :1], 2, axis=1)
    assert _dependence(copies, theta) == pytest.approx(2.0)
    # the first component, by either solver, is LAPACK's
    from cbmm.efficient.audit import _top_component

    for shape in [(300, 12), (700, 600)]:
        matrix = rng.normal(size=shape)
        _, values, vectors = np.linalg.svd(matrix)
        value, vector = _top_component(matrix)
        assert value == pytest.approx(values[0], rel=1e-10)
        assert abs(vector @ vectors[0]) == pytest.approx(1.0, abs=1e-8)
        assert _top_component(matrix, vector=False) == (pytest.approx(values[0]), None)


def test_ability_agreement_is_undefined_without_spread_and_refuses_no_answers():
    items = bank_table([1.0, 1.0, 1.0], [0.0, 0.5, -0.5])
    alike = pd.DataFrame(np.ones((5, 3)), columns=items.index)  # every model alike
    agreement = cbmm.efficient.ability_agreement(items, alike)
    assert np.isnan(agreement.observed) and agreement.agrees  # no evidence either way
    with pytest.raises(ValueError, match="no model answered"):
        cbmm.efficient.ability_agreement(items, pd.DataFrame(np.nan, index=range(3),
                                                             columns=items.index))


def test_the_audit_flags_unanswerable_and_out_of_range_items():
    items = bank_table([1.0, 1.0, 1.0, 0.0, 1.5, 0.0], [0.0, 0.5, 9.0, 0.2, -0.3, -4.0])
    rng = np.random.default_rng(0)
    answers = pd.DataFrame((rng.random((60, 6)) < 0.5).astype(float), columns=items.index)
    answers["q0"] = 1.0  # every model right
    answers["q5"] = 0.0  # every model wrong, and a = 0 (as a prior leaves such an item)
    answers["q3"] = answers["q4"]  # a = 0 though stronger models answer it right: no reverse
    audit = cbmm.item_audit(items, answers)
    assert audit.loc["q0", "not_identified"] and "(60) answered it correctly" in \
        audit.loc["q0", "reason"]
    assert audit.loc["q2", "out_of_range"] and "easier than every model" in \
        audit.loc["q2", "reason"]
    assert audit.loc["q3", "no_information"] and np.isnan(audit.loc["q3", "difficulty"])
    assert items.loc["q3", "a"] < NEGLIGIBLE_SLOPE
    assert audit.loc["q4", "reason"] == "" and not audit.loc["q4", list(cbmm.efficient.FLAGS)].any()
    assert list(audit.loc["q5", list(cbmm.efficient.FLAGS)]) == [True, False, False, False]
    assert audit.loc["q5", "reason"] == "every model that answered it (60) answered it wrongly"
    # answers to some of the items only: the others are judged by nothing, and it says so
    with pytest.warns(UserWarning, match="responses: 2 of the 6 calibrated items have no "
                                         "answer in them"):
        part = cbmm.item_audit(items, answers.drop(columns=["q1", "q4"]))
    assert part.loc[["q1", "q4"], "not_identified"].all()
    assert part.loc["q1", "reason"] == "no model of the responses answered it"
    # one model (a file of one new model, say) makes every item unidentified: refused
    with pytest.raises(ValueError, match="^responses: one model answered the calibrated items; "
                                         "the audit compares models"):
        cbmm.item_audit(items, answers.iloc[:1])
    # a second that answered nothing does not count
    with pytest.raises(ValueError, match="^responses: one model answered"):
        cbmm.item_audit(items, pd.concat([answers.iloc[:1], answers.iloc[:1] * np.nan]
                                         ).set_axis(["m0", "m1"]))


# ------------------------------------------------------------------------ study

def test_the_study_compares_strategies_and_the_baseline_on_held_out_models(simulated):
    _, table, _ = simulated
    small = table.iloc[:300, :80]
    calibrated = study.calibrations(small, splits=2, seed=1)
    assert [len(split.held) for split in calibrated] == [60, 60]
    assert set(calibrated[0].held).isdisjoint(calibrated[0].result.theta.index.map(
        small.index.get_loc))
    rows = study.selection_study(small, calibrated, ks=[10, 80],
                                 strategies=["stratified", "random"], seed=1, draws=3)
    # k = 80 is every item: skipped
    assert set(rows["k"]) == {10}
    assert set(rows["strategy"]) == {"stratified", "random", study.BASELINE}
    assert rows.groupby(["split", "strategy", "draw"]).size().eq(60).all()
    assert set(rows["draw"]) == {0, 1, 2}
    summary = study.summarise_selection(rows)
    assert set(summary.columns) >= {"k", "strategy", "mae", "mae_sd", "rmse", "coverage"}
    # a split's MAE is its draws' mean, over its 60 models (not 180), and the table's the
    # mean over the splits
    per_draw = (rows["predicted"] - rows["accuracy"]).abs().groupby(
        [rows["strategy"], rows["split"], rows["draw"]]).mean()
    by_strategy = summary.set_index("strategy")
    for strategy in ("stratified", "random", study.BASELINE):
        assert by_strategy.loc[strategy, "mae"] == pytest.approx(per_draw[strategy].mean())
        assert by_strategy.loc[strategy, "mae_sd"] == pytest.approx(
            per_draw[strategy].groupby(level="split").mean().std())
    # rmse and coverage the same way: each split's over its draws' rows, then the mean over
    # the splits (a coverage that ignored the upper bound, and an rmse without its square
    # root, passed the checks above)
    error = rows["predicted"] - rows["accuracy"]
    inside = (rows["lower"] <= rows["accuracy"]) & (rows["accuracy"] <= rows["upper"])
    assert (rows["accuracy"] > rows["upper"]).any() and (rows["accuracy"] < rows["lower"]).any()
    for strategy in ("stratified", "random"):
        splits = [(rows["strategy"] == strategy) & (rows["split"] == split) for split in (0, 1)]
        assert by_strategy.loc[strategy, "rmse"] == pytest.approx(
            np.mean([np.sqrt(np.mean(error[split] ** 2)) for split in splits]))
        assert by_strategy.loc[strategy, "coverage"] == pytest.approx(
            np.mean([inside[split].mean() for split in splits]))
    assert (summary["n_models"] == 60).all()
    # each row says whether its split's calibration fit is an answer, the summary all
    statuses = [split.result.status for split in calibrated]
    assert (rows["calibration_status"] == rows["split"].map(dict(enumerate(statuses)))).all()
    assert (summary["calibration_status"] == study.calibration_statuses(statuses)).all()
    assert np.isnan(summary.set_index("strategy").loc[study.BASELINE, "coverage"])  # no interval
    # what predict_accuracy says with the split's calibration models as the reference,
    # the width cross-validated over them (the fit is theirs, whoever chose the items)
    held, result = calibrated[1].held, calibrated[1].result
    calibration = small.drop(index=small.index[held])
    wider = 0
    for reference in (True, False):
        rows = study.selection_study(small, calibrated, ks=[10, 25], strategies=["random"],
                                     seed=1, reference=reference).query("split == 1 and "
                                                                        "strategy == 'random'")
        given = {"reference": calibration, "selection": "random",
                 "refit": QuietFit()} if reference else {}
        # draw d of split s: seed 1 + s + d * 2 (the splits)
        for k, (draw, seed) in itertools.product((10, 25), ((0, 2), (4, 10))):
            chosen = cbmm.select_items(result, k, "random", seed=seed)
            expected = cbmm.predict_accuracy(small.iloc[held][chosen], result, **given)
            got = rows.query(f"k == {k} and draw == {draw}")
            np.testing.assert_allclose(got["predicted"], expected["accuracy"], atol=1e-12)
            np.testing.assert_allclose(got["upper"], expected["upper"], atol=1e-12)
            if reference:  # where the jackknife's is the narrower
                jackknife = cbmm.predict_accuracy(small.iloc[held][chosen], result,
                                                  reference=calibration)
                wider += int((got["upper"].to_numpy() > jackknife["upper"].to_numpy()
                              + 1e-9).sum())
    assert wider > 0
    # chosen on the split's calibration models (predictive: on their answers, the
    # selection of 10 the start of that of 20) or on their fit: the width cross-validated
    # over them, each fold's items chosen on the calibration refitted without it
    rows = study.selection_study(small, calibrated, ks=[10, 20],
                                 strategies=["predictive", "information"],
                                 seed=1).query("split == 1")
    chosen = {"predictive": cbmm.select_items(result, 20, "predictive", responses=calibration)}
    for k, strategy in itertools.product((10, 20), chosen | {"information": None}):
        items = chosen[strategy][:k] if strategy == "predictive" else \
            cbmm.select_items(result, k, strategy)
        expected = cbmm.predict_accuracy(small.iloc[held][items], result,
                                         reference=calibration, selection=strategy,
                                         refit=QuietFit())  # the study's: warm-started
        got = rows.query(f"k == {k} and strategy == '{strategy}'")
        for column in ("accuracy", "upper"):
            np.testing.assert_allclose(got[column.replace("accuracy", "predicted")],
                                       expected[column], atol=1e-12)
        # beside it, the error selection_error cross-validates on the calibration models
        curve = cbmm.selection_error(result, calibration, [k], strategy, refit=QuietFit())
        np.testing.assert_allclose(got["cv_mae"], curve.loc[k, "mae"], rtol=1e-10)
    # also of random items, and none for the baseline or without the reference
    random = study.selection_study(small, calibrated, ks=[10], strategies=["random"], seed=1)
    curve = cbmm.selection_error(result, calibration, [10], "random", refit=QuietFit())
    np.testing.assert_allclose(random.query("split == 1 and strategy == 'random'")["cv_mae"],
                               curve.loc[10, "mae"], rtol=1e-10)
    assert random.query(f"strategy == '{study.BASELINE}'")["cv_mae"].isna().all()
    assert study.selection_study(small, calibrated, ks=[10], strategies=["random"],
                                 reference=False)["cv_mae"].isna().all()
    summary = study.summarise_selection(rows).set_index(["k", "strategy"])
    assert summary.loc[(20, "information"), "cv_mae"] == pytest.approx(
        rows.query("k == 20 and strategy == 'information'")["cv_mae"].iloc[0])
    adaptive = study.adaptive_study(small, calibrated, se_targets=[0.3],
                                    max_exposures=[None, 0.2], max_items=20)
    assert len(adaptive) == 240 and (adaptive["n_items"] <= 20).all()
    assert adaptive.groupby(["max_exposure", "split"], dropna=False).size().eq(60).all()
    summary = study.summarise_adaptive(adaptive).set_index("max_exposure")
    # exposure is shared by the tests of both splits: counted over all 120
    for limit, tests in adaptive.groupby("max_exposure", dropna=False):
        uses = Counter(item for given in tests["items"]
                       for item in cbmm.efficient.item_list(given))
        assert summary.loc[limit, "exposure"] == max(uses.values()) / 120
    assert summary.loc[0.2, "exposure"] <= 0.2 < summary.loc[np.nan, "exposure"]
    assert (summary["n_tests"] == 120).all()
    # the 2PL's interval (reference=False) is predict_accuracy's of the test's answers, on
    # its split's calibration; with the reference (the default) the same tests are
    # scaled by the interval scale of the split's calibration models, refitted as the
    # study's calibrations were
    plain = study.adaptive_study(small, calibrated, se_targets=[0.3],
                                 max_exposures=[None, 0.2], max_items=20, reference=False)
    pd.testing.assert_frame_equal(plain.drop(columns=["lower", "upper", "interval_scale"]),
                                  adaptive.drop(columns=["lower", "upper", "interval_scale"]))
    assert (plain["interval_scale"] == 1).all()
    for _, test in plain.iloc[::40].iterrows():
        result = calibrated[test["split"]].result
        given = cbmm.efficient.item_list(test["items"])
        expected = cbmm.predict_accuracy(small.loc[[test["model"]], given], result)
        np.testing.assert_allclose(test[["predicted", "lower", "upper"]].astype(float),
                                   expected.iloc[0][["accuracy", "lower", "upper"]],
                                   atol=1e-12)
    # one scale per split and exposure setting: the library's, the reference's tests
    # sharing a cap of the same rate
    for (split, calibration), cap in itertools.product(enumerate(calibrated), (None, 0.2)):
        scale = cbmm.adaptive_interval_scale(calibration.result,
                                             small.drop(index=small.index[calibration.held]),
                                             refit=QuietFit(), se_target=0.3, max_items=20,
                                             max_exposure=cap)
        tests = adaptive[(adaptive["split"] == split)
                         & (adaptive["max_exposure"].isna() if cap is None
                            else adaptive["max_exposure"] == cap)]
        assert len(tests) == 60 and (tests["interval_scale"] == scale).all()
    # where the 2PL holds the scale narrows the intervals of tests alone, which still cover
    alone = adaptive["max_exposure"].isna()
    assert (adaptive.loc[alone, "interval_scale"] < 1).all()
    assert (adaptive["upper"] - adaptive["lower"] <= plain["upper"] - plain["lower"])[alone].all()
    covered = adaptive["lower"].le(adaptive["accuracy"]) & adaptive["upper"].ge(
        adaptive["accuracy"])
    np.testing.assert_allclose(summary["accuracy_coverage"],
                               covered.groupby(adaptive["max_exposure"], dropna=False).mean()
                               .loc[summary.index])
    assert (summary["accuracy_coverage"] >= 0.9).all()
    # every k at least the number of items: no rows; a table, not an array
    assert study.selection_study(small, calibrated, ks=[80], strategies=["random"]).empty
    with pytest.raises(ValueError, match="table must be a pandas.DataFrame"):
        study.calibrations(small.to_numpy())
    # too few calibration models answered 95 % of the items to be a reference: the 2PL alone
    sparse = small.mask(np.random.default_rng(0).random(small.shape) < 0.3)
    sparse_fits = study.calibrations(sparse, splits=1, seed=1)
    with pytest.warns(UserWarning, match="every split is predicted by the 2PL alone"):
        rows = study.selection_study(sparse, sparse_fits, ks=[10], strategies=["random"])
    pd.testing.assert_frame_equal(rows, study.selection_study(
        sparse, sparse_fits, ks=[10], strategies=["random"], reference=False))
    # balanced over two areas of 60 and 20 items: one set of tests per balance, labelled
    # by the Series' name; a balanced test never holds an area above its quota
    area = pd.Series(["first"] * 60 + ["second"] * 20, index=small.columns, name="area")
    balanced = study.adaptive_study(small, calibrated, se_targets=[0.3], max_items=20,
                                    contents=[None, area])
    assert balanced.groupby("content").size().to_dict() == {"none": 120, "area": 120}
    for given in balanced.query("content == 'area'")["items"].map(cbmm.efficient.item_list):
        counts = area[given].value_counts().reindex(["first", "second"], fill_value=0)
        assert (counts < np.array([0.75, 0.25]) * len(given) + 1).all()
    with pytest.raises(ValueError, match="'content' given more than once"):
        study.adaptive_study(small, calibrated, se_targets=[0.3],
                             contents=[area.rename(None), area.rename(None)])


def test_the_studies_share_each_splits_reference_and_refit_its_folds_once(simulated):
    _, table, _ = simulated
    small = table.iloc[:150, :60]
    shared = study.calibrations(small, splits=1, seed=4)
    calls = []
    refit = shared[0].refit  # counted, as a user's refit function (so cold)
    shared[0].refit = lambda data: calls.append(len(data)) or refit(data)
    study.selection_study(small, shared, ks=[10], strategies=["information"], draws=2,
                          tinybenchmarks=True)
    # the five folds' refits and tinyBenchmarks' validation fit of each draw, on 4/5 of the 120
    assert calls == [96] * 7
    study.adaptive_study(small, shared, se_targets=[0.3], max_items=10)
    assert len(calls) == 7  # the adaptive study's scale reuses the folds
    # and sharing changes nothing: the same tests and scales as a calibration used afresh
    used, fresh = (study.calibrations(small, splits=1, seed=4) for _ in range(2))
    study.selection_study(small, used, ks=[10], strategies=["information"])
    pd.testing.assert_frame_equal(
        study.adaptive_study(small, used, se_targets=[0.3], max_items=10),
        study.adaptive_study(small, fresh, se_targets=[0.3], max_items=10))


def test_a_studys_calibration_statuses_name_each_with_its_splits_where_they_differ():
    per_split = ["multimodal", "converged", "multimodal", "max_iter"]
    assert study.calibration_statuses(per_split) == "converged 1, max_iter 1, multimodal 2"
    assert study.calibration_statuses(per_split[::2]) == "multimodal"


def test_model_splits_hold_out_a_share_and_more_splits_extend_fewer():
    assert [study.held_out(n) for n in (140, 158, 3)] == [28, 32, 1]  # round(0.2 n), >= 1
    five, eighteen = (study.model_splits(140, k, study.TEST_SHARE, seed=3) for k in (5, 18))
    assert all(len(held) == 28 and len(np.union1d(train, held)) == 140
               for train, held in eighteen)
    # the benchmark's extra splits of a small matrix keep the five it had
    for (train, held), (train18, held18) in zip(five, eighteen):
        assert np.array_equal(held, held18) and np.array_equal(train, train18)
    with pytest.raises(ValueError, match="test_share must be in"):
        study.held_out(140, 1.0)


def test_split_count_holds_out_the_models_asked_for_and_never_fewer_splits():
    # 500 held-out models: ceil(500 / 28) = 18 splits of 140 models, ceil(500 / 32) = 16
    # of 158, and a matrix whose five splits already hold out more keeps its five
    assert [study.split_count(n, 5, 500) for n in (140, 158, 2211)] == [18, 16, 5]
    assert study.split_count(140, 5) == 5  # held_models 0: exactly the splits asked
    assert study.split_count(140, 5, 28 * 7) == 7  # exactly seven splits' worth
    assert study.split_count(140, 5, 500, test_share=0.5) == 8  # 70 held out per split
    with pytest.raises(ValueError, match="held_models must be a non-negative integer"):
        study.split_count(140, 5, -1)


def test_a_fit_that_set_items_aside_serves_scoring_prediction_and_the_audit():
    sim = simulate(200, 20, seed=4)
    table = pd.DataFrame(sim.responses, columns=[f"q{j}" for j in range(20)],
                         index=[f"m{i}" for i in range(200)]).assign(easy=1.0, hard=0.0)
    result = quiet_fit(table.iloc[:150], degenerate="set_aside")
    assert result.info["set_aside"]["items"] == ["easy", "hard"]
    held = table.iloc[150:]
    informative = result.items_frame().set_index("item").drop(["easy", "hard"])
    # an item every calibration model answered alike carries no information about ability
    abilities = ["theta", "se", "status"]
    pd.testing.assert_frame_equal(
        cbmm.score(held, result)[abilities],
        cbmm.score(held.drop(columns=["easy", "hard"]), informative,
                   sigma=result.sigma)[abilities])
    # and is predicted as they answered it: skipping "easy" adds it as correct, less the
    # model's own offset (a share of its mean residual, well below 0.1 of an item here)
    predicted = cbmm.predict_accuracy(held.drop(columns="easy"), result)
    all_but_easy = (held.drop(columns="easy").sum(axis=1) + 1) / 22
    np.testing.assert_allclose(predicted["upper"], all_but_easy, atol=1e-12)
    assert (predicted["accuracy"] > all_but_easy - 0.1 / 22).all()
    audit = cbmm.item_audit(result, table.iloc[:150])
    assert audit.loc[["easy", "hard"], "not_identified"].all()
    assert audit["not_identified"].sum() == 2
    # as the fit gives them (they read a = 0, b = +-40, the bank's stand-ins), and why; on
    # answers that differ (a held-out model that got "hard" right) still set aside
    assert audit.loc[["easy", "hard"], "a"].isna().all()
    assert audit.loc[["easy", "hard"], "b"].tolist() == [np.inf, -np.inf]
    assert audit.loc["hard", "reason"] == ("the calibration fit set it aside: every model it "
                                           "kept answered it wrongly (no estimate of a or b)")
    other = cbmm.item_audit(result, table.iloc[150:].assign(hard=[1.0] + [0.0] * 49))
    assert other.loc["hard", "not_identified"] and not other.loc["hard", "no_information"]
    assert other.loc["easy", "reason"].startswith("the calibration fit set it aside: every "
                                                  "model it kept answered it correctly")
    # the information map draws them at a = 0, marked, as many as its legend counts
    import matplotlib.pyplot as plt

    from cbmm.figures.item_audit import plot_item_audit

    figure = plot_item_audit(audit.reset_index())
    marked = [c for c in figure.axes[0].collections
              if c.get_label().startswith("answered alike by every model")]
    plt.close(figure)
    assert [c.get_label() for c in marked] == ["answered alike by every model (2)"]
    np.testing.assert_array_equal(marked[0].get_offsets(),
                                  audit.loc[["easy", "hard"], ["share_correct"]].assign(a=0.0))
    assert set(cbmm.select_items(result, 20, "information")) == set(informative.index)


def test_the_bank_of_a_fit_is_built_once_while_the_fit_holds_the_same_values(simulated):
    """adaptive_test(respond, fit) per model rebuilt the fit's J x 641 tables for each
    test; the bank of the last FitResult is kept while it holds the same arrays."""
    from cbmm.efficient.bank import ItemBank

    _, table, _ = simulated
    result = quiet_fit(table.iloc[:200, :40])
    bank = ItemBank.of(result)
    assert ItemBank.of(result) is bank
    answers = table.iloc[200]
    given_fit = cbmm.adaptive_test(lambda item: answers[item], result, seed=3)
    given_bank = cbmm.adaptive_test(lambda item: answers[item], bank, seed=3)
    assert given_fit.items == given_bank.items and given_fit.theta == given_bank.theta
    result.a = result.a * 2.0  # new values: a new bank
    assert ItemBank.of(result) is not bank
    np.testing.assert_allclose(ItemBank.of(result).a, 2.0 * bank.a)
    # the kept bank goes with its fit
    import gc

    from cbmm.efficient import bank as bank_module

    del result
    gc.collect()
    assert bank_module._last_bank[0] is None


def test_the_items_of_a_test_are_read_back_whatever_their_labels():
    """The study and `cbmm adaptive` listed a test's items separated by spaces: items
    labelled "q 3" came back as "q" and "3", and the summary's exposure read 6.48."""
    from cbmm.efficient.adaptive import item_list_text

    odd = ["q 3", "010", "a,b", 'say "hi"', "é", "", "[1]"]
    assert cbmm.efficient.item_list(item_list_text(odd)) == odd
    assert cbmm.efficient.item_list(item_list_text([3, 10])) == ["3", "10"]
    assert cbmm.efficient.item_list(np.nan) == [] == cbmm.efficient.item_list("")
    sim = simulate(150, 30, seed=2)
    table = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(150)],
                         columns=[f"q {j}" for j in range(30)])
    calibrated = study.calibrations(table, splits=2, seed=0)
    tests = study.adaptive_study(table, calibrated, se_targets=[0.3], max_exposures=[0.5],
                                 max_items=8, reference=False)
    uses = Counter(item for given in tests["items"] for item in cbmm.efficient.item_list(given))
    assert set(uses) <= set(table.columns)
    assert sum(uses.values()) == tests["n_items"].sum()
    exposure = study.summarise_adaptive(tests)["exposure"].iloc[0]
    assert exposure == max(uses.values()) / len(tests) <= 0.5


def test_the_study_warns_once_of_an_exposure_cap_too_tight_for_min_items():
    sim = simulate(100, 30, seed=4)
    table = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(100)],
                         columns=[f"q{j}" for j in range(30)])
    calibrated = study.calibrations(table, splits=1, seed=0)
    with pytest.warns(UserWarning, match=r"^adaptive_study: an exposure cap of 0.1 over 30 "
                                         r"items and 20 tests allows 3 items per test, fewer "
                                         r"than min_items 5") as caught:
        tests = study.adaptive_study(table, calibrated, se_targets=[0.2, 0.3],
                                     max_exposures=[None, 0.1, 0.5], reference=False)
    assert sum("exposure cap" in str(w.message) for w in caught) == 1  # 0.5 allows 15
    capped = tests[tests["max_exposure"] == 0.1]
    assert (capped["n_items"] <= 3).all() and capped["stop"].eq("exposure share").any()

