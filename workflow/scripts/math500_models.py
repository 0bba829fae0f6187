"""The MATH-500 model metadata, validated (and refreshed from the Hub on request)
(rule math500_models)."""

from cbmm.data.math500 import model_table, refresh_model_table
from cbmm.io import write_csv
from cbmm_workflow.jobs import start_log

log = start_log(snakemake.log[0], job="math500_models")
source, out = snakemake.input[0], snakemake.output[0]
if snakemake.params.refresh:
    log.info("refreshing %s from the Hugging Face Hub", source)
    refresh_model_table(source, out)
else:
    table = model_table(source)
    log.info("%s: %d rows", source, len(table))
    write_csv(table, out)
