"""Configuration, job lists, batches and output paths shared by every stage.

Everything the rules need to know about the configuration goes through the
functions here, so each fact (a path pattern, a seed rule, a batch, a job
list) has one place.  Method facts (names, options, costs, conda envs) come
from the method registry, :mod:`cbmm.registry`.
"""

import functools
import importlib.util
import json
import math
import os
import re
import zlib
from pathlib import Path

import cbmm
import jsonschema
import numpy as np
import yaml
from cbmm.data import DataError, load_registry, validate_registry
from cbmm.data.release import check_release
from cbmm.registry import get_method, method_order
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

REPO = Path(workflow.basedir)
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def _load_helpers():
    """workflow/scripts/helpers.py, which the jobs import too (one copy of shared code)."""
    spec = importlib.util.spec_from_file_location(
        "cbmm_workflow_helpers", REPO / "workflow" / "scripts" / "helpers.py"
    )
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    return helpers


HELPERS = _load_helpers()

# --------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------


def repo_path(path):
    """A path of the configuration: absolute, or relative to the repository root."""
    path = Path(os.path.expanduser(str(path)))
    return path if path.is_absolute() else REPO / path


def _key(path):
    """A JSON-Schema error path as a config key: simulation.studies.mcar.levels[0]."""
    parts = (f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
    return "".join(parts).lstrip(".")


def _schema_problems(config):
    """One line per schema violation, naming the key."""
    schema = yaml.safe_load(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.path)))
    return [f"{_key(e.absolute_path) or '(top level)'}: {e.message}" for e in errors]


def _fail(problems):
    if problems:
        lines = "\n".join(f"- {p}" for p in problems)
        raise WorkflowError(f"invalid configuration:\n{lines}")


def _import_method_modules(config):
    """Register the user's methods (config key method_modules) in this process."""
    try:
        HELPERS.import_method_modules(method_modules())
    except (
        Exception
    ) as exc:  # any error of a user's module: name the key and the module
        raise WorkflowError(
            f"invalid configuration:\n- method_modules: {exc}"
        ) from None


def method_modules():
    """The method_modules entries as the jobs import them (.py files made absolute)."""
    return [
        str(repo_path(spec)) if spec.endswith(".py") else spec
        for spec in config["method_modules"]
    ]


def _check_datasets(config):
    """The config's own release and dataset entries, by the registry's own check
    (cbmm.data.validate_registry: unknown or missing options, a missing sha256, paths
    that would leave the download cache)."""
    try:
        validate_registry(
            {"release": config["release"], "datasets": config["datasets"]}, "config"
        )
    except DataError as exc:
        return [str(exc)]
    return []


def _merge_registry(config):
    """Put the registry file's entries (datasets and alternatives) under the config's own."""
    if config["registry"] is None:
        return
    try:
        registry = load_registry(repo_path(config["registry"]))
    except DataError as exc:
        _fail([f"registry: {exc}"])
    config["datasets"] = {
        **registry["alternatives"],
        **registry["datasets"],
        **config["datasets"],
    }
    try:
        config["release"] = check_release({**registry["release"], **config["release"]})
    except DataError as exc:
        _fail([str(exc)])


def _check_methods(config):
    """Every method named anywhere is registered; options are the method's own."""
    problems = []
    known = cbmm.available_methods()
    named = [("methods", m) for m in config["methods"]]
    named += [
        ("real.runtime.exclude_methods", m)
        for m in config["real"]["runtime"]["exclude_methods"]
    ]
    named += [("fit.method_options", m) for m in config["fit"]["method_options"]]
    for key, name in named:
        if name not in known:
            problems.append(
                f"{key}: method {name!r} is not registered (registered: {', '.join(known)}; "
                "add your own through method_modules)"
            )
    for name, options in config["fit"]["method_options"].items():
        if name in known:
            problems += _option_problems(f"fit.method_options.{name}", name, options)
    converged = {"accelerate": config["real"]["converged"]["accelerate"]}
    problems += _option_problems("real.converged", "cbmm", converged)
    if uses_conda_envs():
        for name in used_methods(config):
            if name in known and not method_env_file(name).is_file():
                problems.append(
                    f"methods: {name!r} runs in conda env {method_env_file(name)}, "
                    "which does not exist (Method.env of its registry entry)"
                )
    return problems


def _option_problems(key, method, options):
    """Options checked against the registry: JSON Schema of the declared options, then
    the method's own check (which also catches what JSON Schema cannot say)."""
    spec = get_method(method)
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: o.json_schema() for name, o in spec.options.items()},
    }
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(options))
    if errors:
        known = ", ".join(sorted(spec.options)) or "none"
        return [
            f"{'.'.join(filter(None, [key, _key(e.absolute_path)]))}: {e.message} "
            f"(options of {method}: {known})"
            for e in errors
        ]
    try:
        spec.check_options(options)
    except ValueError as exc:
        return [f"{key}: {exc}"]
    return []


#: Allowed levels per design factor: (test, what a level must be).
LEVEL_RULES = {
    "n_models": (lambda v: v >= 2 and float(v).is_integer(), "an integer >= 2"),
    "n_items": (lambda v: v >= 2 and float(v).is_integer(), "an integer >= 2"),
    "log10_sigma": (lambda v: math.isfinite(v), "a finite number"),
    "sparsity": (lambda v: 0 <= v < 1, "a share in [0, 1)"),
    "missing_rate": (lambda v: 0 <= v < 1, "a share in [0, 1)"),
}


def _check_levels(config):
    """Each study's levels are possible values of its factor (schema: numbers)."""
    problems = []
    sim = config["simulation"]
    for study, spec in sim["studies"].items():
        test, what = LEVEL_RULES[spec["factor"]]
        for i, level in enumerate(spec["levels"]):
            if not test(level):
                problems.append(
                    f"simulation.studies.{study}.levels[{i}]: {level!r} is not a possible "
                    f"{spec['factor']} (must be {what})"
                )
    defaults = sim["defaults"]
    for factor in ("n_models", "n_items"):
        test, what = LEVEL_RULES[factor]
        if not test(defaults[factor]):
            problems.append(
                f"simulation.defaults.{factor}: {defaults[factor]!r} must be {what}"
            )
    return problems


def _check_references(config):
    """Cross-key checks JSON Schema cannot express; each names its key."""
    problems = []
    studies = config["simulation"]["studies"]
    for study in config["simulation"]["run"]:
        if study not in studies:
            problems.append(
                f"simulation.run: study {study!r} is not defined under simulation.studies "
                f"(defined: {', '.join(sorted(studies))})"
            )
    datasets = config["datasets"]
    real = config["real"]
    references = [
        (f"real.{role}.datasets", real[role]["datasets"])
        for role in ("runtime", "stability", "interpretability")
    ]
    references.append(
        (
            "real.interpretability.rankflow",
            [panel["dataset"] for panel in real["interpretability"]["rankflow"]],
        )
    )
    if math500() is not None:
        references.append(
            ("real.interpretability.math500.dataset", [math500()["dataset"]])
        )
    for key, names in references:
        for name in names:
            if name not in datasets:
                problems.append(
                    f"{key}: dataset {name!r} is not in the registry "
                    f"(known: {', '.join(sorted(datasets)) or 'none'})"
                )
    for panel in real["interpretability"]["rankflow"]:
        if panel["dataset"] not in real["interpretability"]["datasets"]:
            problems.append(
                f"real.interpretability.rankflow: dataset {panel['dataset']!r} must also be "
                "listed in real.interpretability.datasets (its ranking is drawn)"
            )
    for name, entry in datasets.items():
        if entry["source"] == "local":
            path = repo_path(entry["options"]["path"])
            if not path.is_file():
                problems.append(f"datasets.{name}.options.path: file {path} not found")
    if math500() is not None:
        models, items = math500()["models"], math500()["items"]
        if not repo_path(models).is_file():
            problems.append(
                f"real.interpretability.math500.models: file {repo_path(models)} not found"
            )
        if items != "hub" and not repo_path(items).is_file():
            problems.append(
                f"real.interpretability.math500.items: file {repo_path(items)} not found"
            )
    return problems


def load_config(config):
    """Check ``config`` completely before any job: schema (filling defaults), the user's
    methods, the dataset registry, method names and options, levels, references."""
    _fail(_schema_problems(config))
    validate(config, schema=str(SCHEMA))  # fills the defaults
    _import_method_modules(config)
    _fail(_check_datasets(config))
    _merge_registry(config)
    _fail(_check_methods(config) + _check_levels(config) + _check_references(config))
    return config


def check_software(config):
    """Stop before any job if a configured method cannot run (says how to fix it)."""
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
# output paths (one place for each pattern)
# --------------------------------------------------------------------------

MATRIX = "resources/matrices/{dataset}.parquet"
MATRIX_SUMMARY = "resources/matrices/{dataset}.summary.json"
MATH500_ITEMS = "resources/metadata/math500_items.csv"
MATH500_MODELS = "resources/metadata/math500_models.csv"
# One finished fit (fit.json, abilities.csv, items.csv, unit.json), written by a batch job.
SIM_FIT_DIR = "results/fits/simulation/{study}/level_{level}/{method}/rep_{replicate}"
REAL_FIT_DIR = (
    "results/fits/real/{dataset}/{method}/{stopping}/s2_{init_scale}/seed_{seed}"
)
# One row per fit of a batch job (the job's declared output).  A batch holds the fits
# of every configured method that runs in conda env {env}.
SIM_BATCH = "results/batches/simulation/{env}/batch_{batch}.csv"
REAL_BATCH = "results/batches/real/{dataset}/{env}/batch_{batch}.csv"
REAL_METRICS = "results/metrics/real/{dataset}.json"
STABILITY = "results/metrics/stability/{dataset}.csv"
SIM_TABLE = "results/tables/sim_{study}.csv"
RUNTIME_TABLE = "results/tables/runtime_leaderboard.csv"
RUNTIME_SUMMARY = "results/tables/runtime_summary.csv"
SPEEDUP_TABLE = "results/tables/speedup.csv"
DISCRIMINATION_TABLE = "results/tables/discrimination_summary.csv"
RANKINGS = "results/tables/rankings/{dataset}.csv"
STABILITY_TABLE = "results/tables/stability_raw.csv"
STABILITY_SUMMARY = "results/tables/stability_summary.csv"
STABILITY_TEX = "results/tables/stability_{parameter}.tex"
MATH500_ABILITIES = "results/tables/math500_abilities.csv"
MATH500_ITEMS_TABLE = "results/tables/math500_items.csv"
MATH500_MODELS_TEX = "results/tables/math500_models.tex"
FIDELITY = "results/fidelity/fidelity.csv"
FIGURE = "results/figures/{figure}"  # + .pdf, .png and .caption.rst
STABILITY_PARAMETERS = ["theta", "a", "b"]


def figure_files(name):
    """PDF and PNG of one figure (what rule all asks for)."""
    stem = FIGURE.format(figure=name)
    return [f"{stem}.pdf", f"{stem}.png"]


def log_file(job, name):
    """Log of one job of rule ``job``."""
    return f"logs/{job}/{name}.log"


def benchmark_file(job, name):
    """Snakemake's benchmark (wall time, memory) of one job of rule ``job``."""
    return f"results/benchmarks/{job}/{name}.tsv"


# --------------------------------------------------------------------------
# method facts (from the registry)
# --------------------------------------------------------------------------


def methods_in_order():
    """The configured methods in display order (the registry's; the jobs that sort by
    it need not import the user's method modules)."""
    return method_order(used_methods(config))


def env_file(env):
    """A conda env of the jobs: envs/<env>.yaml."""
    return REPO / "envs" / f"{env}.yaml"


def method_env_file(method):
    """The conda env of a method's fits: that of its registry entry (Method.env)."""
    return env_file(get_method(method).env)


def batch_env(wildcards):
    """The conda env of a batch job (the env its methods share)."""
    return str(env_file(wildcards.env))


#: Frameworks that a method's library imports whenever they are installed, though the
#: method does not use them: pymanopt loads torch as an autodiff back-end (1.3 CPU-s)
#: while cBMM's Manopt passes analytic NumPy gradients.  {import name: package names}
OPTIONAL_FRAMEWORKS = {"torch": {"torch", "pytorch"}}


def absent_frameworks(wildcards):
    """The OPTIONAL_FRAMEWORKS that a batch job's env file does not list.  The job hides
    them while it loads its methods' software, as they would be absent in that env under
    --sdm conda, so that one shared environment (.venv) costs the same start-up."""
    return env_absent_frameworks(wildcards.env)


@functools.cache
def env_absent_frameworks(env):
    """absent_frameworks of one env (its file is read once, not once per batch job)."""
    env = yaml.safe_load(env_file(env).read_text())
    listed = set()
    for dependency in env["dependencies"]:
        for spec in dependency["pip"] if isinstance(dependency, dict) else [dependency]:
            listed.add(re.split(r"[\s=<>!\[]", spec.strip(), maxsplit=1)[0].lower())
    return [
        name for name, packages in OPTIONAL_FRAMEWORKS.items() if not packages & listed
    ]


def env_methods(methods):
    """``methods`` grouped by the conda env they run in: {env: [method, ...]}, both in
    the order given.  The fits of one env share batch jobs (one Python start-up)."""
    groups = {}
    for method in methods:
        groups.setdefault(get_method(method).env, []).append(method)
    return groups


def method_options(method):
    return config["fit"]["method_options"].get(method, {})


def fit_cost_s(method, cells):
    """Declared single-core seconds of one fit (the registry's seconds_per_million_cells)."""
    return get_method(method).seconds_per_million_cells * cells / 1e6


def fit_timeout_s(method, cells, max_iter):
    """fit.timeout_s for one fit ('auto': cbmm.fit's own rule, resolved here because the
    batch's runtime resource and the fit's stored key depend on it)."""
    timeout = config["fit"]["timeout_s"]
    if timeout == "auto":
        return get_method(method).default_timeout_s(cells, 1, max_iter)
    return timeout


# --------------------------------------------------------------------------
# batches: fits packed into jobs by their declared cost
# --------------------------------------------------------------------------


def pack(units, costs, target):
    """Consecutive ``units`` in batches whose summed ``costs`` stay within ``target``
    (a unit costlier than ``target`` is a batch of its own)."""
    batches, current, total = [], [], 0.0
    for unit, cost in zip(units, costs):
        if current and total + cost > target:
            batches.append(current)
            current, total = [], 0.0
        current.append(unit)
        total += cost
    if current:
        batches.append(current)
    return batches


def batch_resources(units):
    """mem_mb and runtime (minutes) of one batch job: memory of its largest fit; runtime
    of twice its declared cost plus the largest time limit among its fits."""
    res = config["fit"]["resources"]
    cells = max(u["cells"] for u in units)
    mem_mb = res["mem_mb_base"] + res["mem_mb_per_million_cells"] * cells / 1e6
    cost = sum(u["cost_s"] for u in units)
    limits = [u["timeout_s"] for u in units if u["timeout_s"] is not None]
    seconds = 2 * cost + (max(limits) if limits else 2 * cost)
    return int(math.ceil(mem_mb)), int(
        math.ceil(res["runtime_min_base"] + seconds / 60)
    )


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
    design[factor] = float(level)
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
    key = [
        config["simulation"]["seed"],
        zlib.crc32(study.encode()),
        zlib.crc32(fmt(level).encode()),
        int(replicate),
    ]
    return int(np.random.SeedSequence(key).generate_state(1, dtype=np.uint32)[0])


@functools.cache
def sim_batches(env):
    """The simulated fits of the methods of one env packed into jobs: every study,
    level, replicate and method in that order, so a job draws each data set once for
    all its methods."""
    fit = config["fit"]
    methods = env_methods(config["methods"])[env]
    units = []
    for study in sim_studies():
        for level in sim_levels(study):
            design = sim_design(study, level)
            cells = design["n_models"] * design["n_items"]
            for replicate in sim_replicates():
                for method in methods:
                    units.append(
                        {
                            "study": study,
                            "level": level,
                            "replicate": replicate,
                            "method": method,
                            "options": method_options(method),
                            "design": design,
                            "seed": sim_seed(study, level, replicate),
                            "fit_dir": SIM_FIT_DIR.format(
                                study=study,
                                level=level,
                                method=method,
                                replicate=replicate,
                            ),
                            "cells": cells,
                            "cost_s": fit_cost_s(method, cells),
                            "timeout_s": fit_timeout_s(method, cells, fit["max_iter"]),
                        }
                    )
    return pack(units, [u["cost_s"] for u in units], fit["batch_seconds"])


def sim_batch_files():
    """Batch tables of every simulated fit."""
    return [
        SIM_BATCH.format(env=env, batch=k)
        for env in env_methods(config["methods"])
        for k in range(len(sim_batches(env)))
    ]


def sim_batch(wildcards):
    return sim_batches(wildcards.env)[int(wildcards.batch)]


# --------------------------------------------------------------------------
# real-data studies
# --------------------------------------------------------------------------
# A real fit is (dataset, method, rule, init_scale, seed); rule "paper" is the
# paper's stopping rule (config fit), rule "converged" is real.converged.  The
# runtime study uses the paper's rule; interpretability and stability the
# converged one; the same fit needed twice is made once.

PAPER, CONVERGED = "paper", "converged"


def runtime_methods():
    excluded = set(config["real"]["runtime"]["exclude_methods"])
    return [m for m in config["methods"] if m not in excluded]


def runtime_fits():
    """(dataset, method, rule, init_scale, seed) of the runtime study."""
    rt = config["real"]["runtime"]
    scale = fmt(config["fit"]["init_scale"])
    return [
        (d, m, PAPER, scale, s)
        for d in rt["datasets"]
        for m in runtime_methods()
        for s in range(rt["replicates"])
    ]


def stability_fits(dataset):
    st = config["real"]["stability"]
    return [
        (dataset, "cbmm", CONVERGED, fmt(v), s)
        for v in st["init_scales"]
        for s in range(st["replicates"])
    ]


def interpretability_fits(dataset):
    """The converged fit behind a dataset's rankings and summaries, and its paper-rule twin."""
    seed = config["real"]["interpretability"]["seed"]
    scale = fmt(config["fit"]["init_scale"])
    return {
        stopping: (dataset, "cbmm", stopping, scale, seed)
        for stopping in (CONVERGED, PAPER)
    }


def real_settings(stopping):
    """tol, max_iter and cbmm options of a stopping rule."""
    if stopping == PAPER:
        return config["fit"]["tol"], config["fit"]["max_iter"], {}
    converged = config["real"]["converged"]
    return (
        converged["tol"],
        converged["max_iter"],
        {"accelerate": converged["accelerate"]},
    )


@functools.cache
def real_units():
    """Every real fit the configuration needs, once each, in a stable order."""
    real = config["real"]
    fits = list(runtime_fits())
    for dataset in real["stability"]["datasets"]:
        fits += stability_fits(dataset)
    for dataset in real["interpretability"]["datasets"]:
        fits += interpretability_fits(dataset).values()
    return list(dict.fromkeys(fits))


def real_fit_dir(fit):
    dataset, method, stopping, scale, seed = fit
    return REAL_FIT_DIR.format(
        dataset=dataset, method=method, stopping=stopping, init_scale=scale, seed=seed
    )


@functools.cache
def real_batches(dataset, env):
    """The fits of one dataset by the methods of one env, under both stopping rules,
    packed into jobs by their cost at the dataset's size (known once build_dataset, a
    checkpoint, has run: call this only from input functions)."""
    cells = real_cells(dataset)
    units = []
    for fit in real_units():
        fit_dataset, method, stopping, scale, seed = fit
        if (fit_dataset, get_method(method).env) != (dataset, env):
            continue
        tol, max_iter, rule_options = real_settings(stopping)
        units.append(
            {
                "method": method,
                "options": {**method_options(method), **rule_options},
                "stopping": stopping,
                "tol": tol,
                "max_iter": max_iter,
                "init_scale": float(scale),
                "seed": seed,
                "fit_dir": real_fit_dir(fit),
                "cells": cells,
                "cost_s": fit_cost_s(method, cells),
                "timeout_s": fit_timeout_s(method, cells, max_iter),
            }
        )
    return pack(units, [u["cost_s"] for u in units], config["fit"]["batch_seconds"])


def real_cells(dataset):
    """N x J of a built dataset (raises Snakemake's IncompleteCheckpointException, which
    input functions handle, until build_dataset has run)."""
    summary = checkpoints.build_dataset.get(dataset=dataset).output.summary
    shape = json.loads(Path(summary).read_text())
    return shape["n_models"] * shape["n_items"]


def real_batch_of(fit):
    """The batch table holding one real fit."""
    dataset, method = fit[:2]
    env = get_method(method).env
    for k, batch in enumerate(real_batches(dataset, env)):
        if any(u["fit_dir"] == real_fit_dir(fit) for u in batch):
            return REAL_BATCH.format(dataset=dataset, env=env, batch=k)
    raise KeyError(fit)


def real_batch(wildcards):
    return real_batches(wildcards.dataset, wildcards.env)[int(wildcards.batch)]


# input functions of the real-data rules (metrics.smk, aggregate.smk)


def interpretability_inputs(wildcards):
    fits = interpretability_fits(wildcards.dataset)
    return {f"{stopping}_batch": real_batch_of(fit) for stopping, fit in fits.items()}


def stability_inputs(wildcards):
    return sorted({real_batch_of(fit) for fit in stability_fits(wildcards.dataset)})


def runtime_batch_files(wildcards):
    return sorted({real_batch_of(fit) for fit in runtime_fits()})


def math500_fit_batch(wildcards):
    return real_batch_of(interpretability_fits(math500()["dataset"])[CONVERGED])


def math500():
    """The MATH-500 settings, or None when real.interpretability.math500.dataset is null."""
    settings = config["real"]["interpretability"]["math500"]
    return settings if settings["dataset"] is not None else None


def interpretability_datasets():
    return config["real"]["interpretability"]["datasets"]


def rankflow_top():
    """How many models a single-dataset rank-flow figure shows."""
    return config["real"]["interpretability"]["rankflow_top"]


def rankflow_panels():
    return {
        p["dataset"]: p["top"] for p in config["real"]["interpretability"]["rankflow"]
    }


# --------------------------------------------------------------------------
# real data (data.smk)
# --------------------------------------------------------------------------


def local_source(wildcards):
    """A local dataset's file is an input, so editing it rebuilds the matrix."""
    entry = config["datasets"][wildcards.dataset]
    return (
        [str(repo_path(entry["options"]["path"]))] if entry["source"] == "local" else []
    )


def local_entry(entry):
    """The registry entry with a local path made absolute (paths are relative to the repo)."""
    if entry["source"] != "local":
        return entry
    options = {**entry["options"], "path": str(repo_path(entry["options"]["path"]))}
    return {**entry, "options": options}


# --------------------------------------------------------------------------
# what the configuration asks for
# --------------------------------------------------------------------------


def all_tables():
    """Every aggregated table the configuration asks for (what the figures read)."""
    real = config["real"]
    tables = [SIM_TABLE.format(study=study) for study in sim_studies()]
    if real["runtime"]["datasets"] and runtime_methods():
        tables.append(RUNTIME_TABLE)
    if real["interpretability"]["datasets"]:
        tables.append(DISCRIMINATION_TABLE)
        tables += [
            RANKINGS.format(dataset=d) for d in real["interpretability"]["datasets"]
        ]
    if real["stability"]["datasets"]:
        tables.append(STABILITY_TABLE)
    if math500() is not None:
        tables += [MATH500_ABILITIES, MATH500_ITEMS_TABLE]
    return tables


def all_figures():
    """Every figure and paper table (summaries, LaTeX) the configuration asks for."""
    real = config["real"]
    outputs = []
    for study in sim_studies():
        outputs += figure_files(f"sensitivity_{study}")
    if real["runtime"]["datasets"] and runtime_methods():
        outputs += figure_files("runtime") + [RUNTIME_SUMMARY, SPEEDUP_TABLE]
    if real["interpretability"]["datasets"]:
        outputs += figure_files("discrimination")
        for dataset in real["interpretability"]["datasets"]:
            outputs += figure_files(f"rankflow_{dataset}")
    if rankflow_panels():
        outputs += figure_files("rankflow")
    if real["stability"]["datasets"]:
        outputs.append(STABILITY_SUMMARY)
        outputs += [STABILITY_TEX.format(parameter=p) for p in STABILITY_PARAMETERS]
    if math500() is not None:
        outputs += figure_files("math500_ability") + figure_files("item_difficulty")
        outputs.append(MATH500_MODELS_TEX)
    return outputs


def report_table(path, caption, category, subcategory=None):
    """A table output shown in the Snakemake report with its caption."""
    return report(
        path,
        caption=f"../report/{caption}.rst",
        category=category,
        subcategory=subcategory,
    )


def interpretability_figures():
    """The figures of render_interpretability: (output name, report category,
    subcategory, render.py spec) for the discrimination summary, the paper's rank-flow
    panels and each interpretability dataset's own rank flow."""
    panels = rankflow_panels()
    figures = [
        (
            "discrimination",
            "Interpretability",
            None,
            {"figure": "discrimination", "args": [DISCRIMINATION_TABLE]},
        )
    ]
    if panels:
        figures.append(
            (
                "rankflow",
                "Interpretability",
                None,
                {
                    "figure": "rankflow",
                    "args": [
                        {d: RANKINGS.format(dataset=d) for d in panels},
                        DISCRIMINATION_TABLE,
                    ],
                    "kwargs": {"top": panels},
                    "caption_args": {"config_summary": {"top": panels}},
                },
            )
        )
    top = rankflow_top()
    return figures + [
        (
            f"rankflow_{dataset}",
            "Rankings",
            dataset,
            {
                "figure": "rankflow",
                "args": [
                    {dataset: RANKINGS.format(dataset=dataset)},
                    DISCRIMINATION_TABLE,
                ],
                "kwargs": {"top": {dataset: top}},
                "caption_args": {"config_summary": {"top": {dataset: top}}},
            },
        )
        for dataset in interpretability_datasets()
    ]


def figure_outputs(name, category, subcategory=None):
    """PDF, PNG (shown in the report) and caption of one figure, in that order (the
    order render.py reads them in).

    The caption is written by the render job from the figure's own caption
    function (cbmm.figures.FIGURES[...].caption); the report shows that file as
    the PNG's caption (by its absolute path: it lies in the working directory, not
    beside the rules)."""
    stem = FIGURE.format(figure=name)
    return {
        "pdf": f"{stem}.pdf",
        "png": report(
            f"{stem}.png",
            caption=os.path.abspath(f"{stem}.caption.rst"),
            category=category,
            subcategory=subcategory,
        ),
        "caption": f"{stem}.caption.rst",
    }


def env_constraint():
    """Wildcard constraint of {env}: the conda envs of the registered methods (user
    methods included)."""
    envs = {get_method(m).env for m in cbmm.available_methods()}
    return "|".join(map(re.escape, sorted(envs)))
