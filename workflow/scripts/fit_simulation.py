"""Fit one batch of simulated replicates and score each fit against its truth
(rule fit_simulation).

Each unit is one (study, level, replicate, method): the data are drawn
from the design and the replicate's seed (the same draw for every method; drawn
once for the consecutive units of one replicate), fitted from the shared start
with that seed at the true temperature, and scored with
cbmm.metrics.fit_metrics.  A fit already stored with the same settings is
reused (cbmm_workflow.store).  Writes one row per unit: the tidy rows of results/tables/sim_<study>.csv.
cbmm.fit runs each fit in a forked worker under the unit's time limit, so a
crash, a hang or an exception of the method is a ``failed: ...`` row, not a
failed job.
"""

import functools
import json

import cbmm
import pandas as pd
from cbmm.metrics import fit_metrics
from cbmm.responses import no_information
from cbmm.io import write_csv
from cbmm.simulate import simulate
from cbmm_workflow.jobs import (import_method_modules, load_method_software, log_start_up,
                                method_code, start_log, use_job_threads)
from cbmm_workflow.store import batch_rows, fit_key

log = start_log(snakemake.log[0], job="fit_simulation")
use_job_threads(snakemake.threads)
p = snakemake.params
# a log setting, read from the config rather than params: changing it reruns no job
PROGRESS_EVERY = snakemake.config["fit"]["progress_every"]
import_method_modules(p.method_modules)
load_method_software(p.units)
log_start_up(log)


def settings_of(unit):
    return dict(tol=p.tol, max_iter=p.max_iter, seed=unit["seed"], init_scale=p.init_scale)


def key_of(unit):
    return fit_key(data=("simulation", unit["design"]), method=unit["method"],
                   options=unit["options"], timeout_s=unit["timeout_s"], cbmm=cbmm.__version__,
                   code=method_code(unit["method"], p.method_modules), **settings_of(unit))


@functools.lru_cache(maxsize=1)
def draw(design_json, seed):
    """The replicate's data set and truth (kept for the next unit: the same draw)."""
    return simulate(**json.loads(design_json), seed=seed)


def fit_unit(unit):
    truth = draw(json.dumps(unit["design"], sort_keys=True), unit["seed"])
    # the paper's procedure (random start, its rule), then this unit's settings and options
    settings = {**cbmm.paper_settings(unit["method"]), **settings_of(unit), **unit["options"]}
    # a tiny design can draw answers that no fit takes (all alike, a model or an item
    # without an answer): a failed unit, not a failed job
    try:
        responses = cbmm.as_responses(truth.responses, coding="binary")  # 0 is wrong, even alone
        reason = no_information(responses)
    except cbmm.ResponseError as exc:
        responses, reason = truth.responses.shape, str(exc).removeprefix("responses: ")
    if reason:
        result = cbmm.FitResult.failure(
            f"the simulated answers: {reason}", responses=responses, method=unit["method"],
            sigma=truth.sigma, **{k: settings[k] for k in ("tol", "max_iter", "seed", "init_scale")})
    else:
        result = cbmm.fit(responses, unit["method"], sigma=truth.sigma,
                          timeout_s=unit["timeout_s"], verbose=PROGRESS_EVERY, **settings)
    row = {"study": unit["study"], "level": float(unit["level"]), "method": unit["method"],
           "replicate": unit["replicate"], "status": result.status,
           "runtime_s": result.runtime_s, "n_iter": result.n_iter, "loss": result.loss,
           **fit_metrics(result, truth)}
    log.info("%s, %s level %s replicate %d: %s, %d iterations, %.3f s", unit["method"],
             unit["study"], unit["level"], unit["replicate"], result.status, result.n_iter,
             result.runtime_s)
    return result, row


write_csv(pd.DataFrame(batch_rows(p.units, key_of, fit_unit, log)), snakemake.output[0])
