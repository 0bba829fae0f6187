"""``cbmm select | predict | adaptive | audit``: the efficient-evaluation commands, called
in this process through ``cbmm.cli.main`` (tests/test_cli.py covers the process
boundary), against the library functions they wrap."""

import logging

import numpy as np
import pandas as pd
import pytest

import cbmm
from cbmm.cli import main
from cbmm.efficient import item_list
from cbmm.efficient.cli import TARGET_GRID
from cbmm.efficient.refit import refit_like
from cbmm.simulate import simulate


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A fit of 300 simulated models (``fit/``) and the answers of 40 more (``new.csv``)."""
    folder = tmp_path_factory.mktemp("efficient_cli")
    sim = simulate(340, 60, seed=3)
    table = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(340)],
                         columns=[f"q{j}" for j in range(60)])
    table.iloc[:300].to_csv(folder / "calibration.csv")
    table.iloc[300:].to_csv(folder / "new.csv")
    assert main(["fit", "--responses", str(folder / "calibration.csv"),
                 "--out", str(folder / "fit")]) == 0
    return folder, table


def call(capsys, *args):
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def test_select_writes_the_items_select_items_chooses(calibrated, capsys, tmp_path):
    folder, _ = calibrated
    status, out, _ = call(capsys, "select", "--items", folder / "fit", "--k", 12,
                          "--strategy", "anchor", "--seed", 4, "--out", tmp_path / "keep.csv")
    assert status == 0 and "selected 12 item(s) (anchor)" in out
    expected = cbmm.select_items(cbmm.FitResult.load(folder / "fit"), 12, "anchor", seed=4)
    assert list(pd.read_csv(tmp_path / "keep.csv")["item"]) == list(expected)
    # items.csv alone: no calibration abilities, N(0, 1) stands for them
    status, _, _ = call(capsys, "select", "--items", folder / "fit" / "items.csv", "--k", 5,
                        "--strategy", "information", "--out", tmp_path / "five.csv")
    assert status == 0
    expected = cbmm.select_items(folder / "fit" / "items.csv", 5, "information")
    assert list(pd.read_csv(tmp_path / "five.csv")["item"]) == list(expected)
    # predictive: chosen on the calibration models' answers
    status, out, _ = call(capsys, "select", "--items", folder / "fit", "--k", 7, "--strategy",
                          "predictive", "--responses", folder / "calibration.csv",
                          "--out", tmp_path / "seven.csv")
    assert status == 0 and "selected 7 item(s) (predictive)" in out
    calibration = pd.read_csv(folder / "calibration.csv", index_col=0)
    expected = cbmm.select_items(folder / "fit", 7, "predictive", responses=calibration)
    assert list(pd.read_csv(tmp_path / "seven.csv")["item"]) == list(expected)
    # and the accuracy of new models from those items, the width cross-validated
    new = pd.read_csv(folder / "new.csv", index_col=0)[expected]
    new.to_csv(tmp_path / "answers.csv")
    status, _, _ = call(capsys, "predict", "--responses", tmp_path / "answers.csv", "--items",
                        folder / "fit", "--reference", folder / "calibration.csv",
                        "--selection", "predictive", "--out", tmp_path / "accuracy.csv")
    written = pd.read_csv(tmp_path / "accuracy.csv", index_col="model")
    predicted = cbmm.predict_accuracy(new, cbmm.FitResult.load(folder / "fit"),
                                      reference=calibration, selection="predictive")
    assert status == 0
    pd.testing.assert_frame_equal(written, predicted, check_names=False, rtol=1e-12)


def test_select_for_a_target_error_keeps_the_fewest_items_the_cross_validation_allows(
        calibrated, capsys, caplog, tmp_path):
    folder, _ = calibrated
    fit = cbmm.FitResult.load(folder / "fit")
    calibration = pd.read_csv(folder / "calibration.csv", index_col=0)
    ks = [k for k in TARGET_GRID if k < 60]
    assert ks == [5, 10, 15, 20, 25, 30, 40, 50]
    for strategy in ("predictive", "stratified"):  # the library's default, the folds refitted
        curve = cbmm.selection_error(fit, calibration, ks, strategy)
        pd.testing.assert_frame_equal(curve, cbmm.selection_error(
            fit, calibration, ks, strategy, refit=refit_like(fit)))
        # a target between the errors of 20 and 25 items (or of whichever k the curve
        # first falls below it at): the fewest items that meet it
        target = (curve.loc[20, "mae"] + curve.loc[25, "mae"]) / 2
        expected_k = int(curve.index[curve["mae"] <= target][0])
        status, out, _ = call(capsys, "select", "--items", folder / "fit", "--target-mae",
                              target, "--strategy", strategy, "--responses",
                              folder / "calibration.csv", "--out", tmp_path / f"{strategy}.csv")
        assert status == 0, out
        assert (f"{expected_k} items: cross-validated MAE {curve.loc[expected_k, 'mae']:.4f} "
                f"(se {curve.loc[expected_k, 'mae_se']:.4f})") in out
        assert "cross-validated on the 300 models" in out and f"selected {expected_k} item(s)" in out
        # a seeded strategy's curve is over several draws per fold, and says so
        assert ("5 draws per fold" in out) == (strategy == "stratified")
        expected = cbmm.select_items(fit, expected_k, strategy, responses=(
            calibration if strategy == "predictive" else None))
        assert list(pd.read_csv(tmp_path / f"{strategy}.csv")["item"]) == list(expected)
    # as many as --draws asks for: the library's curve with that many
    curve = cbmm.selection_error(fit, calibration, [10, 20], "random", refit=refit_like(fit),
                                 draws=2)
    assert curve.loc[10, "mae"] > curve.loc[20, "mae"]  # so both are measured and printed
    status, out, _ = call(capsys, "select", "--items", folder / "fit", "--target-mae",
                          curve.loc[20, "mae"], "--ks", "10,20", "--strategy", "random",
                          "--draws", 2, "--responses", folder / "calibration.csv", "--out",
                          tmp_path / "random.csv")
    assert status == 0 and "(random, 2 draws per fold)" in out
    printed = {int(row[0]): float(row[1]) for row in map(str.split, out.splitlines())
               if len(row) == 5 and row[0].isdigit()}
    assert printed == {k: round(curve.loc[k, "mae"], 4) for k in (10, 20)}
    # --verbose logs each k's row as it is measured (the curve's own figures)
    with caplog.at_level(logging.INFO, logger="cbmm"):
        status, _, _ = call(capsys, "select", "--items", folder / "fit", "--target-mae",
                            curve.loc[20, "mae"], "--ks", "10,20", "--strategy", "random",
                            "--draws", 2, "--responses", folder / "calibration.csv",
                            "--out", tmp_path / "random.csv", "--force", "--verbose")
    assert status == 0
    assert [r.getMessage().rsplit(", ", 1)[0] for r in caplog.records
            if r.getMessage().startswith("selection_error:")] == [
        f"selection_error: k = {k}: MAE {curve.loc[k, 'mae']:.4f} (se "
        f"{curve.loc[k, 'mae_se']:.4f})" for k in (10, 20)]
    # items chosen on the fit are chosen again on its refits: the fit folder, not items.csv
    status, _, err = call(capsys, "select", "--items", folder / "fit" / "items.csv",
                          "--target-mae", 0.05, "--responses", folder / "calibration.csv",
                          "--out", tmp_path / "none.csv")
    assert status == 2 and "--items must be the `cbmm fit` folder" in err
    assert not (tmp_path / "none.csv").exists()


def test_select_for_a_target_error_measures_more_items_only_where_fewer_miss(capsys, tmp_path):
    # 130 items: --ks 20,120 is measured up to 100 items first, then on
    sim = simulate(200, 130, seed=8)
    table = pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(200)],
                         columns=[f"q{j}" for j in range(130)])
    table.to_csv(tmp_path / "calibration.csv")
    assert main(["fit", "--responses", str(tmp_path / "calibration.csv"),
                 "--out", str(tmp_path / "fit")]) == 0
    capsys.readouterr()
    curve = cbmm.selection_error(cbmm.FitResult.load(tmp_path / "fit"), table, [20, 120],
                                 "predictive", refit=True)
    assert curve.loc[120, "mae"] < curve.loc[20, "mae"]
    for target, measured in ((curve.loc[20, "mae"] + 1e-6, [20]),
                             ((curve.loc[20, "mae"] + curve.loc[120, "mae"]) / 2, [20, 120])):
        status, out, _ = call(capsys, "select", "--items", tmp_path / "fit", "--target-mae",
                              target, "--ks", "120,20", "--strategy", "predictive",
                              "--responses", tmp_path / "calibration.csv", "--out",
                              tmp_path / "keep.csv", "--force")
        assert status == 0
        rows = [line.split() for line in out.splitlines()]
        printed = {int(row[0]): float(row[1]) for row in rows  # k, mae, mae_se, rmse, q90
                   if len(row) == 5 and row[0].isdigit()}
        assert printed == {k: round(curve.loc[k, "mae"], 4) for k in measured}
        assert f"selected {measured[-1]} item(s)" in out


def test_predict_and_audit_write_what_the_library_returns(calibrated, capsys, tmp_path):
    folder, table = calibrated
    subset = table.iloc[300:, :20]
    subset.to_csv(tmp_path / "subset.csv")
    status, out, _ = call(capsys, "predict", "--responses", tmp_path / "subset.csv", "--items",
                          folder / "fit", "--out", tmp_path / "accuracy.csv")
    assert status == 0 and "40 model(s) from 20-20 answered item(s)" in out
    assert "answered no calibrated item" not in out
    written = pd.read_csv(tmp_path / "accuracy.csv", index_col="model")
    expected = cbmm.predict_accuracy(subset, cbmm.FitResult.load(folder / "fit"))
    pd.testing.assert_frame_equal(written, expected, check_names=False, rtol=1e-12)
    status, out, _ = call(capsys, "predict", "--responses", tmp_path / "subset.csv", "--items",
                          folder / "fit", "--reference", folder / "calibration.csv",
                          "--out", tmp_path / "corrected.csv")
    assert status == 0
    written = pd.read_csv(tmp_path / "corrected.csv", index_col="model")
    expected = cbmm.predict_accuracy(subset, cbmm.FitResult.load(folder / "fit"),
                                     reference=table.iloc[:300])
    pd.testing.assert_frame_equal(written, expected, check_names=False, rtol=1e-12)
    # a model that answered nothing: the calibration's prediction, and a note saying so
    blank = subset.copy()
    blank.iloc[:2] = np.nan
    blank.to_csv(tmp_path / "two_blank.csv")
    status, out, _ = call(capsys, "predict", "--responses", tmp_path / "two_blank.csv",
                          "--items", folder / "fit", "--out", tmp_path / "blank.csv")
    assert status == 0 and "2 model(s) answered no calibrated item" in out
    status, out, _ = call(capsys, "audit", "--responses", folder / "calibration.csv",
                          "--items", folder / "fit", "--out", tmp_path / "audit.csv",
                          "--figure", tmp_path / "audit.png")
    assert status == 0 and "audited 60 item(s)" in out
    audit = pd.read_csv(tmp_path / "audit.csv", index_col="item", keep_default_na=False)
    assert list(audit.columns[-12:]) == [*cbmm.efficient.FLAGS, "key_checked",
                                         "ability_rank_correlation",
                                         "implied_rank_correlation", "wrong_way_dependence",
                                         "ordinary_dependence", "shared_z", "shared_bound",
                                         "reason"]
    # the benchmark's checks, on every row and in the command's output
    library = cbmm.item_audit(folder / "fit", table.iloc[:300])
    checked = int(library["key_checked"].sum())
    assert audit["key_checked"].sum() == checked
    assert f"The answers could show a wrong key on {checked} of 60 items" in out
    agreement = cbmm.efficient.ability_agreement(folder / "fit", table.iloc[:300])
    assert agreement == library.attrs["ability_agreement"]
    assert (audit["ability_rank_correlation"] == agreement.observed).all()
    assert (audit["implied_rank_correlation"] == agreement.implied).all()
    dependence = library.attrs["wrong_way_dependence"]
    for column, value in [("wrong_way_dependence", dependence.observed),
                          ("ordinary_dependence", dependence.ordinary)]:  # NaN: empty
        np.testing.assert_array_equal(pd.to_numeric(audit[column], errors="coerce"), value)
    assert "T" + str(agreement)[1:] in out and "T" + str(dependence)[1:] in out
    assert (tmp_path / "audit.png").read_bytes()[:4] == b"\x89PNG"


def test_adaptive_answers_from_the_file_and_only_what_it_holds(calibrated, capsys, tmp_path):
    folder, table = calibrated
    answers = table.iloc[300:310].copy()
    answers.iloc[0, 30:] = np.nan  # the first model answered only 30 items
    answers.iloc[1, 3:] = np.nan  # and the second 3: too few for the SE target
    answers.to_csv(tmp_path / "answers.csv")
    status, out, _ = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                          "--items", folder / "fit", "--se-target", 0.3, "--max-items", 40,
                          "--max-exposure", 0.5, "--out", tmp_path / "tests.csv")
    assert status == 0 and "tested 10 model(s) adaptively" in out
    tests = pd.read_csv(tmp_path / "tests.csv", index_col="model")
    first = item_list(tests.loc["m300", "items"])
    assert set(first) <= set(table.columns[:30])
    assert (tests["n_items"] <= 40).all() and set(tests["stop"]) <= set(cbmm.efficient.
                                                                        adaptive.STOPS)
    given = pd.Series([i for row in tests["items"] for i in item_list(row)]).value_counts()
    assert given.max() <= 5  # at most half of the 10 tests
    assert tests.loc["m301", "n_items"] == 3 and tests.loc["m301", "stop"] == "no item left"
    short = int((tests["stop"] == "no item left").sum())
    assert f"{short} test(s) ran out of items before the SE target" in out


def test_adaptive_with_a_reference_scales_the_intervals_as_the_library_does(calibrated, capsys,
                                                                          tmp_path):
    folder, table = calibrated
    args = ["adaptive", "--responses", folder / "new.csv", "--items", folder / "fit",
            "--se-target", 0.3, "--max-items", 20, "--seed", 2]
    status, _, _ = call(capsys, *args, "--out", tmp_path / "plain.csv")
    assert status == 0
    status, out, _ = call(capsys, *args, "--reference", folder / "calibration.csv",
                          "--out", tmp_path / "scaled.csv")
    scale = cbmm.adaptive_interval_scale(
        folder / "fit", table.iloc[:300], refit=refit_like(folder / "fit"), seed=2,
        se_target=0.3, max_items=20)
    assert status == 0 and f"interval scale {scale:.3f}" in out
    plain = pd.read_csv(tmp_path / "plain.csv", index_col="model")
    scaled = pd.read_csv(tmp_path / "scaled.csv", index_col="model")
    pd.testing.assert_frame_equal(plain.drop(columns=["lower", "upper"]),
                                  scaled.drop(columns=["lower", "upper"]))
    # the library's test of each model, answered from the file, with that scale
    draws = np.random.default_rng(2)
    for model, answers in table.iloc[300:].iterrows():
        test = cbmm.adaptive_test(lambda item: answers[item], folder / "fit", se_target=0.3,
                                  max_items=20, seed=draws, interval_scale=scale)
        assert test.items == item_list(scaled.loc[model, "items"])
        np.testing.assert_allclose([test.lower, test.upper],
                                   scaled.loc[model, ["lower", "upper"]].astype(float),
                                   atol=1e-12)
    # the file's tests share a cap: so do the reference's, at the same rate
    status, out, _ = call(capsys, *args, "--reference", folder / "calibration.csv",
                          "--max-exposure", 0.2, "--out", tmp_path / "capped.csv")
    capped = cbmm.adaptive_interval_scale(
        folder / "fit", table.iloc[:300], refit=refit_like(folder / "fit"), seed=2,
        max_exposure=0.2, se_target=0.3, max_items=20)
    assert status == 0 and f"interval scale {capped:.3f}" in out and capped != scale
    # the items alone record no fit to refit as
    items = folder / "fit" / "items.csv"
    status, _, err = call(capsys, *args[:3], "--items", items, "--reference",
                          folder / "calibration.csv", "--out", tmp_path / "no.csv")
    assert status == 2 and err == ("error: --reference refits the calibration without each "
                                   "fifth of its models, as it was fitted: --items must be "
                                   f"the `cbmm fit` folder, not {items}\n")
    assert not (tmp_path / "no.csv").exists()


def test_adaptive_tests_of_a_file_draw_anew_for_each_model(calibrated, capsys, tmp_path):
    # ten models with the same answers: one seed, one stream, so not ten equal tests
    folder, table = calibrated
    answers = pd.concat([table.iloc[[300]]] * 10)
    answers.index = [f"copy{i}" for i in range(10)]
    answers.to_csv(tmp_path / "answers.csv")
    outputs = []
    for name in ("first.csv", "again.csv"):
        status, _, _ = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                            "--items", folder / "fit", "--max-items", 10, "--seed", 4,
                            "--out", tmp_path / name)
        assert status == 0
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
    tests = pd.read_csv(tmp_path / "first.csv", index_col="model")
    assert tests["items"].map(lambda row: item_list(row)[0]).nunique() > 1
    # without the progressive start's draws and with one candidate nothing is random
    status, _, _ = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                        "--items", folder / "fit", "--max-items", 10, "--seed", 4,
                        "--progressive", 0, "--candidates", 1, "--out", tmp_path / "plain.csv")
    assert status == 0
    plain = pd.read_csv(tmp_path / "plain.csv", index_col="model")
    assert plain["items"].nunique() == 1


@pytest.mark.parametrize("answered,per_test", [(60, 6), (20, 2)])
def test_adaptive_tests_of_a_file_share_a_binding_exposure_cap(calibrated, capsys, tmp_path,
                                                               answered, per_test):
    """10 models under a 10 % cap, each item in at most 1 test: the items the file answers
    shared out, to the last test. A file answering 20 of the 60 calibrated items gives 2
    each: its share was taken over the 60 (6 per test), so that the first tests took them
    all and the last ones gave none, written as results of the prior alone."""
    folder, table = calibrated
    table.iloc[300:310, :answered].to_csv(tmp_path / "answers.csv")
    status, out, _ = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                          "--items", folder / "fit", "--se-target", 0.01,
                          "--max-exposure", 0.1, "--out", tmp_path / "tests.csv")
    tests = pd.read_csv(tmp_path / "tests.csv", index_col="model")
    assert status == 0 and tests["n_items"].eq(per_test).all()
    assert tests["stop"].eq("exposure share").all()
    assert "10 test(s) stopped before the SE target at their share of the items " \
           "--max-exposure 0.1 leaves for the file's 10 models" in out
    given = [item for row in tests["items"] for item in item_list(row)]
    assert sorted(given) == sorted(table.columns[:answered].astype(str))  # each item once
    # below --min-items (5) it says so, counting the file's items
    assert (f"an exposure cap of 0.1 over {answered} items and 10 tests allows {per_test} "
            "items" in out) == (per_test < 5)


def test_adaptive_says_when_the_exposure_cap_allows_fewer_items_than_min_items(calibrated,
                                                                               capsys, tmp_path):
    """A 10 % cap on a 30-item bank (AIME24) stopped every test at 3 items, below
    min_items, without a word: 60 items at 5 % over 40 tests allow 3 (two uses each)."""
    folder, table = calibrated
    table.iloc[300:340].to_csv(tmp_path / "answers.csv")
    status, out, _ = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                          "--items", folder / "fit", "--se-target", 0.01,
                          "--max-exposure", 0.05, "--out", tmp_path / "tests.csv")
    assert status == 0 and pd.read_csv(tmp_path / "tests.csv")["n_items"].max() <= 3
    assert ("--max-exposure: an exposure cap of 0.05 over 60 items and 40 tests allows 3 "
            "items per test, fewer than --min-items 5: the tests stop at their share (stop "
            "'exposure share') short of the SE target; a cap of 0.1 allows 5") in out
    status, out, _ = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                          "--items", folder / "fit", "--se-target", 0.01, "--min-items", 3,
                          "--max-exposure", 0.05, "--out", tmp_path / "tests3.csv")
    assert status == 0 and "allows" not in out


def test_adaptive_balances_each_test_over_the_areas_of_a_content_file(calibrated, capsys,
                                                                         tmp_path):
    folder, table = calibrated
    table.iloc[300:320].to_csv(tmp_path / "answers.csv")
    areas = pd.DataFrame({"item": table.columns, "level": range(60),
                          "subject": ["algebra"] * 15 + ["geometry"] * 45})
    areas.to_csv(tmp_path / "content.csv", index=False)
    status, _, err = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                          "--items", folder / "fit", "--content", tmp_path / "content.csv",
                          "--out", tmp_path / "tests.csv")
    assert status == 2 and "name the column of content areas with --content-column " \
                           "(one of ['level', 'subject'])" in err
    status, _, err = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                          "--items", folder / "fit", "--content", tmp_path / "content.csv",
                          "--content-column", "item", "--out", tmp_path / "tests.csv")
    assert status == 2 and "--content-column item: the column of " in err \
        and "item ids, not of their content areas (those columns: ['level', 'subject'])" in err
    status, _, _ = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                        "--items", folder / "fit", "--content", tmp_path / "content.csv",
                        "--content-column", "subject", "--se-target", 0.25,
                        "--out", tmp_path / "tests.csv")
    assert status == 0
    subject = areas.set_index("item")["subject"]
    for given in pd.read_csv(tmp_path / "tests.csv")["items"].map(item_list):
        algebra = int((subject[given] == "algebra").sum())
        assert len(given) / 4 - 1 < algebra < len(given) / 4 + 1  # a quarter of the items
    areas.iloc[:50].to_csv(tmp_path / "part.csv", index=False)
    status, _, err = call(capsys, "adaptive", "--responses", tmp_path / "answers.csv",
                          "--items", folder / "fit", "--content", tmp_path / "part.csv",
                          "--content-column", "subject", "--out", tmp_path / "part_tests.csv")
    assert status == 2 and f"--content {tmp_path / 'part.csv'}: 10 calibrated item(s) " \
                           "without a content area: ['q50', 'q51'" in err
    assert not (tmp_path / "part_tests.csv").exists()


@pytest.mark.parametrize("args,message", [
    (["select", "--k", "61"], "--k 61: the calibration has 60 items"),
    (["select", "--k", "0"], "--k: expected an integer >= 1"),
    (["select", "--k", "5", "--strategy", "predictive"],
     "--responses (the calibration models' answers) is needed by --strategy predictive"),
    (["select", "--k", "5", "--responses", "new.csv"], "and --target-mae, and read by nothing "
                                                       "else"),
    (["select", "--target-mae", "0.02"], "--target-mae measures the items' error on the "
                                         "calibration models' answers: give them, --responses"),
    (["select", "--k", "5", "--target-mae", "0.02"], "not allowed with argument"),
    (["select", "--k", "5", "--ks", "10"], "--ks lists the numbers of items --target-mae tries"),
    (["select", "--k", "5", "--verbose"], "--verbose logs --target-mae's cross-validation"),
    (["select", "--target-mae", "0.02", "--ks", "0,5", "--responses", "calibration.csv"],
     "--ks: expected comma-separated integers >= 1, got '0,5'"),
    (["select", "--k", "5", "--draws", "2"], "--draws is the draws per fold of "
                                             "--target-mae's cross-validation: give --target-mae"),
    (["select", "--target-mae", "0.02", "--draws", "2", "--strategy", "predictive",
      "--responses", "calibration.csv"], "a strategy whose items depend on the seed "
                                         "(stratified, random, anchor), not --strategy "
                                         "predictive"),
    (["select", "--target-mae", "0.02", "--draws", "0", "--responses", "calibration.csv"],
     "--draws: expected an integer >= 1"),
    (["select", "--target-mae", "0.02", "--ks", "10,60", "--responses", "calibration.csv"],
     "--ks 60: the calibration has 60 items, and --target-mae measures fewer"),
    (["select", "--target-mae", "0.02", "--strategy", "predictive", "--responses", "few.csv"],
     "--responses few.csv: 10 model(s) answered at least 95% of the calibrated items; the "
     "cross-validated curve (its folds predicted as with a reference for 0.95 intervals) "
     "needs at least 19"),
    (["select", "--target-mae", "0.0001", "--ks", "5,10", "--strategy", "predictive",
      "--responses", "calibration.csv"],
     "--target-mae 0.0001: none of the 2 numbers of items tried meets it (the least MAE, "),
    (["select", "--k", "5", "--strategy", "predictive", "--responses", "nope.csv"],
     "--responses nope.csv: no such file"),
    (["predict", "--responses", "nope.csv"], "--responses nope.csv: no such file"),
    (["predict", "--responses", "new.csv", "--reference", "nope.csv"],
     "--reference nope.csv: no such file"),
    (["predict", "--responses", "new.csv", "--reference", "new.csv"],
     "--responses and --reference name the same file"),
    (["predict", "--responses", "new.csv", "--selection", "predictive"],
     "--selection says how the items were chosen on --reference's answers"),
    (["audit", "--responses", "calibration.csv", "--figure", "map.txt"],
     "--figure map.txt: expected a file name ending in .pdf, .png, .svg"),
    (["audit", "--responses", "calibration.csv", "--figure", "map"],
     "--figure map: expected a file name ending in"),
    (["adaptive", "--responses", "new.csv", "--max-items", "0"],
     "--max-items: expected an integer >= 1"),
    (["adaptive", "--responses", "new.csv", "--progressive", "-1"],
     "--progressive: expected an integer >= 0"),
    (["adaptive", "--responses", "new.csv", "--content-column", "subject"],
     "--content-column names a column of --content: give --content"),
    (["adaptive", "--responses", "new.csv", "--content", "calibration.csv"],
     "--content calibration.csv: expected a column item and a column of content areas"),
    (["adaptive", "--responses", "new.csv", "--reference", "new.csv"],
     "--responses and --reference name the same file"),
    (["adaptive", "--responses", "new.csv", "--reference", "nope.csv"],
     "--reference nope.csv: no such file"),
    (["adaptive", "--responses", "new.csv", "--reference", "few.csv"],
     "--reference few.csv: 10 model(s) answered at least 95% of the calibrated items; a "
     "0.95 interval needs at least 19"),
    (["predict", "--responses", "new.csv", "--reference", "all.csv"],
     "--reference all.csv: 40 of the models predicted are among its models, with the same "
     "answers (m300, m301, m302 and 37 more)"),
    (["adaptive", "--responses", "new.csv", "--reference", "all.csv"],
     "--reference all.csv: 40 of the models predicted are among its models"),
    (["audit", "--responses", "calibration.csv", "--figure", "/proc/cbmm-map.png"],
     "--figure /proc/cbmm-map.png: cannot write into /proc"),
    (["predict", "--responses", "trailing.csv"],
     "trailing.csv: item column 61 has no header (a comma at the end of each line?)"),
    # the calibration's own models, too few: the error alone, not the in-sample warning first
    (["predict", "--responses", "new.csv", "--reference", "few.csv"],
     "--reference few.csv: 10 model(s) answered at least 95% of the calibrated items; a "
     "0.95 interval needs at least 19"),
    # a file of which no model answered a calibrated item: refused, as audit refuses it
    (["predict", "--responses", "blank.csv"],
     "--responses blank.csv: no model answered any calibrated item of --items fit"),
    (["adaptive", "--responses", "blank.csv"],
     "--responses blank.csv: no model answered any calibrated item of --items fit"),
    (["score", "--responses", "blank.csv"],
     "--responses blank.csv: no model answered any calibrated item of --items fit"),
    (["audit", "--responses", "blank.csv"],
     "--responses blank.csv: no model answered any calibrated item"),
])
def test_bad_input_is_one_line_naming_the_argument(calibrated, capsys, monkeypatch, tmp_path,
                                                   args, message):
    folder, table = calibrated
    monkeypatch.chdir(folder)
    table.iloc[:10].to_csv(folder / "few.csv")
    table.to_csv(folder / "all.csv")
    table.iloc[300:].assign(**{" ": np.nan}).to_csv(folder / "trailing.csv")
    (table.iloc[300:] * np.nan).to_csv(folder / "blank.csv")
    status, _, err = call(capsys, *args, "--items", "fit", "--out", tmp_path / "out.csv")
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("name,message", [
    ("accuracy.parquet", "this command writes a CSV table; name the file .csv (not .parquet)"),
    ("audit.png", "this command writes a CSV table; name the file .csv (not .png)"),
    ("a" * 300 + ".csv", "File name too long"),
])
def test_an_output_that_cannot_be_written_as_named_is_refused_first(calibrated, capsys,
                                                                   tmp_path, name, message):
    folder, _ = calibrated
    for command in (["predict", "--responses", folder / "new.csv"],
                    ["audit", "--responses", folder / "new.csv"], ["select", "--k", 3]):
        status, _, err = call(capsys, *command, "--items", folder / "fit",
                              "--out", tmp_path / name)
        assert status == 2 and err.startswith(f"error: --out {tmp_path / name}: ")
        assert message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_an_existing_output_is_kept_without_force(calibrated, capsys, tmp_path):
    folder, _ = calibrated
    (tmp_path / "keep.csv").write_text("mine\n")
    status, _, err = call(capsys, "select", "--items", folder / "fit", "--k", 3,
                          "--out", tmp_path / "keep.csv")
    assert status == 2 and "exists; pass --force" in err
    assert (tmp_path / "keep.csv").read_text() == "mine\n"


def test_an_output_never_replaces_an_input_nor_a_file_of_the_fit(calibrated, capsys,
                                                                  monkeypatch, tmp_path):
    folder, _ = calibrated
    monkeypatch.chdir(folder)
    saved = {path.name: path.read_bytes() for path in (folder / "fit").iterdir()}
    new = (folder / "new.csv").read_bytes()
    (tmp_path / "sub").mkdir()
    status, _, err = call(capsys, "predict", "--responses", "new.csv", "--items", "fit",
                          "--out", tmp_path / "sub" / ".." / ".." / folder.name / "new.csv",
                          "--force")
    assert status == 2 and "--responses and --out name the same file" in err
    for command in (["select", "--k", 3], ["audit", "--responses", "calibration.csv"]):
        status, _, err = call(capsys, *command, "--items", "fit", "--out", "fit/items.csv",
                              "--force")
        assert status == 2 and "--out fit/items.csv: inside the folder --items fit" in err
    status, _, err = call(capsys, "audit", "--responses", "calibration.csv", "--items", "fit",
                          "--out", tmp_path / "audit.csv", "--figure", "fit/audit.png")
    assert status == 2 and "--figure fit/audit.png: inside the folder --items fit" in err
    assert {path.name: path.read_bytes() for path in (folder / "fit").iterdir()} == saved
    assert (folder / "new.csv").read_bytes() == new and not (tmp_path / "audit.csv").exists()


def test_errors_in_the_answers_name_the_file_and_its_line(calibrated, capsys, tmp_path):
    folder, table = calibrated
    (tmp_path / "long.csv").write_text("model,item,correct\nm300,q0,1\nm300,q1,2\n")
    status, _, err = call(capsys, "predict", "--responses", tmp_path / "long.csv", "--items",
                          folder / "fit", "--out", tmp_path / "out.csv")
    assert status == 2 and err.startswith(
        f"error: --responses {tmp_path / 'long.csv'}: value 2 at line 3 (model 'm300', "
        "item 'q1'); expected")
    # a reference of models that skipped items shows no error where they skipped
    table.iloc[:40, :50].to_csv(tmp_path / "part.csv")
    status, _, err = call(capsys, "predict", "--responses", folder / "new.csv", "--items",
                          folder / "fit", "--reference", tmp_path / "part.csv",
                          "--out", tmp_path / "out.csv")
    assert status == 2 and f"--reference {tmp_path / 'part.csv'}: 0 model(s) answered " \
                           "at least 95% of the calibrated items (40 other(s) skipped more" in err
    assert not (tmp_path / "out.csv").exists()


def test_predict_cross_validates_items_chosen_on_the_fit_by_refitting_it(calibrated, capsys,
                                                                         tmp_path):
    folder, table = calibrated
    chosen = cbmm.select_items(cbmm.FitResult.load(folder / "fit"), 10, "information")
    table.iloc[300:][chosen].to_csv(tmp_path / "answers.csv")
    status, _, _ = call(capsys, "predict", "--responses", tmp_path / "answers.csv", "--items",
                        folder / "fit", "--reference", folder / "calibration.csv",
                        "--selection", "information", "--out", tmp_path / "accuracy.csv")
    assert status == 0
    expected = cbmm.predict_accuracy(table.iloc[300:][chosen], folder / "fit",
                                     reference=table.iloc[:300], selection="information",
                                     refit=True)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "accuracy.csv", index_col="model"),
                                  expected, check_names=False, rtol=1e-12)
    # the saved fit's settings refit its own data to the same parameters
    saved = cbmm.FitResult.load(folder / "fit")
    again = refit_like(folder / "fit")(table.iloc[:300])
    np.testing.assert_allclose(again.a.to_numpy(), saved.a.to_numpy(), rtol=1e-9)
    status, _, err = call(capsys, "predict", "--responses", tmp_path / "answers.csv",
                          "--items", folder / "fit" / "items.csv", "--reference",
                          folder / "calibration.csv", "--selection", "information",
                          "--out", tmp_path / "again.csv")
    assert status == 2 and "--items must be the `cbmm fit` folder" in err
    assert not (tmp_path / "again.csv").exists()
    # a model that answered none of the items: nothing chosen on the folds either, and the
    # interval at least the jackknife's
    blank = table.iloc[300:][chosen].copy()
    blank.iloc[0] = np.nan
    widest = cbmm.predict_accuracy(blank, folder / "fit", reference=table.iloc[:300],
                                   selection="information", refit=True).iloc[0]
    jackknife = cbmm.predict_accuracy(blank, folder / "fit", reference=table.iloc[:300]).iloc[0]
    assert widest["n_items"] == 0 and widest["accuracy"] == jackknife["accuracy"]
    assert widest["lower"] <= jackknife["lower"] and widest["upper"] >= jackknife["upper"]


def test_a_bare_items_csv_is_read_at_the_temperature_sigma_says(calibrated, capsys, tmp_path):
    """A user's trial: an items.csv of a sigma=2 fit, copied out of its folder, was read at
    temperature 1 without a word (accuracies off by up to 0.037); --sigma reads it at its
    fit's, and contradicting a fit folder's own is refused."""
    folder, table = calibrated
    assert main(["fit", "--responses", str(folder / "calibration.csv"), "--sigma", "2",
                 "--out", str(tmp_path / "fit2")]) == 0
    (tmp_path / "bare.csv").write_bytes((tmp_path / "fit2" / "items.csv").read_bytes())
    subset = table.iloc[300:, :20]
    subset.to_csv(tmp_path / "subset.csv")
    fitted = cbmm.FitResult.load(tmp_path / "fit2")
    expected = cbmm.predict_accuracy(subset, fitted.items_frame())  # attrs: sigma 2
    for items, sigma, out in ((tmp_path / "bare.csv", ["--sigma", "2"], "bare2.csv"),
                              (tmp_path / "bare.csv", [], "bare1.csv")):
        status, _, err = call(capsys, "predict", "--responses", tmp_path / "subset.csv",
                              "--items", items, *sigma, "--out", tmp_path / out)
        assert status == 0, err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "bare2.csv", index_col="model"),
                                  expected, check_names=False, rtol=1e-12)
    at_one = pd.read_csv(tmp_path / "bare1.csv", index_col="model")
    assert (at_one["accuracy"] - expected["accuracy"]).abs().max() > 1e-3  # another scale
    status, _, err = call(capsys, "audit", "--responses", tmp_path / "subset.csv", "--items",
                          tmp_path / "fit2", "--sigma", "1", "--out", tmp_path / "a.csv")
    assert status == 2 and "--sigma 1 contradicts the calibration's sigma=2" in err
    assert not (tmp_path / "a.csv").exists()
    # its fit.json for the folder: read as a CSV, it was 'line 2: 2 fields, expected 1'
    status, _, err = call(capsys, "predict", "--responses", tmp_path / "subset.csv", "--items",
                          tmp_path / "fit2" / "fit.json", "--out", tmp_path / "a.csv")
    assert status == 2 and f"a fit's record, not its items; give the fit's folder " \
        f"{tmp_path / 'fit2'}" in err
