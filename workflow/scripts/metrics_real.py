"""Descriptive summary (CV of a, Spearman of theta with mean accuracy for all and the
top models) and the full rankings table of one dataset (rule metrics_real), each with
the status of the fits (docs/trust.md: anything but ``converged`` is not an optimum).

The numbers and the ranking come from the converged fit (real.converged); the
same summary of the fit at the paper's stopping rule is added with the suffix
``_paper_rule``, so the two can be compared side by side.  The fits are read through
the store from the batch tables that list them (the job's inputs).
"""

import cbmm
import numpy as np
import pandas as pd
from cbmm.data import read_matrix
from cbmm.io import write_csv
from cbmm.metrics import descriptive_metrics
from cbmm.tables import rankings_table
from cbmm_workflow.jobs import start_log, write_json
from cbmm_workflow.store import listed_fits, refuse_unplanned

log = start_log(snakemake.log[0], job="metrics_real")
inp, out, p = snakemake.input, snakemake.output, snakemake.params
dataset = snakemake.wildcards.dataset
responses = cbmm.as_responses(read_matrix(inp.matrix), source=inp.matrix)
accuracy = pd.Series(responses.accuracy(axis=1), index=responses.row_labels.astype(str))
refuse_unplanned(p.planned, log)
fits = listed_fits([inp.converged_batch, inp.paper_batch], p.fit_dirs.values())


def summary(rule):
    """(summary dict, abilities, status) of the fit of one stopping rule; a failed fit
    gives NaN numbers."""
    fit_dir = p.fit_dirs[rule]
    fit = fits[fit_dir]
    if fit.failed:
        log.warning("%s: the %s fit of %s failed (%s)", fit_dir, rule, dataset, fit.status)
    abilities = fit.theta.rename(index=str)
    numbers = descriptive_metrics(abilities.reindex(accuracy.index).to_numpy(),
                                  np.asarray(fit.a), accuracy.to_numpy(),
                                  top_fraction=p.top_fraction)
    return numbers, abilities, fit.status


converged, abilities, status = summary("converged")
if status.startswith("failed"):
    raise RuntimeError(f"{p.fit_dirs['converged']}: the converged fit of {dataset!r} failed "
                       f"({status}); no rankings can be computed")
paper, _, paper_status = summary("paper")
row = {"dataset": dataset, "n_models": responses.shape[0], "n_items": responses.shape[1],
       **converged, **{f"{name}_paper_rule": value for name, value in paper.items()},
       "status": status, "status_paper_rule": paper_status}
log.info("%s", row)
write_json(row, out.metrics)
write_csv(rankings_table(abilities, accuracy, status=status), out.rankings)
