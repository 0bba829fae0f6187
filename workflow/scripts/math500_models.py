"""The MATH-500 model metadata, validated (and refreshed from the Hub on request)
(rule math500_models).  A bad table, or a refresh that cannot reach the Hub, ends the job
with one line in its log naming the key."""

import sys

from cbmm.data import DataError, DownloadError
from cbmm.data.math500 import model_table, refresh_model_table
from cbmm.io import write_csv
from cbmm_workflow.jobs import start_log

log = start_log(snakemake.log[0], job="math500_models")
source, out = snakemake.input[0], snakemake.output[0]
try:
    if snakemake.params.refresh:
        log.info("refreshing %s from the Hugging Face Hub", source)
        refresh_model_table(source, out)
    else:
        table = model_table(source)
        log.info("%s: %d rows", source, len(table))
        write_csv(table, out)
except DownloadError as exc:  # the refresh, offline: the table itself was read
    log.error("real.interpretability.math500.refresh_models: %s (offline: set it to false)",
              exc)
    sys.exit(1)
except DataError as exc:  # a bad table: its file, row and column are in the message
    log.error("real.interpretability.math500.models: %s", exc)
    sys.exit(1)
