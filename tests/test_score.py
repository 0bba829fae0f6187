"""cbmm.score: abilities of new models against fixed items, checked against closed forms,
finite differences of the loss, and a full refit on simulated data."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import logit

import cbmm
from cbmm.simulate import simulate


def row_loss(theta, a, b, y_row, sigma, prior=False):
    """Loss (3) of one model, through the library's own full-matrix loss."""
    value = cbmm.loss(np.array([theta, 0.0]), a, b, np.vstack([y_row, np.zeros_like(y_row)]),
                      sigma)
    return value + (0.5 * theta**2 if prior else 0.0)


def test_closed_form_for_identical_items():
    # k correct out of n items with the same (a, b): Phi((theta a + b) / sigma) = k / n
    a, b, sigma = 1.7, -0.4, 2.0
    items = pd.DataFrame({"a": [a] * 10, "b": [b] * 10}, index=[f"i{j}" for j in range(10)])
    rows = []
    for k, n in ((3, 10), (7, 8), (1, 2)):
        row = np.full(10, np.nan)
        row[:n] = 0.0
        row[:k] = 1.0
        rows.append(row)
    scores = cbmm.score(pd.DataFrame(rows, columns=items.index), items, sigma=sigma)
    for (k, n), (_, got) in zip(((3, 10), (7, 8), (1, 2)), scores.iterrows()):
        p = k / n
        assert got["theta"] == pytest.approx((sigma * logit(p) - b) / a, rel=1e-9)
        assert got["se"] == pytest.approx(sigma / (a * math.sqrt(n * p * (1 - p))), rel=1e-9)
        assert (got["n_items"], got["n_correct"], got["status"]) == (n, k, "converged")


@pytest.mark.parametrize("prior", ["none", "normal"])
def test_score_equation_and_information_by_finite_differences(prior):
    rng = np.random.default_rng(3)
    n, j, sigma = 12, 40, 0.7
    a = rng.uniform(0.0, 2.0, j)
    a[:3] = 0.0  # items that carry no information
    b = rng.normal(0, 1, j)
    theta_true = rng.normal(0, 1, n)
    responses = (rng.random((n, j)) < 1 / (1 + np.exp(-(np.outer(theta_true, a) + b) / sigma)))
    responses = responses.astype(float)
    responses[rng.random((n, j)) < 0.3] = np.nan
    responses[0, 3:6] = [1.0, 0.0, 1.0]  # at least one informative correct and wrong answer
    responses[0, 6:] = np.nan
    items = pd.DataFrame({"a": a, "b": b})
    scores = cbmm.score(responses, items, sigma=sigma, prior=prior)
    y = cbmm.as_responses(responses).y
    h = 1e-4
    for i in range(n):
        if scores["status"][i] != "converged":
            continue
        t = scores["theta"][i]
        up, mid, down = (row_loss(t + d, a, b, y[i], sigma, prior == "normal") for d in (h, 0, -h))
        assert (up - down) / (2 * h) == pytest.approx(0.0, abs=1e-6)
        information = (up - 2 * mid + down) / h**2
        assert scores["se"][i] == pytest.approx(1 / math.sqrt(information), rel=1e-4)
    assert (scores["status"] == "converged").sum() >= n - 2


def test_scores_match_a_joint_refit():
    """Calibrate on 800 models, score 200 others: their joint-fit abilities, within their se."""
    sim = simulate(1000, 200, missing="mcar", missing_rate=0.2, seed=0)
    frame = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(1000)],
                         columns=[f"q{j}" for j in range(200)])
    calibration = cbmm.fit(frame.iloc[:800], tol=1e-8, accelerate="squarem", max_iter=100000)
    joint = cbmm.fit(frame, tol=1e-8, accelerate="squarem", max_iter=100000)
    assert calibration.converged and joint.converged
    scores = cbmm.score(frame.iloc[800:], calibration)
    assert (scores["status"] == "converged").all()
    assert list(scores.index) == list(frame.index[800:])
    joint_theta = joint.theta.iloc[800:]
    difference = (scores["theta"] - joint_theta).abs()
    assert np.corrcoef(scores["theta"], joint_theta)[0, 1] > 0.999
    assert difference.mean() < 0.05 and difference.max() < 0.2
    assert difference.max() < scores["se"].median()
    assert np.corrcoef(scores["theta"], sim.theta[800:])[0, 1] > 0.95


def test_all_correct_all_wrong_and_unanswered_models():
    items = pd.DataFrame({"a": [1.0, 0.5, 2.0, 0.0], "b": [0.0, 1.0, -1.0, 0.3]},
                         index=["w", "x", "y", "z"])
    responses = pd.DataFrame([[1, 1, np.nan, 0], [0, np.nan, 0, 1], [np.nan, np.nan, np.nan, 1],
                              [np.nan] * 4, [1, 0, 1, 1]], columns=items.index,
                             index=["ace", "dud", "only_z", "absent", "mixed"])
    with pytest.warns(cbmm.DegenerateDataWarning, match="2 model.*ace, dud.*prior='normal'"):
        mle = cbmm.score(responses, items)
    assert mle.loc["ace", "theta"] == np.inf and mle.loc["dud", "theta"] == -np.inf
    assert list(mle["status"]) == ["all correct", "all wrong", "no information",
                                   "no information", "converged"]
    assert np.isnan(mle.loc[["only_z", "absent"], "theta"]).all()
    assert (mle.loc[["ace", "dud", "only_z", "absent"], "se"] == np.inf).all()
    assert list(mle["n_items"]) == [3, 3, 1, 0, 4] and list(mle["n_correct"]) == [2, 1, 1, 0, 3]
    with pytest.warns(cbmm.DegenerateDataWarning):
        posterior = cbmm.score(responses, items, prior="normal")
    assert np.isfinite(posterior["theta"]).all()
    assert posterior.loc["ace", "theta"] > 0 > posterior.loc["dud", "theta"]
    assert list(posterior["status"]) == list(mle["status"])
    assert posterior.loc["absent", "theta"] == 0.0 and posterior.loc["absent", "se"] == 1.0


def test_items_are_matched_by_id_and_one_model_can_be_scored(tmp_path):
    sim = simulate(300, 30, seed=2)
    frame = pd.DataFrame(sim.responses, columns=[f"q{j}" for j in range(30)])
    result = cbmm.fit(frame.iloc[:299], sigma=1.5)
    full = cbmm.score(frame.iloc[299:], result)
    shuffled = frame.iloc[299:, ::-1].drop(columns=["q4", "q7"])
    part = cbmm.score(shuffled, result.items_frame(), sigma=1.5)
    expected = cbmm.score(frame.iloc[299:].assign(q4=np.nan, q7=np.nan), result)
    assert part["theta"].iloc[0] == pytest.approx(expected["theta"].iloc[0], rel=1e-10)
    assert full["theta"].iloc[0] != pytest.approx(part["theta"].iloc[0], rel=1e-6)
    # a saved fit: items.csv or its folder; sigma comes from fit.json beside it
    result.save(tmp_path / "fit")
    for source in (tmp_path / "fit", tmp_path / "fit" / "items.csv"):
        again = cbmm.score(frame.iloc[299:], source)
        assert again["theta"].iloc[0] == pytest.approx(full["theta"].iloc[0], rel=1e-10)
    with pytest.raises(ValueError, match=r"sigma=1 contradicts the calibration's sigma=1.5"):
        cbmm.score(frame.iloc[299:], tmp_path / "fit", sigma=1.0)
    # unlabelled arrays: one column per item, in order
    array = cbmm.score(sim.responses[299:], result)
    assert array["theta"].iloc[0] == pytest.approx(full["theta"].iloc[0], rel=1e-10)
    # one model's answers as a Series: labelled by its name, its items by the index
    series = shuffled.iloc[0].rename("new model")
    one = cbmm.score(series, result.items_frame(), sigma=1.5)
    assert list(one.index) == ["new model"]
    assert one["theta"].iloc[0] == pytest.approx(part["theta"].iloc[0], rel=1e-10)
    predicted = cbmm.predict_accuracy(series, result)
    assert predicted["n_items"].iloc[0] == 28 and list(predicted.index) == ["new model"]


def test_a_users_items_file_has_its_ids_in_item_or_the_first_column(tmp_path):
    responses = pd.DataFrame([[1, 0, 1]], columns=["01", "x", "q"])
    (tmp_path / "named.csv").write_text("item,a,b\n01,1.5,0.2\nx,0.5,-1\nq,2,1\n")
    expected = cbmm.score(responses, tmp_path / "named.csv")
    # the ids in a first column of another name, kept as written ("01" is no number)
    (tmp_path / "label.csv").write_text("label,a,b\nq,2,1\n01,1.5,0.2\nx,0.5,-1\n")
    pd.testing.assert_frame_equal(cbmm.score(responses, tmp_path / "label.csv"), expected)
    (tmp_path / "ids.csv").write_text("a,b\n1.5,0.2\n0.5,-1\n2,1\n")
    with pytest.raises(ValueError, match="ids.csv: no column of item ids"):
        cbmm.score(responses, tmp_path / "ids.csv")
    # a line short of the header's fields (it read as b = NaN, "a failed calibration?")
    (tmp_path / "cut.csv").write_text("item,a,b\n01,1.5,0.2\nx,0.5,-1\nq,2")
    with pytest.raises(ValueError, match=r"cut.csv, line 4: 2 fields, expected 3 \(as in the "
                                         r"header; the file ends in the middle of this line: "
                                         r"cut short\?\)"):
        cbmm.score(responses, tmp_path / "cut.csv")
    (tmp_path / "long.csv").write_text("item,a,b\n01,1.5,0.2,7\nx,0.5,-1\nq,2,1\n")
    with pytest.raises(ValueError, match=r"long.csv, line 2: 4 fields, expected 3 \(as in the "
                                         r"header\)$"):
        cbmm.score(responses, tmp_path / "long.csv")


@pytest.mark.parametrize("responses,items,message", [
    (pd.DataFrame([[1, 0]], columns=["q0", "zz"]), None,
     r"1 item column\(s\) not among the calibrated items: \['zz'\]"),
    (pd.DataFrame([[1, 2]], columns=["q0", "q1"]), None, r"value 2 at row 0"),
    (np.ones((2, 3)), None, "3 columns but 2 calibrated items"),
    (np.ones(2), None, "2-D"),
    (pd.DataFrame([[1, 0]], columns=["q0", "q1"]),
     pd.DataFrame({"a": [1.0, np.nan], "b": [0.0, 0.0]}, index=["q0", "q1"]),
     r"item 'q1' has a=nan"),
    (pd.DataFrame([[1, 0]], columns=["q0", "q1"]),
     pd.DataFrame({"a": [1.0, -1.0], "b": [0.0, 0.0]}, index=["q0", "q1"]), "a >= 0"),
    (pd.DataFrame([[1, 0]], columns=["q0", "q1"]),
     pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q0"]), "more than once"),
    (pd.DataFrame([[1, 0]], columns=["q0", "q1"]), pd.DataFrame({"a": [1.0]}), r"\['b'\]"),
    (pd.DataFrame([[1, 0]], columns=["q0", "q1"]), "nope/items.csv", "no such file"),
    (pd.DataFrame([[1, 0, 1]], columns=["q0", "q1", " "]), None,
     r"item column 3 has no header \(a comma at the end of each line\?\)"),
    (pd.DataFrame([[1, 0]], columns=["q0", "q1"]),
     pd.DataFrame({"a": [1.0, "x"], "b": [0.0, 0.0]}, index=["q0", "q1"]),
     r"item 'q1' has a='x'; columns a and b must be numbers"),
])
def test_bad_input_names_the_problem(responses, items, message):
    if items is None:
        items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q1"])
    with pytest.raises(ValueError, match=message):
        cbmm.score(responses, items)


@pytest.mark.parametrize("kwargs,name", [({"prior": "flat"}, "prior"), ({"sigma": 0}, "sigma"),
                                         ({"sigma": "x"}, "sigma"), ({"tol": -1}, "tol"),
                                         ({"max_iter": 0}, "max_iter")])
def test_bad_arguments(kwargs, name):
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]})
    with pytest.raises(ValueError, match=name):
        cbmm.score(np.array([[1.0, 0.0]]), items, **kwargs)


def test_failed_calibration_is_refused():
    failed = cbmm.FitResult.failure("timeout after 5 s", responses=(3, 2), method="cbmm")
    with pytest.raises(ValueError, match="the calibration fit failed"):
        cbmm.score(np.array([[1.0, 0.0]]), failed)


def test_a_calibration_that_is_not_an_optimum_is_named_once(tmp_path, capsys):
    """Items of a fit stopped short (max_iter) or without a finite optimum (unbounded)
    give scores that are not an answer: the library warns, the command says it once
    though several of its steps read the calibration."""
    from cbmm.cli import main

    sim = simulate(60, 15, seed=3)
    new = sim.responses[:5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converged = cbmm.fit(sim.responses)
        short = cbmm.fit(sim.responses, max_iter=2)
    assert (converged.status, short.status) == ("converged", "max_iter")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cbmm.score(new, converged)
    assert not [w for w in caught if issubclass(w.category, cbmm.ConvergenceWarning)]
    with pytest.warns(cbmm.ConvergenceWarning, match="calibration's status is max_iter: its "
                                                     "item parameters are not an optimum"):
        cbmm.score(new, short)
    frame = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(60)])
    frame.to_csv(tmp_path / "all.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["fit", "--responses", str(tmp_path / "all.csv"), "--out",
                     str(tmp_path / "fit"), "--max-iter", "2"]) == 0
    capsys.readouterr()
    assert main(["predict", "--responses", str(tmp_path / "all.csv"), "--items",
                 str(tmp_path / "fit"), "--out", str(tmp_path / "p.csv")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert sum("calibration's status is max_iter" in line for line in lines) == 1, lines


def test_warnings_name_the_callers_line_whatever_the_depth():
    """A warning points at the user's call, not at the library line that noticed: the
    calibration check is reached from score (depth 2) and from predict_accuracy and
    item_audit (deeper), the status warning from fit."""
    import inspect

    sim = simulate(60, 15, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        short = cbmm.fit(sim.responses, max_iter=2)
    calls = {"fit": lambda: cbmm.fit(sim.responses, max_iter=2),
             "score": lambda: cbmm.score(sim.responses[:5], short),
             "predict_accuracy": lambda: cbmm.predict_accuracy(sim.responses[:5], short),
             "item_audit": lambda: cbmm.item_audit(short, sim.responses)}
    for name, call in calls.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            line = inspect.getsourcelines(call)[1]
            call()
        located = {(w.filename, w.lineno) for w in caught
                   if issubclass(w.category, cbmm.ConvergenceWarning)}
        assert located == {(__file__, line)}, (name, located)


def test_score_command(tmp_path):
    from cbmm.cli import main

    sim = simulate(120, 20, seed=8)
    frame = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(120)],
                         columns=[f"q{j}" for j in range(20)])
    frame.iloc[:100].to_csv(tmp_path / "old.csv")
    frame.iloc[100:].to_csv(tmp_path / "new.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["fit", "--responses", str(tmp_path / "old.csv"), "--out",
                     str(tmp_path / "fit")]) == 0
        args = ["score", "--responses", str(tmp_path / "new.csv"), "--items",
                str(tmp_path / "fit"), "--out", str(tmp_path / "scores.csv")]
        assert main(args) == 0
        assert main(args) == 2  # exists: refused without --force
        assert main(args + ["--force", "--prior", "normal"]) == 0
    table = pd.read_csv(tmp_path / "scores.csv")
    assert list(table.columns) == ["model", "theta", "se", "se_calibration", "n_items",
                                   "n_correct", "status"]
    expected = cbmm.score(frame.iloc[100:], cbmm.FitResult.load(tmp_path / "fit"), prior="normal")
    np.testing.assert_allclose(table["theta"], expected["theta"], rtol=1e-12)
    assert json.loads((tmp_path / "fit" / "fit.json").read_text())["sigma"] == 1.0
    assert table["se_calibration"].isna().all()  # a fit without standard errors
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["fit", "--responses", str(tmp_path / "old.csv"), "--out",
                     str(tmp_path / "fit"), "--se", "--force"]) == 0
        assert main(args + ["--force"]) == 0
        carried = pd.read_csv(tmp_path / "scores.csv")
        assert main(args + ["--force", "--items-fixed"]) == 0
        fixed = pd.read_csv(tmp_path / "scores.csv")
    expected = cbmm.score(frame.iloc[100:], cbmm.FitResult.load(tmp_path / "fit"))
    np.testing.assert_allclose(carried["se"], expected["se"], rtol=1e-12)
    np.testing.assert_allclose(carried["se"] ** 2, fixed["se"] ** 2
                               + carried["se_calibration"] ** 2, rtol=1e-9)
    assert fixed["se_calibration"].isna().all() and (carried["se_calibration"] > 0).all()


def test_long_tables_and_the_signed_coding_score_alike():
    sim = simulate(150, 25, missing="mcar", missing_rate=0.2, seed=9)
    frame = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(150)],
                         columns=[f"q{j}" for j in range(25)])
    calibration = cbmm.fit(frame.iloc[:140])
    wide = cbmm.score(frame.iloc[140:], calibration)
    long = frame.iloc[140:].stack().rename("correct").rename_axis(["model", "item"])
    from_long = cbmm.score(long.reset_index(), calibration)
    pd.testing.assert_frame_equal(from_long.loc[wide.index], wide, check_exact=False,
                                  rtol=1e-12)
    signed = frame.iloc[140:].replace({0.0: -1.0}).fillna(0.0)
    from_signed = cbmm.score(signed, calibration, coding="signed")
    pd.testing.assert_frame_equal(from_signed, wide, check_exact=False, rtol=1e-12)
    with pytest.raises(ValueError, match="more than once"):
        cbmm.score(pd.concat([long.reset_index()] * 2), calibration)


def test_a_bad_record_of_a_long_file_is_named_by_its_line(tmp_path):
    from cbmm.data import read_table

    calibration = pd.DataFrame({"a": [1.0, 2.0], "b": [0.0, 0.5]}, index=["q0", "q1"])
    (tmp_path / "long.csv").write_text("model,item,correct\nm0,q0,1\nm0,q1,0\nm1,q0,2\n"
                                       "m1,q1,yes\nm1,q0,1\n")
    records = read_table(tmp_path / "long.csv")
    with pytest.raises(ValueError, match="responses: value '2' at line 4 \\(model 'm1', item "
                                         "'q0'\\) \\(1 more such record\\(s\\)\\); expected"):
        cbmm.score(records, calibration)
    with pytest.raises(ValueError, match="value -1 at line 2 .* expected 0/1 with NaN"):
        cbmm.score(records.assign(correct=[-1, 0, 1, 0, 1]), calibration, coding="binary")
    with pytest.raises(ValueError, match="model 'm1' answers item 'q0' more than once, at "
                                         "lines 4 and 6 "):
        cbmm.score(records.assign(correct=[1, 0, 1, 0, 1]), calibration)
    # integer ids (a long table pandas read) are shown as written, not as np.int64(0)
    numbered = pd.DataFrame({"a": [1.0, 2.0], "b": [0.0, 0.5]}, index=["0", "1"])
    with pytest.raises(ValueError, match="model 'm1' answers item 0 more than once"):
        cbmm.score(records.assign(correct=[1, 0, 1, 0, 1], item=[0, 1, 0, 1, 0]), numbered)


def test_a_bad_cell_or_label_of_a_wide_file_is_named_by_its_line_as_fit_names_it(tmp_path):
    from cbmm.data import read_table

    calibration = pd.DataFrame({"a": [1.0, 2.0], "b": [0.0, 0.5]}, index=["q0", "q1"])
    (tmp_path / "wide.csv").write_text("model,q0,q1\nm0,1,0\nm1,2,1\nm2,0,0\n")
    # the header is line 1: m1's row is line 3 (score said row 1, fit line 3)
    with pytest.raises(ValueError, match=r"value 2 at line 3 \(model 'm1', item 'q0'\)"):
        cbmm.score(read_table(tmp_path / "wide.csv"), calibration)
    (tmp_path / "twice.csv").write_text("model,q0,q1\nm0,1,0\nm1,0,1\nm0,0,0\n")
    with pytest.raises(ValueError, match=r"duplicate model labels: 'm0' \(lines 2, 4\)"):
        cbmm.score(read_table(tmp_path / "twice.csv"), calibration)


# ---- inputs a careful tool must not trust -------------------------------------------------

def root_of_the_score_equation(row, a, b, sigma=1.0, prior=False):
    """The root of L_i'(theta) by SciPy's brentq and 1 / sqrt(L_i'') there, both written out
    here in the threshold form (overflow-free for any a, b)."""
    from scipy.optimize import brentq
    from scipy.special import expit, log_expit

    seen = ~np.isnan(row)
    y = np.where(row[seen] == 1, 1.0, -1.0)
    s, c = a[seen] / sigma, b[seen] / sigma
    t = -c / s

    def derivative(theta):
        return float(np.sum(-y * s * expit(-y * s * (theta - t)))) + (theta if prior else 0.0)

    root = brentq(derivative, -50, 50, xtol=1e-14, rtol=4 * np.finfo(float).eps)
    x = s * (root - t)
    information = np.exp(2 * np.log(s) + log_expit(x) + log_expit(-x)).sum() + prior
    return root, 1 / np.sqrt(information)


@pytest.mark.parametrize("prior", [False, True])
@pytest.mark.parametrize("a_step,b_step,answer", [
    (1e12, -0.5e12, 1.0),  # a near-deterministic item: theta >= 0.5
    (1e300, 1e300, 1.0),  # ... at the end of the float range: theta >= -1
    (1e300, -1e300, 0.0),  # theta <= 1
])
def test_items_of_huge_discrimination_give_the_root_of_the_score_equation(
        a_step, b_step, answer, prior):
    a = np.r_[np.full(10, 1.0), a_step]
    b = np.r_[np.linspace(-1, 1, 10), b_step]
    row = np.r_[np.ones(3), np.zeros(7), answer] if answer else np.r_[np.ones(8), np.zeros(2), 0]
    items = pd.DataFrame({"a": a, "b": b}, index=[f"q{j}" for j in range(11)])
    got = cbmm.score(pd.DataFrame([row], columns=items.index), items,
                     prior="normal" if prior else "none").iloc[0]
    root, se = root_of_the_score_equation(row, a, b, prior=prior)
    assert got["status"] == "converged"
    assert got["theta"] == pytest.approx(root, abs=1e-13)
    assert got["se"] == pytest.approx(se, rel=0.05)


@pytest.mark.parametrize("sigma", [0, -1, float("nan"), 1e-320, "1", None])
def test_a_fit_json_with_a_sigma_the_model_does_not_take_is_refused(tmp_path, sigma):
    sim = simulate(60, 10, seed=2)
    frame = pd.DataFrame(sim.responses, columns=[f"q{j}" for j in range(10)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cbmm.fit(frame).save(tmp_path / "fit")
    meta = json.loads((tmp_path / "fit" / "fit.json").read_text())
    meta["sigma"] = sigma
    (tmp_path / "fit" / "fit.json").write_text(json.dumps(meta))
    message = (r"fit.json: not a complete fit.json \(field 'sigma' is .*, expected a "
               r"temperature: a number in \[1e-300, 1e\+300\]\)")
    with pytest.raises(ValueError, match=message):
        cbmm.score(frame, tmp_path / "fit")
    with pytest.raises(ValueError, match=message):   # and loaded, not left to repr's error
        cbmm.FitResult.load(tmp_path / "fit")


def test_sparse_responses_score_like_the_dense_matrix():
    import scipy.sparse

    sim = simulate(120, 15, missing="mcar", missing_rate=0.4, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cbmm.fit(sim.responses[:100])
    dense = cbmm.score(sim.responses[100:], result)
    signed = np.nan_to_num(2 * sim.responses[100:] - 1)  # stored entries: the observed cells
    for matrix in (scipy.sparse.csr_matrix(signed), scipy.sparse.coo_array(signed)):
        pd.testing.assert_frame_equal(cbmm.score(matrix, result), dense)


def test_a_sparse_matrix_storing_a_cell_twice_is_refused():
    import scipy.sparse

    items = pd.DataFrame({"a": [1.0, 1.0, 1.0], "b": [0.0, 0.0, 0.0]}, index=["x", "y", "z"])
    twice = scipy.sparse.coo_matrix(([-1.0, 1, 1, 1], ([0, 0, 0, 0], [0, 0, 1, 2])), shape=(1, 3))
    with pytest.raises(ValueError, match=r"stores 1 cell\(s\) more than once, first row 0, column 0"):
        cbmm.score(twice, items)


def test_blank_text_is_missing_to_score_as_to_fit():
    """A row of empty strings is a model that answered nothing (fit reads "" as missing);
    score took it for answered and then refused it as a row without answers."""
    items = pd.DataFrame({"a": [1.0, 0.5, 2.0], "b": [0.0, 1.0, -1.0]}, index=["x", "y", "z"])
    frame = pd.DataFrame([["1", "0", " "], ["", "", ""], ["0", "", "1"]], columns=items.index,
                         index=["m0", "m1", "m2"])
    got = cbmm.score(frame, items)
    expected = cbmm.score(frame.replace(r"^\s*$", np.nan, regex=True).astype(float), items)
    pd.testing.assert_frame_equal(got, expected)
    assert got.loc["m1", "status"] == "no information" and list(got["n_items"]) == [2, 0, 2]


def test_labels_like_the_internal_padding_are_the_users_own():
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q1"])
    frame = pd.DataFrame([[1, 0], [0, 1], [1, 0]], columns=["q0", "q1"],
                         index=["(padding row 0)", "(padding row 1)", "m"])
    assert list(cbmm.score(frame, items).index) == list(frame.index)
    with pytest.raises(ValueError, match=r"duplicate model labels: '\(padding row 0\)' \(rows 0, 1\)"):
        cbmm.score(frame.set_axis(["(padding row 0)"] * 2 + ["m"]), items)


def test_a_duplicated_item_label_is_named_not_a_traceback():
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q1"])
    frame = pd.DataFrame([[1, 0, 1], [0, 1, 1]], columns=["q0", "q1", "q1"], index=["m", "n"])
    with pytest.raises(ValueError, match=r"duplicate item ids: 'q1' \(columns 1, 2\)"):
        cbmm.score(frame, items)
    # a bool column among integer ones is padded with True, as its dtype asks
    mixed = pd.DataFrame({"q0": [True, False], "q1": [0, 1]}, index=["m", "n"])
    pd.testing.assert_frame_equal(cbmm.score(mixed, items),
                                  cbmm.score(mixed.astype(int), items))


@pytest.mark.parametrize("items", [None, 5, np.ones((2, 2)), {"a": [1.0], "b": [0.0]}])
def test_items_of_a_type_no_calibration_has_are_named(items):
    with pytest.raises(ValueError, match=r"items: expected a FitResult, a DataFrame with columns "
                                         r"a and b, or the path of a saved fit"):
        cbmm.score(np.array([[1.0, 0.0]]), items)


def test_a_fits_items_frame_carries_its_temperature():
    """``FitResult.items_frame()`` at sigma 2 scores as the fit does (read at sigma 1 it
    put abilities off by 1.4); a bare table is still read at temperature 1."""
    sim = simulate(80, 20, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cbmm.fit(sim.responses, sigma=2.0)
    new = sim.responses[:10]
    table = fit.items_frame()
    assert table.attrs["sigma"] == 2.0
    pd.testing.assert_frame_equal(cbmm.score(new, table), cbmm.score(new, fit))
    bare = table.copy()
    bare.attrs = {}
    scaled = bare.assign(a=bare["a"] / 2, b=bare["b"] / 2)
    np.testing.assert_allclose(cbmm.score(new, scaled)["theta"], cbmm.score(new, fit)["theta"],
                               atol=1e-8)
    with pytest.raises(ValueError, match="sigma=1 contradicts the calibration's sigma=2"):
        cbmm.score(new, table, sigma=1.0)


def test_a_record_without_a_model_id_is_named_not_dropped():
    records = pd.DataFrame({"model": ["a", "a", None, "b"], "item": ["q0", "q1", "q0", "q1"],
                            "correct": [1, 0, 1, 1]})
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q1"])
    with pytest.raises(ValueError, match=r"1 record\(s\) without a model id, first at row 2$"):
        cbmm.score(records, items)
    # numpy's integer labels as numbers, not np.int64(2); repeated labels by position
    with pytest.raises(ValueError, match=r"first at row 2$"):
        cbmm.score(records.set_axis(np.arange(4, dtype=np.int64)), items)
    with pytest.raises(ValueError, match=r"first at record 2 \(counted from 0\)$"):
        cbmm.score(records.set_axis([0, 1, 0, 1]), items)
    # a blank id is no id (it was named as a row of the table pivoted from the records)
    with pytest.raises(ValueError, match=r"1 record\(s\) without an item id, first at row 1$"):
        cbmm.score(records.assign(model="a", item=["q0", " ", "q1", "q0"]), items)


def test_a_repeated_answer_names_both_records_and_whether_they_agree():
    """A weekly long table with a record twice (tables concatenated: repeated index labels)
    names both, by position, and says whether the answers agree."""
    records = pd.DataFrame({"model": ["a", "a", "b", "b"], "item": ["q0", "q1", "q0", "q1"],
                            "correct": [1, 0, 1, 1]})
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q1"])
    same = pd.concat([records, records.iloc[[2]]])
    with pytest.raises(ValueError, match=r"model 'b' answers item 'q0' more than once, at "
                                         r"records 2 and 4 \(counted from 0\) \(the same "
                                         r"answer; 1 repeated record"):
        cbmm.score(same, items)
    other = pd.concat([records, records.iloc[[1]].assign(correct=1)], ignore_index=True)
    with pytest.raises(ValueError, match=r"item 'q1' more than once, at rows 1 and 4 "
                                         r"\(answers 0, 1;"):
        cbmm.score(other, items)


def test_a_long_table_with_another_answer_column_is_told_its_columns(tmp_path, capsys):
    records = pd.DataFrame({"model": ["a", "b"], "item": ["q0", "q1"], "score": [1, 0]})
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q1"])
    with pytest.raises(ValueError, match=r"a long table\? its columns are model, item and "
                                         r"correct: rename the answers' column"):
        cbmm.score(records, items)
    # the command reads the file's first column as the models' labels
    from cbmm.cli import main

    records.to_csv(tmp_path / "week.csv", index=False)
    items.rename_axis("item").to_csv(tmp_path / "items.csv")
    assert main(["score", "--responses", str(tmp_path / "week.csv"), "--items",
                 str(tmp_path / "items.csv"), "--out", str(tmp_path / "s.csv")]) == 2
    assert "a long table? its columns are model, item and correct" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"\['q9'\]; drop them: cbmm.score holds the "
                                         r"calibrated items fixed"):
        cbmm.score(pd.DataFrame({"q0": [1.0], "q9": [0.0]}), items)


def test_an_error_after_unanswered_rows_names_the_right_row():
    frame = pd.DataFrame([[np.nan, np.nan], [np.nan, np.nan], [1, 0], [1, 7]],
                         index=["m0", "m1", "m2", "m3"], columns=["q0", "q1"])
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q1"])
    with pytest.raises(ValueError, match=r"value 7.0 at row 3 \('m3'\), column 1 \('q1'\)"):
        cbmm.score(frame, items)


def test_rows_stop_once_newton_no_longer_moves_them():
    """A Newton step below the float resolution of the ability is convergence: the rows
    that reached it were bisected down to the float resolution instead (about 40
    iterations per row on 2,000 items, where 15 do)."""
    sim = simulate(120, 2000, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cbmm.fit(sim.responses[:60], max_iter=200)
    few = cbmm.score(sim.responses[60:], fit, max_iter=15)
    assert (few["status"] == "converged").all(), few["status"].value_counts()
    np.testing.assert_allclose(few["theta"], cbmm.score(sim.responses[60:], fit)["theta"],
                               rtol=0, atol=1e-12)


def test_a_transposed_matrix_is_named_as_such():
    items = pd.DataFrame({"a": [1.0, 1.0, 1.0], "b": [0.0, 0.0, 0.0]}, index=["q0", "q1", "q2"])
    frame = pd.DataFrame([[1, 0, 1], [0, 1, 1], [1, 1, 0]], columns=items.index,
                         index=["m", "n", "o"])
    with pytest.raises(ValueError, match=r"3 item column\(s\) not among the calibrated items: "
                                         r"\['m', 'n', 'o'\]; its rows are, mostly: transpose"):
        cbmm.score(frame.T, items)
    # columns that are not items, rows that are not either: the usual advice
    with pytest.raises(ValueError, match=r"\['x'\]; drop them: cbmm.score holds the calibrated"):
        cbmm.score(frame.rename(columns={"q0": "x"}), items)


def test_population_prior_of_a_joint_fit_is_the_normal_posterior_mean():
    """A calibration that estimated no population: prior="population" is the posterior mean
    and sd under N(0, 1), checked by numerical integration."""
    from scipy import integrate, stats

    items = pd.DataFrame({"a": [1.3, 0.7, 2.0], "b": [-0.4, 0.9, 0.1]}, index=["i", "j", "k"])
    answers = pd.DataFrame({"i": [1, 1], "j": [0, np.nan], "k": [0, 1]}, index=["m", "n"])
    with pytest.warns(UserWarning, match="items: a table of items without the calibration's "
                                         r"population .*N\(0, 1\) here"):
        scores = cbmm.score(answers, items, prior="population")
    for model, row in answers.iterrows():
        seen = row.notna().to_numpy()
        x = row.to_numpy()[seen]

        def likelihood(t, x=x, seen=seen):
            p = 1 / (1 + np.exp(-(items["a"].to_numpy()[seen] * t + items["b"].to_numpy()[seen])))
            return stats.norm.pdf(t) * np.prod(np.where(x > 0, p, 1 - p))

        mass = integrate.quad(likelihood, -12, 12)[0]
        mean = integrate.quad(lambda t: t * likelihood(t), -12, 12)[0] / mass
        second = integrate.quad(lambda t: t * t * likelihood(t), -12, 12)[0] / mass
        assert scores.loc[model, "theta"] == pytest.approx(mean, abs=1e-3)
        assert scores.loc[model, "se"] == pytest.approx(np.sqrt(second - mean ** 2), abs=1e-3)
    assert list(scores["status"]) == ["converged", "all correct"]


def test_a_column_that_is_no_item_is_named_as_such_before_its_values():
    """A user's trial: a 'rank' column (0..4) beside the items failed on its values
    ('value 2 at ... column 'rank''), and a long table's unknown item id was called a
    column."""
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.0]}, index=["q0", "q1"])
    frame = pd.DataFrame({"q0": [1, 0, 1, 0, 1], "q1": [0, 1, 1, 0, 0], "rank": range(5)},
                         index=[f"m{i}" for i in range(5)])
    with pytest.raises(ValueError, match=r"^responses: 1 item column\(s\) not among the "
                                         r"calibrated items: \['rank'\]; drop them"):
        cbmm.score(frame, items)
    log = pd.DataFrame({"model": ["m", "m", "n"], "item": ["q0", "zz", "q1"],
                        "correct": [1, 0, 1]})
    with pytest.raises(ValueError, match=r"^responses: 1 item id\(s\) not among the calibrated "
                                         r"items: \['zz'\]"):
        cbmm.score(log, items)
    pd.testing.assert_frame_equal(cbmm.score(frame.drop(columns="rank"), items),
                                  cbmm.score(frame[["q1", "q0"]], items))


def test_a_fits_record_for_its_items_names_the_folder_to_give(tmp_path):
    """fit.json read as a CSV said 'line 2: 2 fields, expected 1 (as in the header)'."""
    answers = simulate(30, 8, seed=3).responses
    cbmm.fit(answers).save(tmp_path / "fit")
    with pytest.raises(ValueError, match=f"fit.json: a fit's record, not its items; give the "
                                         f"fit's folder {tmp_path / 'fit'}"):
        cbmm.score(answers[:2], tmp_path / "fit" / "fit.json")


@pytest.mark.parametrize("prior", ["none", "normal"])
def test_the_calibrations_item_error_by_finite_differences(prior):
    """``se_calibration``: the delta method's sum over items of (d theta / d a_j)^2 a_se_j^2
    + (d theta / d b_j)^2 b_se_j^2, each derivative taken by rescoring with one item's a or b
    moved, and ``se`` the items-fixed one with it in quadrature."""
    rng = np.random.default_rng(8)
    j, sigma = 25, 1.3
    a, b = rng.uniform(0.2, 2.0, j), rng.normal(0, 1, j)
    a_se, b_se = rng.uniform(0.05, 0.3, j), rng.uniform(0.05, 0.3, j)
    a_se[4] = np.nan  # no standard error (a held at 0, say): adds nothing
    items = pd.DataFrame({"a": a, "b": b, "a_se": a_se, "b_se": b_se},
                         index=[f"i{k}" for k in range(j)])
    answers = (rng.random((4, j)) < 0.55).astype(float)
    answers[1, 15:] = np.nan
    responses = pd.DataFrame(answers, columns=items.index)
    got = cbmm.score(responses, items, sigma=sigma, prior=prior)
    fixed = cbmm.score(responses, items, sigma=sigma, prior=prior, item_error=False)
    h = 1e-5
    variance = np.zeros(len(responses))
    for k in range(j):
        for column, se in (("a", a_se[k]), ("b", b_se[k])):
            moved = [items.copy(), items.copy()]
            moved[0].iloc[k, items.columns.get_loc(column)] += h
            moved[1].iloc[k, items.columns.get_loc(column)] -= h
            up, down = (cbmm.score(responses, m, sigma=sigma, prior=prior)["theta"]
                        for m in moved)
            variance += np.nan_to_num(((up - down) / (2 * h)).to_numpy() ** 2 * se ** 2)
    np.testing.assert_allclose(got["se_calibration"], np.sqrt(variance), rtol=1e-5)
    np.testing.assert_allclose(got["se"] ** 2, fixed["se"] ** 2 + variance, rtol=1e-5)
    np.testing.assert_array_equal(got["theta"], fixed["theta"])
    assert fixed["se_calibration"].isna().all()


def test_the_item_error_is_read_wherever_the_calibration_is_given(tmp_path):
    """A fit with standard errors carries them to score as its FitResult, its items_frame(),
    its saved folder and that folder's items.csv; a fit without them holds the items fixed,
    and a calibration of few models says its intervals fall short."""
    sim = simulate(170, 30, seed=2)
    new = sim.responses[150:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cbmm.fit(sim.responses[:150], se=True)
    fit.save(tmp_path / "fit")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 150 models, item error carried: no warning
        want = cbmm.score(new, fit)
        for given in (fit.items_frame(), tmp_path / "fit", tmp_path / "fit" / "items.csv"):
            pd.testing.assert_frame_equal(cbmm.score(new, given), want, check_exact=False,
                                          rtol=1e-12)
    assert (want["se_calibration"] > 0).all()
    with pytest.warns(cbmm.IntervalWarning, match="150 models .* item_error=False holds "
                                                  "them fixed"):
        fixed = cbmm.score(new, fit, item_error=False)
    assert fixed["se_calibration"].isna().all() and (fixed["se"] < want["se"]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare = cbmm.fit(sim.responses[:150])
    with pytest.warns(cbmm.IntervalWarning, match="it has no standard errors: fit it with "
                                                  "se=True"):
        cbmm.score(new, bare)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        few = cbmm.fit(sim.responses[:50], se=True)
    with pytest.warns(cbmm.IntervalWarning, match="50 models and fewer than 80 models"):
        cbmm.score(new, few)


def test_a_model_answering_many_items_per_calibration_model_is_warned_of():
    """With the item error carried, 90 calibration models and new models answering 400
    items (more than 4 per calibration model) still fall short: said; 300 items are not."""
    sim = simulate(100, 400, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cbmm.fit(pd.DataFrame(sim.responses[:90]), se=True)
    new = pd.DataFrame(sim.responses[90:])
    with pytest.warns(cbmm.IntervalWarning, match="a scored model answered 400 items, more "
                                                  "than 4 per calibration model"):
        cbmm.score(new, fit)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cbmm.score(new.iloc[:, :300], fit)


def test_an_item_known_not_at_all_makes_the_standard_error_infinite():
    """a_se = inf (a hand-made table): the models that answered it get se = inf (it added
    nothing before, a smaller se than a_se = 1e6 gave); the others keep a finite one."""
    items = pd.DataFrame({"a": [1.0, 1.2, 0.8], "b": [0.0, 0.5, -0.5],
                          "a_se": [0.1, np.inf, 0.1], "b_se": [0.1, 0.1, 0.1]},
                         index=["x", "y", "z"])
    answers = pd.DataFrame({"x": [1.0, 1.0], "y": [0.0, np.nan], "z": [0.0, 0.0]})
    got = cbmm.score(answers, items)
    assert np.isinf(got["se"].iloc[0]) and np.isinf(got["se_calibration"].iloc[0])
    assert np.isfinite(got["se"].iloc[1])


def test_an_unlabelled_responses_object_is_one_column_per_item():
    sim = simulate(120, 15, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cbmm.fit(sim.responses[:100])
        for storage in ("dense", "sparse"):
            got = cbmm.score(cbmm.as_responses(sim.responses[100:], storage=storage), fit)
            pd.testing.assert_frame_equal(got, cbmm.score(sim.responses[100:], fit))


def test_a_negative_standard_error_of_an_item_is_named():
    items = pd.DataFrame({"a": [1.0, 1.0], "b": [0.0, 0.5], "a_se": [0.1, -0.2],
                          "b_se": [0.1, 0.1]}, index=["x", "y"])
    with pytest.raises(ValueError, match=r"item 'y' has a_se=-0.2; a standard error is >= 0"):
        cbmm.score(pd.DataFrame([[1.0, 0.0]], columns=["x", "y"]), items)


@pytest.mark.parametrize("prior", ["none", "normal"])
def test_answered_cells_alone_give_the_whole_rows_scores(prior, monkeypatch):
    """Where few cells are answered the Newton passes read those cells alone: the same
    abilities, standard errors and statuses as the passes over whole rows (models that
    answered all alike, or nothing, included)."""
    import sys

    module = sys.modules["cbmm.score"]
    rng = np.random.default_rng(11)
    n, j = 300, 200
    items = pd.DataFrame({"a": rng.uniform(0.0, 2.0, j), "b": rng.normal(0, 1, j)},
                         index=[f"q{k}" for k in range(j)])
    answers = (rng.random((n, j)) < 0.5).astype(float)
    answers[rng.random((n, j)) < 0.8] = np.nan
    answers[0] = np.where(np.isnan(answers[0]), np.nan, 1.0)  # all correct
    answers[1] = np.nan  # nothing answered
    responses = pd.DataFrame(answers, columns=items.index)
    scored = {}
    for share in (0.0, 1.1):  # never, and always, by cells
        monkeypatch.setattr(module, "_CELLS_BELOW", share)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scored[share] = cbmm.score(responses, items, prior=prior)
    pd.testing.assert_series_equal(scored[0.0]["status"], scored[1.1]["status"])
    for column in ("theta", "se"):
        np.testing.assert_allclose(scored[1.1][column], scored[0.0][column], rtol=1e-9,
                                   atol=1e-9)
