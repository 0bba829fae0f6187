"""A fit says whether it is an answer: statuses, the spectral start, multi-start, the prior,
set-aside rows and columns.

Expectations come from constructions whose answer is known without the code under test:
an item separated perfectly by the abilities (loss (3) has no finite optimum), data with
two competing orientations (two local optima), a gradient measured by finite differences.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

import cbmm
from scipy.sparse import csr_array
from scipy.sparse.csgraph import connected_components

from cbmm.diagnostics import (STATIONARY_BELOW, components, identified_core, scaled_gradient,
                              separation)
from cbmm.initialization import spectral_start
from cbmm.model import expit
from cbmm.prior import Penalty
from cbmm.simulate import simulate


def two_orientations(n=1500, j=120, seed=0):
    """Half the items discriminate the wrong way (stronger models fail them): loss (3) with
    a >= 0 has one optimum per orientation of theta, and the side with more signal wins."""
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(n)
    slope = rng.uniform(0.1, 0.8, j) * np.where(np.arange(j) < j // 2, 1.0, -1.0)
    slope[: j // 2] *= 1.3  # the positive half carries more signal
    p = expit(np.outer(theta, slope) + rng.normal(0, 0.3, j))
    return (rng.random((n, j)) < p).astype(float), theta


def quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cbmm.fit(*args, **kwargs)


# ----------------------------------------------------------------------- statuses

def test_an_item_separated_by_ability_has_no_finite_optimum_without_the_prior():
    sim = simulate(300, 40, seed=4)
    y = pd.DataFrame(sim.responses)
    order = np.argsort(sim.theta)
    guttman = np.zeros(300)
    guttman[order[150:]] = 1.0  # right exactly for the abler half: a Guttman item
    y["guttman"] = guttman
    with pytest.warns(cbmm.DegenerateDataWarning, match="no finite optimum"):
        ml = cbmm.fit(y, prior="none")
    assert ml.status == "unbounded"
    assert "guttman" in ml.info["separated_items"]
    # the prior makes the objective coercive: a finite answer, the item very discriminating
    map_fit = quiet_fit(y)
    assert map_fit.status == "converged"
    assert map_fit.a["guttman"] == pytest.approx(np.max(map_fit.a))


def test_separation_finds_separated_items_and_models_by_order_only():
    y = cbmm.as_responses(np.array([[1, 1, 0], [1, 0, 0], [0, 1, 1], [0, 0, 1]])).y
    theta = np.array([3.0, 2.0, 1.0, 0.0])
    items, models = separation(cbmm.as_responses(y), theta, np.array([1.0, 0.0, 1.0]))
    # item 0: correct for the two ablest only; item 1: not separated; item 2: correct for the
    # two least able only -> its wrong answers come from abler models, not separated
    assert items.tolist() == [True, False, False]
    # on the items with a > 0 (0 and 2): model 0 right then wrong, model 1 right/wrong,
    # model 2 wrong/right, model 3 wrong/right: none all alike
    assert models.tolist() == [False, False, False, False]
    # with item 0 alone discriminating, every model answered it alike with itself
    for storage in ("dense", "sparse"):
        data = cbmm.as_responses(y, storage=storage)
        items, models = separation(data, theta, np.array([1.0, 0.0, 0.0]))
        assert items.tolist() == [True, False, False] and models.all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_separation_is_its_definition_cell_by_cell(seed):
    """Against the definition read off each column's and row's answers one by one, dense
    and sparse, with missing cells, ties in theta and items of a = 0."""
    rng = np.random.default_rng(seed)
    n, j = 40, 30
    y = np.where(rng.random((n, j)) < 0.5, 1.0, 0.0)
    y[rng.random((n, j)) < 0.6] = np.nan
    y[np.arange(n), rng.integers(0, j, n)] = 1.0
    y[rng.integers(0, n, j), np.arange(j)] = 0.0
    theta = np.round(np.sort(rng.normal(size=n)), 1)  # increasing with the row, with ties
    theta[n // 2:] += 0.05  # none across the middle
    y[:, :4] = np.where(np.arange(n)[:, None] >= n // 2, 1.0, 0.0)  # separated items
    y[-3:, 4:] = np.where(rng.random((3, j - 4)) < 0.5, np.nan, 1.0)  # models all right
    a = np.where(rng.random(j) < 0.2, 0.0, 1.0)
    a[:4] = 1.0
    want_items = [np.max(theta[y[:, k] == 0], initial=-np.inf)
                  < np.min(theta[y[:, k] == 1], initial=np.inf) for k in range(j)]
    right = [(y[i] == 1)[a > 0].sum() for i in range(n)]
    wrong = [(y[i] == 0)[a > 0].sum() for i in range(n)]
    want_models = [r + w > 0 and (r == 0 or w == 0) for r, w in zip(right, wrong)]
    assert any(want_items) and any(want_models)
    for storage in ("dense", "sparse"):
        items, models = separation(cbmm.as_responses(y, storage=storage), theta, a)
        assert items.tolist() == want_items and models.tolist() == want_models


def test_the_papers_rule_is_not_called_converged_where_the_gradient_is_large():
    sim = simulate(400, 150, seed=6)
    with pytest.warns(cbmm.ConvergenceWarning, match="standard errors from a stationary point"):
        paper = cbmm.fit(sim.responses, **cbmm.paper_settings("cbmm"))
    assert paper.status == "not_stationary"
    assert paper.info["scaled_gradient"] > STATIONARY_BELOW
    tight = quiet_fit(sim.responses, prior="none")
    assert tight.status == "converged" and tight.info["scaled_gradient"] <= STATIONARY_BELOW


@pytest.mark.parametrize("prior", ["none", "normal"])
def test_scaled_gradient_is_the_largest_gradient_in_units_of_its_standard_error(prior):
    sim = simulate(120, 30, seed=9, missing="mcar", missing_rate=0.2)
    data = cbmm.as_responses(sim.responses)
    penalty = Penalty.of(prior)
    rng = np.random.default_rng(0)
    theta, a, b = sim.theta + 0.1 * rng.standard_normal(120), sim.a, sim.b + 0.1
    measured = scaled_gradient(theta, a, b, data, 1.0, penalty)
    # independently: gradient by central differences of the objective, Fisher diagonal
    # from its definition
    y = data.y.astype(float)

    def objective(t, aa, bb):
        x = np.outer(t, aa) + bb
        return (np.where(y != 0, np.logaddexp(0, -y * x), 0).sum()
                + penalty.value(t, aa, bb))

    point = np.concatenate([theta, a, b])
    h = 1e-6
    grad = np.array([(objective(*np.split(point + h * e, [120, 150]))
                      - objective(*np.split(point - h * e, [120, 150]))) / (2 * h)
                     for e in np.eye(point.size)])
    p = expit(np.outer(theta, a) + b)
    q = np.where(y != 0, p * (1 - p), 0)
    fisher = np.concatenate([q @ a ** 2, theta ** 2 @ q, q.sum(0)])
    fisher += np.concatenate([np.full(120, penalty.theta_precision),
                              np.full(60, penalty.item_precision)])
    assert measured == pytest.approx(np.max(np.abs(grad) / np.sqrt(fisher)), rel=1e-5)


def test_set_aside_fits_the_rest_and_reports_it():
    sim = simulate(200, 50, seed=2)
    y = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(200)],
                     columns=[f"q{j}" for j in range(50)])
    y.loc["m0"] = 1.0     # a perfect model
    y.loc["m1"] = 0.0     # a model with nothing right
    y["q0"] = 1.0         # an item everyone answers
    with pytest.warns(cbmm.DegenerateDataWarning, match="set aside"):
        result = cbmm.fit(y, prior="none", degenerate="set_aside", se=True)
    assert result.status == "converged"
    assert result.theta["m0"] == np.inf and result.theta["m1"] == -np.inf
    assert result.b["q0"] == np.inf and np.isnan(result.a["q0"])
    assert set(result.info["set_aside"]["models"]) >= {"m0", "m1"}
    assert "q0" in result.info["set_aside"]["items"]
    # the scale is the fitted models': theta has mean 0 and sd 1 over them
    fitted = result.theta[np.isfinite(result.theta)]
    assert fitted.mean() == pytest.approx(0, abs=1e-12) and fitted.std(ddof=0) == \
        pytest.approx(1, rel=1e-12)
    assert np.isnan(result.theta_se["m0"]) and (result.theta_se[fitted.index] > 0).all()
    # and equals a fit of the identified core alone
    rows, cols = identified_core(cbmm.as_responses(y))
    core = quiet_fit(y.iloc[rows, cols], prior="none")
    np.testing.assert_allclose(fitted, core.theta, atol=1e-6)


def test_identified_core_repeats_until_nothing_is_degenerate():
    # models 3 (all wrong) and 4 (all right) go first; without model 3, item 2 is all
    # correct and goes next
    y = np.array([[1, 0, 1, 0], [1, 1, 1, 0], [0, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1],
                  [0, 1, 1, 0]], dtype=float)
    rows, cols = identified_core(cbmm.as_responses(y))
    part = cbmm.as_responses(y).take(rows, cols)
    assert part.degenerate_items().size == 0 and part.degenerate_models().size == 0
    assert 3 not in rows and 4 not in rows and 2 not in cols


# ---------------------------------------------------------- start and multi-start

def test_the_spectral_start_is_deterministic_and_oriented_by_the_signal():
    y, theta = two_orientations()
    data = cbmm.as_responses(y)
    start = spectral_start(data)
    assert spearmanr(start[0], theta)[0] > 0.9
    np.testing.assert_array_equal(start[0], spectral_start(data)[0])
    # the same start from sparse storage
    np.testing.assert_allclose(spectral_start(data.to_sparse())[0], start[0], atol=1e-5)
    # ordinary data: theta rises with accuracy
    sim = simulate(300, 100, seed=1, missing="mcar", missing_rate=0.3)
    start = spectral_start(cbmm.as_responses(sim.responses))
    assert spearmanr(start[0], np.nanmean(sim.responses, axis=1))[0] > 0.9


def test_every_seed_reaches_the_best_of_two_optima_and_disagreement_is_flagged():
    y, theta = two_orientations()
    fits = [quiet_fit(y, seed=seed) for seed in range(10)]
    best = min(f.info["objective"] for f in fits)
    for f in fits:  # the spectral start finds the better orientation whatever the seed
        assert f.info["objective"] == pytest.approx(best, abs=1.0)
        assert spearmanr(f.theta, theta)[0] > 0.9
        assert f.status in ("converged", "multimodal")
        agreeing = f.info["starts_agreeing"]
        assert (f.status == "multimodal") == (agreeing < 2)
    # random starts reach the other optimum: that is why one start alone is flagged
    objectives = [s["objective"] for f in fits for s in f.info["starts"]]
    assert max(objectives) > best + 100
    # a random start alone, in the worse optimum, knows nothing better: status converged,
    # but several starts expose it
    paper = [quiet_fit(y, prior="none", start="random", n_starts=1, seed=s) for s in range(6)]
    worse = [f for f in paper if f.info["objective"] > best + 100]
    assert worse, "no random start reached the worse optimum"
    # where one start alone of several reaches the best (three random starts, seed 0: the
    # other two in the worse optimum), the fit is flagged (no fit above was: the check of
    # the status against starts_agreeing held for any status)
    with pytest.warns(cbmm.ConvergenceWarning, match="only 1 of 3 starts reached the best "
                                                     "objective.*raise n_starts"):
        lone = cbmm.fit(y, start="random", n_starts=3, seed=0)
    objectives = np.array([s["objective"] for s in lone.info["starts"]])
    assert np.sum(objectives <= objectives.min() + 1.0) == 1 and objectives.max() > best + 100
    assert lone.info["objective"] == pytest.approx(best, abs=1.0)
    assert lone.status == "multimodal" and lone.info["starts_agreeing"] == 1


def test_starts_as_good_with_other_abilities_are_multimodal_not_agreeing():
    """Each item beside its reversed copy: loss (3) with a >= 0 takes the same value at
    (theta, a, b) and at (-theta, a and b of the twin), so two opposite rankings fit
    equally well; starts that land on both are not agreeing starts."""
    sim = simulate(200, 100, seed=1)
    y = np.asarray(sim.responses, dtype=float)
    mirrored = np.hstack([y, 1 - y])
    with pytest.warns(cbmm.ConvergenceWarning, match="abilities unlike the best start's "
                                                     r"\(\d\.\d of its standard errors apart, "
                                                     r"correlation -1.00\).*item_audit"):
        result = cbmm.fit(mirrored, n_starts=10, seed=0)
    assert result.status == "multimodal"
    starts = result.info["starts"]
    best = result.info["objective"]
    reversed_ = [s for s in starts if s["correlation"] < 0]
    assert reversed_ and all(s["objective"] == pytest.approx(best, abs=1e-3) for s in reversed_)
    # apart by 2 |theta| / se: several standard errors for most models
    assert all(s["theta_difference_se"] > 3 for s in reversed_)
    assert result.info["starts_distinct"] == len(reversed_)
    assert result.info["starts_agreeing"] == 10 - len(reversed_)
    # the symmetry itself, by the loss alone: the reversed copy's parameters swapped in
    theta, a, b = (np.asarray(v, dtype=float) for v in (result.theta, result.a, result.b))
    swap = np.r_[100:200, 0:100]
    data = cbmm.as_responses(mirrored)
    assert cbmm.loss(-theta, a[swap], -b[swap], data) == pytest.approx(
        cbmm.loss(theta, a, b, data), rel=1e-9)
    # ordinary data: every start at the best objective has the best's abilities
    plain = quiet_fit(y, n_starts=5, seed=0)
    assert plain.status == "converged" and plain.info["starts_distinct"] == 0
    assert min(s["correlation"] for s in plain.info["starts"]) > 0.999
    assert max(s["theta_difference_se"] for s in plain.info["starts"]) < 0.01


def split_answers(n=200, j=100, seed=2):
    """Half the models answered only the first half of the items, half only the rest."""
    sim = simulate(n, j, seed=seed)
    y = np.asarray(sim.responses, dtype=float)
    y[: n // 2, j // 2:] = np.nan
    y[n // 2:, : j // 2] = np.nan
    return y


def test_answers_in_groups_that_share_none_are_disconnected():
    y = split_answers()
    with pytest.warns(cbmm.DegenerateDataWarning, match="2 groups of models and items that "
                                                        "share no answer"):
        result = cbmm.fit(y)
    assert result.status == "disconnected"
    assert "compared by the prior alone" in result.info["status_reason"]
    assert [(c["models"], c["items"]) for c in result.info["components"]] == [(100, 50)] * 2
    assert result.info["components"][1]["first_models"] == [100, 101, 102]
    models, items = components(cbmm.as_responses(y))
    assert (models == np.repeat([0, 1], 100)).all() and (items == np.repeat([0, 1], 50)).all()
    # a calibration whose items no answer linked: scoring on it says so
    with pytest.warns(cbmm.DegenerateDataWarning, match="status is disconnected"):
        cbmm.score(np.tile([1.0, 0.0], (1, 50)), result)
    # a status that says more (here max_iter) keeps it, its reason and warning naming
    # the groups too (they were silent)
    with pytest.warns(cbmm.ConvergenceWarning, match="stopped at max_iter=3 .*; and the observed "
                                                "answers fall into 2 groups"):
        stopped = cbmm.fit(y, max_iter=3, n_starts=1)
    assert stopped.status == "max_iter" and len(stopped.info["components"]) == 2
    # one model that answered items of both halves links them
    linked = y.copy()
    linked[0, 50:] = 1.0
    assert quiet_fit(linked).status == "converged"
    assert "components" not in quiet_fit(linked).info


@pytest.mark.parametrize("rate", [0.5, 0.9, 0.97, 0.99])
def test_components_are_the_connected_parts_of_the_observed_cells(rate):
    """Against SciPy's graph search on the bipartite graph of observed cells, dense and
    sparse: random masks from linked to falling apart, and a staircase of models each
    sharing one item with the next (a path as long as the matrix)."""
    rng = np.random.default_rng(int(rate * 100))
    n, j = 60, 80
    y = np.where(rng.random((n, j)) < 0.5, 1.0, 0.0)
    y[rng.random((n, j)) < rate] = np.nan
    y[np.arange(n), rng.integers(0, j, n)] = 1.0  # each model and item has an answer
    y[rng.integers(0, n, j), np.arange(j)] = 0.0
    stair = np.full((n, n + 1), np.nan)
    stair[np.arange(n), np.arange(n)] = 1.0
    stair[np.arange(n), np.arange(1, n + 1)] = 0.0
    for matrix in (y, stair):
        mask = csr_array(~np.isnan(matrix))
        count, labels = connected_components(
            csr_array(np.block([[np.zeros((len(matrix),) * 2), mask.toarray()],
                                [mask.toarray().T, np.zeros((matrix.shape[1],) * 2)]])),
            directed=False)
        for storage in ("dense", "sparse"):
            models, items = components(cbmm.as_responses(matrix, storage=storage))
            groups = np.r_[models, items]
            assert groups.max() + 1 == count
            # the same partition: each of SciPy's labels maps to one of ours, and back
            pairs = set(zip(labels, groups))
            assert len(pairs) == count
            sizes = np.bincount(models, minlength=count)
            assert (np.diff(sizes) <= 0).all()  # numbered by decreasing number of models


def test_the_same_answers_in_long_format_reach_the_same_optimum():
    """The issue's report: a long table of the same data landed in another solution."""
    y, _ = two_orientations(n=600, j=80, seed=3)
    wide = pd.DataFrame(y, index=[f"m{i}" for i in range(600)],
                        columns=[f"q{j}" for j in range(80)])
    records = wide.stack().rename("correct").reset_index()
    records.columns = ["model", "item", "correct"]
    records = records.sample(frac=1.0, random_state=0)  # another order of models and items
    fits = [quiet_fit(wide), quiet_fit(records), quiet_fit(records, layout="long")]
    for other in fits[1:]:
        assert other.info["objective"] == pytest.approx(fits[0].info["objective"], abs=1e-3)
        np.testing.assert_allclose(other.theta.sort_index(), fits[0].theta.sort_index(),
                                   atol=1e-3)
    # fit takes as_responses' layout: the same records read as a wide table are text
    with pytest.raises(cbmm.ResponseError, match="value 'm"):
        cbmm.fit(records, layout="wide")


def test_a_warm_start_from_a_fit_returns_to_the_same_optimum_at_once():
    sim = simulate(300, 80, seed=5)
    first = quiet_fit(sim.responses)
    again = quiet_fit(sim.responses, start=first, n_starts=1)
    assert again.info["objective"] == pytest.approx(first.info["objective"], abs=1e-3)
    assert again.n_iter < first.info["starts"][0]["n_iter"]
    with pytest.raises(ValueError, match="theta0 has shape"):
        cbmm.fit(sim.responses, start=(np.zeros(3), first.a, first.b))


def test_a_warm_start_matches_the_fits_models_and_items_by_label():
    sim = simulate(120, 40, seed=6)
    frame = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(120)],
                         columns=[f"q{j}" for j in range(40)])
    first = quiet_fit(frame, prior="none")   # its loss_history: loss (3), no penalty
    theta, a, b = (np.asarray(v) for v in first.raw_parameters())

    def start_loss(part):   # the loss (3) at the fit's values of part's models and items
        rows, columns = frame.index.get_indexer(part.index), frame.columns.get_indexer(part.columns)
        y = cbmm.as_responses(part.to_numpy()).y
        return cbmm.loss(theta[rows], a[columns], b[columns], y)

    # another order of the same answers, and a subset: each starts where the fit was
    for part in (frame.iloc[::-1, ::-1], frame.iloc[10:90:2, 5:35]):
        again = quiet_fit(part, start=first, n_starts=1, max_iter=1, prior="none",
                          accelerate="none")   # auto's entry 0: after Newton steps in theta
        assert again.loss_history[0] == pytest.approx(start_loss(part), rel=1e-6)
    with pytest.raises(ValueError, match=r"1 of the responses' items are not among the "
                                         r"FitResult's \(e.g. \['new'\]\)"):
        cbmm.fit(frame.rename(columns={"q3": "new"}), start=first)
    # a set-aside fit's own set-aside model and item are left out of its warm start
    frame.iloc[:, 0], frame.iloc[0] = 1, 1
    aside = quiet_fit(frame, degenerate="set_aside")
    again = quiet_fit(frame, start=aside, degenerate="set_aside", n_starts=1)
    assert again.info["objective"] == pytest.approx(aside.info["objective"], abs=1e-3)
    assert again.n_iter < aside.info["starts"][0]["n_iter"]
    with pytest.raises(ValueError, match=r"theta0 has 1 non-finite value\(s\) \(first at "
                                         r"'m0'\); .* fit with degenerate='set_aside'"):
        cbmm.fit(frame, start=aside)


# ----------------------------------------------------------------------- the prior

def test_map_fits_agree_across_methods_and_engines():
    sim = simulate(200, 60, seed=3)
    settings = dict(tol=1e-10, max_iter=20000, n_starts=1)
    fits = [quiet_fit(sim.responses, "cbmm", **settings),
            quiet_fit(sim.responses, "cbmm", engine="numpy", **settings),
            quiet_fit(sim.responses, "lbfgsb", **settings)]
    objectives = [f.info["objective"] for f in fits]
    assert max(objectives) - min(objectives) < 1e-4


def test_the_map_objective_is_loss_plus_the_normal_log_prior():
    sim = simulate(100, 30, seed=8)
    result = quiet_fit(sim.responses, sigma=2.0, prior_sd=2.0, n_starts=1)
    theta, a, b = (np.asarray(v) for v in result.raw_parameters())
    penalty = 0.5 * (theta @ theta) + 0.5 / 4.0 * ((a / 2) @ (a / 2) + (b / 2) @ (b / 2))
    assert result.info["objective"] == pytest.approx(result.loss + penalty, rel=1e-12)
    # at the MAP point the gradient of loss + penalty vanishes (projected on a >= 0)
    assert result.info["scaled_gradient"] <= STATIONARY_BELOW


@pytest.mark.parametrize("method", ["cbmm", "lbfgsb", "manopt"])
def test_the_prior_sd_range_is_the_one_whose_fits_stay_finite(method):
    """Beyond the range a clear error (fits divided by zero at 1e-170, overflowed at
    1e200, failed at 1e-100 and 1e-10), within it a finite fit."""
    y = simulate(60, 20, seed=2).responses
    for sd in (1e-6, 1e6):
        result = quiet_fit(y, method, prior_sd=sd, n_starts=1)
        assert not result.failed and np.isfinite(result.info["objective"])
    for sd, message in ((1e-170, ">= 1e-06"), (1e200, "<= 1e\\+06"), (0.0, ">= 1e-06")):
        with pytest.raises(ValueError, match=f"option 'prior_sd' must be {message}"):
            cbmm.fit(y, method, prior_sd=sd)


def test_methods_that_fit_their_own_model_keep_their_status_and_one_start():
    spec = cbmm.registry.get_method("pyirt")
    assert not spec.minimises_loss
    with pytest.raises(ValueError, match="n_starts=3 needs a method whose starts can be "
                                         "compared"):
        cbmm.fit(np.eye(4), "pyirt", n_starts=3)
    with pytest.raises(ValueError, match="se=True needs a method that gives standard errors"):
        cbmm.fit(np.eye(4), "mirt", se=True)


def test_paper_settings_reproduce_the_papers_procedure():
    sim = simulate(100, 40, seed=1)
    paper = quiet_fit(sim.responses, **cbmm.paper_settings("cbmm"))
    assert paper.info["start"] == "random" and paper.info["n_starts"] == 1
    assert paper.info["accelerate"] == "none" and paper.info["objective"] == paper.loss
    start = cbmm.initial_values(100, 40, seed=0)
    assert paper.loss_history[0] == pytest.approx(
        cbmm.loss(*start, cbmm.as_responses(sim.responses).y), rel=1e-6)
