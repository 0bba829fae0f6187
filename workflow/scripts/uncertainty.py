"""Abilities with intervals of one dataset (rule uncertainty): the library's default cBMM
fit with standard errors, a bootstrap over items warm-started from it, and the abilities
table (cbmm.tables.abilities_table) with the fit's status."""

import cbmm
import pandas as pd
from cbmm.data import read_matrix
from cbmm.io import write_csv
from cbmm.tables import abilities_table
from cbmm_workflow.jobs import start_log, use_job_threads

log = start_log(snakemake.log[0], job="uncertainty")
use_job_threads(snakemake.threads)
p, matrix = snakemake.params, snakemake.input.matrix
responses = cbmm.as_responses(read_matrix(matrix), source=matrix)
log.info("%s: %d x %d", matrix, *responses.shape)
boot = cbmm.bootstrap(responses, n_boot=p.n_boot, level=p.level, sigma=p.sigma, se=True)
fit = boot.fit
log.info("fit: %s, %d iterations, %.3f s; bootstrap: %d replicates, %d failed, %.1f s",
         fit.status, fit.n_iter, fit.runtime_s, boot.n_boot, boot.n_failed, boot.runtime_s)
accuracy = pd.Series(responses.accuracy(axis=1), index=fit.theta.index)
write_csv(abilities_table(fit, boot, accuracy), snakemake.output[0])
