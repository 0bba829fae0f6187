"""Descriptive summary (CV of a, Spearman of theta with mean accuracy for all and the
top models) and the full rankings table of one dataset (rule metrics_real).

The numbers and the ranking come from the converged fit (real.converged); the
same summary of the fit at the paper's stopping rule is added with the suffix
``_paper_rule``, so the two can be compared side by side.
"""

import json
from pathlib import Path

import cbmm
import pandas as pd
from cbmm.data import read_matrix
from cbmm.metrics import descriptive_metrics
from cbmm.tables import rankings_table
from helpers import start_log, write_csv, write_json

log = start_log(snakemake.log[0], job="metrics_real")
inp, out, p = snakemake.input, snakemake.output, snakemake.params
dataset = snakemake.wildcards.dataset
responses = cbmm.as_responses(read_matrix(inp.matrix), source=inp.matrix)
accuracy = pd.Series(responses.accuracy(axis=1), index=responses.row_labels.astype(str))


def summary(fit_dir, rule):
    """(summary dict, abilities) of one fit; a failed fit gives NaN numbers."""
    fit = json.loads((Path(fit_dir) / "fit.json").read_text())
    if fit["status"].startswith("failed"):
        log.warning("%s: the %s fit of %s failed (%s)", fit_dir, rule, dataset, fit["status"])
    abilities = pd.read_csv(Path(fit_dir) / "abilities.csv",
                            dtype={"model": str}).set_index("model")["theta"]
    a_hat = pd.read_csv(Path(fit_dir) / "items.csv")["a"].to_numpy()
    numbers = descriptive_metrics(abilities.reindex(accuracy.index).to_numpy(), a_hat,
                                  accuracy.to_numpy(), top_fraction=p.top_fraction)
    return numbers, abilities, fit["status"]


converged, abilities, status = summary(p.fit_dirs["converged"], "converged")
if status.startswith("failed"):
    raise RuntimeError(f"{p.fit_dirs['converged']}: the converged fit of {dataset!r} failed "
                       f"({status}); no rankings can be computed")
paper, _, _ = summary(p.fit_dirs["paper"], "paper-rule")
row = {"dataset": dataset, "n_models": responses.shape[0], "n_items": responses.shape[1],
       **converged, **{f"{name}_paper_rule": value for name, value in paper.items()}}
log.info("%s", row)
write_json(row, out.metrics)
write_csv(rankings_table(abilities, accuracy), out.rankings)
