"""MATH-500 tables for the ability and difficulty figures (rule math500_tables).

math500_abilities.csv: row_label, model, prompt, params_b, release_date, tier, theta, accuracy,
status (one row per matrix row, i.e. per model and prompt style).
math500_items.csv: item, subject, level, a, b, accuracy, status (column j of the matrix is
item j).  ``status`` is the fit's (docs/trust.md): the paper's MATH-500 matrix has items
answered alike by every model, so its maximum-likelihood fit is ``unbounded``.
math500_models.tex: the paper's list of the models, as a LaTeX table.
Every matrix row and column must have its metadata; a gap stops the job naming it.
The fit is read through the store from the batch table that lists it (the job's input).
"""

import sys

import cbmm
import pandas as pd
from cbmm.data import read_matrix
from cbmm.io import write_csv, write_text
from cbmm.tables import math500_model_latex, math500_model_table
from cbmm_workflow.jobs import start_log
from cbmm_workflow.store import listed_fits, refuse_unplanned


def require_all(keys, known, what, source, labels):
    """One line in the log, naming the setting, where some of the matrix's ``labels``
    (its models or items) have no metadata: a matrix of the user's own, say."""
    missing = [k for k in keys if k not in set(known)]
    if missing:
        log.error("real.interpretability.math500 (%s): %s has no %s for %d of the matrix's "
                  "%d %ss, e.g. %s; %s", inp.matrix, source, what, len(missing), len(keys),
                  what.split()[0], missing[:5], labels)
        sys.exit(1)


log = start_log(snakemake.log[0], job="math500_tables")
inp, out = snakemake.input, snakemake.output
fit_dir = snakemake.params.fit_dir
refuse_unplanned(snakemake.params.planned, log)
fit = listed_fits([inp.batch], [fit_dir])[fit_dir]
if fit.failed:
    raise RuntimeError(f"{fit_dir}: the MATH-500 fit failed ({fit.status})")
responses = cbmm.as_responses(read_matrix(inp.matrix), source=inp.matrix)
row_labels = [str(v) for v in responses.row_labels]
col_labels = [str(v) for v in responses.col_labels]

models = pd.read_csv(inp.models, dtype={"row_label": str})
require_all(row_labels, models["row_label"], "model metadata", inp.models,
            "its rows must be labelled as real.interpretability.math500.models' row_label")
abilities = fit.theta.rename(index=str)
table = models.set_index("row_label").loc[row_labels,
                                          ["model", "prompt", "params_b", "release_date", "tier"]]
table.insert(0, "row_label", row_labels)
table["theta"] = abilities.loc[row_labels].to_numpy()
table["accuracy"] = responses.accuracy(axis=1)
table["status"] = fit.status
write_csv(table.reset_index(drop=True), out.abilities)

meta = pd.read_csv(inp.items_meta, dtype={"item": str})
require_all(col_labels, meta["item"], "item metadata", inp.items_meta,
            "its items must be labelled by their line in MATH-500's test.jsonl (0-499)")
items = meta.set_index("item").loc[col_labels, ["subject", "level"]]
items.insert(0, "item", col_labels)
items["a"] = fit.a.rename(index=str).loc[col_labels].to_numpy()
items["b"] = fit.b.rename(index=str).loc[col_labels].to_numpy()
items["accuracy"] = responses.accuracy(axis=0)
items["status"] = fit.status
write_csv(items.reset_index(drop=True), out.item_table)
log.info("%d models x prompts, %d items", len(table), len(items))
write_text(math500_model_latex(math500_model_table(models),
                               caption="List of LLM candidates in the MATH-500 suite",
                               label="tab:llm_list"), out.models_tex)
