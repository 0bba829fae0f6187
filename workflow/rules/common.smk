"""Glue between the rules and the workflow package beside the scripts,
workflow/scripts/cbmm_workflow/ (configuration, paths, plan, figures, fit store): the
checked plan, the input functions of the rules' wildcards, the report's entries."""

import json
import os
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

# The jobs import the package from their script's folder, which Snakemake puts on
# their import path; the Snakefile imports it from the same folder.
sys.path.insert(0, str(Path(workflow.basedir) / "workflow" / "scripts"))
import cbmm_workflow.config as configuration
from cbmm.registry import get_method
from cbmm_workflow import paths, render
from cbmm_workflow.jobs import code_digest, logged_warnings
from cbmm_workflow.store import mark_stale_batches, refit_marker
from cbmm_workflow.plan import CONVERGED, PAPER, Plan, registered_envs


def checked_plan(config):
    """The plan of ``config``, checked completely before any job: a bad configuration
    stops the run with one line per bad key."""
    try:
        return Plan(configuration.load_config(config, conda_envs=uses_conda_envs()))
    except configuration.ConfigError as exc:
        raise WorkflowError(str(exc)) from None


def show_logged_warnings(since):
    """At the end of a run (well or not): which of its jobs' logs hold warnings."""
    lines = logged_warnings(since)
    if lines:
        logger.warning(
            "warnings in this run's job logs (read them before using the "
            "results):\n" + "\n".join(lines)
        )


def check_software(config):
    """Stop before any job if a configured method cannot run (says how to fix it)."""
    try:
        configuration.check_software(config)
    except configuration.ConfigError as exc:
        # e.g. --report of an own-dataset run without its --configfile: the paper's methods
        given = (
            ""
            if workflow.overwrite_configfiles
            else (
                "\n(No --configfile was given: this is the paper's configuration, "
                "config/config.yaml. Pass the one your run used.)"
            )
        )
        raise WorkflowError(f"{exc}{given}") from None


def uses_conda_envs():
    from snakemake.settings.types import DeploymentMethod

    return DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method


def env_constraint():
    """Wildcard constraint of {env}: the conda envs of the registered methods."""
    return "|".join(map(re.escape, registered_envs()))


# ------------------------------------------------------------ input functions


def refit_input(pattern):
    """Input function: a batch table's refit marker (cbmm_workflow.store) when there is
    one, so that a batch whose stored fits were found missing or damaged runs again."""

    def marker(wildcards):
        path = refit_marker(pattern.format(**wildcards))
        return [str(path)] if path.is_file() else []

    return marker


def sim_batch(wildcards):
    return PLAN.sim_batches(wildcards.env)[int(wildcards.batch)]


def real_cells(dataset):
    """N x J of a built dataset (raises Snakemake's IncompleteCheckpointException, which
    input functions handle, until the checkpoint build_dataset has run)."""
    summary = checkpoints.build_dataset.get(dataset=dataset).output.summary
    shape = json.loads(Path(summary).read_text())
    return shape["n_models"] * shape["n_items"]


def real_batch(wildcards):
    cells = real_cells(wildcards.dataset)
    return PLAN.real_batches(wildcards.dataset, wildcards.env, cells)[
        int(wildcards.batch)
    ]


def real_batch_file(fit):
    return PLAN.real_batch_file(fit, real_cells(fit.dataset))


def real_batch_plan(fits):
    """The batch tables holding ``fits``, each with the fits planned for it: the reading
    job's inputs and (a parameter) what it checks them against (a table of another packing
    whose job Snakemake did not record is not taken for up to date)."""
    return PLAN.real_batch_plan(fits, real_cells)


def batch_env(wildcards):
    """The conda env of a batch job (the env its methods share)."""
    return str(paths.env_file(wildcards.env))


def method_env(wildcards):
    """The conda env of a job of one method."""
    return str(paths.env_file(get_method(wildcards.method).env))


def interpretability_inputs(wildcards):
    fits = PLAN.interpretability_fits(wildcards.dataset)
    return {f"{stopping}_batch": real_batch_file(fit) for stopping, fit in fits.items()}


def interpretability_plan(wildcards):
    return real_batch_plan(PLAN.interpretability_fits(wildcards.dataset).values())


def stability_plan(wildcards):
    return real_batch_plan(PLAN.stability_fits(wildcards.dataset))


def stability_inputs(wildcards):
    return list(stability_plan(wildcards))


def runtime_plan(wildcards):
    return real_batch_plan(PLAN.runtime_fits())


def runtime_batch_files(wildcards):
    return list(runtime_plan(wildcards))


def math500_fit_batch(wildcards):
    return real_batch_file(math500_fit())


def math500_plan(wildcards):
    return real_batch_plan([math500_fit()])


def math500_fit():
    return PLAN.interpretability_fits(PLAN.math500["dataset"])[CONVERGED]


# ------------------------------------------------------------- report entries


def report_table(path, caption, category, subcategory=None):
    """A table output shown in the Snakemake report with its caption."""
    return report(
        path,
        caption=f"../report/{caption}.rst",
        category=category,
        subcategory=subcategory,
    )


def figure_outputs(figures):
    """PDF, PNG (shown in the report) and caption of each figure (cbmm_workflow.render),
    in the order render.py reads them.  The report shows the caption file, which the
    render job writes in the working directory, by its absolute path."""
    outputs = []
    for figure in figures:
        stem = paths.FIGURE.format(figure=figure.name)
        png = report(
            f"{stem}.png",
            caption=os.path.abspath(f"{stem}.caption.rst"),
            category=figure.category,
            subcategory=figure.subcategory,
        )
        outputs += [f"{stem}.pdf", png, f"{stem}.caption.rst"]
    return outputs
