"""Build one registry dataset into the canonical matrix + summary (rule build_dataset)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from cbmm.data import build_dataset  # noqa: E402

from helpers import start_log  # noqa: E402

log = start_log(snakemake.log[0], job="build_dataset")  # noqa: F821
name = snakemake.wildcards.dataset  # noqa: F821
entry = snakemake.params.entry  # noqa: F821
log.info("building %s from %s", name, entry)
build_dataset(name, entry, snakemake.output.matrix, cache_dir=snakemake.params.cache_dir,  # noqa: F821
              release=snakemake.params.release or None)  # noqa: F821
log.info("wrote %s", snakemake.output.matrix)  # noqa: F821
