"""The store of finished fits: one folder per fit, written and read through
:meth:`cbmm.FitResult.save` and :meth:`cbmm.FitResult.load`.

A batch job keeps each fit in its own folder (``fit_dir`` of its unit,
:mod:`cbmm_workflow.paths`): FitResult's files and ``unit.json``, which holds the fit's
key (a digest of every setting it depends on) and its table row.  A later job finding
the same key reuses the row instead of fitting again, so an interrupted batch resumes
where it stopped and another packing refits nothing.

That reuse is why the folders are not declared outputs of the batch jobs: Snakemake
removes a job's outputs before it runs the job again.  The batch table (the job's
declared output) lists each fit with its folder and, for real data, its key; a job that
reads fits takes that table as its input and reads the fits through
:func:`listed_fits`, which loads a folder only if it still holds the fit the table
lists.  So the dependency graph carries the fits a job reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path

import pandas as pd
from cbmm import FitResult

from .jobs import json_safe, write_json

UNIT_FILE = "unit.json"


class StoreError(RuntimeError):
    """A fit folder is missing, or holds another fit than its batch table lists."""


def fit_key(**settings) -> str:
    """Digest of everything a fit depends on (method, options, data, seed, stopping rule,
    time limit, cbmm version)."""
    text = json.dumps(json_safe(settings), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _stored_unit(fit_dir) -> dict | None:
    try:
        return json.loads((Path(fit_dir) / UNIT_FILE).read_text())
    except (OSError, ValueError):
        return None


def stored_row(fit_dir, key: str) -> dict | None:
    """The stored row of the fit in ``fit_dir`` if it was made with ``key``, else None."""
    unit = _stored_unit(fit_dir)
    return unit["row"] if unit is not None and unit.get("key") == key else None


def store_fit(fit_dir, key: str, result: FitResult, row: dict) -> None:
    """Store a finished fit: written to a temporary folder, then renamed into place, so a
    folder with a unit.json is always complete."""
    fit_dir = Path(fit_dir)
    fit_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = fit_dir.with_name(f".{fit_dir.name}.{secrets.token_hex(6)}")
    old = fit_dir.with_name(f".{fit_dir.name}.{secrets.token_hex(6)}.old")
    try:
        result.save(tmp)
        write_json({"key": key, "row": row}, tmp / UNIT_FILE)
        if fit_dir.exists():
            os.replace(fit_dir, old)
        os.replace(tmp, fit_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def batch_rows(units, key_of, fit_unit, log) -> list:
    """The rows of a batch job: each unit's stored row when its fit was made with the
    same key, else ``fit_unit(unit) -> (FitResult, row)``, stored before the next unit.

    ``key_of(unit)`` is the unit's :func:`fit_key`; every unit has a ``fit_dir``.
    """
    rows, reused = [], 0
    for unit in units:
        key = key_of(unit)
        row = stored_row(unit["fit_dir"], key)
        if row is None:
            result, row = fit_unit(unit)
            store_fit(unit["fit_dir"], key, result, row)
        else:
            reused += 1
        rows.append(row)
    log.info("%d fits, %d reused from an earlier job", len(rows), reused)
    return rows


def load_fit(fit_dir, key: str) -> FitResult:
    """The fit stored in ``fit_dir``, which must have been made with ``key``."""
    unit = _stored_unit(fit_dir)
    if unit is None:
        raise StoreError(f"{fit_dir}: no stored fit (its {UNIT_FILE} is missing); "
                         "rerun the fit job that lists it")
    if unit.get("key") != key:
        raise StoreError(f"{fit_dir}: holds another fit than its batch table lists (refitted "
                         "with other settings since); rerun the fit job that lists it")
    return FitResult.load(fit_dir)


def listed_fits(batch_tables, fit_dirs) -> dict:
    """``{fit_dir: FitResult}`` of the fits in ``fit_dirs``, each listed (``fit_dir``,
    ``fit_key``) in one of the ``batch_tables`` (the reading job's inputs)."""
    keys = {}
    for table in batch_tables:
        listed = pd.read_csv(table, usecols=["fit_dir", "fit_key"])
        keys.update(zip(listed["fit_dir"], listed["fit_key"]))
    fits = {}
    for fit_dir in fit_dirs:
        if fit_dir not in keys:
            raise StoreError(f"{fit_dir}: not listed in the batch tables {list(batch_tables)}")
        fits[fit_dir] = load_fit(fit_dir, keys[fit_dir])
    return fits
