"""Fit one batch of real-data fits of one dataset (rule fit_real).

Each unit is one (method, stopping rule, start variance s^2, seed) of the dataset's
matrix, fitted at ``fit.sigma`` with its rule's tolerance, iteration limit and options.
A fit already stored with the same settings (and the same matrix file) is reused
(cbmm_workflow.store).  Writes one row per unit, with the fit's folder and key: the jobs
that read the fits take this table as their input and read them through the store.
cbmm.fit runs each fit in a forked worker under the unit's time limit, so a crash, a
hang or an exception of the method is a ``failed: ...`` row, not a failed job.
"""

import functools
import hashlib

import cbmm
import pandas as pd
from cbmm.data import read_matrix
from cbmm.io import write_csv
from cbmm_workflow.jobs import (import_method_modules, load_method_software, log_start_up,
                                method_code, start_log, use_job_threads)
from cbmm_workflow.store import batch_rows, fit_key

log = start_log(snakemake.log[0], job="fit_real")
use_job_threads(snakemake.threads)
p, matrix = snakemake.params, snakemake.input.matrix
# a log setting, read from the config rather than params: changing it reruns no job
PROGRESS_EVERY = snakemake.config["fit"]["progress_every"]
import_method_modules(p.method_modules)
load_method_software(p.units)
log_start_up(log)
with open(matrix, "rb") as stream:
    data_digest = hashlib.file_digest(stream, "sha256").hexdigest()


def settings_of(unit):
    return dict(sigma=p.sigma, tol=unit["tol"], max_iter=unit["max_iter"], seed=unit["seed"],
                init_scale=unit["init_scale"])


def key_of(unit):
    return fit_key(data=data_digest, method=unit["method"], options=unit["options"],
                   timeout_s=unit["timeout_s"], cbmm=cbmm.__version__,
                   code=method_code(unit["method"], p.method_modules), **settings_of(unit))


@functools.cache
def matrix_responses():
    """The matrix, read only if some fit has to be made."""
    responses = cbmm.as_responses(read_matrix(matrix), source=matrix)
    log.info("%s: %d x %d", matrix, *responses.shape)
    return responses


def fit_unit(unit):
    responses = matrix_responses()
    # the paper's procedure (random start, its rule), then this unit's settings and options
    settings = {**cbmm.paper_settings(unit["method"]), **settings_of(unit), **unit["options"]}
    result = cbmm.fit(responses, unit["method"], timeout_s=unit["timeout_s"],
                      verbose=PROGRESS_EVERY, **settings)
    n_models, n_items = responses.shape
    row = {"dataset": p.dataset, "n_models": n_models, "n_items": n_items, "method": unit["method"],
           "stopping": unit["stopping"], "init_scale": unit["init_scale"], "seed": unit["seed"],
           "status": result.status, "runtime_s": result.runtime_s, "n_iter": result.n_iter,
           "loss": result.loss, "stationarity": result.info.get("stationarity"),
           "fit_dir": unit["fit_dir"]}
    log.info("%s, %s rule, s2 %g seed %d: %s, %d iterations, %.3f s", unit["method"],
             unit["stopping"], unit["init_scale"], unit["seed"], result.status, result.n_iter,
             result.runtime_s)
    return result, row


rows = pd.DataFrame(batch_rows(p.units, key_of, fit_unit, log))
rows["fit_key"] = [key_of(unit) for unit in p.units]
write_csv(rows, snakemake.output[0])
