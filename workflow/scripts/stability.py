"""Spearman correlations between cBMM fits of one dataset started with different
variances s^2 and the same seed (rule stability; cbmm.tables.stability_pairs)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

import pandas as pd  # noqa: E402
from cbmm.tables import stability_pairs  # noqa: E402

from helpers import start_log, write_csv  # noqa: E402

log = start_log(snakemake.log[0], job="stability")  # noqa: F821
inp, p = snakemake.input, snakemake.params  # noqa: F821
fits = {}
for (scale, seed), key in zip(p.fits, p.input_keys):
    items = pd.read_csv(inp[f"{key}_item_params"])
    theta = pd.read_csv(inp[f"{key}_abilities"])["theta"].to_numpy()
    fits[(scale, seed)] = (theta, items["a"].to_numpy(), items["b"].to_numpy())
table = stability_pairs(fits, dataset=snakemake.wildcards.dataset)  # noqa: F821
log.info("%d correlations, %d NaN (failed or constant fits)", len(table),
         int(table["spearman"].isna().sum()))
write_csv(table, snakemake.output[0])  # noqa: F821
