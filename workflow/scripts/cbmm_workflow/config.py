"""The configuration, checked completely once, before any job.

:func:`load_config` checks a configuration (``config/config.yaml`` with the overlays of
``--configfile`` merged over it) against the schema, ``workflow/schemas/
config.schema.yaml``, filling in its defaults in the same pass; then the user's method
modules, the dataset registry, method names and options, simulation levels and the
references between keys.  Each problem is one line naming its key, all of them in one
:class:`ConfigError`.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import cbmm
import jsonschema
import yaml
from cbmm.api import FIT_OPTIONS, TIMEOUT
from cbmm.data import DataError, load_registry, validate_registry
from cbmm.model import SIGMA_RANGE
from cbmm.data.release import check_release
from cbmm.efficient import STRATEGIES
from cbmm.registry import get_method

from .jobs import import_method_modules
from .paths import SCHEMA, env_file, repo_path


class ConfigError(Exception):
    """The configuration cannot run: the message names each bad key, one per line."""


def _fail(problems) -> None:
    if problems:
        lines = "\n".join(f"- {p}" for p in problems)
        raise ConfigError(f"invalid configuration:\n{lines}")


def _key(path) -> str:
    """A JSON-Schema error path as a config key: simulation.studies.mcar.levels[0]."""
    parts = (f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
    return "".join(parts).lstrip(".")


def _filling_defaults(validator_class):
    """``validator_class`` that also fills in each missing property's default as it
    descends (jsonschema's FAQ recipe), so checking and filling are one pass."""
    check_properties = validator_class.VALIDATORS["properties"]

    def properties(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from check_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties})


#: Keys of the configuration that are settings of cbmm.fit: their types and bounds are
#: fit's own declarations (cbmm.api.FIT_OPTIONS, cbmm.api.TIMEOUT), so that the schema
#: accepts exactly what the fits accept.  {key path: declaration}
FIT_SETTINGS = {("fit", "sigma"): FIT_OPTIONS["sigma"], ("fit", "tol"): FIT_OPTIONS["tol"],
                ("fit", "max_iter"): FIT_OPTIONS["max_iter"],
                ("fit", "init_scale"): FIT_OPTIONS["init_scale"],
                ("fit", "timeout_s"): TIMEOUT,
                ("real", "converged", "tol"): FIT_OPTIONS["tol"],
                ("real", "converged", "max_iter"): FIT_OPTIONS["max_iter"],
                ("real", "stability", "init_scales", "items"): FIT_OPTIONS["init_scale"]}


def _declared_bounds(schema) -> dict:
    """The schema with the type and bounds of each :data:`FIT_SETTINGS` key from its
    declaration (its default and description stay the schema's)."""
    for path, option in FIT_SETTINGS.items():
        node = schema
        for part in path[:-1]:
            node = node["properties"][part]
        key = path[-1]
        place = node if key == "items" else node["properties"]
        declared = {k: v for k, v in option.json_schema().items() if k != "description"}
        place[key] = {**{k: v for k, v in place[key].items()
                         if k in ("default", "description")}, **declared}
    return schema


def _strict_types(validator_class):
    """``validator_class`` whose integers are written as whole numbers (YAML reads 2.0 as
    a float, which the library's integer arguments refuse, so the jobs would fail) and
    whose numbers are finite (NaN passes every range check; no key means infinity)."""
    checker = validator_class.TYPE_CHECKER.redefine_many({
        "integer": lambda _, value: isinstance(value, int) and not isinstance(value, bool),
        "number": lambda _, value: isinstance(value, (int, float))
        and not isinstance(value, bool) and math.isfinite(value)})
    return jsonschema.validators.extend(validator_class, type_checker=checker)


@functools.cache
def _schema_validator():
    schema = _declared_bounds(yaml.safe_load(SCHEMA.read_text()))
    return _filling_defaults(_strict_types(jsonschema.Draft202012Validator))(schema)


def _schema_problems(config) -> list[str]:
    """One line per schema violation, naming the key; fills in the defaults."""
    validator = _schema_validator()
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.path)))
    return [f"{_key(e.absolute_path) or '(top level)'}: {_message(e)}" for e in errors]


def _message(error) -> str:
    """jsonschema's message, but for a number that is not finite (not of type 'number'
    by :func:`_strict_types`), a value that fits none of several forms (jsonschema: "is
    not valid under any of the given schemas"; here what each form asks) and a missing
    dataset source (the sources named)."""
    if error.validator == "type" and isinstance(error.instance, float) \
            and not math.isfinite(error.instance):
        return f"{error.instance} is not a finite number"
    if error.validator in ("anyOf", "oneOf") and error.context:
        reasons = dict.fromkeys(_message(sub) for sub in error.context if not sub.path)
        if reasons:
            return f"{error.instance!r} fits none of its forms: " + "; ".join(reasons)
    if error.validator == "required" and "source" in error.validator_value \
            and "source" not in error.instance:
        from cbmm.data.datasets import SOURCE_OPTIONS

        return (f"{error.message}: one of {', '.join(SOURCE_OPTIONS)} (docs/data.md; "
                "your own table: source: local, options: {path: ...})")
    return error.message


def method_modules(config) -> list[str]:
    """The method_modules entries as the jobs import them (.py files made absolute)."""
    return [str(repo_path(spec)) if spec.endswith(".py") else spec
            for spec in config["method_modules"]]


#: Seconds a trial import of the user's method modules may take.
IMPORT_CHECK_S = 300
_TRIAL_IMPORT = """
import sys
from cbmm_workflow.jobs import import_method_modules
try:
    import_method_modules(sys.argv[1:])
except RuntimeError as exc:
    print(" ".join(str(exc).split()), file=sys.stderr)
    sys.exit(1)
"""


def _import_method_modules(config) -> None:
    """Register the user's methods (config key method_modules) in this process, once a
    trial import in a child process went well: a module that crashes the interpreter
    (a segmentation fault), exits it or hangs must stop the run with a message, not take
    Snakemake with it."""
    specs = method_modules(config)
    if not specs:
        return
    problem = _trial_import(specs)
    if problem is None:
        try:
            import_method_modules(specs)
        except Exception as exc:  # any error of a user's module: name the key and the module
            problem = str(exc)
    if problem:
        raise ConfigError(f"invalid configuration:\n- method_modules: {problem}") from None


def _trial_import(specs) -> str | None:
    """Import ``specs`` in a fresh interpreter; what went wrong, or None."""
    # this process's import path, the workflow package's folder first
    path = os.pathsep.join([str(Path(__file__).resolve().parents[1]), *filter(None, sys.path)])
    try:
        done = subprocess.run([sys.executable, "-c", _TRIAL_IMPORT, *specs],
                              env={**os.environ, "PYTHONPATH": path}, capture_output=True,
                              text=True, timeout=IMPORT_CHECK_S)
    except subprocess.TimeoutExpired:
        return (f"importing {', '.join(map(repr, specs))} did not finish within "
                f"{IMPORT_CHECK_S} s")
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return (f"importing {', '.join(map(repr, specs))} killed the Python process "
                f"({name}); fix or remove the module")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"importing {specs!r} failed (status {done.returncode})"


def _check_datasets(config) -> list[str]:
    """The config's own release and dataset entries, by the registry's own check
    (cbmm.data.validate_registry: unknown or missing options, a missing sha256, paths
    that would leave the download cache)."""
    try:
        validate_registry({"release": config["release"], "datasets": config["datasets"]},
                          "config")
    except DataError as exc:
        return [str(exc)]
    return []


def _merge_registry(config) -> None:
    """Put the registry file's entries (datasets and alternatives) under the config's own."""
    if config["registry"] is None:
        return
    try:
        registry = load_registry(repo_path(config["registry"]))
    except DataError as exc:
        _fail([f"registry: {exc}"])
    config["datasets"] = {**registry["alternatives"], **registry["datasets"],
                          **config["datasets"]}
    try:
        config["release"] = check_release({**registry["release"], **config["release"]})
    except DataError as exc:
        _fail([str(exc)])


def used_methods(config) -> list[str]:
    """Methods some job will run (cbmm always: the real-data studies need it; and the
    methods cross-validated on datasets)."""
    validated = config["real"]["validation"]["methods"] if config["real"]["validation"][
        "datasets"] else []
    return list(dict.fromkeys([*config["methods"], "cbmm", *validated]))


def _check_methods(config, conda_envs: bool) -> list[str]:
    """Every method named anywhere is registered; options are the method's own."""
    problems = []
    known = cbmm.available_methods()
    named = [("methods", m) for m in config["methods"]]
    named += [("real.runtime.exclude_methods", m)
              for m in config["real"]["runtime"]["exclude_methods"]]
    named += [("fit.method_options", m) for m in config["fit"]["method_options"]]
    named += [("real.validation.methods", m) for m in config["real"]["validation"]["methods"]]
    for key, name in named:
        if name not in known:
            problems.append(f"{key}: method {name!r} is not registered (registered: "
                            f"{', '.join(known)}; add your own through method_modules)")
    for name, options in config["fit"]["method_options"].items():
        if name in known:
            problems += _option_problems(f"fit.method_options.{name}", name, options)
    converged = {"accelerate": config["real"]["converged"]["accelerate"]}
    problems += _option_problems("real.converged", "cbmm", converged)
    if conda_envs:
        for name in used_methods(config):
            env = env_file(get_method(name).env) if name in known else None
            if env is not None and not env.is_file():
                problems.append(f"methods: {name!r} runs in conda env {env}, which does not "
                                "exist (Method.env of its registry entry)")
    return problems


def _option_problems(key, method, options) -> list[str]:
    """Options checked against the registry: JSON Schema of the declared options, then
    the method's own check (which also catches what JSON Schema cannot say)."""
    spec = get_method(method)
    schema = {"type": "object", "additionalProperties": False,
              "properties": {name: o.json_schema() for name, o in spec.options.items()}}
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(options))
    if errors:
        known = ", ".join(sorted(spec.options)) or "none"
        return [f"{'.'.join(filter(None, [key, _key(e.absolute_path)]))}: {e.message} "
                f"(options of {method}: {known})" for e in errors]
    try:
        spec.check_options(options)
    except ValueError as exc:
        return [f"{key}: {exc}"]
    return []


#: Allowed levels per design factor: (test, what a level must be).
LEVEL_RULES = {
    "n_models": (lambda v: v >= 2 and float(v).is_integer(), "an integer >= 2"),
    "n_items": (lambda v: v >= 2 and float(v).is_integer(), "an integer >= 2"),
    "log10_sigma": (lambda v: math.log10(SIGMA_RANGE[0]) <= v <= math.log10(SIGMA_RANGE[1]),
                    f"in [{math.log10(SIGMA_RANGE[0]):g}, {math.log10(SIGMA_RANGE[1]):g}]: "
                    "sigma in cbmm.model.SIGMA_RANGE"),
    "sparsity": (lambda v: 0 <= v < 1, "a share in [0, 1)"),
    "missing_rate": (lambda v: 0 <= v < 1, "a share in [0, 1)"),
}


def _check_studies(config) -> list[str]:
    """Each study's levels are possible values of its factor (schema: numbers), and a
    missing-rate study has a missingness pattern to apply it to."""
    problems = []
    sim = config["simulation"]
    defaults = sim["defaults"]
    for study, spec in sim["studies"].items():
        test, what = LEVEL_RULES[spec["factor"]]
        for i, level in enumerate(spec["levels"]):
            if not test(level):
                problems.append(f"simulation.studies.{study}.levels[{i}]: {level!r} is not a "
                                f"possible {spec['factor']} (must be {what})")
        if spec["factor"] == "missing_rate" and spec.get("missing", defaults["missing"]) == "none":
            problems.append(f"simulation.studies.{study}.missing: a missing_rate study needs a "
                            "missingness pattern (mcar, mar or mnar), here or in "
                            "simulation.defaults.missing")
    for factor in ("n_models", "n_items", "log10_sigma"):
        test, what = LEVEL_RULES[factor]
        if not test(defaults[factor]):
            problems.append(f"simulation.defaults.{factor}: {defaults[factor]!r} must be {what}")
    return problems


def math500_settings(config) -> dict | None:
    """The MATH-500 settings, or None when real.interpretability.math500.dataset is null."""
    settings = config["real"]["interpretability"]["math500"]
    return settings if settings["dataset"] is not None else None


def _check_references(config) -> list[str]:
    """Cross-key checks JSON Schema cannot express; each names its key."""
    problems = []
    studies = config["simulation"]["studies"]
    for study in config["simulation"]["run"]:
        if study not in studies:
            problems.append(f"simulation.run: study {study!r} is not defined under "
                            f"simulation.studies (defined: {', '.join(sorted(studies))})")
    datasets, real = config["datasets"], config["real"]
    math500 = math500_settings(config)
    references = [(f"real.{role}.datasets", real[role]["datasets"])
                  for role in ("runtime", "stability", "interpretability", "uncertainty",
                               "validation", "efficiency")]
    references.append(("real.interpretability.rankflow",
                       [panel["dataset"] for panel in real["interpretability"]["rankflow"]]))
    if math500 is not None:
        references.append(("real.interpretability.math500.dataset", [math500["dataset"]]))
    for key, names in references:
        for name in names:
            if name not in datasets:
                problems.append(f"{key}: dataset {name!r} is not in the registry "
                                f"(known: {', '.join(sorted(datasets)) or 'none'})")
    for panel in real["interpretability"]["rankflow"]:
        if panel["dataset"] not in real["interpretability"]["datasets"]:
            problems.append(f"real.interpretability.rankflow: dataset {panel['dataset']!r} "
                            "must also be listed in real.interpretability.datasets (its "
                            "ranking is drawn)")
    problems += [f"real.efficiency.strategies: {name!r} is not a strategy of "
                 f"cbmm.select_items ({', '.join(STRATEGIES)})"
                 for name in real["efficiency"]["strategies"] if name not in STRATEGIES]
    adaptive = real["efficiency"]["adaptive"]
    if adaptive["min_items"] >= adaptive["max_items"]:
        problems.append(f"real.efficiency.adaptive.min_items: {adaptive['min_items']} is not "
                        f"below max_items {adaptive['max_items']}: every test would give "
                        "max_items items, whatever the se_targets")
    for name, entry in datasets.items():
        if entry["source"] == "local":
            path = repo_path(entry["options"]["path"])
            if not path.is_file():
                what = f"{path} is a folder, not a file" if path.is_dir() \
                    else f"file {path} not found"
                problems.append(f"datasets.{name}.options.path: {what}")
    if math500 is not None:
        models, items = repo_path(math500["models"]), math500["items"]
        if not models.is_file():
            problems.append(f"real.interpretability.math500.models: file {models} not found")
        if items != "hub" and not repo_path(items).is_file():
            problems.append(f"real.interpretability.math500.items: file {repo_path(items)} "
                            "not found")
    return problems


def load_config(config: dict, *, conda_envs: bool = False) -> dict:
    """Check ``config`` completely, filling in its defaults (in place), and return it.

    In order: the schema, the user's methods (imported: they register themselves), the
    dataset entries and the registry file merged under them, method names and options
    (with ``conda_envs``, each method's conda env file must exist), levels, references.

    Raises
    ------
    ConfigError
        Naming every bad key of the first stage that has any.
    """
    _fail(_schema_problems(config))
    _import_method_modules(config)
    _fail(_check_datasets(config))
    _merge_registry(config)
    _fail(_check_methods(config, conda_envs) + _check_studies(config)
          + _check_references(config))
    return config


def check_software(config) -> None:
    """Stop if a configured method cannot run (says how to fix it)."""
    try:
        cbmm.check_methods(used_methods(config))
    except cbmm.MethodUnavailableError as exc:
        missing = exc.methods
        # the lists that name them (a method validated alone is not in `methods:`)
        keys = [key for key, names in (("methods", config["methods"]),
                                        ("real.validation.methods",
                                         config["real"]["validation"]["methods"]))
                if set(missing) & set(names)]
        where = " and ".join(f"`{key}:`" for key in keys) or "`methods:`"
        raise ConfigError(
            f"{exc}\nInstall the missing software as shown, or remove "
            f"{', '.join(missing)} from {where} in your config (e.g. --config "
            "'methods=[cbmm,lbfgsb]')."
        ) from None
