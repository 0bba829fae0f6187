"""Concatenate per-job rows (JSON objects or CSV tables) into one CSV table
(rules aggregate_simulation, aggregate_discrimination, aggregate_stability)."""

import json
import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

import pandas as pd  # noqa: E402

from helpers import start_log, write_csv  # noqa: E402


def read_part(path):
    if path.endswith(".json"):
        return pd.DataFrame([json.loads(open(path).read())])
    return pd.read_csv(path)


log = start_log(snakemake.log[0], job=snakemake.rule)  # noqa: F821
table = pd.concat([read_part(path) for path in snakemake.input], ignore_index=True)  # noqa: F821
log.info("%d rows from %d files", len(table), len(snakemake.input))  # noqa: F821
write_csv(table, snakemake.output[0])  # noqa: F821
