"""One tidy row for one simulated fit: identifiers, fit summary and every
metric of cbmm.metrics.SIMULATION_METRICS against the truth (rule metrics_simulation)."""

import os
import sys

# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

from helpers import start_log, write_json  # noqa: E402

from cbmm import FitResult  # noqa: E402
from cbmm.metrics import fit_metrics  # noqa: E402
from cbmm.simulate import Simulation  # noqa: E402

log = start_log(snakemake.log[0], job="metrics_simulation")  # noqa: F821
inp = snakemake.input  # noqa: F821
truth = Simulation.load(inp.simulation)
fit = FitResult.load(os.path.dirname(inp.fit))
metrics = fit_metrics(fit, truth)
row = {**snakemake.params.row, "status": fit.status, "runtime_s": fit.runtime_s,  # noqa: F821
       "n_iter": fit.n_iter, "loss": fit.loss, **metrics}
log.info("%s", row)
write_json(row, snakemake.output[0])  # noqa: F821
