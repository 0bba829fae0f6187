"""The published numbers beside this run's, from the aggregated tables (rule fidelity)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from helpers import start_log  # noqa: E402

from cbmm.fidelity import write_fidelity  # noqa: E402

log = start_log(snakemake.log[0], job="fidelity")  # noqa: F821
table = write_fidelity(snakemake.input, snakemake.output[0])  # noqa: F821
counts = table["within_spread"].replace("", "not computed").value_counts().to_dict()
log.info("%d published numbers: %s", len(table), counts)
