"""Held-out fit of one method on one dataset (rule validate_method): cbmm.cross_validate
with the method run to the converged rule (real.converged), one row per fold, with the
dataset's name: the fit's held-out log loss, Brier score and AUC beside the item-mean,
model-mean and additive (Rasch) baselines."""

import cbmm
from cbmm.data import read_matrix
from cbmm.io import write_csv
from cbmm.validation import BASELINES, best_baseline
from cbmm_workflow.jobs import import_method_modules, start_log

log = start_log(snakemake.log[0], job="validate_method")
p, matrix = snakemake.params, snakemake.input.matrix
import_method_modules(p.method_modules)
dataset, method = snakemake.wildcards.dataset, snakemake.wildcards.method
responses = cbmm.as_responses(read_matrix(matrix), source=matrix)
table = cbmm.cross_validate(responses, method, folds=p.folds, seed=p.seed, sigma=p.sigma,
                            **p.settings)
table.insert(0, "dataset", dataset)
best, means = best_baseline(table)
log.info("%s, %s: held-out log loss %.4f (best baseline %s %.4f, item means %.4f), statuses %s",
         dataset, method, table["log_loss"].mean(), BASELINES[best], means["log_loss"],
         table["item_mean_log_loss"].mean(), table["status"].value_counts().to_dict())
write_csv(table, snakemake.output[0])
