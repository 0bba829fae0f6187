"""Runtime study table: one row per (dataset, method, replicate) fit (rule aggregate_runtime)."""

import json
import os
import sys
from pathlib import Path

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

import pandas as pd  # noqa: E402

from helpers import start_log, write_csv  # noqa: E402

log = start_log(snakemake.log[0], job="aggregate_runtime")  # noqa: F821
shapes = {}
for path in snakemake.input.summaries:  # noqa: F821
    summary = json.loads(Path(path).read_text())
    shapes[Path(path).name.removesuffix(".summary.json")] = (summary["n_models"], summary["n_items"])
rows = []
for (dataset, method, _scale, seed), path in zip(snakemake.params.jobs, snakemake.input.fits):  # noqa: F821
    fit = json.loads(Path(path).read_text())
    n_models, n_items = shapes[dataset]
    rows.append({"dataset": dataset, "n_models": n_models, "n_items": n_items, "method": method,
                 "replicate": seed, "status": fit["status"], "runtime_s": fit["runtime_s"],
                 "n_iter": fit["n_iter"], "loss": fit["loss"]})
table = pd.DataFrame(rows)
log.info("%d fits, %d failed", len(table), int(table["status"].str.startswith("failed").sum()))
write_csv(table, snakemake.output[0])  # noqa: F821
