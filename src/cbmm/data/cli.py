"""``cbmm data ...`` subcommands.

``register(subparsers)`` adds them to the main ``cbmm`` parser; each sets
``func`` to a handler ``func(args) -> int`` (exit status).  Data errors are
printed as one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .matrix import DataError

__all__ = ["main", "register"]


def _guard(handler):
    def run(args) -> int:
        try:
            return handler(args)
        except DataError as exc:
            print(f"cbmm data: error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:  # e.g. an output folder that cannot be written
            print(f"cbmm data: error: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2

    return run


@_guard
def _build(args) -> int:
    from .datasets import build_dataset, find_entry, load_registry

    registry = load_registry(args.registry)
    out = build_dataset(
        args.name,
        find_entry(registry, args.name),
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
    if args.label_column:
        entry["options"]["label_column"] = args.label_column
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
    return 0


@_guard
def _math500_items(args) -> int:
    from .math500 import fetch_items

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

    table = refresh_model_table(args.table, args.out)
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
        "--registry", default="config/datasets.yaml", help="registry YAML (default: %(default)s)"
    )
    build.add_argument(
        "--out", required=True, type=Path, help="output .parquet (summary JSON goes next to it)"
    )
    build.add_argument("--cache-dir", required=True, type=Path, help="download cache directory")
    build.set_defaults(func=_build)

    imp = commands.add_parser(
        "import", help="validate a local CSV/Parquet table and store it canonically"
    )
    imp.add_argument(
        "file", type=Path, help="CSV or Parquet: label column + item columns, 0/1/empty"
    )
    imp.add_argument("--out", required=True, type=Path, help="output .parquet")
    imp.add_argument("--label-column", help="column holding the model labels (default: the first)")
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
        "--out", type=Path, help="also write the full comparison (every label) as JSON"
    )
    compare.set_defaults(func=_compare)

    items = commands.add_parser(
        "math500-items", help="write the MATH-500 item table (subject, level)"
    )
    items.add_argument("--out", required=True, type=Path, help="output CSV")
    items.add_argument(
        "--source", default="hub", help="'hub' (HuggingFaceH4/MATH-500) or a path to test.jsonl"
    )
    items.add_argument("--sha256", help="expected SHA-256 of test.jsonl")
    items.add_argument("--revision", help="dataset revision on the Hub (default: main)")
    items.add_argument("--cache-dir", type=Path, help="Hub cache directory")
    items.set_defaults(func=_math500_items)

    models = commands.add_parser(
        "math500-models", help="refresh the MATH-500 model table from the Hub"
    )
    models.add_argument("--table", default="config/math500_models.csv", type=Path)
    models.add_argument("--out", required=True, type=Path)
    models.set_defaults(func=_math500_models)
    return data


def main(argv=None) -> int:
    """Run the ``data`` subcommands on their own (``python -m cbmm.data.cli data ...``)."""
    parser = argparse.ArgumentParser(prog="cbmm")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
