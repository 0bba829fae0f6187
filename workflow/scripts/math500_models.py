"""The MATH-500 model metadata, validated (and refreshed from the Hub on request)
(rule math500_models)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from cbmm.data.math500 import model_table, refresh_model_table  # noqa: E402

from helpers import start_log, write_csv  # noqa: E402

log = start_log(snakemake.log[0], job="math500_models")  # noqa: F821
source, out = snakemake.input[0], snakemake.output[0]  # noqa: F821
if snakemake.params.refresh:  # noqa: F821
    log.info("refreshing %s from the Hugging Face Hub", source)
    refresh_model_table(source, out)
else:
    table = model_table(source)
    log.info("%s: %d rows", source, len(table))
    write_csv(table, out)
