"""The workflow package (workflow/scripts/cbmm_workflow/) without Snakemake: the
configuration's checks, the plan (units, seeds, packing, resources, targets), the
render specs and the store of finished fits.  Each test takes milliseconds; the whole
workflow runs in tests/test_workflow.py.

The expectations are the paper's and the test configuration's own numbers, worked out
by hand or recorded from the run of the test configuration before the package existed
(the seeds), not recomputed by the package's code.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import cbmm
from cbmm.registry import _METHODS
from cbmm_workflow import config as configuration
from cbmm_workflow import paths, render, store
from cbmm_workflow.plan import (CONVERGED, PAPER, Plan, RealFit, pack,
                                registered_envs, simulation_seed)

REPO = Path(__file__).resolve().parents[1]
PAPER_CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
TEST_OVERLAY = yaml.safe_load((REPO / ".test" / "config.yaml").read_text())


def merged(*overlays) -> dict:
    """config/config.yaml with ``overlays`` merged over it the way Snakemake merges
    --configfile's (mappings key by key; lists and scalars replace)."""
    def merge(base, extra):
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = copy.deepcopy(value)
        return base

    config = copy.deepcopy(PAPER_CONFIG)
    for overlay in overlays:
        merge(config, overlay)
    return config


def test_plan(*overlays) -> Plan:
    """The plan of the test configuration (with ``overlays``)."""
    return Plan(configuration.load_config(merged(TEST_OVERLAY, *overlays)))


test_plan.__test__ = False  # a helper, not a test


# ------------------------------------------------------------------ configuration

def test_the_schema_fills_in_every_default_in_the_same_pass():
    config = merged(TEST_OVERLAY)
    del config["fit"]["timeout_s"]
    checked = configuration.load_config(config)
    assert checked is config  # filled in place, as Snakemake's config is
    resources = config["fit"]["resources"]
    assert (resources["mem_mb_base"], resources["mem_mb_per_million_cells"],
            resources["runtime_min_base"]) == (1500, 60, 5)
    assert config["fit"]["timeout_s"] == "auto"
    assert config["fit"]["batch_seconds"] == 0.05  # the overlay's, not the default 600
    assert config["figures"] == {"metric_definitions": "published"}
    assert config["method_modules"] == []


#: A bad configuration and the text of the one line that must name its key.
BAD_CONFIGS = {
    "unknown method": ({"methods": ["cbmm", "fancy_irt"]}, "methods: method 'fancy_irt'"),
    "method name not an identifier": ({"methods": ["cbmm", "Fancy-IRT"]}, "methods[1]"),
    "negative replicates": ({"simulation": {"replicates": -3}}, "simulation.replicates: -3"),
    "missing dataset file": (
        {"datasets": {"mine": {"source": "local", "options": {"path": "no/such/file.csv"}}}},
        "datasets.mine.options.path: file"),
    "dataset without a path": ({"datasets": {"mine": {"source": "local", "options": {}}}},
                               "datasets.mine.options: missing required option(s) ['path']"),
    "dataset path misspelled": (
        {"datasets": {"mine": {"source": "local", "options": {"pth": "x.csv"}}}},
        "datasets.mine.options: missing required option(s) ['path'] for source 'local'; "
        "unknown option(s) ['pth']"),
    "unknown dataset source": ({"datasets": {"mine": {"source": "ftp"}}},
                               "datasets.mine.source: 'ftp'"),
    "unknown dataset option": (
        {"datasets": {"mine": {"source": "local", "options": {
            "path": ".test/data/suites/suite_a.csv", "sep": ";"}}}},
        "datasets.mine.options: unknown option(s) ['sep']"),
    "release file without sha256": (
        {"datasets": {"mine": {"source": "release", "options": {"file": "data/x.csv"}}}},
        "datasets.mine.options: missing required option(s) ['sha256']"),
    "release file outside the cache": (
        {"datasets": {"mine": {"source": "release", "options": {"file": "../../etc/x.csv",
                                                                "sha256": "0" * 64}}}},
        "datasets.mine.options.file: '../../etc/x.csv' is not a relative path"),
    "absolute release file": (
        {"datasets": {"mine": {"source": "release", "options": {"file": "/etc/passwd",
                                                                "sha256": "0" * 64}}}},
        "datasets.mine.options.file: '/etc/passwd' is not a relative path"),
    "release URL that is not http(s)": ({"release": {"base_url": "ftp://example.org"}},
                                        "release.base_url: expected an http(s) URL"),
    "content balance over no item column": (
        {"real": {"efficiency": {"adaptive": {"content": "topic"}}}},
        "real.efficiency.adaptive.content: 'topic'"),
    "unregistered dataset in a study": (
        {"real": {"stability": {"datasets": ["suite_a", "nowhere"]}}},
        "real.stability.datasets: dataset 'nowhere'"),
    "misspelt key": ({"simulation": {"replicate": 2}}, "simulation: Additional properties"),
    "a dataset without its source": (
        {"datasets": {"mine": {"options": {"path": ".test/data/suites/suite_a.csv"}}}},
        "datasets.mine: 'source' is a required property: one of release, math500_lart, hub, "
        "local (docs/data.md; your own table: source: local"),
    "a folder as a local path": (
        {"datasets": {"mine": {"source": "local", "options": {"path": ".test/data"}}}},
        "/.test/data is a folder, not a file"),
    "an exposure cap of 0": (
        {"real": {"efficiency": {"adaptive": {"max_exposures": [0]}}}},
        "real.efficiency.adaptive.max_exposures[0]: 0 fits none of its forms: 0 is less than "
        "or equal to the minimum of 0; 0 is not of type 'null'"),
    "negative number of models": (
        {"simulation": {"studies": {"size_fixJ": {"levels": [30, -5]}}}},
        "simulation.studies.size_fixJ.levels[1]: -5 is not a possible n_models"),
    "missing rate above 1": ({"simulation": {"studies": {"mcar": {"levels": [0.0, 2]}}}},
                             "simulation.studies.mcar.levels[1]: 2 is not a possible"),
    "sparsity of 1": ({"simulation": {"studies": {"sparsity": {"levels": [1]}}}},
                      "simulation.studies.sparsity.levels[0]: 1 is not a possible sparsity"),
    "non-numeric level": ({"simulation": {"studies": {"mar": {"levels": ["high"]}}}},
                          "simulation.studies.mar.levels[0]: 'high' is not of type 'number'"),
    "missing rate without a pattern": (
        {"simulation": {"studies": {"rate": {"factor": "missing_rate", "levels": [0.1]}}}},
        "simulation.studies.rate.missing: a missing_rate study needs a missingness pattern"),
    "study to run that is not defined": ({"simulation": {"run": ["mcar", "mcr"]}},
                                         "simulation.run: study 'mcr' is not defined"),
    "unknown method option": ({"fit": {"method_options": {"cbmm": {"bogus": 1}}}},
                              "fit.method_options.cbmm: Additional properties"),
    "ill-typed method option": (
        {"fit": {"method_options": {"lbfgsb": {"maxcor": "abc"}}}},
        "fit.method_options.lbfgsb.maxcor: 'abc' is not of type 'integer'"),
    "option value not allowed": (
        {"fit": {"method_options": {"cbmm": {"engine": "gpu"}}}},
        "fit.method_options.cbmm.engine: 'gpu' is not one of"),
    "options of an unknown method": ({"fit": {"method_options": {"nomethod": {}}}},
                                     "fit.method_options: method 'nomethod'"),
    "bad converged rule": ({"real": {"converged": {"accelerate": "warp"}}},
                           "real.converged.accelerate: 'warp' is not one of"),
    "bad time limit": ({"fit": {"timeout_s": -1}}, "fit.timeout_s: -1"),
    "infinite time limit (no limit is null)": (
        {"fit": {"timeout_s": math.inf}},
        "fit.timeout_s: inf fits none of its forms: 'auto' was expected; inf is not a finite "
        "number"),
    "temperature beyond the model's range": (
        {"fit": {"sigma": 1e301}}, "fit.sigma: 1e+301 is greater than the maximum of 1e+300"),
    "tolerance that is not a number": ({"fit": {"tol": math.nan}},
                                       "fit.tol: nan is not a finite number"),
    "start variance that is not a number": (
        {"real": {"stability": {"init_scales": [1, math.nan]}}},
        "real.stability.init_scales[1]: nan is not a finite number"),
    "zero iterations of the converged rule": (
        {"real": {"converged": {"max_iter": 0}}},
        "real.converged.max_iter: 0 is less than the minimum of 1"),
    "temperature level beyond the model's range": (
        {"simulation": {"studies": {"temperature": {"levels": [-0.25, 400]}}}},
        "simulation.studies.temperature.levels[1]: 400 is not a possible log10_sigma"),
    "whole number written as a decimal": ({"real": {"efficiency": {"splits": 2.0}}},
                                          "real.efficiency.splits: 2.0 is not of type "
                                          "'integer'"),
    "infinite SE target": ({"real": {"efficiency": {"adaptive": {"se_targets": [math.inf]}}}},
                           "real.efficiency.adaptive.se_targets[0]: inf is not a finite "
                           "number"),
    "exposure setting given twice": (
        {"real": {"efficiency": {"adaptive": {"max_exposures": [None, 0.2, 0.2]}}}},
        "real.efficiency.adaptive.max_exposures: [None, 0.2, 0.2] has non-unique elements"),
    "minimum test length not below the maximum": (
        {"real": {"efficiency": {"adaptive": {"min_items": 30, "max_items": 10}}}},
        "real.efficiency.adaptive.min_items: 30 is not below max_items 10"),
    "method module that cannot be imported": (
        {"method_modules": ["no_such_module_xyz"]},
        "method_modules: cannot import 'no_such_module_xyz'"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_bad_config_is_one_error_with_one_line_naming_the_key(case):
    content, expected = BAD_CONFIGS[case]
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.load_config(merged(TEST_OVERLAY, content))
    lines = str(caught.value).splitlines()
    assert lines[0] == "invalid configuration:"
    assert [line for line in lines if expected in line] == [next(
        line for line in lines if expected in line)], lines
    assert all(line.startswith("- ") for line in lines[1:]), lines


@pytest.mark.parametrize("setting,value", [
    ("sigma", cbmm.model.SIGMA_RANGE[1]), ("sigma", cbmm.model.SIGMA_RANGE[0]),
    ("timeout_s", None), ("timeout_s", 1e300), ("timeout_s", "auto"), ("max_iter", 10 ** 30),
    ("tol", 1e-300)])
def test_the_schema_accepts_what_fit_accepts(setting, value):
    """The bounds are fit's own declarations: every value fit takes passes the schema."""
    config = configuration.load_config(merged(TEST_OVERLAY, {"fit": {setting: value}}))
    assert config["fit"][setting] == value
    spec = cbmm.api.TIMEOUT if setting == "timeout_s" else cbmm.api.FIT_OPTIONS[setting]
    assert spec.validate(setting, value) == value


def test_every_problem_of_a_stage_is_reported_at_once():
    bad = {"simulation": {"replicates": 0, "seed": -1}, "fit": {"tol": 0}}
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.load_config(merged(TEST_OVERLAY, bad))
    keys = [line.split(":")[0] for line in str(caught.value).splitlines()[1:]]
    assert keys == ["- fit.tol", "- simulation.replicates", "- simulation.seed"]


@pytest.fixture
def unregister():
    """Methods a test registers are removed afterwards (the registry is global)."""
    before = set(_METHODS)
    yield
    for name in set(_METHODS) - before:
        del _METHODS[name]


def test_a_method_of_the_users_module_is_known_to_the_checks(unregister):
    config = configuration.load_config(merged(TEST_OVERLAY, {
        "method_modules": [".test/methods/toy.py"], "methods": ["cbmm", "toy"],
        "fit": {"method_options": {"toy": {"prior": 2.0}}}}))
    assert configuration.method_modules(config) == [str(REPO / ".test" / "methods" / "toy.py")]
    with pytest.raises(configuration.ConfigError, match=r"fit\.method_options\.toy\.prior: "
                                                        r"-1 is less than the minimum of 0"):
        configuration.load_config(merged(TEST_OVERLAY, {
            "method_modules": [".test/methods/toy.py"], "methods": ["cbmm", "toy"],
            "fit": {"method_options": {"toy": {"prior": -1}}}}))


def test_with_conda_envs_each_method_needs_its_env_file(unregister):
    cbmm.register_method("elsewhere", lambda *a, **k: None, env="nowhere")
    config = merged(TEST_OVERLAY, {"methods": ["cbmm", "elsewhere"]})
    configuration.load_config(copy.deepcopy(config))  # one environment: no env file needed
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.load_config(config, conda_envs=True)
    assert f"methods: 'elsewhere' runs in conda env {REPO / 'envs' / 'nowhere.yaml'}" \
        in str(caught.value)


def test_missing_software_stops_with_how_to_fix_it(unregister):
    def unavailable():
        raise cbmm.MethodUnavailableError("needs frobnicate: pip install frobnicate")

    cbmm.register_method("frob", lambda *a, **k: None, availability=unavailable)
    config = configuration.load_config(merged(TEST_OVERLAY, {"methods": ["cbmm", "frob"]}))
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.check_software(config)
    assert "pip install frobnicate" in str(caught.value)
    assert "or remove frob from `methods:` in your config" in str(caught.value)
    # a method only cross-validated is named under the key that lists it
    config = configuration.load_config(merged(TEST_OVERLAY, {"real": {"validation": {
        "datasets": ["suite_a"], "methods": ["cbmm", "frob"]}}}))
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.check_software(config)
    assert "or remove frob from `real.validation.methods:` in your config" in str(caught.value)
    configuration.check_software(configuration.load_config(merged(TEST_OVERLAY)))


def test_the_registry_file_is_merged_under_the_configs_own_datasets():
    config = configuration.load_config(merged({"datasets": {
        "IFEval": {"source": "local", "options": {"path": ".test/data/suites/suite_a.csv"}}}}))
    registry = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())
    assert set(registry["datasets"]) | set(registry["alternatives"]) <= set(config["datasets"])
    assert config["datasets"]["IFEval"]["source"] == "local"  # the config's entry wins
    assert config["datasets"]["MMLU_PRO"] == {**registry["datasets"]["MMLU_PRO"],
                                              "options": registry["datasets"]["MMLU_PRO"][
                                                  "options"]}
    assert config["release"]["repo"] == registry["release"]["repo"]


def schema_keys(properties, definitions, prefix="") -> dict:
    """Every key of the schema (``<name>`` for a mapping's entries, ``[]`` for a list's
    items) with its default, or None where it has none."""
    def resolve(node):
        if "$ref" in node:
            return {**definitions[node["$ref"].split("/")[-1]],
                    **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    keys = {}
    for name, node in properties.items():
        node, key = resolve(node), prefix + name
        keys[key] = node.get("default")
        keys.update(schema_keys(node.get("properties", {}), definitions, f"{key}."))
        entries = node.get("additionalProperties")
        if isinstance(entries, dict):
            keys.update(schema_keys(resolve(entries).get("properties", {}), definitions,
                                    f"{key}.<name>."))
        keys.update(schema_keys(resolve(node.get("items", {})).get("properties", {}),
                                definitions, f"{key}[]."))
    return keys


def test_config_readme_documents_every_key_with_its_default():
    schema = yaml.safe_load(paths.SCHEMA.read_text())
    expected = schema_keys(schema["properties"], schema["definitions"])
    rows = re.findall(r"^\| `([^`]+)` \| (?:`([^`]*)`|—) \|", (REPO / "config" / "README.md")
                      .read_text(), re.M)
    documented = {key: None if not default else json.loads(default) for key, default in rows}
    assert len(rows) == len(documented)  # each key once
    assert documented == expected


# ------------------------------------------------------------------ packing, seeds

def test_pack_keeps_order_and_stays_within_the_target():
    units = list("abcdefg")
    costs = [1, 1, 1, 5, 1, 0.5, 0.5]
    assert pack(units, costs, 2) == [["a", "b"], ["c"], ["d"], ["e", "f", "g"]]
    assert pack(units, costs, 100) == [units]
    assert pack([], [], 2) == []


def test_pack_gives_a_unit_costlier_than_the_target_a_batch_of_its_own():
    assert pack(["cheap", "dear", "cheap2"], [0.1, 9.0, 0.1], 1.0) == [
        ["cheap"], ["dear"], ["cheap2"]]


#: Seeds of the test configuration's replicates as its run recorded them (fit.json of
#: results/fits/simulation/<study>/level_<level>/cbmm/rep_<r>) before this package existed.
RECORDED_SEEDS = {("mcar", "0.3", 1): 4246445426, ("temperature", "-0.25", 0): 3841400125,
                  ("size_fixN", "40", 1): 2126212655}


def test_seeds_are_those_the_test_configuration_has_always_drawn():
    plan = test_plan()
    assert {key: plan.seed(*key) for key in RECORDED_SEEDS} == RECORDED_SEEDS


def test_a_seed_is_keyed_by_names_and_values_not_positions():
    base = PAPER_CONFIG["simulation"]["seed"]
    seed = simulation_seed(base, "mcar", 0.3, 1)
    assert simulation_seed(base, "mcar", "0.30", 1) == seed  # the level's canonical text
    fewer = test_plan({"simulation": {"run": ["mcar"], "studies": {"mcar": {"levels": [0.3]}}}})
    assert fewer.seed("mcar", "0.3", 1) == seed == test_plan().seed("mcar", "0.3", 1)
    seeds = {simulation_seed(base, study, level, r) for study in ("mcar", "mar")
             for level in (0.0, 0.3) for r in range(3)}
    assert len(seeds) == 12  # every replicate its own draw
    assert simulation_seed(base + 1, "mcar", 0.3, 1) != seed


# ------------------------------------------------------------------ simulation plan

def test_designs_vary_one_factor_over_the_defaults():
    plan = test_plan()
    assert plan.design("mcar", "0.3") == {"n_models": 60, "n_items": 40, "sigma": 1.0,
                                          "sparsity": 0.0, "missing": "mcar",
                                          "missing_rate": 0.3}
    assert plan.design("size_fixJ", "30")["n_models"] == 30
    assert plan.design("temperature", "-0.25")["sigma"] == pytest.approx(10 ** -0.25)
    assert plan.design("mnar", "0.1")["missing"] == "mnar"
    assert plan.study_design("mnar") == {"factor": "missing_rate", "missing": "mnar"}
    assert plan.levels("temperature") == ["-0.25", "0.25"]


def test_every_simulated_fit_is_in_one_batch_of_its_methods_env():
    plan = test_plan()
    assert plan.env_methods() == {"core": ["cbmm", "lbfgsb"]}
    batches = plan.sim_batches("core")
    units = [u for batch in batches for u in batch]
    sim = plan.config["simulation"]
    expected = [(study, level, r, method) for study in sim["run"]
                for level in plan.levels(study) for r in range(sim["replicates"])
                for method in ("cbmm", "lbfgsb")]
    # in order, so that a job draws each data set once for all its methods
    assert [(u["study"], u["level"], u["replicate"], u["method"]) for u in units] == expected
    assert len(batches) == 25  # the test configuration's fit_simulation jobs
    target = plan.config["fit"]["batch_seconds"]
    assert all(sum(u["cost_s"] for u in b) <= target or len(b) == 1 for b in batches)
    assert plan.sim_batch_files() == [f"results/batches/simulation/core/batch_{k}.csv"
                                      for k in range(25)]
    unit = units[0]
    assert unit["fit_dir"] == f"results/fits/simulation/{unit['study']}/level_{unit['level']}/" \
        "cbmm/rep_0"
    # cBMM declares 2 s per million cells; 20 x 60 cells
    assert unit["cells"] == 1200 and unit["cost_s"] == pytest.approx(2 * 1200 / 1e6)


def test_a_batch_asks_for_the_memory_of_its_largest_fit_and_twice_its_cost_plus_a_limit():
    plan = test_plan()
    units = [{"cells": 1_000_000, "cost_s": 10.0, "timeout_s": 100.0},
             {"cells": 2_000_000, "cost_s": 20.0, "timeout_s": None}]
    # 1500 + 60 x 2 MB; 5 + (2 x 30 + 100) / 60 = 7.67 minutes, rounded up
    assert plan.batch_resources(units) == {"mem_mb": 1620, "runtime": 8}
    no_limit = [{"cells": 10, "cost_s": 30.0, "timeout_s": None}]
    assert plan.batch_resources(no_limit) == {"mem_mb": 1501, "runtime": 7}  # 5 + 120 / 60


def test_auto_time_limits_follow_the_methods_declared_cost():
    plan = test_plan()
    # 'auto': 60 s plus ten times the declared single-core cost (cbmm: 2 s per 1e6 cells)
    assert plan.fit_timeout_s("cbmm", 5_000_000, 1000) == pytest.approx(60 + 10 * 2 * 5)
    assert test_plan({"fit": {"timeout_s": 7}}).fit_timeout_s("cbmm", 5_000_000, 1000) == 7
    assert test_plan({"fit": {"timeout_s": None}}).fit_timeout_s("cbmm", 5, 1) is None


# ------------------------------------------------------------------- real-data plan

def test_each_real_fit_is_planned_once_under_its_stopping_rule():
    plan = test_plan()
    fits = plan.real_fits
    assert len(fits) == len(set(fits))
    runtime = [RealFit(d, m, PAPER, "1", s) for d in ("suite_a", "suite_b")
               for m in ("cbmm", "lbfgsb") for s in (0, 1)]
    stability = [RealFit("suite_a", "cbmm", CONVERGED, v, s) for v in ("1", "3") for s in (0, 1)]
    interpretability = [RealFit(d, "cbmm", rule, "1", 0)
                        for d in ("MATH_500", "suite_a", "suite_b")
                        for rule in (CONVERGED, PAPER)]
    assert set(fits) == set(runtime + stability + interpretability)
    # the runtime study's seed-0 cBMM fits are the interpretability study's paper-rule ones,
    # the stability study's (s2 1, seed 0) fit its converged one
    assert len(fits) == 8 + 4 + 6 - 2 - 1
    assert fits[0].fit_dir == "results/fits/real/suite_a/cbmm/paper/s2_1/seed_0"


def test_a_datasets_fits_of_both_rules_share_batches_sized_by_the_built_matrix():
    plan = test_plan({"fit": {"batch_seconds": 600}})
    cells = 80 * 50  # suite_a
    (batch,) = plan.real_batches("suite_a", "core", cells)
    assert {u["stopping"] for u in batch} == {PAPER, CONVERGED}
    converged = next(u for u in batch if u["stopping"] == CONVERGED)
    settings = plan.config["real"]["converged"]
    assert (converged["tol"], converged["max_iter"]) == (settings["tol"], settings["max_iter"])
    assert converged["options"] == {"accelerate": "auto"} and converged["cells"] == cells
    paper = next(u for u in batch if u["stopping"] == PAPER)
    assert (paper["tol"], paper["max_iter"], paper["options"]) == (1e-4, 1000, {})
    fit = plan.interpretability_fits("suite_a")[CONVERGED]
    assert plan.real_batch_file(fit, cells) == "results/batches/real/suite_a/core/batch_0.csv"
    with pytest.raises(KeyError):
        plan.real_batch_file(RealFit("suite_a", "cbmm", PAPER, "9", 0), cells)


def test_a_local_datasets_file_is_made_absolute_and_is_its_builds_input():
    plan = test_plan()
    path = str(REPO / ".test" / "data" / "suites" / "suite_a.csv")
    assert plan.dataset_entry("suite_a")["options"]["path"] == path
    assert plan.local_files("suite_a") == [path]
    assert plan.config["datasets"]["suite_a"]["options"]["path"] == \
        ".test/data/suites/suite_a.csv"  # the config itself is left as written


# ------------------------------------------------------------------------- targets

def test_the_targets_of_the_test_configuration():
    plan = test_plan()
    studies = ["size_fixN", "size_fixJ", "temperature", "mcar", "mar", "mnar", "sparsity"]
    datasets = ["MATH_500", "suite_a", "suite_b"]
    assert plan.all_tables() == (
        [f"results/tables/sim_{s}.csv" for s in studies]
        + ["results/tables/runtime_leaderboard.csv", "results/tables/discrimination_summary.csv"]
        + [f"results/tables/rankings/{d}.csv" for d in datasets]
        + ["results/tables/stability_raw.csv", "results/tables/math500_abilities.csv",
           "results/tables/math500_items.csv"]
        + ["results/tables/abilities/MATH_500.csv", "results/tables/abilities/suite_a.csv",
           "results/tables/heldout/MATH_500.csv"]
        + [f"results/tables/{table}/{d}.csv" for d in ("MATH_500", "suite_a")
           for table in ("efficiency", "adaptive", "adaptive_summary", "item_audit")])
    assert plan.heldout_parts("MATH_500") == ["results/validation/MATH_500/cbmm.csv",
                                              "results/validation/MATH_500/lbfgsb.csv"]
    figures = {Path(p).name for p in plan.all_figures()}
    stems = ([f"sensitivity_{s}" for s in studies] + ["runtime", "discrimination", "rankflow",
                                                       "math500_ability", "item_difficulty"]
             + [f"rankflow_{d}" for d in datasets]
             + ["abilities_MATH_500", "abilities_suite_a"]
             + [f"{figure}_{d}" for d in ("MATH_500", "suite_a")
                for figure in ("efficiency", "item_audit")])
    assert {f"{stem}.{ext}" for stem in stems for ext in ("pdf", "png")} <= figures
    assert {"runtime_summary.csv", "speedup.csv", "stability_summary.csv", "stability_theta.tex",
            "stability_a.tex", "stability_b.tex", "math500_models.tex"} <= figures
    assert plan.fidelity_table() == [paths.FIDELITY]


def test_without_real_data_only_the_simulation_is_a_target():
    plan = test_plan({"real": {"runtime": {"datasets": []}, "stability": {"datasets": []},
                               "interpretability": {"datasets": [], "rankflow": [],
                                                    "math500": {"dataset": None}},
                               "uncertainty": {"datasets": []},
                               "validation": {"datasets": []},
                               "efficiency": {"datasets": []}}})
    assert plan.math500 is None and plan.real_fits == []
    assert all(Path(p).name.startswith("sim_") for p in plan.all_tables())
    assert all("sensitivity_" in p for p in plan.all_figures())


def test_the_own_dataset_config_runs_that_dataset_alone(tmp_path):
    own = yaml.safe_load((REPO / "config" / "own_dataset.yaml").read_text())
    csv = tmp_path / "mine.csv"
    pd.DataFrame([[1, 0], [0, 1], [1, 1]], index=["m1", "m2", "m3"],
                 columns=["q1", "q2"]).to_csv(csv)
    own["datasets"]["my_suite"]["options"]["path"] = str(csv)
    plan = Plan(configuration.load_config(merged(own)))
    assert not plan.studies and plan.math500 is None and not plan.rankflow_panels()
    assert {fit.dataset for fit in plan.real_fits} == {"my_suite"}
    # MAP fits: answers where models answered every item alike, as own benchmarks have
    units = plan.real_batches("my_suite", "core", 6)
    assert {unit["options"]["prior"] for batch in units for unit in batch} == {"normal"}
    assert plan.all_tables() == [
        "results/tables/discrimination_summary.csv", "results/tables/rankings/my_suite.csv",
        "results/tables/abilities/my_suite.csv", "results/tables/heldout/my_suite.csv",
        *[f"results/tables/{table}/my_suite.csv"
          for table in ("efficiency", "adaptive", "adaptive_summary", "item_audit")]]
    assert {Path(p).stem for p in plan.all_figures()} == {
        "discrimination", "rankflow_my_suite", "abilities_my_suite", "efficiency_my_suite",
        "item_audit_my_suite"}
    assert plan.fidelity_table() == []  # no published number concerns it: no empty table


def test_every_table_target_is_a_table_of_cbmm_tables():
    patterns = [re.escape(f"{paths.TABLE_DIR}/") + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(f))
                for f in cbmm.tables.TABLE_FILES.values()]
    plan = test_plan()
    targets = plan.all_tables() + [p for p in plan.all_figures() if "/tables/" in p]
    assert [t for t in targets if not any(re.fullmatch(p, t) for p in patterns)] == []


# ------------------------------------------------------------------- render specs

def test_every_study_of_the_configuration_has_a_figure_drawn_by_its_design():
    plan = test_plan({"simulation": {
        "run": ["mcar", "wide"],
        "studies": {"wide": {"factor": "n_items", "missing": "mar", "levels": [50, 80]}}}})
    figures = render.sensitivity_figures(plan)
    assert [f.name for f in figures] == ["sensitivity_mcar", "sensitivity_wide"]
    wide = figures[1].spec
    assert wide["figure"] == "sensitivity_wide"
    assert wide["args"] == ["results/tables/sim_wide.csv"]
    assert wide["kwargs"]["design"] == wide["caption_args"]["design"] == {
        "factor": "n_items", "missing": "mar"}
    assert {"results/figures/sensitivity_wide.pdf",
            "results/figures/sensitivity_wide.png"} <= set(plan.all_figures())


def test_the_interpretability_figures_show_the_configured_panels():
    plan = test_plan()
    figures = {f.name: f for f in render.interpretability_figures(plan)}
    assert list(figures) == ["discrimination", "rankflow"]
    assert figures["rankflow"].spec["kwargs"] == {"top": {"suite_a": 20, "suite_b": 20}}
    own = {f.name: f for f in render.dataset_rankflow_figures(plan)}["rankflow_suite_b"]
    assert own.name == "rankflow_suite_b" and own.subcategory == "suite_b"
    # the dataset's own metrics, not the summary of all: a failed dataset stopped the others'
    assert own.spec["args"] == [{"suite_b": "results/tables/rankings/suite_b.csv"},
                                "results/metrics/real/suite_b.json"]
    assert own.spec["kwargs"] == {"top": {"suite_b": 20}, "names": True}


def test_the_efficiency_study_has_two_figures_per_dataset_drawn_from_its_tables():
    plan = test_plan()
    figures = {f.name: f for dataset in plan.efficiency_datasets()
               for f in render.efficiency_figures(plan, dataset)}
    assert list(figures) == ["efficiency_MATH_500", "item_audit_MATH_500",
                             "efficiency_suite_a", "item_audit_suite_a"]
    assert figures["efficiency_suite_a"].spec == {
        "figure": "efficiency",
        "args": ["results/tables/efficiency/suite_a.csv", "results/tables/adaptive/suite_a.csv"],
        "kwargs": {"title": "suite_a"},
        "caption_args": {"config_summary": {"splits": 2, "held_models": 0, "test_share": 0.2,
                                            "draws": 5, "tinybenchmarks": True,
                                            "content": None}}}
    # MATH-500's tests are also balanced over its items' subjects (the schema's default)
    assert figures["efficiency_MATH_500"].spec["caption_args"]["config_summary"][
        "content"] == "subject"
    assert figures["item_audit_MATH_500"].spec["args"] == [
        "results/tables/item_audit/MATH_500.csv"]
    assert figures["item_audit_MATH_500"].spec["kwargs"] == {"title": "MATH-500"}


def test_the_math500_datasets_fit_is_planned_where_it_is_no_interpretability_dataset():
    """The MATH-500 tables read its interpretability fit: with the dataset left out of
    real.interpretability.datasets the plan had none, and Snakemake stopped with an
    InputFunctionException (KeyError: RealFit(dataset='MATH_500', ...))."""
    plan = test_plan({"real": {"interpretability": {"datasets": ["suite_a", "suite_b"]}}})
    fit = plan.interpretability_fits("MATH_500")[CONVERGED]
    assert fit in plan.real_fits
    cells = 40 * 60
    assert plan.real_batch_file(fit, cells).startswith("results/batches/real/MATH_500/")


@pytest.mark.parametrize("content,expected", [
    ({"real": {"efficiency": {"datasets": ["suite_a", "nowhere"]}}},
     "real.efficiency.datasets: dataset 'nowhere' is not in the registry"),
    ({"real": {"efficiency": {"strategies": ["stratified", "best"]}}},
     "real.efficiency.strategies: 'best' is not a strategy of cbmm.select_items"),
])
def test_a_bad_efficiency_study_stops_the_plan_naming_the_key(content, expected):
    with pytest.raises(configuration.ConfigError) as caught:
        test_plan(content)
    assert str(caught.value).splitlines() == ["invalid configuration:", f"- {expected}" + (
        " (known: MATH_500, suite_a, suite_b)" if "registry" in expected else
        " (stratified, random, information, anchor, predictive)")]


# ---------------------------------------------------------------------- conda envs

def test_the_registered_methods_name_their_conda_envs():
    assert {"core", "mirt", "pyirt"} <= set(registered_envs())


# ------------------------------------------------------------------ store of fits

def a_fit(seed: int) -> cbmm.FitResult:
    rng = np.random.default_rng(seed)
    return cbmm.FitResult(
        theta=pd.Series(rng.normal(size=4), index=[f"m{i}" for i in range(4)], name="theta"),
        a=pd.Series(rng.uniform(size=3), index=["q0", "q1", "q2"], name="a"),
        b=pd.Series(rng.normal(size=3), index=["q0", "q1", "q2"], name="b"),
        loss=1.5, loss_history=[2.0, 1.5], n_iter=2, status="converged", runtime_s=0.1,
        method="cbmm", seed=seed)


def test_fit_keys_name_every_setting_in_any_order():
    key = store.fit_key(method="cbmm", seed=1, tol=1e-4, options={"a": 1, "b": 2})
    assert key == store.fit_key(options={"b": 2, "a": 1}, tol=1e-4, seed=1, method="cbmm")
    assert key != store.fit_key(method="cbmm", seed=2, tol=1e-4, options={"a": 1, "b": 2})
    assert re.fullmatch(r"[0-9a-f]{64}", key)


def test_a_stored_fit_is_reused_only_under_its_own_key(tmp_path):
    fit_dir = tmp_path / "fits" / "one"
    assert store.stored_row(fit_dir, "k1") is None
    store.store_fit(fit_dir, "k1", a_fit(1), {"status": "converged", "loss": math.nan})
    assert store.stored_row(fit_dir, "k1") == {"status": "converged", "loss": None}
    assert store.stored_row(fit_dir, "k2") is None
    store.store_fit(fit_dir, "k2", a_fit(2), {"status": "max_iter"})  # replaced whole
    assert store.stored_row(fit_dir, "k2") == {"status": "max_iter"}
    assert sorted(p.name for p in fit_dir.parent.iterdir()) == ["one"]  # no leftovers
    loaded = store.load_fit(fit_dir, "k2")
    assert list(loaded.theta.index) == ["m0", "m1", "m2", "m3"]
    np.testing.assert_array_equal(loaded.theta, a_fit(2).theta)  # exactly, through the CSV
    assert loaded.seed == 2


def test_a_batch_resumes_from_the_fits_it_had_stored(tmp_path):
    units = [{"name": n, "fit_dir": str(tmp_path / n)} for n in ("a", "b", "c")]
    fitted, killed_at = [], ["c"]

    def fit_unit(unit):
        if unit["name"] in killed_at:
            raise KeyboardInterrupt  # the job is killed during this fit
        fitted.append(unit["name"])
        return a_fit(len(fitted)), {"name": unit["name"]}

    def key_of(unit):
        return f"key-{unit['name']}"

    log = logging.getLogger("test")
    with pytest.raises(KeyboardInterrupt):
        store.batch_rows(units, key_of, fit_unit, log)
    assert fitted == ["a", "b"]
    killed_at.clear()
    rows = store.batch_rows(units, key_of, fit_unit, log)
    assert rows == [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    assert fitted == ["a", "b", "c"]  # the rerun fitted only c


def test_readers_get_a_fit_only_as_its_batch_table_lists_it(tmp_path):
    fit_dir = str(tmp_path / "fit")
    store.store_fit(fit_dir, "k1", a_fit(1), {})
    table = tmp_path / "batch_0.csv"
    pd.DataFrame({"fit_dir": [fit_dir], "fit_key": ["k1"], "loss": [1.5]}).to_csv(table,
                                                                                 index=False)
    fits = store.listed_fits([table], [fit_dir])
    assert list(fits) == [fit_dir] and fits[fit_dir].seed == 1
    with pytest.raises(store.StoreError, match="not listed"):
        store.listed_fits([table], [str(tmp_path / "other")])
    store.store_fit(fit_dir, "k2", a_fit(2), {})  # refitted after the table was written
    with pytest.raises(store.StoreError, match="holds another fit than its batch table lists"):
        store.listed_fits([table], [fit_dir])
    with pytest.raises(store.StoreError, match="no stored fit"):
        store.load_fit(tmp_path / "nothing", "k1")


def truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


@pytest.mark.parametrize("name", ["abilities.csv", "items.csv", "fit.json"])
def test_a_damaged_stored_fit_is_refitted_not_reused(tmp_path, name):
    fit_dir = tmp_path / "fit"
    store.store_fit(fit_dir, "k1", a_fit(1), {"loss": 1.0})
    assert store.stored_row(fit_dir, "k1") == {"loss": 1.0}
    truncate(fit_dir / name)
    assert store.stored_row(fit_dir, "k1") is None
    with pytest.raises(store.StoreError, match=rf"fit: stored fit damaged \({name} is not the "
                                               "file that was stored\\); run the workflow again"):
        store.load_fit(fit_dir, "k1")
    fitted = []

    def fit_unit(unit):
        fitted.append(unit)
        return a_fit(1), {"loss": 1.0}

    store.batch_rows([{"fit_dir": str(fit_dir)}], lambda unit: "k1", fit_unit,
                     logging.getLogger("test"))
    assert len(fitted) == 1 and store.load_fit(fit_dir, "k1").seed == 1


def test_batch_tables_of_missing_or_damaged_fits_are_marked_before_the_run(tmp_path,
                                                                           monkeypatch):
    """The check the Snakefile makes: a table listing a deleted or truncated fit gets its
    refit marker, naming the fit; the others none (sizes only: cheap enough for the paper's
    14,000 fits)."""
    monkeypatch.chdir(tmp_path)
    plan = test_plan({"simulation": {"run": ["mcar"]}, "methods": ["cbmm"],
                      "fit": {"batch_seconds": 1e-6}})  # a fit per job
    batches = plan.sim_batches("core")
    tables = [Path(paths.SIM_BATCH.format(env="core", batch=k)) for k in range(len(batches))]
    assert len(tables) >= 3
    for table, batch in zip(tables, batches):
        for unit in batch:
            store.store_fit(unit["fit_dir"], "k", a_fit(1), {})
        table.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame([{k: unit[k] for k in ("study", "level", "method", "replicate")}
                      for unit in batch]).assign(status="converged").to_csv(table, index=False)
    log = logging.getLogger("test")
    assert store.mark_stale_batches(plan, log) == []
    # another configuration's plan (more replicates, other batches) judges none of them
    other = test_plan({"simulation": {"run": ["mcar"], "replicates": 3}, "methods": ["cbmm"],
                       "fit": {"batch_seconds": 1e-6}})
    assert len(other.sim_batches("core")) > len(batches)
    assert store.mark_stale_batches(other, log) == []
    assert not list(tables[0].parent.glob("*.refit"))
    shutil.rmtree(batches[0][0]["fit_dir"])
    truncate(Path(batches[1][-1]["fit_dir"]) / "abilities.csv", keep=0.9)
    assert store.mark_stale_batches(plan, log) == [str(tables[0]), str(tables[1])]
    assert [store.refit_marker(t).is_file() for t in tables] == \
        [True, True] + [False] * (len(tables) - 2)
    assert store.refit_marker(tables[0]).read_text() == \
        f"{batches[0][0]['fit_dir']}: unit.json missing\n"
    assert "abilities.csv has" in store.refit_marker(tables[1]).read_text()


def assert_unplanned_marked(written, planned, differ):
    """``unplanned_tables`` of the ``planned`` tables finds and marks those that differ
    from the ``written`` ones, and a written table listing a fit twice."""
    assert store.unplanned_tables(planned) == differ
    assert all(store.refit_marker(table).is_file() == (table in differ) for table in planned)
    # a table listing a fit twice is not the one planned either
    first = next(iter(written))
    frame = pd.read_csv(first)
    pd.concat([frame, frame.iloc[:1]]).to_csv(first, index=False)
    assert store.unplanned_tables({first: written[first]}) == [first]


def test_the_aggregation_refuses_batch_tables_of_another_packing_and_marks_them(
        tmp_path, monkeypatch):
    """A batch job that finished while Snakemake was not running left no record of its
    parameters: after a change of replicates, its table (of the old packing) counted as up
    to date and the simulation tables lost replicate 2 and listed others twice. The
    aggregation checks every table against the fits planned for it and marks the others."""
    monkeypatch.chdir(tmp_path)
    settings = {"simulation": {"run": ["mcar"]}, "methods": ["cbmm"],
                "fit": {"batch_seconds": 1e-6}}
    plan = test_plan(settings)
    written = plan.sim_batch_keys()
    for table, keys in written.items():
        Path(table).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(keys, columns=["study", "level", "method", "replicate"]).assign(
            status="converged").to_csv(table, index=False)
    assert store.unplanned_tables(written) == []
    assert not list(Path(next(iter(written))).parent.glob("*.refit"))
    more = test_plan({**settings, "simulation": {"run": ["mcar"], "replicates": 3}})
    planned = more.sim_batch_keys()
    differ = [table for table, keys in planned.items() if written.get(table) != keys]
    assert differ and len(differ) < len(planned)  # tables of the old packing, and new ones
    assert_unplanned_marked(written, planned, differ)


def test_the_readers_of_real_batch_tables_refuse_those_of_another_packing_and_mark_them(
        tmp_path, monkeypatch):
    """The same for the real-data batch tables: after a change of the runtime study's
    replicates, tables of the old packing whose jobs Snakemake did not record gave the
    runtime table L-BFGS-B's replicate 1 twice and not cBMM's replicate 2, as many rows
    as expected (exit 0). The jobs reading real batch tables check each against the fits
    planned for it (by folder) and mark the others."""
    monkeypatch.chdir(tmp_path)
    cells = 80 * 50
    settings = {"simulation": {"run": []}, "fit": {"batch_seconds": 0.01},
                "real": {"runtime": {"datasets": ["suite_a"], "replicates": 2},
                         "stability": {"datasets": []},
                         "interpretability": {"datasets": [], "rankflow": [],
                                              "math500": {"dataset": None}}}}
    plan = test_plan(settings)
    written = plan.real_batch_plan(plan.runtime_fits(), lambda dataset: cells)
    assert sorted(d for dirs in written.values() for d in dirs) == sorted(
        fit.fit_dir for fit in plan.runtime_fits())  # every fit in one table, once
    for table, fit_dirs in written.items():
        Path(table).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"fit_dir": fit_dirs, "fit_key": "k", "status": "converged"}).to_csv(
            table, index=False)
    assert store.unplanned_tables(written) == []
    assert not list(Path(next(iter(written))).parent.glob("*.refit"))
    more = test_plan(settings, {"real": {"runtime": {"replicates": 3}}})
    planned = more.real_batch_plan(more.runtime_fits(), lambda dataset: cells)
    assert all(planned[more.real_batch_file(fit, cells)].count(fit.fit_dir) == 1
               for fit in more.runtime_fits())
    differ = [table for table, dirs in planned.items() if written.get(table) != dirs]
    assert differ and len(differ) < len(planned)  # tables of the old packing, and new ones
    # what the runtime table was made of: the old tables and the new ones the run wrote
    old = [d for table in planned if table in written for d in written[table]]
    new = [d for table in planned if table not in written for d in planned[table]]
    assert len(old + new) == len(more.runtime_fits()) != len(set(old + new))
    assert_unplanned_marked(written, planned, differ)


def test_a_fits_key_follows_the_code_of_a_users_method(tmp_path, unregister):
    from cbmm_workflow.jobs import code_digest, import_method_modules, method_code

    module = tmp_path / "mine.py"
    module.write_text(TOY_MODULE.format(value=1.0))
    import_method_modules([str(module)])
    before = method_code("mine", [str(module)])
    assert before == code_digest([str(module)], [str(module)])
    assert method_code("cbmm", [str(module)]) is None  # the cbmm version stands for it
    module.write_text(TOY_MODULE.format(value=2.0))
    import_method_modules([str(module)])
    assert method_code("mine", [str(module)]) not in (before, None)
    assert code_digest([str(module)]) != code_digest([])


TOY_MODULE = """
import numpy as np, cbmm
def solve(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0, a0 * {value}, b0, [], 1, "converged", 0.0)
cbmm.register_method("mine", solve)
"""


@pytest.mark.parametrize("body,message", [
    ("import sys\nsys.exit(0)\n", "cannot import '{path}': it called sys.exit(0) while being "
                                  "imported"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
     "importing '{path}' killed the Python process (SIGSEGV); fix or remove the module"),
])
def test_a_method_module_that_exits_or_crashes_at_import_is_a_config_error(tmp_path, body,
                                                                           message, unregister):
    module = tmp_path / "bad.py"
    module.write_text(body)
    with pytest.raises(configuration.ConfigError) as caught:
        configuration.load_config(merged(TEST_OVERLAY, {"method_modules": [str(module)]}))
    assert str(caught.value).splitlines() == [
        "invalid configuration:", "- method_modules: " + message.format(path=module)]


def test_held_out_fits_run_to_the_converged_rule_with_each_methods_options():
    """The validation study's fits stop by real.converged, as the rankings' do (the
    library's defaults left L-BFGS-B `not_stationary` in every fold of MATH-500: a baseline
    stopped short), with accelerate for cbmm alone and fit.method_options on top."""
    plan = test_plan({"real": {"converged": {"tol": 1e-9, "max_iter": 20000}},
                      "fit": {"method_options": {"lbfgsb": {"prior": "none"}}}})
    assert plan.validation_settings("cbmm") == {"tol": 1e-9, "max_iter": 20000,
                                                "accelerate": "auto"}
    assert plan.validation_settings("lbfgsb") == {"tol": 1e-9, "max_iter": 20000,
                                                  "prior": "none"}
    # the rule's accelerate over the method's own, as the rankings' fits get it
    plan = test_plan({"real": {"converged": {"tol": 1e-9, "max_iter": 20000}},
                      "fit": {"method_options": {"cbmm": {"accelerate": "none",
                                                          "prior": "none"}}}})
    assert plan.validation_settings("cbmm") == {"tol": 1e-9, "max_iter": 20000,
                                                "accelerate": "auto", "prior": "none"}
    # what the job passes on is what cbmm.fit accepts for the method
    responses = np.array([[1, 0, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 0.]])
    for method in ("cbmm", "lbfgsb"):
        cbmm.cross_validate(responses, method, folds=2, **plan.validation_settings(method))


def test_a_datasets_efficiency_study_depends_on_its_own_settings_only():
    """Adding a dataset (or changing MATH-500's content balance) changed the study's
    parameters for every dataset, and Snakemake ran every finished study again (24 minutes
    for a leaderboard suite)."""
    plan = test_plan()
    settings = plan.efficiency_settings()
    assert "datasets" not in settings and "content" not in settings["adaptive"]
    assert settings["k"] == [5, 20] and settings["adaptive"]["max_items"] == 20
    assert test_plan({"real": {"efficiency": {"datasets": ["suite_a"]}}}
                     ).efficiency_settings() == settings
    other_balance = test_plan({"real": {"efficiency": {"adaptive": {"content": None}}}})
    assert other_balance.efficiency_settings() == settings
    assert other_balance.content_balance("MATH_500") is None
    assert plan.content_balance("MATH_500") == "subject" and plan.content_balance("suite_a") is None
    assert test_plan({"real": {"efficiency": {"k": [5]}}}).efficiency_settings() != settings


def reordered(mapping):
    """``mapping`` with the keys of every mapping in it in reverse order."""
    if isinstance(mapping, dict):
        return {key: reordered(mapping[key]) for key in reversed(mapping)}
    return mapping


def test_settings_written_in_another_order_are_the_same_parameters():
    """Snakemake compares a rule's parameters as written: the same dataset entry or
    real.efficiency with its keys in another order, or an entry with a description, ran
    the dataset's build and every job after it again."""
    plan = test_plan()
    config = merged(TEST_OVERLAY)
    config["datasets"]["suite_a"] = reordered(config["datasets"]["suite_a"])
    config["datasets"]["suite_a"]["description"] = "my suite"
    config["real"]["efficiency"] = reordered(config["real"]["efficiency"])
    other = Plan(configuration.load_config(config))
    assert list(other.config["real"]["efficiency"]) != list(plan.config["real"]["efficiency"])
    for name in ("suite_a", "MATH_500"):
        assert json.dumps(other.dataset_entry(name)) == json.dumps(plan.dataset_entry(name))
    assert json.dumps(other.efficiency_settings()) == json.dumps(plan.efficiency_settings())


def test_an_interrupted_job_logs_one_line_not_a_traceback(tmp_path):
    """Ctrl-C stops every running job; the profile prints the failed jobs' logs, which
    were each a KeyboardInterrupt traceback. Other errors keep theirs."""
    scripts = Path(__file__).resolve().parents[1] / "workflow" / "scripts"
    for error, path in (("KeyboardInterrupt", tmp_path / "stopped.log"),
                        ("ValueError('bad')", tmp_path / "failed.log")):
        code = ("import sys\nsys.path.insert(0, sys.argv[1])\n"
                "from cbmm_workflow.jobs import start_log\n"
                f"log = start_log(sys.argv[2], job='fit')\nraise {error}\n")
        done = subprocess.run([sys.executable, "-c", code, str(scripts), str(path)])
        assert done.returncode != 0  # Python exits by the SIGINT itself (-2), or with 1
    stopped = (tmp_path / "stopped.log").read_text()
    assert "Traceback" not in stopped
    assert stopped.rstrip().endswith("ERROR interrupted; the same command resumes the run")
    failed = (tmp_path / "failed.log").read_text()
    assert "Traceback" in failed and failed.rstrip().endswith("ValueError: bad")


def test_the_end_of_a_run_names_the_job_logs_that_warn(tmp_path):
    """A job's warnings (here the efficiency study's skipped k, in the words of
    workflow/scripts/efficiency.py) reach the console at the end of the run: per rule the
    logs written since it started that hold one, with their first warning."""
    from cbmm_workflow.jobs import logged_warnings

    scripts = Path(__file__).resolve().parents[1] / "workflow" / "scripts"

    def job(rule, name, *messages):
        code = ("import sys, warnings\nsys.path.insert(0, sys.argv[1])\n"
                "from cbmm_workflow.jobs import start_log\n"
                f"log = start_log(sys.argv[2], job={rule!r})\nlog.info('working')\n"
                + "".join(f"log.warning({m!r})\n" for m in messages if m)
                + "warnings.warn('a Python warning', UserWarning)\n" * bool(messages))
        path = tmp_path / "logs" / rule / f"{name}.log"
        subprocess.run([sys.executable, "-c", code, str(scripts), str(path)], check=True)

    job("efficiency", "old_suite", "from an earlier run")
    time.sleep(0.05)
    started = time.time()
    job("efficiency", "my_suite", "real.efficiency.k, dataset 'my_suite': k = 1000 skipped, "
        "not below its 30 items")
    job("efficiency", "quiet_suite")
    for name in ("a", "b", "c", "d"):
        job("fit", f"batch_{name}", f"fit {name} did not converge")
    job("render", "python", None)
    (tmp_path / "logs" / "render" / "gone.log").symlink_to(tmp_path / "nowhere")  # unreadable
    lines = logged_warnings(started, folder=tmp_path / "logs", shown=3)
    assert lines == [
        f"{tmp_path / 'logs' / 'efficiency'}: 1 job log(s) with warnings, e.g.",
        f"  {tmp_path / 'logs' / 'efficiency' / 'my_suite.log'}: real.efficiency.k, dataset "
        "'my_suite': k = 1000 skipped, not below its 30 items",
        f"{tmp_path / 'logs' / 'fit'}: 4 job log(s) with warnings, e.g.",
        *(f"  {tmp_path / 'logs' / 'fit' / f'batch_{n}.log'}: fit {n} did not converge"
          for n in "abc"),
        # a Python warning, without the file and line it was raised at
        f"{tmp_path / 'logs' / 'render'}: 1 job log(s) with warnings, e.g.",
        f"  {tmp_path / 'logs' / 'render' / 'python.log'}: UserWarning: a Python warning"]
    assert logged_warnings(time.time() + 60, folder=tmp_path / "logs") == []
