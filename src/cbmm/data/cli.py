"""``cbmm data ...`` subcommands.

``register(subparsers)`` adds them to the main ``cbmm`` parser; each sets
``func`` to a handler ``func(args) -> int`` (exit status).  Data errors are
printed as one line on stderr with exit status 2.  Like the other commands,
every command that writes checks its outputs before any work: never
an input file, named with the suffix of the format written, and new unless
``--force``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from .._cli_common import (CliError, _check_output_file, _distinct, _file_path, _Parser,
                           add_reading_options, interrupted)
from .checks import SHA256_PATTERN
from .matrix import DataError

__all__ = ["main", "register"]

#: Defaults of ``build --registry`` and ``math500-models --table``: relative to the current
#: folder, meant to be the repository root (a user elsewhere is told so, see _default_file).
DEFAULT_REGISTRY = Path("config/datasets.yaml")
DEFAULT_MODEL_TABLE = Path("config/math500_models.csv")


def _sha256(text: str) -> str:
    if not re.fullmatch(SHA256_PATTERN, text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a hex SHA-256 (64 characters)")
    return text


def _guard(handler):
    def run(args) -> int:
        try:
            return handler(args)
        except (CliError, DataError) as exc:
            if interrupted():  # pandas' reader made a Ctrl-C a parse error
                raise KeyboardInterrupt from None
            print(f"cbmm data: error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:  # e.g. an output folder that cannot be written
            print(f"cbmm data: error: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2

    return run


def _default_file(given, flag: str, default: Path) -> Path:
    """``given``, else ``default`` when the current folder holds it: a user outside the
    repository is told where it was looked for and which option names another."""
    if given is not None:
        return given
    if not default.is_file():
        raise CliError(
            f"{flag} not given, and its default {default} is not in the current folder "
            f"{Path.cwd()} (the default is relative to it); run from the repository root or "
            f"pass {flag} PATH"
        )
    return default


def _check_dataset_outputs(args, entry: dict, *inputs) -> None:
    """``--out`` and the files written beside it are none of ``inputs`` (``(name, path)``
    pairs), end in ``.parquet`` (the matrix) and are new unless ``--force``."""
    from .datasets import dataset_outputs

    matrix, *beside = dataset_outputs(entry, args.out)
    _distinct(*inputs, *(("--out", path) for path in (matrix, *beside)))
    _check_output_file(matrix, "--out", args.force, suffix=".parquet")
    for path in beside:
        _check_output_file(path, f"--out {matrix}: its companion", args.force)


@_guard
def _build(args) -> int:
    from .datasets import build_dataset, find_entry, load_registry

    registry_path = _default_file(args.registry, "--registry", DEFAULT_REGISTRY)
    registry = load_registry(registry_path)
    entry = find_entry(registry, args.name)
    inputs = [("--registry", registry_path)]
    if entry["source"] == "local":
        inputs.append(("the registry's local path", entry["options"]["path"]))
    _check_dataset_outputs(args, entry, *inputs)
    out = build_dataset(
        args.name,
        entry,
        args.out,
        cache_dir=args.cache_dir,
        release=registry["release"],
    )
    print(out)
    return 0


@_guard
def _import(args) -> int:
    from .datasets import build_dataset

    entry = {"source": "local", "options": {"path": str(args.file)}}
    for key in ("coding", "layout", "label_column", "model_column", "item_column",
                "correct_column"):
        if getattr(args, key) is not None:
            entry["options"][key] = getattr(args, key)
    _check_dataset_outputs(args, entry, ("the input file", args.file))
    print(build_dataset(args.name or Path(args.file).stem, entry, args.out, cache_dir=None))
    return 0


@_guard
def _summary(args) -> int:
    from .matrix import matrix_summary, read_matrix

    summary = matrix_summary(read_matrix(args.file))
    if not args.full:
        summary = {k: v for k, v in summary.items() if k not in ("model_accuracy", "item_accuracy")}
    print(json.dumps(summary, indent=2))
    return 0


@_guard
def _compare(args) -> int:
    from .compare import compare_matrices, read_any_matrix
    from .matrix import write_json

    if args.out is not None:
        # Each input apart: comparing a file with itself is allowed.
        _distinct(("the rebuilt matrix", args.rebuilt), ("--out", args.out))
        _distinct(("the release matrix", args.release), ("--out", args.out))
        _check_output_file(args.out, "--out", args.force, suffix=".json")
    result = compare_matrices(read_any_matrix(args.rebuilt), read_any_matrix(args.release))
    if args.out is not None:
        write_json(result, args.out)
    models, items, cells, per_model = (
        result[k] for k in ("models", "items", "cells", "per_model")
    )
    for what, counts in (("models", models), ("items", items)):
        print(
            f"{what}: {counts['both']} in both, {len(counts['only_rebuilt'])} only in the "
            f"rebuild, {len(counts['only_release'])} only in the release"
            + (" (one side's numbered items paired with the other's <prefix>_<number> by "
               "number)" if counts.get("matched_by_position") else "")
        )
    agreement = "-" if cells["agreement"] is None else f"{100 * cells['agreement']:.2f} %"
    print(
        f"cells observed in both: {cells['compared']}, {agreement} agree; observed only in the "
        f"rebuild: {cells['observed_only_rebuilt']}, only in the release: "
        f"{cells['observed_only_release']}"
    )
    if per_model["min"] is not None:
        print(
            f"per model: agreement min {per_model['min']:.4f}, median {per_model['median']:.4f}; "
            f"{per_model['n_below_1']} model(s) below 1"
        )
    for side, labels in result["duplicate_labels"].items():
        if labels:  # compared by their first row only
            shown = ", ".join(map(str, labels[:5])) + (" ..." if len(labels) > 5 else "")
            print(f"duplicate model labels in the {side} (their first row compared): {shown}")
    return 0


@_guard
def _math500_items(args) -> int:
    from .math500 import fetch_items

    if args.source != "hub":
        _distinct(("--source", args.source), ("--out", args.out))
    _check_output_file(args.out, "--out", args.force, csv=True)
    print(
        fetch_items(
            args.out,
            source=args.source,
            sha256=args.sha256,
            cache_dir=args.cache_dir,
            revision=args.revision,
        )
    )
    return 0


@_guard
def _math500_models(args) -> int:
    from .math500 import refresh_model_table

    source = _default_file(args.table, "--table", DEFAULT_MODEL_TABLE)
    _distinct(("--table", source), ("--out", args.out))
    _check_output_file(args.out, "--out", args.force, csv=True)
    table = refresh_model_table(source, args.out)
    for repo, reason in table.attrs["unresolved"].items():
        print(f"unresolved: {repo}: {reason}", file=sys.stderr)
    print(args.out)
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``data`` command (with its subcommands) to ``subparsers``."""
    data = subparsers.add_parser("data", help="fetch, build and inspect response matrices")
    commands = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")

    build = commands.add_parser(
        "build", help="build one registry dataset into a canonical Parquet matrix"
    )
    build.add_argument(
        "--name", required=True, help="dataset name in the registry (datasets or alternatives)"
    )
    build.add_argument(
        "--registry",
        type=Path,
        help=f"registry YAML (default: {DEFAULT_REGISTRY} in the current folder, i.e. run from "
        "the repository root)",
    )
    build.add_argument(
        "--out",
        required=True,
        type=_file_path,
        help="output .parquet (summary JSON goes next to it; hub builds also <stem>.models.csv)",
    )
    build.add_argument("--cache-dir", required=True, type=Path, help="download cache directory")
    build.add_argument("--force", action="store_true", help="replace an existing --out (and "
                       "the files beside it)")
    build.set_defaults(func=_build)

    imp = commands.add_parser(
        "import", help="validate a local CSV/Parquet table and store it canonically"
    )
    imp.add_argument(
        "file", type=Path, help="CSV or Parquet: wide (label column + item columns, 0/1/empty) "
        "or long (model, item, correct records)"
    )
    imp.add_argument(
        "--out", required=True, type=_file_path,
        help="output .parquet (summary JSON goes next to it); not the input file",
    )
    imp.add_argument("--force", action="store_true", help="replace an existing --out (and "
                     "its summary)")
    add_reading_options(imp)
    imp.add_argument("--name", help="dataset name recorded in the summary (default: file stem)")
    imp.set_defaults(func=_import)

    summary = commands.add_parser("summary", help="print the summary of a canonical matrix")
    summary.add_argument("file", type=Path)
    summary.add_argument(
        "--full", action="store_true", help="include per-model and per-item accuracies"
    )
    summary.set_defaults(func=_summary)

    compare = commands.add_parser(
        "compare",
        help="compare a rebuilt suite with the release: models and items in both or one, cells",
    )
    compare.add_argument("rebuilt", type=Path, help="the rebuilt matrix (.parquet or .csv)")
    compare.add_argument("release", type=Path, help="the release's matrix (.parquet or .csv)")
    compare.add_argument(
        "--out", type=_file_path,
        help="also write the full comparison (every label) as .json; not an input file",
    )
    compare.add_argument("--force", action="store_true", help="replace an existing --out")
    compare.set_defaults(func=_compare)

    items = commands.add_parser(
        "math500-items", help="write the MATH-500 item table (subject, level)"
    )
    items.add_argument("--out", required=True, type=_file_path, help="output CSV")
    items.add_argument("--force", action="store_true", help="replace an existing --out")
    items.add_argument(
        "--source", default="hub", help="'hub' (HuggingFaceH4/MATH-500) or a path to test.jsonl"
    )
    items.add_argument("--sha256", type=_sha256, help="expected SHA-256 of test.jsonl")
    items.add_argument("--revision", help="dataset revision on the Hub (default: main)")
    items.add_argument("--cache-dir", type=Path, help="Hub cache directory")
    items.set_defaults(func=_math500_items)

    models = commands.add_parser(
        "math500-models", help="refresh the MATH-500 model table from the Hub"
    )
    models.add_argument(
        "--table",
        type=Path,
        help=f"the model table to refresh (default: {DEFAULT_MODEL_TABLE} in the current "
        "folder, i.e. run from the repository root)",
    )
    models.add_argument("--out", required=True, type=_file_path, help="output CSV")
    models.add_argument("--force", action="store_true", help="replace an existing --out")
    models.set_defaults(func=_math500_models)
    return data


def main(argv=None) -> int:
    """Run the ``data`` subcommands on their own (``python -m cbmm.data.cli data ...``)."""
    parser = _Parser(prog="cbmm")
    register(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(argv)
    except CliError as exc:
        print(f"cbmm data: error: {exc}", file=sys.stderr)
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
