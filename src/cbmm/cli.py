"""Command line: ``cbmm fit|bootstrap|validate|score|select|predict|adaptive|audit|simulate|
methods|data ...`` (also ``python -m cbmm``).

Every command checks all its arguments, its inputs and its output paths
before it computes anything, and writes its outputs atomically at the end
(all or nothing).  Existing outputs are replaced only with ``--force``.

Exit status: 0 success; 1 a fit that ran and failed (its failed result is
written) or an internal error; 2 bad input.  Errors are one line on stderr,
never a traceback (``CBMM_DEBUG=1`` shows the traceback of an error).
Warnings are one line each (``warning: ...``).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np
import pandas as pd

from ._cli_common import (
    _PATH_ERRORS,
    CliError,
    _check_input_file,
    _check_output_file,
    _check_output_folder,
    _check_some_answered,
    _declared,
    _distinct,
    _file_path,
    _files_named,
    _integer,
    _number,
    _outside,
    _Parser,
    _path,
    _read_responses,
    add_reading_options,
    interrupted,
    noting_interrupts,
)

__all__ = ["main", "build_parser", "CliError"]

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_AN_ANSWER = 3  # `fit --strict`: written, but its status is not "converged"


# ------------------------------------------------------------------------ commands

def _method_options(method, pairs) -> dict:
    """``--option KEY=VALUE`` pairs parsed with the method's declared option types."""
    options = {}
    for pair in pairs or []:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"--option {pair!r}: expected KEY=VALUE")
        if key in options:
            raise CliError(f"--option {key}: given twice; give each option once")
        if key not in method.options:
            known = ", ".join(sorted(method.options)) or "none"
            raise CliError(f"--option {key}: method {method.name!r} has no such option; "
                           f"its options are: {known} (see cbmm methods)")
        try:
            options[key] = method.options[key].parse(key, text)
        except ValueError as exc:
            raise CliError(f"--option {pair}: {exc}") from None
    return method.check_options(options)


def _checked_method(args) -> dict:
    """The options of ``--method`` from ``--option`` pairs, once its software is found."""
    from .registry import get_method

    method = get_method(args.method)
    options = _method_options(method, args.option)
    method.availability()
    return options


def _responses(args):
    """``--responses`` read and validated (:func:`cbmm.as_responses`), refused as fit refuses
    answers that cannot tell the models apart, but naming the file (fit's says
    "responses")."""
    from .responses import as_responses, no_information

    data = as_responses(_read_responses(args), coding=args.coding, layout=args.layout,
                        source=str(args.responses))
    reason = no_information(data, args.coding)
    if reason:
        raise CliError(f"{args.responses}: {reason}")
    return data


def _save_folder(result, args) -> None:
    """``result.save`` into ``--out`` (checked before the computation)."""
    try:
        result.save(args.out, replace=args.force)
    except FileExistsError as exc:  # another run wrote there since the check
        raise CliError(f"--out {args.out}: {exc.strerror}, written by another run meanwhile; "
                       "pass --force to replace it") from None


def _worker_settings(args) -> dict:
    """``timeout_s`` and ``isolate`` of :func:`cbmm.fit` from --timeout and --no-isolate."""
    if not args.isolate and args.timeout not in ("auto", None):
        raise CliError("--timeout needs the worker process; drop it or --no-isolate")
    return {"timeout_s": args.timeout if args.isolate else None, "isolate": args.isolate}


def _fit_command(args) -> int:
    import cbmm

    worker = _worker_settings(args)
    options = _checked_method(args)
    _check_output_folder(args.out, cbmm.FitResult.OUTPUT_FILES, "--out", args.force,
                         foreign=_other_files(cbmm.FitResult.OUTPUT_FILES))
    _not_overwritten(args, cbmm.FitResult.OUTPUT_FILES)
    result = cbmm.fit(_responses(args), method=args.method, **fit_settings(args), **worker,
                      verbose=args.verbose, **options)
    _save_folder(result, args)
    print(f"{result.method}: {result.status} ({result.n_iter} iterations, "
          f"loss {result.loss:.6g}, {result.runtime_s:.3f} s) -> {args.out}")
    if result.failed:
        return EXIT_FAILED
    return EXIT_NOT_AN_ANSWER if args.strict and result.status != "converged" else 0


def _not_overwritten(args, names) -> None:
    """``--responses`` is none of the files the result writes into ``--out`` (with
    ``--force`` a data file named items.csv there was replaced by the fit's items)."""
    _distinct(("--responses", args.responses), *(("--out", args.out / name) for name in names))


def _other_files(names) -> list[str]:
    """The files of the other result folder (a fit's, a bootstrap's) than ``names``."""
    import cbmm

    both = cbmm.FitResult.OUTPUT_FILES + cbmm.BootstrapResult.OUTPUT_FILES
    return [name for name in dict.fromkeys(both) if name not in names]


def _bootstrap_command(args) -> int:
    import cbmm

    from .bootstrap import BootstrapResult

    options = _checked_method(args)
    _check_output_folder(args.out, BootstrapResult.OUTPUT_FILES, "--out", args.force,
                         foreign=_other_files(BootstrapResult.OUTPUT_FILES))
    _not_overwritten(args, BootstrapResult.OUTPUT_FILES)
    settings = {k: v for k, v in fit_settings(args).items() if k not in ("se", "seed")}
    settings["verbose"] = args.verbose
    result = cbmm.bootstrap(_responses(args), n_boot=args.n_boot, resample=args.resample,
                            level=args.level, seed=args.seed, method=args.method,
                            **settings, **options)
    _save_folder(result, args)
    print(f"{result.n_boot} replicates resampling {result.resample} ({result.n_failed} failed), a "
          f"{result.fit.status} {result.fit.method} fit, {result.runtime_s:.2f} s -> {args.out}")
    return 0


def _validate_command(args) -> int:
    import cbmm

    from .io import write_csv
    from .validation import BASELINES, best_baseline

    worker = _worker_settings(args)
    options = _checked_method(args)
    _check_output_file(args.out, "--out", args.force, csv=True)
    _distinct(("--responses", args.responses), ("--out", args.out))
    settings = {k: v for k, v in fit_settings(args).items() if k != "seed"}
    scores = cbmm.cross_validate(_responses(args), args.method, folds=args.folds, seed=args.seed,
                                 verbose=args.verbose, **settings, **worker, **options)
    write_csv(scores, args.out, float_format="%.17g")
    failed = int(scores["status"].str.startswith("failed").sum())
    if failed == len(scores):  # nothing to summarise: a failed run, like `cbmm fit`'s
        print(f"{args.folds} folds: the {args.method} fit failed in all {failed} folds "
              f"({scores['status'].iloc[0]}) -> {args.out}")
        return EXIT_FAILED
    means = scores[["log_loss", "auc"]].mean()
    name, baseline = best_baseline(scores)
    print(f"{args.folds} folds: held-out log loss {means['log_loss']:.4f}, AUC "
          f"{means['auc']:.4f}; best baseline {BASELINES[name]}: log loss "
          f"{baseline['log_loss']:.4f}, AUC {baseline['auc']:.4f} -> {args.out}")
    return 0


def _score_command(args) -> int:
    import cbmm

    from .io import write_csv
    from .score import read_items

    if args.items.is_dir():
        _check_input_file(args.items / "items.csv", "--items")
    else:
        _check_input_file(args.items, "--items")
    _check_output_file(args.out, "--out", args.force, csv=True)
    _distinct(("--responses", args.responses), ("--items", args.items), ("--out", args.out))
    _outside("--items", args.items, ("--out", args.out))
    read_items(args.items)  # bad items before the responses are read
    table = _read_responses(args)
    with _files_named(args, "--responses"):
        scores = cbmm.score(table, args.items, sigma=args.sigma, prior=args.prior,
                            coding=args.coding, layout=args.layout,
                            item_error=not args.items_fixed)
    _check_some_answered(args, int((scores["n_items"] > 0).sum()))
    write_csv(scores.reset_index(), args.out, float_format="%.17g")
    counts = scores["status"].value_counts()
    print(f"scored {len(scores)} model(s) ({', '.join(f'{n} {s}' for s, n in counts.items())}) "
          f"-> {args.out}")
    return 0


def _simulate_command(args) -> int:
    from .io import atomic_paths
    from .simulate import simulate

    _check_output_file(args.out, "--out", args.force, csv=True)
    if args.missing == "none" and args.missing_rate:
        raise CliError(f"--missing-rate {args.missing_rate:g}: --missing none draws no missing "
                       "cell; choose --missing mcar, mar or mnar")
    if args.missing != "none" and not args.missing_rate:
        raise CliError(f"--missing {args.missing} needs --missing-rate above 0 (the share of "
                       "missing cells); without it nothing is missing")
    if args.truth is not None:
        if args.truth.suffix.lower() not in ("", ".npz"):
            raise CliError(f"--truth {args.truth}: this writes a NumPy .npz archive; name the "
                           f"file .npz (not {args.truth.suffix})")
        _check_output_file(args.truth, "--truth", args.force)
        _distinct(("--out", args.out), ("--truth", args.truth))
    sim = simulate(args.n_models, args.n_items, sigma=args.sigma, sparsity=args.sparsity,
                   missing=args.missing, missing_rate=args.missing_rate, seed=args.seed)
    observed = ~np.isnan(sim.responses)
    empty_models, empty_items = (int((~observed.any(axis=axis)).sum()) for axis in (1, 0))
    if empty_models or empty_items:  # fit would refuse the file
        raise CliError(f"the draw (missing rate {sim.missing_rate:.3f}) leaves {empty_models} "
                       f"model(s) and {empty_items} item(s) without an observed answer, which "
                       "no fit takes; lower --missing-rate or raise --n-models / --n-items")
    table = pd.DataFrame(sim.responses, index=[f"model_{i}" for i in range(args.n_models)],
                         columns=[f"item_{j}" for j in range(args.n_items)])
    paths = [args.out] + ([args.truth] if args.truth is not None else [])
    with atomic_paths(paths) as temporaries:
        table.to_csv(temporaries[0], index_label="model", float_format="%.0f")
        if args.truth is not None:
            with open(temporaries[1], "wb") as handle:  # a handle: savez adds no suffix
                np.savez(handle, theta=sim.theta, a=sim.a, b=sim.b, sigma=sim.sigma)
    print(f"simulated {args.n_models} x {args.n_items} responses "
          f"(missing rate {sim.missing_rate:.3f}) -> {', '.join(map(str, paths))}")
    return 0


def _methods_command(args) -> int:
    import cbmm

    from .registry import get_method

    for name in cbmm.available_methods():
        method = get_method(name)
        try:
            method.availability()
            state = "available"
        except cbmm.MethodUnavailableError as exc:
            state = f"unavailable: {' '.join(str(exc).split())}"
        print(f"{name:8s} {method.label:10s} {state}")
        if method.description:
            print(f"    {method.description}")
        for key, option in method.options.items():
            print(f"    --option {key}=...  {option.describe()}, default {option.default!r}"
                  + (f": {option.doc}" if option.doc else ""))
    return 0


# -------------------------------------------------------------------------- parser

def add_fit_settings(command, without=()) -> None:
    """``--sigma``, ``--tol``, ... ``--se``: :data:`cbmm.api.FIT_OPTIONS` (but ``without``),
    with their defaults and documentation."""
    from .api import FIT_OPTIONS

    for name, option in FIT_OPTIONS.items():
        if name in without:
            continue
        flag = "--" + name.replace("_", "-")
        text = f"{option.doc} (default {option.default!r})"
        if option.kind == "bool":
            command.add_argument(flag, action="store_true", help=option.doc)
        elif option.choices:
            command.add_argument(flag, choices=option.choices, default=option.default, help=text)
        else:
            command.add_argument(flag, type=_declared(name, option), default=option.default,
                                 help=text)


def add_worker_options(command, fitted: str) -> None:
    """``--timeout`` and ``--no-isolate``: where and how long ``fitted`` runs."""
    from .api import TIMEOUT

    command.add_argument("--timeout", type=_declared("timeout_s", TIMEOUT),
                         default=TIMEOUT.default, metavar="SECONDS|auto|none",
                         help=f"time limit of {fitted}; a fit past it is recorded as failed "
                              f"(default {TIMEOUT.default}: ten times the method's expected "
                              "cost + 60 s; none: no limit)")
    command.add_argument("--no-isolate", dest="isolate", action="store_false",
                         help=f"run {fitted} in this process (debugging: no crash isolation, "
                              "no time limit)")


def fit_settings(args) -> dict:
    """The values of :func:`add_fit_settings`'s arguments, by ``cbmm.fit``'s names."""
    from .api import FIT_OPTIONS

    return {name: getattr(args, name) for name in FIT_OPTIONS if hasattr(args, name)}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    from .api import FIT_OPTIONS
    from .registry import available_methods
    from .data.cli import register as register_data
    from .efficient.cli import register as register_efficient
    from .score import PRIORS
    from .simulate import MISSING_PATTERNS

    parser = _Parser(prog="cbmm", description="Interpretable, scalable 2PL evaluation of LLMs "
                                              "by constrained block MM.")
    parser.add_argument("--version", action="version", version=f"cbmm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_input(command, required=True):
        command.add_argument("--responses", required=required, type=_path,
                             help="CSV (first column = model labels, other columns = items; "
                                  "1 correct, 0 incorrect, empty missing) or Parquet file")
        add_reading_options(command)

    fit = sub.add_parser("fit", help="fit a response matrix",
                         description="Fit X = theta a^T + 1 b^T (a >= 0) to a models x items "
                                     "response matrix and write abilities.csv, items.csv and "
                                     "fit.json into --out.  Exit status 1 when the fit failed "
                                     "(the failed result is written), 2 on bad input, 3 with "
                                     "--strict when its status is another than converged.")
    add_input(fit)
    fit.add_argument("--method", default="cbmm",
                     help=f"estimation method: {', '.join(available_methods())} "
                          "(default cbmm; see `cbmm methods`)")
    fit.add_argument("--out", required=True, type=_path, help="output folder")
    add_fit_settings(fit)
    fit.add_argument("--option", action="append", metavar="KEY=VALUE",
                     help="method option, repeatable, e.g. --option accelerate=squarem "
                          "(`cbmm methods` lists each method's options and types)")
    add_worker_options(fit, "the fit")
    fit.add_argument("--verbose", type=_integer(0), default=0, metavar="N",
                     help="log progress every N iterations to stderr (default 0: off)")
    fit.add_argument("--strict", action="store_true",
                     help="exit with status 3 (the result written) where the fit's status is "
                          "not converged: max_iter, not_stationary, unbounded, multimodal or "
                          "disconnected, not an answer (docs/trust.md)")
    fit.add_argument("--force", action="store_true", help="replace earlier results in --out")
    fit.set_defaults(handler=_fit_command)

    def add_method(command):
        command.add_argument("--method", default="cbmm",
                             help="estimation method (default cbmm; see `cbmm methods`)")
        command.add_argument("--option", action="append", metavar="KEY=VALUE",
                             help="method option, repeatable (see `cbmm methods`)")

    boot = sub.add_parser("bootstrap", help="percentile-bootstrap intervals of abilities, "
                                            "ranks and items",
                          description="Fit the responses, then refit --n-boot resamples of "
                                      "items (or models) warm-started from that fit (see "
                                      "cbmm.bootstrap).  Writes abilities.csv (theta and rank "
                                      "with intervals), items.csv, prob_better.csv (share of "
                                      "replicates in which the row model beats the column "
                                      "model) and bootstrap.json into --out.")
    add_input(boot)
    add_method(boot)
    boot.add_argument("--out", required=True, type=_path, help="output folder")
    boot.add_argument("--n-boot", type=_integer(2), default=200,
                      help="replicates (default 200)")
    boot.add_argument("--resample", choices=["items", "models"], default="items",
                      help="items: intervals for abilities and ranks (default); models: for "
                           "item parameters")
    boot.add_argument("--level", type=_number(0.0, 1.0), default=0.95,
                      help="interval coverage (default 0.95)")
    add_fit_settings(boot, without=("se",))  # --start, --n-starts: the full data's fit
    boot.add_argument("--verbose", type=_integer(0), default=0, metavar="N",
                      help="log the fit's progress every N iterations and the replicates' "
                           "after every tenth of them, to stderr (default 0: off)")
    boot.add_argument("--force", action="store_true", help="replace earlier results in --out")
    boot.set_defaults(handler=_bootstrap_command)

    validate = sub.add_parser("validate", help="held-out (cross-validated) fit of a method",
                              description="K-fold cross-validation over the observed cells "
                                          "(see cbmm.cross_validate): a CSV with one row per "
                                          "fold, the held-out log loss, Brier score and AUC "
                                          "of the method beside three baselines fitted on "
                                          "the same training cells (item means, model means "
                                          "and the additive (Rasch) model logit p = u_i + "
                                          "v_j); the summary line names the best baseline, "
                                          "and a warning says when the fit loses to one.  "
                                          "Exit status 1 when every fold's fit failed.")
    add_input(validate)
    add_method(validate)
    validate.add_argument("--out", required=True, type=_file_path, help="output CSV")
    validate.add_argument("--folds", type=_integer(2), default=5, help="folds (default 5)")
    add_fit_settings(validate, without=("se",))  # held-out answers use the estimates alone
    add_worker_options(validate, "each fold's fit")
    validate.add_argument("--verbose", type=_integer(0), default=0, metavar="N",
                          help="log each fold's fit every N iterations and when it is done, "
                               "to stderr (default 0: off)")
    validate.add_argument("--force", action="store_true", help="replace an existing --out")
    validate.set_defaults(handler=_validate_command)

    score = sub.add_parser("score", help="abilities of new models against calibrated items",
                           description="Estimate the abilities of the models in --responses "
                                       "with the item parameters of an earlier fit held fixed "
                                       "(see cbmm.score).  Writes a CSV with columns model, "
                                       "theta, se, se_calibration, n_items, n_correct, "
                                       "status; se carries the calibration's item error where "
                                       "it was fitted with --se.")
    add_input(score)
    score.add_argument("--items", required=True, type=_path,
                       help="items.csv of an earlier `cbmm fit`, or its output folder")
    score.add_argument("--out", required=True, type=_file_path, help="output CSV")
    score.add_argument("--sigma", type=_declared("sigma", FIT_OPTIONS["sigma"]),
                       help="temperature (default: the calibration's, from fit.json beside "
                            "items.csv, else 1)")
    score.add_argument("--prior", choices=PRIORS, default="none",
                       help="none: maximum likelihood (all-correct models get +inf); normal: "
                            "MAP under theta ~ N(0, 1); population: posterior mean and sd "
                            "under the calibration's population (an mml fit's histogram, "
                            "else N(0, 1)) (default none)")
    score.add_argument("--items-fixed", action="store_true",
                       help="hold the calibration's items fixed: se without their standard "
                            "errors (which a calibration fitted with --se otherwise adds)")
    score.add_argument("--force", action="store_true", help="replace an existing --out")
    score.set_defaults(handler=_score_command)

    register_efficient(sub, add_input)

    sim = sub.add_parser("simulate", help="simulate a response matrix (the paper's design)",
                         description="Draw responses from the paper's simulation design and "
                                     "write them as a CSV that `fit` reads.")
    sim.add_argument("--n-models", type=_integer(2), default=1000, help="N (default 1000)")
    sim.add_argument("--n-items", type=_integer(1), default=1000, help="J (default 1000)")
    sim.add_argument("--sigma", type=_declared("sigma", FIT_OPTIONS["sigma"]), default=1.0,
                     help="temperature (default 1)")
    sim.add_argument("--sparsity", type=_number(0.0, 1.0, low_open=False), default=0.0,
                     help="fraction of items with a = 0, in [0, 1) (default 0)")
    sim.add_argument("--missing", choices=MISSING_PATTERNS, default="none",
                     help="missingness pattern (default none)")
    sim.add_argument("--missing-rate", type=_number(0.0, 1.0, low_open=False), default=0.0,
                     help="rho for mcar/mar, column gate rate for mnar, in [0, 1) (default 0)")
    sim.add_argument("--seed", type=_integer(0), default=0, help="seed, >= 0 (default 0)")
    sim.add_argument("--out", required=True, type=_file_path, help="output CSV")
    sim.add_argument("--truth", type=_file_path, help="optional .npz file for the true parameters")
    sim.add_argument("--force", action="store_true", help="replace existing output files")
    sim.set_defaults(handler=_simulate_command)

    methods = sub.add_parser("methods", help="list the methods, their options and whether "
                                             "they run here")
    methods.set_defaults(handler=_methods_command)

    register_data(sub)
    return parser


# ---------------------------------------------------------------------------- main

def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _warning_printer():
    """``warnings.showwarning`` for one command: each distinct warning once, on one line
    (the calibration's status, say, is checked by each step that reads it)."""
    shown = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = _one_line(message)
        if text not in shown:
            shown.add(text)
            print(f"warning: {text}", file=sys.stderr)

    return show


def main(argv=None) -> int:
    """Run the command line; return the exit status (0, 1 or 2; 130 when interrupted)."""
    from .api import FitFailedError
    from .data.matrix import DataError
    from .registry import MethodUnavailableError

    debug = os.environ.get("CBMM_DEBUG", "") not in ("", "0")
    try:
        with warnings.catch_warnings(), noting_interrupts():
            warnings.showwarning = _warning_printer()
            args = build_parser().parse_args(argv)
            handler = getattr(args, "func", None) or args.handler  # data commands set func
            status = handler(args) or 0
            if interrupted():  # a reader that reported it as a bad file: not the file's fault
                raise KeyboardInterrupt
            return status
    except FitFailedError as exc:  # a failed fit, as `cbmm fit` reports one
        if debug:
            raise
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except (CliError, DataError, MethodUnavailableError, ValueError) as exc:
        if debug:
            raise
        if interrupted():  # pandas' reader made a Ctrl-C a parse error
            print("error: interrupted", file=sys.stderr)
            return 130
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `cbmm methods | head`
        sys.stderr.close()
        return EXIT_FAILED
    except OSError as exc:
        if debug:
            raise
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT if exc.errno in _PATH_ERRORS else EXIT_FAILED
    except MemoryError:
        if debug:
            raise
        print("error: out of memory", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # a bug of ours: still one line, the type says where to look
        if debug:
            raise
        print(f"internal error: {type(exc).__name__}: {_one_line(exc)} "
              "(rerun with CBMM_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
