"""The paper's MATH-500 model list as a LaTeX table (rule render_math500_models_table)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from cbmm.io import write_text  # noqa: E402
from cbmm.tables import math500_model_latex, math500_model_table  # noqa: E402

from helpers import start_log  # noqa: E402

log = start_log(snakemake.log[0], job="render_math500_models_table")  # noqa: F821
table = math500_model_table(snakemake.input[0])  # noqa: F821
write_text(math500_model_latex(table, caption="List of LLM candidates in the MATH-500 suite",
                               label="tab:llm_list"), snakemake.output[0])  # noqa: F821
log.info("%d models", len(table))
