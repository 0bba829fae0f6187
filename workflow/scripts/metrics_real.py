"""Descriptive summary (CV of a, Spearman of theta with mean accuracy for all and the
top models) and the full rankings table of one dataset (rule metrics_real)."""

import json
import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

import cbmm  # noqa: E402
import pandas as pd  # noqa: E402
from cbmm.data import read_matrix  # noqa: E402
from cbmm.metrics import descriptive_metrics  # noqa: E402
from cbmm.tables import rankings_table  # noqa: E402

from helpers import start_log, write_csv, write_json  # noqa: E402

log = start_log(snakemake.log[0], job="metrics_real")  # noqa: F821
inp, out = snakemake.input, snakemake.output  # noqa: F821
dataset = snakemake.wildcards.dataset  # noqa: F821
fit = json.loads(open(inp.fit).read())
if fit["status"].startswith("failed"):
    raise RuntimeError(f"{inp.fit}: the interpretability fit of {dataset!r} failed "
                       f"({fit['status']}); no rankings or summaries can be computed")
responses = cbmm.as_responses(read_matrix(inp.matrix), source=inp.matrix)
accuracy = pd.Series(responses.accuracy(axis=1), index=responses.row_labels.astype(str))
abilities = pd.read_csv(inp.abilities, dtype={"model": str}).set_index("model")["theta"]
a_hat = pd.read_csv(inp.item_params)["a"].to_numpy()
summary = descriptive_metrics(abilities.reindex(accuracy.index).to_numpy(), a_hat,
                              accuracy.to_numpy(),
                              top_fraction=snakemake.params.top_fraction)  # noqa: F821
row = {"dataset": dataset, "n_models": responses.shape[0], "n_items": responses.shape[1], **summary}
log.info("%s", row)
write_json(row, out.metrics)
write_csv(rankings_table(abilities, accuracy), out.rankings)
