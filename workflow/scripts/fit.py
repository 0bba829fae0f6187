"""Fit one data set with one method and seed (rules fit_simulation and fit_real).

The input is either a simulated replicate (``input.simulation``; fitted at its
true temperature) or a real response matrix (``input.matrix``; fitted at
``params.sigma``).  Writes fit.json, abilities.csv and items.csv.
"""

import os
import sys

# One core per fit, as in the paper: BLAS and cbmm's OpenMP passes use the job's threads.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(snakemake.threads)  # noqa: F821
# This checkout's scripts and cbmm package, whichever Python runs the job
# (the project's virtualenv or a rule's conda environment).
sys.path[:0] = [snakemake.scriptdir,  # noqa: F821
                os.path.join(snakemake.scriptdir, os.pardir, os.pardir, "src")]  # noqa: F821

import cbmm  # noqa: E402

from fitting import run_fit  # noqa: E402
from helpers import start_log  # noqa: E402


def load_responses(inputs, sigma):
    """(responses, sigma, description) of the job's input."""
    if "simulation" in inputs.keys():
        from cbmm.simulate import Simulation

        simulation = Simulation.load(inputs.simulation)
        return (cbmm.as_responses(simulation.responses, source=inputs.simulation),
                simulation.sigma, f"simulated design {simulation.design}")
    from cbmm.data import read_matrix

    responses = cbmm.as_responses(read_matrix(inputs.matrix), source=inputs.matrix)
    return responses, sigma, f"{inputs.matrix}: {responses.shape[0]} x {responses.shape[1]}"


log = start_log(snakemake.log[0], job=snakemake.rule)  # noqa: F821
p = snakemake.params  # noqa: F821
responses, sigma, what = load_responses(snakemake.input, p.sigma)  # noqa: F821
log.info("%s; method %s, sigma %s, init_scale %s, seed %s", what, p.method, sigma,
         p.init_scale, p.seed)
settings = dict(sigma=sigma, tol=p.tol, max_iter=p.max_iter, seed=p.seed, init_scale=p.init_scale)
result = run_fit(responses, p.method, settings=settings, options=p.options, timeout_s=p.timeout_s)
log.info("status %s, %d iterations, %.3f s, loss %s", result.status, result.n_iter,
         result.runtime_s, result.loss)
result.save(os.path.dirname(snakemake.output.fit))  # noqa: F821
