"""Draw one replicate of a simulation design and save responses + truth (rule simulate)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from cbmm.simulate import simulate  # noqa: E402

from helpers import start_log  # noqa: E402

log = start_log(snakemake.log[0], job="simulate")  # noqa: F821
design, seed = snakemake.params.design, snakemake.params.seed  # noqa: F821
simulation = simulate(**design, seed=seed)
log.info("design %s, seed %d: observed share %.4f", design, seed, 1 - simulation.missing_rate)
simulation.save(snakemake.output[0])  # noqa: F821
