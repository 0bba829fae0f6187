"""``cbmm select|predict|adaptive|audit``: efficient evaluation from the command line.

:func:`register` adds the commands to the main parser (:mod:`cbmm.cli`), whose rules
they follow: every argument, input and output path is checked before any work, outputs
are written atomically, existing ones kept unless ``--force``, errors are one line with
exit status 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._cli_common import (
    CliError,
    _check_input_file,
    _check_output_file,
    _check_some_answered,
    _declared,
    _distinct,
    _file_path,
    _files_named,
    _integer,
    _number,
    _outside,
    _path,
    _read_responses,
)

__all__ = ["register"]


def _integers(text: str) -> list:
    """``--ks``: comma-separated integers >= 1, in ascending order."""
    try:
        values = sorted({int(part) for part in text.split(",")})
    except ValueError:
        values = []
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 1, got "
                                          f"{text!r}")
    return values


def _calibration(path: Path, sigma: float | None):
    """The calibration of ``--items``: a ``cbmm fit`` output folder (its FitResult, with the
    calibration models' abilities), or an ``items.csv``, at temperature ``sigma`` (a fit's
    own; a bare items.csv has none: ``--sigma``, default 1); returns the bank the commands
    read and the FitResult (None for an ``items.csv``), read once, which the refits of
    ``--selection`` and ``--reference`` copy (:func:`~cbmm.efficient.refit.refit_like`)."""
    import dataclasses
    import math

    from ..result import FitResult, is_saved_fit
    from ..score import read_items
    from .bank import ItemBank

    if is_saved_fit(path):
        _, fitted, where = read_items(path)  # bad item parameters are named before the rest
        if sigma is not None and not math.isclose(sigma, fitted):
            raise CliError(f"--sigma {sigma:g} contradicts the calibration's sigma={fitted:g} "
                           f"({where}); leave it out: a fit's folder carries its own")
        result = FitResult.load(path)
        return ItemBank.of(result), result  # as ItemBank.of(path), read once
    _check_input_file(path / "items.csv" if path.is_dir() else path, "--items")
    bank = ItemBank.of(path)
    return (bank if sigma is None else dataclasses.replace(bank, sigma=sigma)), None


#: The numbers of items ``cbmm select --target-mae`` tries, those below the bank's size.
TARGET_GRID = (5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100, 125, 150, 175, 200, 250,
               300, 350, 400, 500, 600, 700, 800, 1000, 1250, 1500, 2000, 2500, 3000, 4000,
               5000)


def _select_command(args) -> int:
    import pandas as pd

    from ..io import write_csv
    from .refit import refit_like
    from .selection import SEEDED_STRATEGIES, select_items

    _check_output_file(args.out, "--out", args.force, csv=True)
    target = args.target_mae is not None
    if target and args.responses is None:
        raise CliError("--target-mae measures the items' error on the calibration models' "
                       "answers: give them, --responses")
    if not target and (args.responses is None) == (args.strategy == "predictive"):
        raise CliError("--responses (the calibration models' answers) is needed by "
                       "--strategy predictive and --target-mae, and read by nothing else")
    if args.ks is not None and not target:
        raise CliError("--ks lists the numbers of items --target-mae tries: give --target-mae")
    if args.draws is not None and not target:
        raise CliError("--draws is the draws per fold of --target-mae's cross-validation: "
                       "give --target-mae")
    if args.verbose and not target:
        raise CliError("--verbose logs --target-mae's cross-validation: give --target-mae")
    if args.draws is not None and args.strategy not in SEEDED_STRATEGIES:
        raise CliError("--draws is the draws per fold of --target-mae's cross-validation for "
                       "a strategy whose items depend on the seed "
                       f"({', '.join(SEEDED_STRATEGIES)})"
                       f", not --strategy {args.strategy}")
    _distinct(("--items", args.items), ("--out", args.out), ("--responses", args.responses))
    _outside("--items", args.items, ("--out", args.out))
    calibration, fitted = _calibration(args.items, args.sigma)
    if args.k is not None and args.k > len(calibration):
        raise CliError(f"--k {args.k}: the calibration has {len(calibration)} items")
    if target and args.strategy != "predictive" and fitted is None:
        raise CliError(f"--target-mae with --strategy {args.strategy} chooses the items "
                       "again on the calibration refitted without each fold of "
                       "--responses, as it was fitted: --items must be the `cbmm fit` "
                       f"folder, not {args.items}")
    # each fold predicted by a calibration that did not see it, where the fit says how
    refit = refit_like(fitted) if target and fitted is not None else None
    responses = None if args.responses is None else _read_responses(args)
    with _files_named(args, "--responses"):
        k = args.k if not target else _items_for_target(calibration, responses, refit, args)
        chosen = select_items(calibration, k, args.strategy, seed=args.seed,
                              responses=responses if args.strategy == "predictive" else None,
                              coding=args.coding, layout=args.layout)
    write_csv(pd.DataFrame({"item": chosen}), args.out)
    print(f"selected {len(chosen)} item(s) ({args.strategy}) -> {args.out}")
    return 0


def _items_for_target(calibration, responses, refit, args) -> int:
    """The fewest items of ``--ks`` (or :data:`TARGET_GRID`) whose cross-validated MAE
    (:func:`~cbmm.efficient.prediction.selection_error` on ``--responses``) is at most
    ``--target-mae``; prints the curve, as far as it was measured."""
    from .prediction import REFERENCE_ANSWERED, SELECTION_DRAWS, selection_error
    from .selection import SEEDED_STRATEGIES

    n_items = len(calibration)
    if args.ks is not None:
        too_many = [k for k in args.ks if k >= n_items]
        if too_many:
            raise CliError(f"--ks {too_many[0]}: the calibration has {n_items} items, and "
                           "--target-mae measures fewer")
        ks = args.ks
    else:
        ks = [k for k in TARGET_GRID if k < n_items]
        if not ks:
            raise CliError(f"--target-mae: the calibration has {n_items} items, fewer than "
                           f"the smallest number tried ({TARGET_GRID[0]}); give --ks")
    draws = args.draws or SELECTION_DRAWS
    try:
        curve = selection_error(calibration, responses, ks, args.strategy, refit=refit,
                                until=args.target_mae, draws=draws, coding=args.coding,
                                layout=args.layout, verbose=args.verbose)
    except ValueError as exc:  # --responses is the reference here
        message = str(exc)
        if message.startswith("reference: "):
            raise CliError(f"--responses {args.responses}: "
                           f"{message.removeprefix('reference: ')}") from None
        raise
    described = f", {draws} draws per fold" if args.strategy in SEEDED_STRATEGIES else ""
    print(f"MAE of the predicted accuracy from k items ({args.strategy}{described}), "
          f"cross-validated on the {int(curve['n_models'].iloc[0])} models of "
          f"{args.responses} that answered {REFERENCE_ANSWERED}:")
    print(curve.drop(columns="n_models").round(4).to_string())
    meeting = curve.index[curve["mae"] <= args.target_mae]
    if not len(meeting):
        best = curve["mae"].idxmin()
        raise CliError(f"--target-mae {args.target_mae:g}: none of the {len(curve)} numbers "
                       f"of items tried meets it (the least MAE, {curve.loc[best, 'mae']:.4f}, "
                       f"at {best} of {n_items} items)")
    print(f"{meeting[0]} items: cross-validated MAE {curve.loc[meeting[0], 'mae']:.4f} "
          f"(se {curve.loc[meeting[0], 'mae_se']:.4f}) <= {args.target_mae:g}")
    return int(meeting[0])


def _predict_command(args) -> int:
    from ..io import write_csv
    from .prediction import predict_accuracy

    _check_output_file(args.out, "--out", args.force, csv=True)
    _distinct(("--responses", args.responses), ("--items", args.items), ("--out", args.out),
              ("--reference", args.reference))
    _outside("--items", args.items, ("--out", args.out))
    if args.selection is not None and args.reference is None:
        raise CliError("--selection says how the items were chosen on --reference's "
                       "answers: give --reference")
    calibration, fitted = _calibration(args.items, args.sigma)
    # chosen on the fit: refitted without each fold as the fit records (predict_accuracy's
    # default, which refits predictive's folds too where there is a fit)
    if args.selection not in (None, "predictive") and fitted is None:
        raise CliError(f"--selection {args.selection} refits the calibration without "
                       "each fold of --reference, as it was fitted: --items must be "
                       f"the `cbmm fit` folder, not {args.items}")
    table = _read_responses(args)
    reference = None if args.reference is None else _read_responses(args, "--reference")
    with _files_named(args, "--responses", "--reference"):
        # the fit, where there is one: its models' labels tell a reference of its own
        predicted = predict_accuracy(table, calibration if fitted is None else fitted,
                                     reference=reference, selection=args.selection,
                                     level=args.level, coding=args.coding,
                                     layout=args.layout)
    _check_some_answered(args, int((predicted["n_items"] > 0).sum()))
    write_csv(predicted.reset_index(), args.out, float_format="%.17g")
    print(f"predicted the accuracy of {len(predicted)} model(s) from "
          f"{predicted['n_items'].min()}-{predicted['n_items'].max()} answered item(s) "
          f"-> {args.out}")
    blank = int((predicted["n_items"] == 0).sum())
    if blank:
        print(f"{blank} model(s) answered no calibrated item: predicted from the calibration "
              "alone (n_items 0, the widest intervals)")
    return 0


def _content(path: Path, column: str | None):
    """``--content``: a CSV with a column ``item`` and the items' content areas in
    ``column`` (or in its only other column), as a Series item -> area."""
    import pandas as pd

    _check_input_file(path, "--content")
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CliError(f"--content {path}: not a readable CSV ({exc})") from None
    others = [name for name in table.columns if name != "item"]
    if "item" not in table.columns or not others:
        found = list(table.columns[:5]) + (["..."] if len(table.columns) > 5 else [])
        raise CliError(f"--content {path}: expected a column item and a column of content "
                       f"areas; found {found}")
    if column is None:
        if len(others) > 1:
            raise CliError(f"--content {path}: name the column of content areas with "
                           f"--content-column (one of {others})")
        column = others[0]
    elif column == "item":
        raise CliError(f"--content-column item: the column of {path}'s item ids, not of their "
                       f"content areas (those columns: {others})")
    elif column not in others:
        raise CliError(f"--content-column {column}: not a column of {path} (it has "
                       f"{others})")
    empty = table.index[table[column].str.strip() == ""]
    if empty.size:
        raise CliError(f"--content {path}, row {empty[0] + 2}: item {table['item'][empty[0]]} "
                       f"has no {column}")
    return table.set_index("item")[column]


def _adaptive_command(args) -> int:
    import numpy as np
    import pandas as pd

    from ..io import write_csv
    from .adaptive import (ItemExposure, _areas, adaptive_interval_scale, item_list_text,
                           replayed_test, tight_exposure)
    from .bank import aligned_answers
    from .prediction import check_not_in_reference, reference_answers
    from .refit import refit_like

    _check_output_file(args.out, "--out", args.force, csv=True)
    _distinct(("--responses", args.responses), ("--items", args.items), ("--out", args.out),
              ("--content", args.content), ("--reference", args.reference))
    _outside("--items", args.items, ("--out", args.out))
    if args.content_column is not None and args.content is None:
        raise CliError("--content-column names a column of --content: give --content")
    bank, fitted = _calibration(args.items, args.sigma)  # its grid computed once for all the tests
    if args.reference is not None and fitted is None:
        raise CliError("--reference refits the calibration without each fifth of its models, "
                       f"as it was fitted: --items must be the `cbmm fit` folder, not "
                       f"{args.items}")
    content = None
    if args.content is not None:
        content = _content(args.content, args.content_column)
        try:
            _areas(bank, content)  # every calibrated item has an area, before any test
        except ValueError as exc:
            raise CliError(f"--content {args.content}: "
                           f"{str(exc).removeprefix('content: ')}") from None
        other = content.index[~content.index.isin(bank.labels)]
        if other.size:
            print(f"--content {args.content}: {other.size} item(s) not among the calibrated "
                  f"items, ignored: {list(other[:5])}")
    table = _read_responses(args)
    with _files_named(args, "--responses"):
        answers, labels = aligned_answers(table, bank, coding=args.coding, layout=args.layout)
    _check_some_answered(args, int((answers != 0).any(axis=1).sum()))
    options = {"se_target": args.se_target, "max_items": args.max_items,
               "min_items": args.min_items, "candidates": args.candidates,
               "progressive": args.progressive, "content": content}
    scale = 1.0
    if args.reference is not None:
        reference = _read_responses(args, "--reference")
        with _files_named(args, "--reference"):
            check_not_in_reference(answers, labels, *reference_answers(
                reference, bank, args.coding, args.layout))
            scale = adaptive_interval_scale(
                bank, reference, refit=refit_like(fitted), seed=args.seed,
                max_exposure=args.max_exposure, coding=args.coding, layout=args.layout,
                **options)
        print(f"interval scale {scale:.3f}: the 95% intervals of --reference's models' own "
              "tests, replayed against the calibration refitted without each fifth of them, "
              "held their accuracy at this multiple of the 2PL's width")
    held = bank.labels[(answers != 0).any(axis=0)]  # the tests' items: the file's
    exposure = None if args.max_exposure is None \
        else ItemExposure(args.max_exposure, len(labels), items=held)
    tight = None if exposure is None else tight_exposure(exposure, held, args.min_items)
    if tight:  # before the tests: the first one shows it
        print(f"--max-exposure: {tight.replace('min_items', '--min-items')}")
    draws = np.random.default_rng(args.seed)  # one stream: each model's test draws anew
    rows = []
    for row, model in zip(answers, labels):
        test = replayed_test(row, bank, exposure=exposure, seed=draws, interval_scale=scale,
                             **options)
        rows.append({"model": model, "theta": test.theta, "se": test.se,
                     "n_items": len(test.items), "accuracy": test.accuracy,
                     "lower": test.lower, "upper": test.upper, "stop": test.stop,
                     "items": item_list_text(test.items)})
    write_csv(pd.DataFrame(rows), args.out, float_format="%.17g")
    used = sum(r["n_items"] for r in rows) / len(rows)
    print(f"tested {len(rows)} model(s) adaptively, {used:.1f} items on average -> {args.out}")
    short = sum(r["stop"] == "no item left" for r in rows)
    if short:
        print(f"{short} test(s) ran out of items before the SE target (column stop: the "
              "file's answers for the model" + (", or the items --max-exposure allows,"
                                                if exposure is not None else "")
              + " were all given)")
    shared = sum(r["stop"] == "exposure share" for r in rows)
    if shared:
        print(f"{shared} test(s) stopped before the SE target at their share of the items "
              f"--max-exposure {args.max_exposure:g} leaves for the file's "
              f"{len(rows)} models (column stop)")
    return 0


def _audit_command(args) -> int:
    from ..io import atomic_paths
    from .audit import FLAGS, item_audit, key_check_summary

    _check_output_file(args.out, "--out", args.force, csv=True)
    if args.figure is not None:
        from ..figures.style import FIGURE_FORMATS

        _check_output_file(args.figure, "--figure", args.force)
        if args.figure.suffix.lower() not in FIGURE_FORMATS:
            raise CliError(f"--figure {args.figure}: expected a file name ending in "
                           f"{', '.join(FIGURE_FORMATS)}")
    _distinct(("--responses", args.responses), ("--items", args.items), ("--out", args.out),
              ("--figure", args.figure))
    _outside("--items", args.items, ("--out", args.out), ("--figure", args.figure))
    calibration, _ = _calibration(args.items, args.sigma)
    responses = _read_responses(args)
    with _files_named(args, "--responses"):
        table = item_audit(calibration, responses, coding=args.coding, layout=args.layout)
    outputs = [args.out] + ([args.figure] if args.figure is not None else [])
    with atomic_paths(outputs) as temporaries:  # both files or neither
        table.reset_index().to_csv(temporaries[0], index=False, float_format="%.17g")
        if args.figure is not None:
            from ..figures.item_audit import plot_item_audit

            plot_item_audit(table.reset_index(), out_paths=[temporaries[1]])
    counts = ", ".join(f"{int(table[flag].sum())} {flag}" for flag in FLAGS)
    print(f"audited {len(table)} item(s): {counts} -> {args.out}")
    summary = key_check_summary(table)
    print(summary[0].upper() + summary[1:])
    for check in ("ability_agreement", "wrong_way_dependence"):
        line = str(table.attrs[check])
        print(line[0].upper() + line[1:])
    return 0


def register(sub, add_input) -> None:
    """Add ``select``, ``predict``, ``adaptive`` and ``audit`` to the subparsers ``sub``;
    ``add_input`` adds ``--responses``, ``--coding`` and ``--layout``."""
    from ..api import FIT_OPTIONS
    from .adaptive import ADAPTIVE_DEFAULTS as DEFAULT
    from .prediction import SELECTION_DRAWS
    from .selection import SEEDED_STRATEGIES, STRATEGIES

    def add_items(command):
        command.add_argument("--items", required=True, type=_path,
                             help="the calibration: the output folder of `cbmm fit` (with the "
                                  "calibration models' abilities) or an items.csv (without "
                                  "them: N(0, 1) stands for the models' abilities)")
        command.add_argument("--sigma", type=_declared("sigma", FIT_OPTIONS["sigma"]),
                             help="the temperature of a bare items.csv's fit (its fit.json's "
                                  "sigma; default 1: a and b are read as they are); a fit's "
                                  "folder carries its own")
        command.add_argument("--out", required=True, type=_file_path, help="output CSV")
        command.add_argument("--force", action="store_true", help="replace an existing output")

    select = sub.add_parser("select", help="the k items to keep of a calibrated benchmark",
                            description="Choose k calibrated items (see cbmm.select_items) "
                                        "and write them, one per row, as a CSV column item. "
                                        "--strategy predictive chooses them on the "
                                        "calibration models' answers, --responses. "
                                        "--target-mae instead of --k: the fewest items that "
                                        "predict accuracy within it, cross-validated on "
                                        "--responses.")
    add_input(select, required=False)
    add_items(select)
    how_many = select.add_mutually_exclusive_group(required=True)
    how_many.add_argument("--k", type=_integer(1), help="items to keep")
    how_many.add_argument("--target-mae", type=_number(0.0, 1.0),
                          help="keep the fewest items whose predicted accuracy misses by at "
                               "most this on average (MAE), cross-validated on the "
                               "calibration models' answers, --responses (see "
                               "cbmm.selection_error: each fold predicted by the fit folder's "
                               "calibration refitted without it; --items may be an items.csv "
                               "with --strategy predictive, then not refitted); prints the "
                               "error per number of items")
    select.add_argument("--ks", type=_integers,
                        help="with --target-mae: the numbers of items to try, comma-separated "
                             f"(default {', '.join(map(str, TARGET_GRID[:8]))}, ..., "
                             f"{TARGET_GRID[-1]}, those below the calibration's items)")
    select.add_argument("--draws", type=_integer(1),
                        help="with --target-mae and a strategy whose items depend on the "
                             f"seed ({', '.join(SEEDED_STRATEGIES)}): the draws of them per fold "
                             f"(default {SELECTION_DRAWS}; each costs what the first does)")
    select.add_argument("--verbose", action="store_true",
                        help="with --target-mae: log each number of items' error as it is "
                             "measured, to stderr (minutes on a bank of thousands of items)")
    select.add_argument("--strategy", choices=STRATEGIES, default=STRATEGIES[0],
                        help=f"how to choose them (default {STRATEGIES[0]})")
    select.add_argument("--seed", type=_integer(0), default=0, help="seed (default 0)")
    select.set_defaults(handler=_select_command)

    predict = sub.add_parser("predict", help="full-benchmark accuracy of models that answered "
                                             "some of the calibrated items",
                             description="Predict the accuracy over all calibrated items of "
                                         "each model in --responses (see "
                                         "cbmm.predict_accuracy).  Writes model, accuracy, "
                                         "lower, upper, n_items, theta, se.")
    add_input(predict)
    add_items(predict)
    predict.add_argument("--level", type=_number(0.0, 1.0), default=0.95,
                         help="coverage of the interval (default 0.95)")
    predict.add_argument("--reference", type=_path,
                         help="answers of the calibration models (or others of known "
                              "accuracy, never those predicted), in --responses' format: "
                              "correct the prediction by what it misses on them (those that "
                              "answered at least 95%% of the calibrated items; at least 19 "
                              "for a 95%% interval)")
    predict.add_argument("--selection", choices=STRATEGIES,
                         help="the `cbmm select --strategy` that chose the items, on "
                              "--reference's answers (predictive) or on their fit (the "
                              "others, --items the fit folder); where --items is the fit "
                              "folder, its calibration is refitted without each fold: "
                              "cross-validate the interval's width (kept where wider than "
                              "the jackknife's)")
    predict.set_defaults(handler=_predict_command)

    adaptive = sub.add_parser("adaptive", help="adaptive tests answered from a file",
                              description="Give each model of --responses an adaptive test "
                                          "(see cbmm.adaptive_test) whose answers are read "
                                          "from the file (only items it answered are asked). "
                                          "Writes model, theta, se, n_items, accuracy, lower, "
                                          "upper, stop and the items given.")
    add_input(adaptive)
    add_items(adaptive)
    adaptive.add_argument("--se-target", type=_number(0.0), default=DEFAULT["se_target"],
                          help="stop once the ability's standard error is at most this "
                               f"(default {DEFAULT['se_target']})")
    adaptive.add_argument("--max-items", type=_integer(1), default=DEFAULT["max_items"],
                          help=f"items at most (default {DEFAULT['max_items']}, or all of a "
                               "smaller calibration)")
    adaptive.add_argument("--min-items", type=_integer(1), default=DEFAULT["min_items"],
                          help="items at least before the SE stop (default "
                               f"{DEFAULT['min_items']}; --max-items or more: tests of "
                               "--max-items items)")
    adaptive.add_argument("--candidates", type=_integer(1), default=DEFAULT["candidates"],
                          help="the next item is drawn among this many of the highest "
                               f"score (default {DEFAULT['candidates']})")
    adaptive.add_argument("--progressive", type=_integer(0), default=DEFAULT["progressive"],
                          help="items over which the score moves from random to the "
                               "posterior-averaged information; 0: information from the "
                               f"first item (default {DEFAULT['progressive']})")
    adaptive.add_argument("--max-exposure", type=_number(0.0, 1.0, high_open=False),
                          help="share of the file's models that may be given one item "
                               "(default: no exposure control)")
    adaptive.add_argument("--content", type=_path,
                          help="a CSV of the items' content areas (columns item and the "
                               "area, e.g. subject): balance each test over the areas in "
                               "their shares of the calibrated items")
    adaptive.add_argument("--content-column",
                          help="the column of --content that holds the areas (needed when "
                               "it has more than one besides item)")
    adaptive.add_argument("--reference", type=_path,
                          help="answers of the calibration models (or others of known "
                               "accuracy), in --responses' format, --items the `cbmm fit` "
                               "folder: scale the accuracy's intervals so that they hold on "
                               "these models' own tests (cbmm.adaptive_interval_scale; five "
                               "refits; with --max-exposure those tests share a cap of the "
                               "same rate)")
    adaptive.add_argument("--seed", type=_integer(0), default=0,
                          help="seed of the draws among the candidates, one stream for the "
                               "file's models in order (default 0)")
    adaptive.set_defaults(handler=_adaptive_command)

    audit = sub.add_parser("audit", help="flag items that are not identified, uninformative, "
                                         "reversed or out of range",
                           description="Audit the calibrated items on the models of "
                                       "--responses (see cbmm.item_audit): a CSV with one row "
                                       "per item, its information, the flags and the reason.")
    add_input(audit)
    add_items(audit)
    audit.add_argument("--figure", type=_file_path,
                       help="also draw the item information map (.pdf, .png or .svg)")
    audit.set_defaults(handler=_audit_command)
