"""Runtime study tables (rule aggregate_runtime): one row per (dataset, method,
replicate) fit at the paper's stopping rule, its summary (mean/min/max per suite and
method) and cBMM's speedup over the fastest baseline.  Replicates are the seeds 0..R-1 of the
configured start variance; the batch tables may hold other fits too (e.g. an
interpretability fit with another seed, or at the converged rule), which are left out.
The user's method modules are imported first: the summary names methods through the
registry."""

import pandas as pd
from cbmm.io import read_csv, write_csv
from cbmm.tables import runtime_summary, speedup_table
from cbmm_workflow.jobs import import_method_modules, start_log
from cbmm_workflow.store import refuse_unplanned

COLUMNS = ["dataset", "n_models", "n_items", "method", "replicate", "status", "runtime_s",
           "n_iter", "loss"]

log = start_log(snakemake.log[0], job="aggregate_runtime")
p, out = snakemake.params, snakemake.output
import_method_modules(p.method_modules)
# each batch table's fits, checked against the plan (a table of an old packing whose job
# Snakemake did not record would give some fits twice and others not at all)
refuse_unplanned(p.planned, log)
rows = pd.concat([read_csv(path) for path in snakemake.input.batches],
                 ignore_index=True)
rows = rows[(rows["stopping"] == p.stopping) & rows["dataset"].isin(p.datasets)
            & rows["method"].isin(p.methods) & (rows["seed"] < p.replicates)
            & (rows["init_scale"] == p.init_scale)]
table = rows.rename(columns={"seed": "replicate"})[COLUMNS]
order = {m: i for i, m in enumerate(p.method_order)}
datasets = {d: i for i, d in enumerate(p.datasets)}
table = table.sort_values(["dataset", "method", "replicate"], key=lambda col: (
    col.map(datasets) if col.name == "dataset" else col.map(order) if col.name == "method"
    else col), ignore_index=True)
expected = len(p.datasets) * len(p.methods) * p.replicates
twice = int(table.duplicated(["dataset", "method", "replicate"]).sum())
if len(table) != expected or twice:
    raise RuntimeError(f"runtime study: {len(table)} fits found in the batch tables "
                       f"({twice} twice), expected {expected} once each")
log.info("%d fits, %d failed", len(table), int(table["status"].str.startswith("failed").sum()))
write_csv(table, out.table)
summary = runtime_summary(table)
write_csv(summary, out.summary)
write_csv(speedup_table(summary), out.speedup)
log.info("%s", summary.to_string())
