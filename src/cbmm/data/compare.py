"""A rebuilt Leaderboard suite beside the paper authors' release (``cbmm data compare``).

Rows are matched by model, columns by item, after two renamings that the two
sources need:

* model labels: the release writes ``<org>__<name>`` (the details dataset's
  name, as Wu et al.'s scraper did), a Hub rebuild ``<org>/<name>``; the first
  ``__`` and the first ``/`` are the same separator;
* item ids: both name items ``<task>_<k>``, except the release's MMLU-Pro,
  whose columns are bare positions ``0 ... 12031``.  Bare integer ids are
  matched to ``<task>_<k>`` when the other matrix has a single sub-task.

Cells are compared where both matrices observe them.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from .matrix import DataError, check_binary, read_matrix
from .release import read_release

__all__ = ["compare_matrices", "read_any_matrix"]


def read_any_matrix(path) -> pd.DataFrame:
    """A canonical matrix (``.parquet``) or a release-format CSV, as float 1/0/NaN."""
    path = Path(path)
    if path.suffix == ".parquet":
        return read_matrix(path)
    if path.suffix == ".csv":
        if not path.is_file():
            raise DataError(f"{path}: no such file")
        with open(path, newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), [])
        if {"model", "item", "correct"} <= set(header):  # read as wide, its ids were answers
            raise DataError(f"{path}: a long table (columns model, item, correct); compare reads "
                            "matrices: a table of answers becomes one with `cbmm data import`")
        table = read_release(path)
        return pd.DataFrame(check_binary(table, str(path)), index=table.index, columns=table.columns)
    raise DataError(f"{path}: expected a .parquet matrix or a release .csv")


def _model_key(label) -> str:
    return str(label).replace("/", "__", 1)


def _item_keys(items, other_items) -> list[str]:
    """``items`` renamed to match ``other_items`` where the release names them by position."""
    items = [str(i) for i in items]
    prefixes = {str(i).rsplit("_", 1)[0] for i in other_items}
    if len(prefixes) == 1 and all(i.isdigit() for i in items):
        return [f"{next(iter(prefixes))}_{i}" for i in items]
    return items


def _unique(frame: pd.DataFrame) -> tuple[pd.DataFrame, list]:
    """``frame`` keeping the first of each duplicated label, and those labels."""
    duplicated = frame.index.duplicated()
    return frame[~duplicated], sorted(set(frame.index[duplicated]))


def _agreement(same: np.ndarray, compared: np.ndarray):
    with np.errstate(invalid="ignore", divide="ignore"):
        return same / compared


def compare_matrices(rebuilt: pd.DataFrame, release: pd.DataFrame, *, lowest: int = 10) -> dict:
    """Models, items and cells of two matrices of one suite, side by side.

    Parameters
    ----------
    rebuilt, release : pandas.DataFrame
        Float 1/0/NaN, index = model labels, columns = item ids (as
        :func:`read_any_matrix` gives them).
    lowest : int
        How many of the least agreeing models to list.

    Returns
    -------
    dict
        ``models`` and ``items``: ``both`` (count), ``only_rebuilt`` and
        ``only_release`` (lists, each side's own labels); ``items["matched_by_position"]``:
        whether one side's items, named by number, were paired with the other's
        ``<prefix>_<number>`` by that number (a release that names them by position);
        ``cells``:
        ``compared`` (observed in both), ``agree``, ``agreement`` (fraction,
        ``None`` when nothing is compared), ``observed_only_rebuilt``,
        ``observed_only_release``; ``per_model``: ``min`` and ``median``
        agreement over models with compared cells, ``n_below_1`` and
        ``lowest`` (label -> agreement); ``duplicate_labels`` of each side
        (the first row of a label is compared).
    """
    labels = {_model_key(m): m for m in rebuilt.index}  # to report the rebuild's own labels
    rebuilt, rebuilt_duplicates = _unique(rebuilt.rename(index=_model_key))
    release, release_duplicates = _unique(release.rename(index=_model_key))
    # compared by these keys (a side named by position renamed), reported by its own labels
    rebuilt_keys = _item_keys(rebuilt.columns, release.columns)
    release_keys = _item_keys(release.columns, rebuilt_keys)
    rebuilt_items = dict(zip(rebuilt_keys, map(str, rebuilt.columns)))
    release_items = dict(zip(release_keys, map(str, release.columns)))
    by_position = any(key != own for key, own in (*rebuilt_items.items(),
                                                  *release_items.items()))
    rebuilt = rebuilt.set_axis(list(rebuilt_items), axis=1)
    release = release.set_axis(list(release_items), axis=1)

    models = rebuilt.index.intersection(release.index, sort=False)
    items = rebuilt.columns.intersection(release.columns, sort=False)
    a = rebuilt.loc[models, items].to_numpy()
    b = release.loc[models, items].to_numpy()
    seen_a, seen_b = ~np.isnan(a), ~np.isnan(b)
    both = seen_a & seen_b
    same = both & (a == b)
    per_model = _agreement(same.sum(axis=1), both.sum(axis=1))
    rated = pd.Series(per_model, index=[labels.get(m, m) for m in models]).dropna()
    compared = int(both.sum())
    return {
        "models": {
            "both": len(models),
            "only_rebuilt": [labels.get(m, m) for m in rebuilt.index.difference(release.index, sort=False)],
            "only_release": list(release.index.difference(rebuilt.index, sort=False)),
        },
        "items": {
            "both": len(items),
            "only_rebuilt": [rebuilt_items[i] for i in
                             rebuilt.columns.difference(release.columns, sort=False)],
            "only_release": [release_items[i] for i in
                             release.columns.difference(rebuilt.columns, sort=False)],
            "matched_by_position": by_position,
        },
        "cells": {
            "compared": compared,
            "agree": int(same.sum()),
            "agreement": float(same.sum() / compared) if compared else None,
            "observed_only_rebuilt": int((seen_a & ~seen_b).sum()),
            "observed_only_release": int((seen_b & ~seen_a).sum()),
        },
        "per_model": {
            "min": float(rated.min()) if len(rated) else None,
            "median": float(rated.median()) if len(rated) else None,
            "n_below_1": int((rated < 1).sum()),
            "lowest": {str(k): float(v) for k, v in rated.sort_values(kind="stable")[:lowest].items()},
        },
        "duplicate_labels": {"rebuilt": rebuilt_duplicates, "release": release_duplicates},
    }
