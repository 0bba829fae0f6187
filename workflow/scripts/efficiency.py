"""The efficient-evaluation study of one dataset (rule efficiency): the selection study
(per-model rows and their summary) and the adaptive tests of held-out models (per test
and their summary; also balanced over a column of the item table, where the rule is
given one), by cbmm.efficient.study.

Splits the dataset's models cannot make (``real.efficiency.test_share`` that leaves
fewer than 2 calibration models, or fewer than tinyBenchmarks' 3 where
``real.efficiency.tinybenchmarks`` is on), and numbers of items ``real.efficiency.k`` none of
which is below the dataset's, end the job with one line in its log naming the key and
the dataset; the other jobs go on (the profile's keep-going).  A k not below them is
skipped with a warning."""

import sys

import pandas as pd

from cbmm.data import read_matrix
from cbmm.efficient import study
from cbmm.efficient.tinybenchmarks import MIN_CALIBRATION_MODELS
from cbmm.io import write_csv
from cbmm_workflow.jobs import start_log

log = start_log(snakemake.log[0], job="efficiency")
inp, out, p = snakemake.input, snakemake.output, snakemake.params
settings, adaptive = p.settings, p.settings["adaptive"]
table = read_matrix(inp.matrix)
try:  # splits this dataset's models cannot make: one line, not a traceback from the fits
    splits = study.split_count(len(table), settings["splits"], settings["held_models"],
                               settings["test_share"])
    study.model_splits(len(table), splits, settings["test_share"], settings["seed"])
except ValueError as exc:
    log.error("real.efficiency, dataset %r: %s", snakemake.wildcards.dataset, exc)
    sys.exit(1)
calibrating = len(table) - study.held_out(len(table), settings["test_share"])
if settings["tinybenchmarks"] and calibrating < MIN_CALIBRATION_MODELS:
    log.error("real.efficiency.tinybenchmarks, dataset %r: its %d models leave %d to calibrate "
              "on (test_share %g); tinyBenchmarks' estimators need at least %d: set the key "
              "to false, or give the dataset more models", snakemake.wildcards.dataset,
              len(table), calibrating, settings["test_share"], MIN_CALIBRATION_MODELS)
    sys.exit(1)
measured = study.measurable_ks(settings["k"], table.shape[1])
if not measured:  # an empty table and figure would say nothing of why
    log.error("real.efficiency.k, dataset %r: every k (%s) is at least its %d items; give "
              "some below %d", snakemake.wildcards.dataset,
              ", ".join(map(str, settings["k"])), table.shape[1], table.shape[1])
    sys.exit(1)
if measured != list(settings["k"]):
    log.warning("real.efficiency.k, dataset %r: k = %s skipped, not below its %d items",
                snakemake.wildcards.dataset,
                ", ".join(str(k) for k in settings["k"] if k not in measured), table.shape[1])
contents = [None]
if p.content is not None:  # the item table's labels are the matrix's columns
    items = pd.read_csv(inp.item_table, dtype={"item": str}).set_index("item")
    areas = items[p.content].reindex(table.columns.astype(str))
    if areas.isna().any():  # checked before the study: it failed after the selection study
        log.error("real.efficiency.adaptive.content, dataset %r: %d of its %d items have no "
                  "%s in %s, e.g. %s; its items must be labelled by their line in MATH-500's "
                  "test.jsonl (0-499), or set the key to null", snakemake.wildcards.dataset,
                  int(areas.isna().sum()), len(areas), p.content, inp.item_table,
                  list(areas.index[areas.isna()][:5]))
        sys.exit(1)
    contents.append(items[p.content])
log.info("%s: %d splits of its %d models, %d held out in each", snakemake.wildcards.dataset,
         splits, len(table), study.held_out(len(table), settings["test_share"]))
calibrated = study.calibrations(table, splits=splits,
                                test_share=settings["test_share"], seed=settings["seed"],
                                fit_options={"sigma": p.sigma})
statuses = study.calibration_statuses(split.result.status for split in calibrated)
if statuses != "converged":  # in the tables' words (calibration_status)
    log.warning("real.efficiency, dataset %r: the splits' calibration fits are %s, not all "
                "converged (docs/trust.md): the study's numbers rest on fits that may not "
                "be the answer", snakemake.wildcards.dataset, statuses)
rows = study.selection_study(table, calibrated, ks=settings["k"],
                             strategies=settings["strategies"], seed=settings["seed"],
                             draws=settings["draws"], tinybenchmarks=settings["tinybenchmarks"])
write_csv(rows, out.rows, float_format="%.10g")
summary = study.summarise_selection(rows)
log.info("selection study of %s (%d x %d), MAE on held-out models and (cv) cross-validated "
         "on the calibration models:\n%s", snakemake.wildcards.dataset, *table.shape,
         summary.pivot(index="k", columns="strategy", values=["mae", "cv_mae"])
         .dropna(axis=1, how="all").round(4).to_string())
write_csv(summary, out.selection, float_format="%.10g")
tests = study.adaptive_study(table, calibrated, se_targets=adaptive["se_targets"],
                             max_exposures=adaptive["max_exposures"],
                             max_items=adaptive["max_items"], min_items=adaptive["min_items"],
                             candidates=adaptive["candidates"],
                             progressive=adaptive["progressive"], contents=contents,
                             seed=settings["seed"], reference=adaptive["interval_scale"])
adaptive_summary = study.summarise_adaptive(tests)
log.info("adaptive tests:\n%s", adaptive_summary.round(4).to_string())
write_csv(tests, out.adaptive, float_format="%.10g")
write_csv(adaptive_summary, out.adaptive_summary, float_format="%.10g")
