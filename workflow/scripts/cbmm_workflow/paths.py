"""Where every file goes: one pattern per kind of file, relative to the working directory
(``--directory``), and the repository's own files, relative to its root."""

from __future__ import annotations

import os
from pathlib import Path

from cbmm.tables import STABILITY_PARAMETERS, TABLE_DIR, TABLE_FILES

#: The repository root (the Snakefile's folder): this file is
#: workflow/scripts/cbmm_workflow/paths.py.
REPO = Path(__file__).parents[3]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def repo_path(path) -> Path:
    """A path of the configuration: absolute, or relative to the repository root."""
    path = Path(os.path.expanduser(str(path)))
    return path if path.is_absolute() else REPO / path


def env_file(env: str) -> Path:
    """A conda env of the jobs: envs/<env>.yaml."""
    return REPO / "envs" / f"{env}.yaml"


def fmt(value) -> str:
    """Canonical text of a number in paths: 200, 0.1, -0.75, 0 (no trailing zeros)."""
    return format(float(value), "g")


def table(name: str) -> str:
    """The pattern of an aggregated table (a name of :data:`cbmm.tables.TABLE_FILES`)."""
    return f"{TABLE_DIR}/{TABLE_FILES[name]}"


MATRIX = "resources/matrices/{dataset}.parquet"
MATRIX_SUMMARY = "resources/matrices/{dataset}.summary.json"
MATH500_ITEMS = "resources/metadata/math500_items.csv"
MATH500_MODELS = "resources/metadata/math500_models.csv"
# One finished fit (cbmm_workflow.store), written by a batch job.
SIM_FIT_DIR = "results/fits/simulation/{study}/level_{level}/{method}/rep_{replicate}"
REAL_FIT_DIR = "results/fits/real/{dataset}/{method}/{stopping}/s2_{init_scale}/seed_{seed}"
# One row per fit of a batch job (the job's declared output).  A batch holds the fits
# of every configured method that runs in conda env {env}.
SIM_BATCH = "results/batches/simulation/{env}/batch_{batch}.csv"
REAL_BATCH = "results/batches/real/{dataset}/{env}/batch_{batch}.csv"
REAL_METRICS = "results/metrics/real/{dataset}.json"
STABILITY = "results/metrics/stability/{dataset}.csv"
SIM_TABLE = table("simulation")
RUNTIME_TABLE = table("runtime")
RUNTIME_SUMMARY = table("runtime_summary")
SPEEDUP_TABLE = table("speedup")
DISCRIMINATION_TABLE = table("discrimination")
RANKINGS = table("rankings")
STABILITY_TABLE = table("stability_raw")
STABILITY_SUMMARY = table("stability_summary")
STABILITY_TEX = table("stability_latex")
MATH500_ABILITIES = table("math500_abilities")
MATH500_ITEMS_TABLE = table("math500_items")
MATH500_MODELS_TEX = table("math500_models_latex")
ABILITIES_TABLE = table("abilities")
HELDOUT_TABLE = table("heldout")
# One method's cross-validation on one dataset (its own job, in the method's conda env).
HELDOUT_PART = "results/validation/{dataset}/{method}.csv"
# The efficient-evaluation study (rules/efficiency.smk): its tables, and the per-model rows
# of the selection study that its table summarises.
EFFICIENCY_TABLE = table("efficiency")
ADAPTIVE_TABLE = table("adaptive")
ADAPTIVE_SUMMARY_TABLE = table("adaptive_summary")
ITEM_AUDIT_TABLE = table("item_audit")
EFFICIENCY_ROWS = "results/efficiency/{dataset}/selection.csv"
FIDELITY = "results/fidelity/fidelity.csv"
FIGURE = "results/figures/{figure}"  # + .pdf, .png and .caption.rst
STABILITY_TEX_FILES = [STABILITY_TEX.format(parameter=p) for p in STABILITY_PARAMETERS]


def figure_files(name: str) -> list[str]:
    """PDF and PNG of one figure (what rule all asks for)."""
    stem = FIGURE.format(figure=name)
    return [f"{stem}.pdf", f"{stem}.png"]


#: The jobs' logs, a folder per rule.
LOGS = "logs"


def log_file(rule: str, name: str) -> str:
    """Log of one job of ``rule``."""
    return f"{LOGS}/{rule}/{name}.log"


def benchmark_file(rule: str, name: str) -> str:
    """Snakemake's benchmark (wall time, memory) of one job of ``rule``."""
    return f"results/benchmarks/{rule}/{name}.tsv"
