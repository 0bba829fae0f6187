"""Command line: ``python -m cbmm fit|simulate|methods|data ...``.

``fit`` reads a CSV or Parquet response matrix with
:func:`cbmm.data.read_table` (first column: model labels, other columns:
items, values 1/0/empty) and writes ``abilities.csv``,
``items.csv`` and ``fit.json`` into ``--out``.  Bad input ends with a one-line
error and exit status 2, and leaves no output behind.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ._atomic import atomic_path
from .data.cli import register as register_data

__all__ = ["main"]

EXIT_BAD_INPUT = 2


class CliError(Exception):
    """An error reported as one line on stderr."""


def _fit_command(args) -> None:
    import cbmm
    from .data import DataError, read_table

    try:
        table = read_table(args.responses)
    except DataError as exc:
        raise CliError(str(exc)) from exc
    options = {}
    for item in args.option or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--option {item!r}: expected KEY=VALUE")
        options[key] = _parse_value(value)
    try:
        responses = cbmm.as_responses(table, source=str(args.responses))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", cbmm.DegenerateDataWarning)
            result = cbmm.fit(responses, method=args.method, sigma=args.sigma, tol=args.tol,
                              max_iter=args.max_iter, seed=args.seed,
                              init_scale=args.init_scale, **options)
    except (ValueError, cbmm.MethodUnavailableError) as exc:
        raise CliError(" ".join(str(exc).split())) from exc
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    result.save(args.out)
    print(f"{result.method}: {result.status} after {result.n_iter} iterations, "
          f"loss {result.loss:.6g}, {result.runtime_s:.3f} s -> {args.out}")
    if result.failed:
        sys.exit(1)


def _parse_value(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _simulate_command(args) -> None:
    from .simulate import simulate

    sim = simulate(args.n_models, args.n_items, sigma=args.sigma, sparsity=args.sparsity,
                   missing=args.missing, missing_rate=args.missing_rate, seed=args.seed)
    out = Path(args.out)
    table = pd.DataFrame(sim.responses, index=[f"model_{i}" for i in range(args.n_models)],
                         columns=[f"item_{j}" for j in range(args.n_items)])
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index_label="model", float_format="%.0f")
    if args.truth:
        truth = Path(args.truth)
        np.savez(truth, theta=sim.theta, a=sim.a, b=sim.b, sigma=sim.sigma)
    print(f"simulated {args.n_models} x {args.n_items} responses "
          f"(missing rate {sim.missing_rate:.3f}) -> {out}")


def _methods_command(args) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cbmm",
        description="Interpretable, scalable 2PL evaluation of LLMs by constrained block MM.")
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser("fit", help="fit a response matrix",
                         description="Fit X = theta a^T + 1 b^T (a >= 0) to a models x items "
                                     "response matrix and write abilities.csv, items.csv and "
                                     "fit.json.")
    fit.add_argument("--responses", required=True, type=Path,
                     help="CSV (first column = model labels, other columns = items; "
                          "1 correct, 0 incorrect, empty missing) or Parquet file")
    fit.add_argument("--method", default="cbmm",
                     help="estimation method: cbmm (default), lbfgsb, manopt, pyirt, mirt "
                          "(see `python -m cbmm methods`)")
    fit.add_argument("--out", required=True, type=Path, help="output directory")
    fit.add_argument("--sigma", type=float, default=1.0,
                     help="known temperature of the logistic link (default 1)")
    fit.add_argument("--tol", type=float, default=1e-4,
                     help="relative change of the loss at which to stop (default 1e-4)")
    fit.add_argument("--max-iter", type=int, default=1000,
                     help="maximum iterations / epochs / EM cycles (default 1000)")
    fit.add_argument("--seed", type=int, default=0, help="seed of the initial values (default 0)")
    fit.add_argument("--init-scale", type=float, default=1.0,
                     help="variance s^2 of log a and b at the start (default 1)")
    fit.add_argument("--option", action="append", metavar="KEY=VALUE",
                     help="method option, repeatable; values parsed as JSON where possible, "
                          "e.g. --option accelerate=squarem --option precision=float64")
    fit.set_defaults(handler=_fit_command)

    sim = sub.add_parser("simulate", help="simulate a response matrix (the paper's design)",
                         description="Draw responses from the paper's simulation design and "
                                     "write them as a CSV that `fit` reads.")
    sim.add_argument("--n-models", type=int, default=1000, help="N (default 1000)")
    sim.add_argument("--n-items", type=int, default=1000, help="J (default 1000)")
    sim.add_argument("--sigma", type=float, default=1.0, help="temperature (default 1)")
    sim.add_argument("--sparsity", type=float, default=0.0,
                     help="fraction of items with a = 0 (default 0)")
    sim.add_argument("--missing", choices=["none", "mcar", "mar", "mnar"], default="none",
                     help="missingness pattern (default none)")
    sim.add_argument("--missing-rate", type=float, default=0.0,
                     help="rho for mcar/mar, column gate rate for mnar (default 0)")
    sim.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    sim.add_argument("--out", required=True, type=Path, help="output CSV")
    sim.add_argument("--truth", type=Path, help="optional .npz file for the true parameters")
    sim.set_defaults(handler=_simulate_command)

    methods = sub.add_parser("methods", help="list estimation methods and whether they run here")
    methods.set_defaults(handler=_methods_command)

    register_data(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(args, "func"):  # subcommands registered by cbmm.data.cli
        return args.func(args)
    try:
        args.handler(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
