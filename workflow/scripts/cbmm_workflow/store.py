"""The store of finished fits: one folder per fit, written and read through
:meth:`cbmm.FitResult.save` and :meth:`cbmm.FitResult.load`.

A batch job keeps each fit in its own folder (``fit_dir`` of its unit,
:mod:`cbmm_workflow.paths`): FitResult's files and ``unit.json``, which holds the fit's
key (a digest of every setting it depends on, the code of a user's method included), its
table row and the size and SHA-256 of each file.  A later job finding the same key and
intact files reuses the row instead of fitting again, so an interrupted batch resumes
where it stopped and another packing refits nothing; a damaged folder is refitted.

That reuse is why the folders are not declared outputs of the batch jobs: Snakemake
removes a job's outputs before it runs the job again.  The batch table (the job's
declared output) lists each fit with its folder and, for real data, its key; a job that
reads fits takes that table as its input and reads the fits through
:func:`listed_fits`, which loads a folder only if it still holds the fit the table
lists.  So the dependency graph carries the fits a job reads.  Before the graph is built,
:func:`mark_stale_batches` marks each batch table one of whose fits is missing or
damaged, so that its job runs again and refits just those.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path

import pandas as pd
from cbmm import FitResult
from cbmm import io as cbmm_io
from cbmm.io import file_record
from cbmm.result import ResultFolderError, read_result_folder

from . import paths
from .jobs import json_safe, write_json

UNIT_FILE = "unit.json"


class StoreError(RuntimeError):
    """A fit folder is missing, damaged, or holds another fit than its batch table lists."""


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


def damage(fit_dir, unit, *, thorough: bool = True) -> str | None:
    """What is wrong with the files of a stored fit (None: nothing): each must have the size
    (``thorough``: and the SHA-256) that ``unit.json`` records."""
    records = unit.get("files") if isinstance(unit, dict) else None
    if records is None:  # stored before unit.json listed its files: FitResult's own checks
        missing = [n for n in FitResult.OUTPUT_FILES if not (Path(fit_dir) / n).is_file()]
        if missing or not thorough:
            return f"{', '.join(missing)} missing" if missing else None
        try:
            read_result_folder(fit_dir)
        except ResultFolderError as exc:
            return str(exc)
        return None
    if not isinstance(records, dict) or set(records) != set(FitResult.OUTPUT_FILES):
        return f"its {UNIT_FILE} lists other files than a fit's"
    for name, record in sorted(records.items()):
        path = Path(fit_dir) / name
        try:
            if not thorough:
                if path.stat().st_size != record["bytes"]:
                    return f"{name} has {path.stat().st_size} bytes, {record['bytes']} stored"
            elif file_record(path.read_bytes()) != record:
                return f"{name} is not the file that was stored"
        except OSError as exc:
            return f"{name}: {exc.strerror or exc}"
    return None


def stored_row(fit_dir, key: str, log=None) -> dict | None:
    """The stored row of the fit in ``fit_dir`` if it was made with ``key`` and its files
    are intact, else None (a damaged folder is logged to ``log``)."""
    unit = _stored_unit(fit_dir)
    if unit is None or unit.get("key") != key:
        return None
    problem = damage(fit_dir, unit)
    if problem:
        if log is not None:
            log.warning("%s: stored fit damaged (%s); fitting it again", fit_dir, problem)
        return None
    return unit["row"]


def store_fit(fit_dir, key: str, result: FitResult, row: dict) -> None:
    """Store a finished fit: written to a temporary folder, then renamed into place, so a
    folder with a unit.json is always complete; ``unit.json`` records each file."""
    fit_dir = Path(fit_dir)
    fit_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = fit_dir.with_name(f".{fit_dir.name}.{secrets.token_hex(6)}")
    old = fit_dir.with_name(f".{fit_dir.name}.{secrets.token_hex(6)}.old")
    try:
        result.save(tmp, replace=False)
        files = {name: file_record((tmp / name).read_bytes()) for name in FitResult.OUTPUT_FILES}
        write_json({"key": key, "row": row, "files": files}, tmp / UNIT_FILE)
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
        row = stored_row(unit["fit_dir"], key, log)
        if row is None:
            result, row = fit_unit(unit)
            store_fit(unit["fit_dir"], key, result, row)
        else:
            reused += 1
        rows.append(row)
    log.info("%d fits, %d reused from an earlier job", len(rows), reused)
    return rows


def load_fit(fit_dir, key: str) -> FitResult:
    """The fit stored in ``fit_dir``, which must have been made with ``key`` and be intact."""
    unit = _stored_unit(fit_dir)
    if unit is None:
        raise StoreError(f"{fit_dir}: no stored fit (its {UNIT_FILE} is missing); "
                         "run the workflow again: the fit job that lists it will refit it")
    if unit.get("key") != key:
        raise StoreError(f"{fit_dir}: holds another fit than its batch table lists (refitted "
                         "with other settings since); rerun the fit job that lists it")
    problem = damage(fit_dir, unit)
    if problem:
        raise StoreError(f"{fit_dir}: stored fit damaged ({problem}); run the workflow again: "
                         "the fit job that lists it will refit it")
    try:
        return FitResult.load(fit_dir)
    except ResultFolderError as exc:
        raise StoreError(f"{exc}; run the workflow again: the fit job that lists it will "
                         "refit it") from None


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


def _listed_fit_dirs(table: Path) -> list[str]:
    """The fit folders a real-data batch table lists (its ``fit_dir`` column)."""
    with open(table, newline="") as handle:
        return [row["fit_dir"] for row in csv.DictReader(handle) if row.get("fit_dir")]


def unit_key(study, level, method, replicate) -> tuple:
    """What names a simulated fit in a batch table's row: study, level, method, replicate."""
    return str(study), float(level), str(method), int(replicate)


def _listed_keys(table) -> list | None:
    """The keys of the rows of a simulation batch table (None if it cannot be read;
    FileNotFoundError if it does not exist)."""
    try:
        with open(table, newline="") as handle:
            return [unit_key(row["study"], row["level"], row["method"], row["replicate"])
                    for row in csv.DictReader(handle)]
    except FileNotFoundError:
        raise
    except (OSError, KeyError, ValueError, TypeError, csv.Error):
        return None


def _sim_table_fits(table, batch) -> list | None:
    """The fit folders to check of the simulation batch table ``table`` of ``batch``:
    ``batch``'s, or ``[None]`` (stale) if the table cannot be read, or None if it does not
    exist or lists other fits (written under another configuration, its job runs again
    where Snakemake recorded its parameters, and the aggregation checks it where it did
    not: :func:`unplanned_tables`; this may be a dry run of another configuration, whose
    tables are not this plan's to mark)."""
    try:
        listed = _listed_keys(table)
    except FileNotFoundError:
        return None
    if listed is None:
        return [None]
    if set(listed) != {unit_key(u["study"], u["level"], u["method"], u["replicate"])
                       for u in batch}:
        return None
    return [unit["fit_dir"] for unit in batch]


def _listed_names(table, real: bool) -> list | None:
    """How the rows of a batch table name their fits: a real-data table's by folder
    (``fit_dir``), a simulation table's by :func:`unit_key` (None if it does not exist or
    cannot be read)."""
    if not real:
        try:
            return _listed_keys(table)
        except FileNotFoundError:
            return None
    try:
        with open(table, newline="") as handle:
            return [row["fit_dir"] for row in csv.DictReader(handle)]
    except (OSError, KeyError, csv.Error):
        return None


def unplanned_tables(planned: dict) -> list[str]:
    """The batch tables of ``planned`` (table -> the fits planned for it, as its rows name
    them: a simulation table's by (study, level, method, replicate), a real-data table's by
    folder, :meth:`.plan.Plan.real_batch_keys`) that do not list exactly those fits, once
    each, each marked stale (its refit marker) so that the next run reruns its job, reusing
    the fits already stored.

    The reading job's check: a batch job that finished while Snakemake was not running
    (killed, or a lost login session on a cluster) left no record of the parameters it
    ran with, so after a change of the configuration Snakemake takes its table, written
    under the old packing, for up to date (its rows: other fits, some twice, some missing)."""
    stale = []
    for table, keys in planned.items():
        real = all(isinstance(key, str) for key in keys)
        listed = _listed_names(table, real)
        expected = sorted(keys) if real else sorted(unit_key(*key) for key in keys)
        if listed is None or sorted(listed) != expected:
            cbmm_io.write_text("the table does not list the fits planned for it\n",
                               refit_marker(table))
            stale.append(str(table))
    return stale


def refuse_unplanned(planned: dict, log) -> None:
    """Stop the reading job (exit status 1), naming them, if some batch tables of
    ``planned`` list other fits than planned for them (:func:`unplanned_tables`, which
    marks them to run again), rather than read the wrong rows."""
    stale = unplanned_tables(planned)
    if stale:
        log.error("%s%s list other fits than this configuration plans for them: their jobs "
                  "finished while Snakemake was not running (killed, or a lost login "
                  "session), so it kept no record of the settings they ran with. They are "
                  "marked to run again: run the same command again (the fits already "
                  "stored are reused)", stale[0],
                  f" and {len(stale) - 1} more batch table(s)" if len(stale) > 1 else "")
        raise SystemExit(1)


def refit_marker(table) -> Path:
    """The file that marks a batch table stale: written, with the reasons, when one of its
    fits is found missing or damaged; the batch job takes it as an input (when present), so
    that the job, being older than it, runs again."""
    return Path(f"{table}.refit")


def mark_stale_batches(plan, log) -> list[str]:
    """Mark each existing batch table of ``plan`` one of whose fits is missing or damaged
    (its files' sizes are not those ``unit.json`` records), saying which; return those
    tables.  Its job then runs again and refits those fits (reusing the rest), and every
    job reading the table runs again after it.  (Removing the table would not do: Snakemake
    does not rerun a job for a missing intermediate file whose readers are up to date.)
    A table is judged by the fits it lists: one written under another configuration (a dry
    run of the paper's plan over the test run's results) is not marked.  Cheap: a stat per
    file."""
    tables = {}
    for env in plan.env_methods():
        for k, batch in enumerate(plan.sim_batches(env)):
            table = paths.SIM_BATCH.format(env=env, batch=k)
            fit_dirs = _sim_table_fits(table, batch)
            if fit_dirs is not None:
                tables[table] = fit_dirs
    for dataset in dict.fromkeys(fit.dataset for fit in plan.real_fits):
        for table in Path().glob(paths.REAL_BATCH.format(dataset=dataset, env="*", batch="*")):
            try:
                tables[str(table)] = _listed_fit_dirs(table)
            except (OSError, KeyError, csv.Error):
                tables[str(table)] = [None]  # unreadable: stale too
    stale = []
    for table, fit_dirs in tables.items():
        if not Path(table).is_file():
            continue
        problems = []
        for fit_dir in fit_dirs:
            unit = _stored_unit(fit_dir) if fit_dir else None
            problem = ("the table cannot be read" if fit_dir is None else f"{UNIT_FILE} missing"
                       if unit is None else damage(fit_dir, unit, thorough=False))
            if problem:
                problems.append(f"{fit_dir}: {problem}")
        if problems:
            log.warning(f"{table}: {len(problems)} of its fits missing or damaged (first: "
                        f"{problems[0]}); its job will refit them")
            cbmm_io.write_text("\n".join(problems) + "\n", refit_marker(table))
            stale.append(table)
    return stale
