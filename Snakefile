# The paper's experiments as declared rules.  From the repository root:
#   snakemake                                    # the paper (profiles/default is picked up)
#   snakemake --configfile config/quick.yaml     # a laptop-sized run
#   snakemake --workflow-profile profiles/slurm  # on a SLURM cluster
# See docs/workflow.md.

import os
import time

from snakemake.utils import min_version

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


include: "workflow/rules/common.smk"


# The configuration, checked completely, and what it asks for (cbmm_workflow.plan).
PLAN = checked_plan(config)
# Job logs written from here on are this run's: their warnings are shown at its end.
STARTED = time.time()
# The code of the user's method modules: their fits' keys, and the fit jobs' params.
METHOD_CODE = code_digest(PLAN.method_modules)
# Batch tables whose stored fits are missing or damaged are marked: their jobs refit them.
if workflow.is_main_process:
    mark_stale_batches(PLAN, logger)
# envs/*.post-deploy.sh install cbmm from this repository into the conda environments.
os.environ.update(CBMM_REPO=workflow.basedir)
# With --sdm conda the methods' software comes from envs/*.yaml, not from this process.
if workflow.is_main_process and not uses_conda_envs():
    check_software(config)


wildcard_constraints:
    study=r"[A-Za-z0-9_]+",
    level=r"-?[0-9][0-9.e+-]*",
    replicate=r"\d+",
    batch=r"\d+",
    seed=r"\d+",
    init_scale=r"[0-9][0-9.e+-]*",
    env=env_constraint(),
    dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    figure=r"[A-Za-z0-9_.-]+",


report: "workflow/report/workflow.rst"


include: "workflow/rules/data.smk"
include: "workflow/rules/fit.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/render.smk"
include: "workflow/rules/fidelity.smk"
include: "workflow/rules/trust.smk"
include: "workflow/rules/efficiency.smk"


# Every table and figure the configuration asks for.
ALL_OUTPUTS = [*PLAN.all_tables(), *PLAN.all_figures(), *PLAN.fidelity_table()]


rule all:
    default_target: True
    input:
        ALL_OUTPUTS,


# `snakemake --report report.html finished`: the report of what a run with failed jobs
# did finish (the plain `--report` refuses to start while any output is missing).
rule finished:
    input:
        [path for path in ALL_OUTPUTS if os.path.exists(path)],


onsuccess:
    show_logged_warnings(STARTED)


onerror:
    show_logged_warnings(STARTED)
