"""The MATH-500 items (subject, level) for the difficulty figure (rule math500_items)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from cbmm.data.math500 import fetch_items  # noqa: E402

from helpers import start_log  # noqa: E402

log = start_log(snakemake.log[0], job="math500_items")  # noqa: F821
log.info("items from %s", snakemake.params.source)  # noqa: F821
fetch_items(snakemake.output[0], source=snakemake.params.source,  # noqa: F821
            cache_dir=snakemake.params.cache_dir)  # noqa: F821
