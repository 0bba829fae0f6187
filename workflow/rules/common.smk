"""Configuration, job enumeration and output paths shared by every stage.

Everything the rules need to know about the configuration goes through the
functions here, so each fact (a path pattern, a seed rule, a job list) has
one place.
"""

import json
import math
import os
import zlib
from pathlib import Path

import numpy as np
from cbmm.figures import STUDIES as PLOTTED_STUDIES
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

REPO = Path(workflow.basedir)
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------

def repo_path(path):
    """A path of the configuration: absolute, or relative to the repository root."""
    path = Path(os.path.expanduser(str(path)))
    return path if path.is_absolute() else REPO / path


def _merge_registry(config):
    """Put the registry file's entries (datasets and alternatives) under the config's own."""
    if config["registry"] is None:
        return
    from cbmm.data import DataError, load_registry

    registry_file = repo_path(config["registry"])
    try:
        registry = load_registry(registry_file)
    except DataError as exc:
        raise WorkflowError(f"config key 'registry': {exc}") from None
    config["datasets"] = {**registry["alternatives"], **registry["datasets"],
                          **config["datasets"]}
    config["release"] = {**registry["release"], **config["release"]}


def _check_references(config):
    """Cross-key checks JSON Schema cannot express; each error names its key."""
    problems = []
    studies = config["simulation"]["studies"]
    for study in config["simulation"]["run"]:
        if study not in studies:
            problems.append(f"simulation.run: study {study!r} is not defined under "
                            f"simulation.studies (defined: {', '.join(sorted(studies))})")
    datasets = config["datasets"]
    real = config["real"]
    references = [(f"real.{role}.datasets", real[role]["datasets"])
                  for role in ("runtime", "stability", "interpretability")]
    references.append(("real.interpretability.rankflow",
                       [panel["dataset"] for panel in real["interpretability"]["rankflow"]]))
    if math500() is not None:
        references.append(("real.interpretability.math500.dataset", [math500()["dataset"]]))
    for key, names in references:
        for name in names:
            if name not in datasets:
                problems.append(f"{key}: dataset {name!r} is not in the registry "
                                f"(known: {', '.join(sorted(datasets)) or 'none'})")
    for name, entry in datasets.items():
        if entry["source"] == "local":
            path = repo_path(entry["options"]["path"])
            if not path.is_file():
                problems.append(f"datasets.{name}.options.path: file {path} not found")
    if math500() is not None:
        models, items = math500()["models"], math500()["items"]
        if not repo_path(models).is_file():
            problems.append(f"real.interpretability.math500.models: file {repo_path(models)} "
                            "not found")
        if items != "hub" and not repo_path(items).is_file():
            problems.append(f"real.interpretability.math500.items: file {repo_path(items)} "
                            "not found")
    if problems:
        raise WorkflowError("invalid configuration:\n" + "\n".join(f"- {p}" for p in problems))


def load_config(config):
    """Validate ``config`` (filling schema defaults) and merge the dataset registry."""
    validate(config, schema=str(SCHEMA))
    _merge_registry(config)
    validate(config, schema=str(SCHEMA))  # the merged registry entries too
    _check_references(config)
    return config


def check_software(config):
    """Stop before any job if a configured method cannot run (says how to fix it)."""
    import cbmm

    try:
        cbmm.check_methods(used_methods(config))
    except cbmm.MethodUnavailableError as exc:
        raise WorkflowError(
            f"{exc}\nInstall the missing software as shown, or remove the method from "
            "the `methods:` list of your config (e.g. --config 'methods=[cbmm,lbfgsb]')."
        ) from None


def uses_conda_envs():
    from snakemake.settings.types import DeploymentMethod

    return DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method


def used_methods(config):
    """Methods some job will run (cbmm always: the real-data studies need it)."""
    methods = list(config["methods"])
    return methods if "cbmm" in methods else methods + ["cbmm"]


# --------------------------------------------------------------------------
# formatting of wildcard values
# --------------------------------------------------------------------------

def fmt(value):
    """Canonical text of a number in paths: 200, 0.1, -0.75, 0 (no trailing zeros)."""
    return format(float(value), "g")


# --------------------------------------------------------------------------
# simulation studies
# --------------------------------------------------------------------------

def sim_studies():
    return list(config["simulation"]["run"])


def sim_levels(study):
    return [fmt(v) for v in config["simulation"]["studies"][study]["levels"]]


def sim_replicates():
    return range(config["simulation"]["replicates"])


def sim_design(study, level):
    """Arguments of cbmm.simulate.simulate for one (study, level) (seed excluded)."""
    spec = config["simulation"]["studies"][study]
    design = dict(config["simulation"]["defaults"])
    design["missing"] = spec.get("missing", design["missing"])
    factor = spec["factor"]
    design[factor] = int(float(level)) if factor in ("n_models", "n_items") else float(level)
    return {
        "n_models": int(design["n_models"]),
        "n_items": int(design["n_items"]),
        "sigma": float(10.0 ** design["log10_sigma"]),
        "sparsity": float(design["sparsity"]),
        "missing": design["missing"],
        "missing_rate": float(design["missing_rate"]),
    }


def sim_seed(study, level, replicate):
    """Seed of one simulated replicate: a child of the base seed keyed by the design.

    Keyed by names and values (not list positions), so adding a level or a
    study leaves every existing replicate unchanged.
    """
    key = [config["simulation"]["seed"], zlib.crc32(study.encode()),
           zlib.crc32(fmt(level).encode()), int(replicate)]
    return int(np.random.SeedSequence(key).generate_state(1, dtype=np.uint32)[0])


# --------------------------------------------------------------------------
# real-data studies
# --------------------------------------------------------------------------

def runtime_methods():
    excluded = set(config["real"]["runtime"]["exclude_methods"])
    return [m for m in config["methods"] if m not in excluded]


def runtime_fits():
    """(dataset, method, init_scale, seed) of the runtime study."""
    rt = config["real"]["runtime"]
    scale = fmt(config["fit"]["init_scale"])
    return [(d, m, scale, s) for d in rt["datasets"] for m in runtime_methods()
            for s in range(rt["replicates"])]


def stability_fits(dataset):
    st = config["real"]["stability"]
    return [(dataset, "cbmm", fmt(v), s) for v in st["init_scales"]
            for s in range(st["replicates"])]


def interpretability_fit(dataset):
    it = config["real"]["interpretability"]
    return (dataset, "cbmm", fmt(config["fit"]["init_scale"]), it["seed"])


def math500():
    """The MATH-500 settings, or None when real.interpretability.math500.dataset is null."""
    settings = config["real"]["interpretability"]["math500"]
    return settings if settings["dataset"] is not None else None


# --------------------------------------------------------------------------
# output paths (one place for each pattern)
# --------------------------------------------------------------------------

MATRIX = "resources/matrices/{dataset}.parquet"
MATRIX_SUMMARY = "resources/matrices/{dataset}.summary.json"
SIMULATION = "results/simulations/{study}/level_{level}/rep_{replicate}.npz"
SIM_FIT_DIR = "results/fits/simulation/{study}/level_{level}/{method}/rep_{replicate}"
SIM_METRICS = "results/metrics/simulation/{study}/level_{level}/{method}/rep_{replicate}.json"
REAL_FIT_DIR = "results/fits/real/{dataset}/{method}/s2_{init_scale}/seed_{seed}"
# The files FitResult.save writes, by the input/output key the rules use for them
# ("items" would shadow a method of Snakemake's named lists).
FIT_FILES = {"fit": "fit.json", "abilities": "abilities.csv", "item_params": "items.csv"}


def fit_outputs(fit_dir):
    return {key: f"{fit_dir}/{name}" for key, name in FIT_FILES.items()}


def real_fit_files(dataset, method, init_scale, seed, name="fit.json"):
    return f"{REAL_FIT_DIR}/{name}".format(dataset=dataset, method=method,
                                           init_scale=init_scale, seed=seed)


def real_fit_inputs(dataset, method, init_scale, seed):
    """All files of one real fit, keyed like fit_outputs."""
    return fit_outputs(REAL_FIT_DIR.format(dataset=dataset, method=method,
                                           init_scale=init_scale, seed=seed))


# --------------------------------------------------------------------------
# cluster resources of fit jobs
# --------------------------------------------------------------------------

def fit_mem_mb(cells):
    res = config["fit"]["resources"]
    return int(math.ceil(res["mem_mb_base"] + res["mem_mb_per_million_cells"] * cells / 1e6))


def fit_runtime_min(method, cells):
    """Minutes requested for one fit; never less than the configured fit time limit."""
    res = config["fit"]["resources"]
    per_cell = res["runtime_min_per_million_cells"].get(method, 60)
    minutes = res["runtime_min_base"] + per_cell * cells / 1e6
    if config["fit"]["timeout_s"] is not None:
        minutes = max(minutes, config["fit"]["timeout_s"] / 60 + res["runtime_min_base"])
    return int(math.ceil(minutes))


def sim_cells(wildcards):
    design = sim_design(wildcards.study, wildcards.level)
    return design["n_models"] * design["n_items"]


def real_cells(summary_path):
    """N x J of a built matrix (read from its summary; FileNotFoundError until built,
    which Snakemake resolves by evaluating the resource again once the input exists)."""
    summary = json.loads(Path(summary_path).read_text())
    return summary["n_models"] * summary["n_items"]


# --------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------

def figure_files(name):
    return [f"results/figures/{name}.pdf", f"results/figures/{name}.png"]


def sim_metrics_files(wildcards):
    """Metrics of every fit of one simulation study."""
    return [SIM_METRICS.format(study=wildcards.study, level=level, method=method, replicate=r)
            for level in sim_levels(wildcards.study) for method in config["methods"]
            for r in sim_replicates()]


wildcard_constraints:
    study=r"[A-Za-z0-9_]+",
    level=r"-?[0-9][0-9.e+-]*",
    replicate=r"\d+",
    seed=r"\d+",
    init_scale=r"[0-9][0-9.e+-]*",
    method=r"[a-z]+",
    dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",


# --------------------------------------------------------------------------
# real data (data.smk)
# --------------------------------------------------------------------------

def local_source(wildcards):
    """A local dataset's file is an input, so editing it rebuilds the matrix."""
    entry = config["datasets"][wildcards.dataset]
    return [str(repo_path(entry["options"]["path"]))] if entry["source"] == "local" else []


def local_entry(entry):
    """The registry entry with a local path made absolute (paths are relative to the repo)."""
    if entry["source"] != "local":
        return entry
    options = {**entry["options"], "path": str(repo_path(entry["options"]["path"]))}
    return {**entry, "options": options}


MATH500_ITEMS = "resources/metadata/math500_items.csv"


MATH500_MODELS = "resources/metadata/math500_models.csv"


# --------------------------------------------------------------------------
# fits (fit.smk)
# --------------------------------------------------------------------------

METHOD_ENVS = {"mirt": "../../envs/mirt.yaml", "pyirt": "../../envs/pyirt.yaml"}


def method_env(wildcards):
    return METHOD_ENVS.get(wildcards.method, "../../envs/core.yaml")


def method_options(wildcards):
    return config["fit"]["method_options"].get(wildcards.method, {})


# --------------------------------------------------------------------------
# metrics (metrics.smk)
# --------------------------------------------------------------------------

REAL_METRICS = "results/metrics/real/{dataset}.json"


RANKINGS = "results/tables/rankings/{dataset}.csv"


STABILITY = "results/metrics/stability/{dataset}.csv"


def interpretability_fit_files(wildcards):
    return real_fit_inputs(*interpretability_fit(wildcards.dataset))


def stability_fit_abilities(wildcards):
    """Parameter files of every stability fit, keyed s2_<v>_seed_<s>_<abilities|item_params>."""
    files = {}
    for job in stability_fits(wildcards.dataset):
        _, _, scale, seed = job
        for key, path in real_fit_inputs(*job).items():
            if key != "fit":
                files[f"s2_{scale}_seed_{seed}_{key}"] = path
    return files


# --------------------------------------------------------------------------
# aggregated tables (aggregate.smk)
# --------------------------------------------------------------------------

SIM_TABLE = "results/tables/sim_{study}.csv"


RUNTIME_TABLE = "results/tables/runtime_leaderboard.csv"


DISCRIMINATION_TABLE = "results/tables/discrimination_summary.csv"


STABILITY_TABLE = "results/tables/stability_raw.csv"


MATH500_ABILITIES = "results/tables/math500_abilities.csv"


MATH500_ITEMS_TABLE = "results/tables/math500_items.csv"


def all_tables():
    """Every aggregated table the configuration asks for."""
    real = config["real"]
    tables = expand(SIM_TABLE, study=sim_studies())
    if real["runtime"]["datasets"] and runtime_methods():
        tables.append(RUNTIME_TABLE)
    if real["interpretability"]["datasets"]:
        tables.append(DISCRIMINATION_TABLE)
        tables += expand(RANKINGS, dataset=real["interpretability"]["datasets"])
    if real["stability"]["datasets"]:
        tables.append(STABILITY_TABLE)
    if math500() is not None:
        tables += [MATH500_ABILITIES, MATH500_ITEMS_TABLE]
    return tables


# --------------------------------------------------------------------------
# figures and paper tables (render.smk)
# --------------------------------------------------------------------------

STABILITY_TEX = "results/tables/stability_{parameter}.tex"


def rankflow_panels():
    return {p["dataset"]: p["top"] for p in config["real"]["interpretability"]["rankflow"]}


def all_figures():
    """Every figure and LaTeX/summary table the configuration asks for."""
    real = config["real"]
    outputs = []
    for study in sim_studies():
        if study in PLOTTED_STUDIES:
            outputs += figure_files(f"sensitivity_{study}")
    if real["runtime"]["datasets"] and runtime_methods():
        outputs += figure_files("runtime")
        outputs += ["results/tables/runtime_summary.csv", "results/tables/speedup.csv"]
    if real["interpretability"]["datasets"]:
        outputs += figure_files("discrimination")
        for dataset in real["interpretability"]["datasets"]:
            outputs += figure_files(f"rankflow_{dataset}")
    if rankflow_panels():
        outputs += figure_files("rankflow")
    if real["stability"]["datasets"]:
        outputs += expand(STABILITY_TEX, parameter=["theta", "a", "b"])
        outputs.append("results/tables/stability_summary.csv")
    if math500() is not None:
        outputs += figure_files("math500_ability") + figure_files("item_difficulty")
        outputs.append("results/tables/math500_models.tex")
    return outputs


def report_table(path, caption, category, subcategory=None):
    """A table output shown in the Snakemake report with its caption."""
    return report(path, caption=f"../report/{caption}.rst", category=category,
                  subcategory=subcategory)


def figure_outputs(name, category, subcategory=None, caption=None):
    """PDF (plain) and PNG (shown in the Snakemake report) of one figure."""
    pdf, png = figure_files(name)
    return {"pdf": pdf,
            "png": report(png, caption=f"../report/{caption or name}.rst", category=category,
                          subcategory=subcategory)}
