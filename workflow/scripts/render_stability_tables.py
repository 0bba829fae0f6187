"""Stability summary (mean, sd, n per cell) and the paper's three LaTeX tables
(theta, a, b) from stability_raw.csv (rule render_stability_tables)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from cbmm.io import write_csv, write_text  # noqa: E402
from cbmm.tables import stability_latex, stability_table  # noqa: E402

from helpers import start_log  # noqa: E402

CAPTIONS = {"theta": r"Stability check for \texttt{cBMM}-recovered $\hat{\boldsymbol\theta}$.",
            "a": r"Stability check for \texttt{cBMM}-recovered $\hat{\mathbf{a}}$.",
            "b": r"Stability check for \texttt{cBMM}-recovered $\hat{\mathbf{b}}$."}

log = start_log(snakemake.log[0], job="render_stability_tables")  # noqa: F821
table = stability_table(snakemake.input[0])  # noqa: F821
write_csv(table, snakemake.output.summary)  # noqa: F821
for parameter, path in zip(("theta", "a", "b"), snakemake.output.tex):  # noqa: F821
    caption = (CAPTIONS[parameter] + " Each block corresponds to a benchmark suite. Cells report"
               " the mean and standard deviation (in parenthesis) of Spearman correlation"
               f" coefficients across {int(table['n'].max())} replicates.")
    write_text(stability_latex(table, parameter, datasets=snakemake.params.datasets,  # noqa: F821
                               caption=caption, label=f"tab:stable_{parameter}"), path)
log.info("wrote %s", list(snakemake.output))  # noqa: F821
