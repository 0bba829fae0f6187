"""Draw one figure of cbmm.figures.FIGURES from its tables (rules render_*).

``params.figure`` names the figure, ``params.args`` are its table arguments
(paths, or a mapping dataset -> path) and ``params.kwargs`` any options.
"""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from cbmm.figures import FIGURES  # noqa: E402

from helpers import start_log  # noqa: E402

log = start_log(snakemake.log[0], job="render")  # noqa: F821
p = snakemake.params  # noqa: F821
kwargs = getattr(p, "kwargs", {})
FIGURES[p.figure].plot(*p.args, out_paths=[snakemake.output.pdf, snakemake.output.png],  # noqa: F821
                       **kwargs)
log.info("wrote %s", list(snakemake.output))  # noqa: F821
