"""The paper's MATH-500 model list as a LaTeX table (rule render_math500_models_table)."""

from cbmm.io import write_text
from cbmm.tables import math500_model_latex, math500_model_table
from helpers import start_log

log = start_log(snakemake.log[0], job="render_math500_models_table")
table = math500_model_table(snakemake.input[0])
write_text(math500_model_latex(table, caption="List of LLM candidates in the MATH-500 suite",
                               label="tab:llm_list"), snakemake.output[0])
log.info("%d models", len(table))
