# The paper's experiments as declared rules.  Run from the repository root:
#   snakemake --cores all --workflow-profile workflow/profiles/default
# (config/config.yaml is the paper; add --configfile config/quick.yaml for a
# laptop-sized run).  See docs/workflow.md.

import os

from snakemake.utils import min_version

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


include: "workflow/rules/common.smk"


load_config(config)
# With --sdm conda the methods' software comes from envs/*.yaml, not from this process.
if workflow.is_main_process and not uses_conda_envs():
    check_software(config)


report: "workflow/report/workflow.rst"


include: "workflow/rules/data.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/fit.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/render.smk"
include: "workflow/rules/fidelity.smk"


rule all:
    input:
        all_tables(),
        all_figures(),
        FIDELITY,
    default_target: True
