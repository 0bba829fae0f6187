"""Stability summary (mean, sd, n per cell) and the paper's three LaTeX tables
(theta, a, b) from stability_raw.csv (rule render_stability_tables)."""

from cbmm.io import write_csv, write_text
from cbmm.tables import stability_latex, stability_table
from helpers import start_log

CAPTIONS = {"theta": r"Stability check for \texttt{cBMM}-recovered $\hat{\boldsymbol\theta}$.",
            "a": r"Stability check for \texttt{cBMM}-recovered $\hat{\mathbf{a}}$.",
            "b": r"Stability check for \texttt{cBMM}-recovered $\hat{\mathbf{b}}$."}

log = start_log(snakemake.log[0], job="render_stability_tables")
table = stability_table(snakemake.input[0])
write_csv(table, snakemake.output.summary)
for parameter, path in zip(snakemake.params.parameters, snakemake.output.tex):
    caption = (CAPTIONS[parameter] + " Each block corresponds to a benchmark suite. Cells report"
               " the mean and standard deviation (in parenthesis) of Spearman correlation"
               f" coefficients across {int(table['n'].max())} replicates.")
    write_text(stability_latex(table, parameter, datasets=snakemake.params.datasets,
                               caption=caption, label=f"tab:stable_{parameter}"), path)
log.info("wrote %s", list(snakemake.output))
