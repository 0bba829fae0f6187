"""Stability study tables (rule aggregate_stability): the Spearman correlations of
every dataset (stability_raw.csv, the rows of the stability jobs), their summary
(mean, sd, n per cell) and the paper's three LaTeX tables (theta, a, b)."""

import pandas as pd
from cbmm.io import read_csv, write_csv, write_text
from cbmm.tables import STABILITY_PARAMETERS, stability_latex, stability_table
from cbmm_workflow.jobs import start_log

CAPTIONS = {"theta": r"Stability check for \texttt{cBMM}-recovered $\hat{\boldsymbol\theta}$.",
            "a": r"Stability check for \texttt{cBMM}-recovered $\hat{\mathbf{a}}$.",
            "b": r"Stability check for \texttt{cBMM}-recovered $\hat{\mathbf{b}}$."}

log = start_log(snakemake.log[0], job="aggregate_stability")
out = snakemake.output
raw = pd.concat([read_csv(path) for path in snakemake.input], ignore_index=True)
write_csv(raw, out.raw)
table = stability_table(raw)
write_csv(table, out.summary)
for parameter, path in zip(STABILITY_PARAMETERS, out.tex, strict=True):
    caption = (CAPTIONS[parameter] + " Each block corresponds to a benchmark suite. Cells report"
               " the mean and standard deviation (in parenthesis) of Spearman correlation"
               f" coefficients across {int(table['n'].max())} replicates.")
    write_text(stability_latex(table, parameter, datasets=snakemake.params.datasets,
                               caption=caption, label=f"tab:stable_{parameter}"), path)
log.info("%d correlations from %d datasets; wrote %s", len(raw), len(snakemake.input),
         list(out))
