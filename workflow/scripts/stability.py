"""Spearman correlations between cBMM fits of one dataset started with different
variances s^2 and the same seed (rule stability; cbmm.tables.stability_pairs).  The fits
are read through the store from the batch tables that list them (the job's inputs)."""

import numpy as np
from cbmm.io import write_csv
from cbmm.tables import stability_pairs
from cbmm_workflow.jobs import start_log
from cbmm_workflow.store import listed_fits, refuse_unplanned

log = start_log(snakemake.log[0], job="stability")
refuse_unplanned(snakemake.params.planned, log)
stored = listed_fits(snakemake.input, [fit["fit_dir"] for fit in snakemake.params.fits])
fits = {}
for fit in snakemake.params.fits:
    result = stored[fit["fit_dir"]]
    fits[(fit["init_scale"], fit["seed"])] = tuple(np.asarray(v) for v in (result.theta, result.a,
                                                                           result.b))
table = stability_pairs(fits, dataset=snakemake.wildcards.dataset)
log.info("%d correlations, %d NaN (failed or constant fits)", len(table),
         int(table["spearman"].isna().sum()))
write_csv(table, snakemake.output[0])
