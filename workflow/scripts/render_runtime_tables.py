"""Runtime summary (mean/min/max per suite and method) and cBMM's speedup over the
fastest baseline (rule render_runtime_tables)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from cbmm.io import write_csv  # noqa: E402
from cbmm.tables import runtime_summary, speedup_table  # noqa: E402

from helpers import start_log  # noqa: E402

log = start_log(snakemake.log[0], job="render_runtime_tables")  # noqa: F821
summary = runtime_summary(snakemake.input[0])  # noqa: F821
write_csv(summary, snakemake.output.summary)  # noqa: F821
write_csv(speedup_table(summary), snakemake.output.speedup)  # noqa: F821
log.info("%s", summary.to_string())
