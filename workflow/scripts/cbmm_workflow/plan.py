"""What a checked configuration asks for: the simulated and real-data fits, their seeds,
their packing into batch jobs and the jobs' resources, and every target.

A batch job fits its units one after the other in one Python process: the fits of
every configured method that runs in the job's conda env (one start-up serves them
all), packed in order by their declared cost (:func:`pack`).  A real fit is (dataset,
method, stopping rule, s^2, seed); rule ``paper`` is the paper's stopping rule (config
``fit``), rule ``converged`` is ``real.converged``.  The runtime study uses the paper's
rule; interpretability and stability the converged one; the same fit needed twice is
made once.
"""

from __future__ import annotations

import functools
import math
import zlib
from typing import NamedTuple

import cbmm
import numpy as np
from cbmm.fidelity import concerns_run
from cbmm.registry import get_method, method_order

from . import paths
from .config import math500_settings, method_modules, used_methods

PAPER, CONVERGED = "paper", "converged"


def pack(units, costs, target) -> list[list]:
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


def simulation_seed(base_seed: int, study: str, level, replicate: int) -> int:
    """Seed of one simulated replicate: a child of the base seed keyed by the design.

    Keyed by names and values (not list positions), so adding a level or a study
    leaves every existing replicate unchanged.
    """
    key = [base_seed, zlib.crc32(study.encode()), zlib.crc32(paths.fmt(level).encode()),
           int(replicate)]
    return int(np.random.SeedSequence(key).generate_state(1, dtype=np.uint32)[0])


def registered_envs() -> list[str]:
    """The conda envs of the registered methods (user methods included)."""
    return sorted({get_method(m).env for m in cbmm.available_methods()})


class RealFit(NamedTuple):
    """One real-data fit."""

    dataset: str
    method: str
    stopping: str  # PAPER or CONVERGED
    init_scale: str  # s^2 as in its path (paths.fmt)
    seed: int

    @property
    def fit_dir(self) -> str:
        return paths.REAL_FIT_DIR.format(**self._asdict())


class Plan:
    """The jobs and targets of one configuration (checked: :func:`.config.load_config`)."""

    def __init__(self, config: dict):
        self.config = config
        self.method_modules = method_modules(config)
        self.math500 = math500_settings(config)

    # ---------------------------------------------------------------- methods

    def methods_in_order(self) -> list[str]:
        """The configured methods in display order (the registry's; the jobs that sort by
        it need not import the user's method modules)."""
        return method_order(used_methods(self.config))

    def env_methods(self) -> dict[str, list[str]]:
        """The configured methods grouped by the conda env they run in: {env: [method,
        ...]}, both in configured order.  The fits of one env share batch jobs."""
        groups = {}
        for method in self.config["methods"]:
            groups.setdefault(get_method(method).env, []).append(method)
        return groups

    def method_options(self, method: str) -> dict:
        return self.config["fit"]["method_options"].get(method, {})

    def fit_timeout_s(self, method: str, cells: int, max_iter: int):
        """fit.timeout_s for one fit ('auto': cbmm.fit's own rule, resolved here because
        the batch's runtime resource and the fit's stored key depend on it)."""
        timeout = self.config["fit"]["timeout_s"]
        if timeout == "auto":
            return get_method(method).default_timeout_s(cells, 1, max_iter)
        return timeout

    def _sized(self, unit: dict, cells: int, max_iter: int) -> dict:
        """A fit of a batch job with what its packing and resources need: its size (N x J
        cells), declared single-core cost (the registry's seconds_per_million_cells) and
        time limit."""
        method = get_method(unit["method"])
        return {**unit, "cells": cells, "cost_s": method.seconds_per_million_cells * cells / 1e6,
                "timeout_s": self.fit_timeout_s(unit["method"], cells, max_iter)}

    def _pack(self, units) -> list[list[dict]]:
        return pack(units, [u["cost_s"] for u in units], self.config["fit"]["batch_seconds"])

    def batch_resources(self, units) -> dict[str, int]:
        """mem_mb and runtime (minutes) of one batch job: memory of its largest fit;
        runtime of twice its declared cost plus the largest time limit among its fits."""
        res = self.config["fit"]["resources"]
        cells = max(u["cells"] for u in units)
        mem_mb = res["mem_mb_base"] + res["mem_mb_per_million_cells"] * cells / 1e6
        cost = sum(u["cost_s"] for u in units)
        limits = [u["timeout_s"] for u in units if u["timeout_s"] is not None]
        seconds = 2 * cost + (max(limits) if limits else 2 * cost)
        return {"mem_mb": math.ceil(mem_mb),
                "runtime": math.ceil(res["runtime_min_base"] + seconds / 60)}

    # ------------------------------------------------------------- simulation

    @property
    def studies(self) -> list[str]:
        return list(self.config["simulation"]["run"])

    def levels(self, study: str) -> list[str]:
        return [paths.fmt(v) for v in self.config["simulation"]["studies"][study]["levels"]]

    def study_design(self, study: str) -> dict:
        """What a study varies, as its figure is drawn by it: {factor, missing}."""
        spec = self.config["simulation"]["studies"][study]
        missing = spec.get("missing", self.config["simulation"]["defaults"]["missing"])
        return {"factor": spec["factor"], "missing": missing}

    def design(self, study: str, level) -> dict:
        """Arguments of cbmm.simulate.simulate for one (study, level) (seed excluded)."""
        design = dict(self.config["simulation"]["defaults"])
        varies = self.study_design(study)
        design["missing"] = varies["missing"]
        design[varies["factor"]] = float(level)
        return {"n_models": int(design["n_models"]), "n_items": int(design["n_items"]),
                "sigma": float(10.0 ** design["log10_sigma"]),
                "sparsity": float(design["sparsity"]), "missing": design["missing"],
                "missing_rate": float(design["missing_rate"])}

    def seed(self, study: str, level, replicate: int) -> int:
        return simulation_seed(self.config["simulation"]["seed"], study, level, replicate)

    @functools.cache
    def sim_batches(self, env: str) -> list[list[dict]]:
        """The simulated fits of the methods of one env packed into jobs: every study,
        level, replicate and method in that order, so a job draws each data set once for
        all its methods."""
        units = []
        for study in self.studies:
            for level in self.levels(study):
                design = self.design(study, level)
                cells = design["n_models"] * design["n_items"]
                for replicate in range(self.config["simulation"]["replicates"]):
                    for method in self.env_methods()[env]:
                        unit = {"study": study, "level": level, "replicate": replicate,
                                "method": method, "options": self.method_options(method),
                                "design": design, "seed": self.seed(study, level, replicate),
                                "fit_dir": paths.SIM_FIT_DIR.format(
                                    study=study, level=level, method=method,
                                    replicate=replicate)}
                        units.append(self._sized(unit, cells, self.config["fit"]["max_iter"]))
        return self._pack(units)

    def sim_batch_files(self) -> list[str]:
        """Batch tables of every simulated fit."""
        return list(self.sim_batch_keys())

    def sim_batch_keys(self) -> dict[str, list[list]]:
        """Each simulation batch table and the fits planned for it, as its rows name them
        (study, level, method, replicate): what the aggregation checks it against."""
        return {paths.SIM_BATCH.format(env=env, batch=k):
                [[u["study"], u["level"], u["method"], u["replicate"]] for u in batch]
                for env in self.env_methods() for k, batch in enumerate(self.sim_batches(env))}

    # -------------------------------------------------------------- real data

    def runtime_methods(self) -> list[str]:
        excluded = set(self.config["real"]["runtime"]["exclude_methods"])
        return [m for m in self.config["methods"] if m not in excluded]

    def runtime_fits(self) -> list[RealFit]:
        runtime = self.config["real"]["runtime"]
        scale = paths.fmt(self.config["fit"]["init_scale"])
        return [RealFit(d, m, PAPER, scale, s) for d in runtime["datasets"]
                for m in self.runtime_methods() for s in range(runtime["replicates"])]

    def stability_fits(self, dataset: str) -> list[RealFit]:
        stability = self.config["real"]["stability"]
        return [RealFit(dataset, "cbmm", CONVERGED, paths.fmt(v), s)
                for v in stability["init_scales"] for s in range(stability["replicates"])]

    def interpretability_fits(self, dataset: str) -> dict[str, RealFit]:
        """The converged fit behind a dataset's rankings and summaries, and its paper-rule
        twin, by stopping rule."""
        seed = self.config["real"]["interpretability"]["seed"]
        scale = paths.fmt(self.config["fit"]["init_scale"])
        return {stopping: RealFit(dataset, "cbmm", stopping, scale, seed)
                for stopping in (CONVERGED, PAPER)}

    def stopping_settings(self, stopping: str) -> tuple[float, int, dict]:
        """tol, max_iter and cbmm options of a stopping rule."""
        if stopping == PAPER:
            return self.config["fit"]["tol"], self.config["fit"]["max_iter"], {}
        converged = self.config["real"]["converged"]
        return converged["tol"], converged["max_iter"], {"accelerate": converged["accelerate"]}

    def validation_settings(self, method: str) -> dict:
        """``cbmm.fit`` settings of a method's held-out fits: the converged rule's tol and
        max_iter (the library's defaults leave L-BFGS-B `not_stationary`: a baseline
        stopped short), the method's options, and the rule's ``accelerate`` over them where
        the method takes it (as :meth:`real_batches` gives the rule's options)."""
        tol, max_iter, rule_options = self.stopping_settings(CONVERGED)
        takes = get_method(method).options
        options = {k: v for k, v in rule_options.items() if k in takes}
        return {"tol": tol, "max_iter": max_iter, **self.method_options(method), **options}

    @functools.cached_property
    def real_fits(self) -> list[RealFit]:
        """Every real fit the configuration needs, once each, in a stable order."""
        real = self.config["real"]
        fits = list(self.runtime_fits())
        for dataset in real["stability"]["datasets"]:
            fits += self.stability_fits(dataset)
        # the MATH-500 tables draw its dataset's interpretability fit, listed there or not
        # (a Snakemake InputFunctionException where it was not)
        interpreted = list(real["interpretability"]["datasets"])
        if self.math500 is not None:
            interpreted.append(self.math500["dataset"])
        for dataset in dict.fromkeys(interpreted):
            fits += self.interpretability_fits(dataset).values()
        return list(dict.fromkeys(fits))

    @functools.cache
    def real_batches(self, dataset: str, env: str, cells: int) -> list[list[dict]]:
        """The fits of one dataset (N x J = ``cells``) by the methods of one env, under
        both stopping rules, packed into jobs by their cost at the dataset's size."""
        units = []
        for fit in self.real_fits:
            if (fit.dataset, get_method(fit.method).env) != (dataset, env):
                continue
            tol, max_iter, rule_options = self.stopping_settings(fit.stopping)
            unit = {"method": fit.method,
                    "options": {**self.method_options(fit.method), **rule_options},
                    "stopping": fit.stopping, "tol": tol, "max_iter": max_iter,
                    "init_scale": float(fit.init_scale), "seed": fit.seed,
                    "fit_dir": fit.fit_dir}
            units.append(self._sized(unit, cells, max_iter))
        return self._pack(units)

    @functools.cache
    def real_batch_keys(self, dataset: str, env: str, cells: int) -> dict[str, tuple[str, ...]]:
        """Each batch table of :meth:`real_batches` and the fits planned for it, as its rows
        name them (their folders, ``fit_dir``): what the jobs reading it check it against."""
        return {paths.REAL_BATCH.format(dataset=dataset, env=env, batch=k):
                tuple(u["fit_dir"] for u in batch)
                for k, batch in enumerate(self.real_batches(dataset, env, cells))}

    def real_batch_file(self, fit: RealFit, cells: int) -> str:
        """The batch table holding one real fit (its dataset has ``cells`` cells)."""
        tables = self.real_batch_keys(fit.dataset, get_method(fit.method).env, cells)
        for table, fit_dirs in tables.items():
            if fit.fit_dir in fit_dirs:
                return table
        raise KeyError(fit)

    def real_batch_plan(self, fits, cells_of) -> dict[str, list[str]]:
        """The batch tables holding ``fits`` (sorted), each with the fits planned for it
        (:meth:`real_batch_keys`; ``cells_of(dataset)``: N x J of a built dataset): a
        reading job's inputs and what it checks them against."""
        planned = {}
        for fit in fits:
            cells = cells_of(fit.dataset)
            table = self.real_batch_file(fit, cells)
            planned[table] = list(self.real_batch_keys(
                fit.dataset, get_method(fit.method).env, cells)[table])
        return dict(sorted(planned.items()))

    def dataset_entry(self, dataset: str) -> dict:
        """The registry entry of ``dataset`` as its build depends on it: a local path made
        absolute (paths of the config are relative to the repository), without its
        description (words for people), its keys in order (:func:`sorted_keys`)."""
        entry = {key: value for key, value in self.config["datasets"][dataset].items()
                 if key != "description"}
        if entry["source"] == "local":
            entry["options"] = {**entry["options"],
                                "path": str(paths.repo_path(entry["options"]["path"]))}
        return sorted_keys(entry)

    def local_files(self, dataset: str) -> list[str]:
        """A local dataset's file (an input, so that editing it rebuilds the matrix)."""
        entry = self.dataset_entry(dataset)
        return [entry["options"]["path"]] if entry["source"] == "local" else []

    def rankflow_panels(self) -> dict[str, int]:
        """The paper's combined rank-flow figure: {dataset: top models shown}."""
        return {p["dataset"]: p["top"]
                for p in self.config["real"]["interpretability"]["rankflow"]}

    def uncertainty_datasets(self) -> list[str]:
        return list(self.config["real"]["uncertainty"]["datasets"])

    def validation_datasets(self) -> list[str]:
        return list(self.config["real"]["validation"]["datasets"])

    def efficiency_datasets(self) -> list[str]:
        return list(self.config["real"]["efficiency"]["datasets"])

    def efficiency_settings(self) -> dict:
        """The settings of real.efficiency that one dataset's study depends on: all but
        the list of datasets and the content balance (:meth:`content_balance`, its own
        parameter), so that adding a dataset or changing MATH-500's balance does not run
        the other datasets' studies again (the slowest jobs of a leaderboard suite)."""
        settings = dict(self.config["real"]["efficiency"])
        settings.pop("datasets", None)
        settings["adaptive"] = {key: value for key, value in settings["adaptive"].items()
                                if key != "content"}
        return sorted_keys(settings)

    def content_balance(self, dataset: str) -> str | None:
        """The column of the MATH-500 item table over which ``dataset``'s adaptive tests
        are also balanced (real.efficiency.adaptive.content), or None: the MATH-500
        dataset's alone has an item table."""
        if self.math500 is None or dataset != self.math500["dataset"]:
            return None
        return self.config["real"]["efficiency"]["adaptive"]["content"]

    def heldout_parts(self, dataset: str) -> list[str]:
        """One cross-validation table per validated method of ``dataset``."""
        return [paths.HELDOUT_PART.format(dataset=dataset, method=method)
                for method in self.config["real"]["validation"]["methods"]]

    # ---------------------------------------------------------------- targets

    def has_runtime_study(self) -> bool:
        return bool(self.config["real"]["runtime"]["datasets"] and self.runtime_methods())

    def all_tables(self) -> list[str]:
        """Every aggregated table the configuration asks for (what the figures read)."""
        real = self.config["real"]
        tables = [paths.SIM_TABLE.format(study=study) for study in self.studies]
        if self.has_runtime_study():
            tables.append(paths.RUNTIME_TABLE)
        if real["interpretability"]["datasets"]:
            tables.append(paths.DISCRIMINATION_TABLE)
            tables += [paths.RANKINGS.format(dataset=d)
                       for d in real["interpretability"]["datasets"]]
        if real["stability"]["datasets"]:
            tables.append(paths.STABILITY_TABLE)
        if self.math500 is not None:
            tables += [paths.MATH500_ABILITIES, paths.MATH500_ITEMS_TABLE]
        tables += [paths.ABILITIES_TABLE.format(dataset=d) for d in self.uncertainty_datasets()]
        tables += [paths.HELDOUT_TABLE.format(dataset=d) for d in self.validation_datasets()]
        for dataset in self.efficiency_datasets():
            tables += [pattern.format(dataset=dataset) for pattern in (
                paths.EFFICIENCY_TABLE, paths.ADAPTIVE_TABLE, paths.ADAPTIVE_SUMMARY_TABLE,
                paths.ITEM_AUDIT_TABLE)]
        return tables

    def fidelity_table(self) -> list[str]:
        """The fidelity table, where a published number concerns the run (none for a run
        on a user's own data alone: it would be empty)."""
        real = self.config["real"]
        names = {*self.studies, *real["runtime"]["datasets"], *real["stability"]["datasets"],
                 *real["interpretability"]["datasets"]}
        if self.math500 is not None:
            names.add(self.math500["dataset"])
        return [paths.FIDELITY] if concerns_run(self.all_tables(), names) else []

    def all_figures(self) -> list[str]:
        """Every figure and paper table (summaries, LaTeX) the configuration asks for."""
        real = self.config["real"]
        outputs = []
        for study in self.studies:
            outputs += paths.figure_files(f"sensitivity_{study}")
        if self.has_runtime_study():
            outputs += paths.figure_files("runtime")
            outputs += [paths.RUNTIME_SUMMARY, paths.SPEEDUP_TABLE]
        if real["interpretability"]["datasets"]:
            outputs += paths.figure_files("discrimination")
            for dataset in real["interpretability"]["datasets"]:
                outputs += paths.figure_files(f"rankflow_{dataset}")
        if self.rankflow_panels():
            outputs += paths.figure_files("rankflow")
        if real["stability"]["datasets"]:
            outputs += [paths.STABILITY_SUMMARY, *paths.STABILITY_TEX_FILES]
        if self.math500 is not None:
            outputs += paths.figure_files("math500_ability") + paths.figure_files(
                "item_difficulty")
            outputs.append(paths.MATH500_MODELS_TEX)
        for dataset in self.uncertainty_datasets():
            outputs += paths.figure_files(f"abilities_{dataset}")
        for dataset in self.efficiency_datasets():
            outputs += paths.figure_files(f"efficiency_{dataset}")
            outputs += paths.figure_files(f"item_audit_{dataset}")
        return outputs


def sorted_keys(value):
    """``value`` with the keys of every mapping in it in sorted order (lists keep theirs): a
    rule's parameters compared by Snakemake as written, so that the same settings written in
    another order ran a dataset's jobs again."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value
