"""The workflow's conda environments provide what their jobs import, at the locked versions.

Conda cannot be reached from the test machines, so the environment files are checked
statically:

* every third-party module that a rule's script imports (its own imports, those of the
  workflow package beside it, and cbmm's imports on the paths the script uses, following
  cbmm's modules) is provided by the rule's environment, for each method a fit rule
  may run (the method's environment comes from its registry entry);
* every version pinned in an environment equals the one of the CI-tested lock and lies
  within pyproject.toml's bounds; every environment lists cbmm's core dependencies
  (the post-deploy script installs cbmm without them);
* every environment installs cbmm itself from the repository (its post-deploy script)
  at the package's current version.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

import cbmm
from cbmm.registry import get_method

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
SCRIPTS = REPO / "workflow" / "scripts"
ENVS = REPO / "envs"
LOCK = REPO / "requirements" / "lock.txt"

#: Distribution (conda or pip name) that provides each top-level module, including
#: modules an environment gets as a dependency of a package it lists.
PROVIDERS = {
    "numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "pyarrow": "pyarrow",
    "yaml": "pyyaml", "matplotlib": "matplotlib-base", "huggingface_hub": "huggingface_hub",
    "tqdm": "tqdm", "pooch": "pooch", "threadpoolctl": "threadpoolctl", "pymanopt": "pymanopt",
    "rpy2": "rpy2", "torch": "torch",
    "pyro": "pyro-ppl", "py_irt": "py-irt", "ordered_set": "py-irt", "httpx2": "huggingface_hub",
}
#: Modules every job gets without its environment: Snakemake puts its own package on
#: the script's import path (the pickled `snakemake` object needs it).
FROM_SNAKEMAKE = {"snakemake"}
#: conda-forge name -> PyPI name, where they differ.
PYPI_NAME = {"matplotlib-base": "matplotlib", "huggingface_hub": "huggingface-hub"}


def rule_blocks():
    """(rule name, conda env expression, script path) of every rule with a script."""
    blocks = []
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        # a rule's body: the lines indented deeper than its own line (rules may be nested
        # in an if block, or defined in a loop with a name: directive)
        for match in re.finditer(r"^([ ]*)(?:rule|checkpoint)(?: (\w+))?:\n"
                                 r"((?:\1[ ]{4}.*\n|[ ]*\n)+)", text, re.M):
            body = match.group(3)
            script = re.search(r"script:\n\s+\"([^\"]+)\"", body)
            conda = re.search(r"conda:\n\s+(\S+)", body)
            name = match.group(2) or re.search(r"name:\n\s+f?\"([^\"]+)\"", body).group(1)
            if script:
                assert conda, f"rule {name} ({smk.name}) has a script but no conda env"
                blocks.append((name, conda.group(1).strip('"'),
                               (smk.parent / script.group(1)).resolve()))
    return blocks


def _imports(path: Path):
    """(module name, level, inside a function) of every import statement of a file."""
    tree = ast.parse(path.read_text(), str(path))
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, 0, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                names = [alias.name for alias in child.names]
                found.append((child.module or "", child.level, in_function, names))
            visit(child, nested)

    visit(tree, False)
    return found


def _local_file(module: str) -> Path | None:
    """The file of a module of this repository: cbmm (src/), or a module or package beside
    the scripts (the workflow package, workflow/scripts/cbmm_workflow/)."""
    root = SRC if module.split(".")[0] == "cbmm" else SCRIPTS
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolve(entry, package: str) -> list[str]:
    """Absolute module names an import statement of ``package`` refers to."""
    if len(entry) == 3:
        return [entry[0]]
    module, level, _, names = entry
    if level:
        base = package.split(".")[: len(package.split(".")) - level + 1]
        module = ".".join(base + ([module] if module else []))
    # `from package import submodule` imports the submodule
    return [module] + [f"{module}.{name}" for name in names
                       if _local_file(f"{module}.{name}")]


def third_party_imports(script: Path, method: str | None) -> set[str]:
    """Top-level third-party modules the script needs, following cbmm and the workflow
    package (each module with the packages it lies in).

    Imports inside functions count too (a lazy import runs when its code path does),
    except those of another method's module: a job runs only its own method."""
    method_modules = {f"cbmm.methods.{name}" for name in ("lbfgsb", "manopt", "mirt", "pyirt")}
    own = {f"cbmm.methods.{method}"} if method else set()
    needed, seen, todo = set(), set(), [("__script__", script)]
    stdlib = set(sys.stdlib_module_names)
    while todo:
        name, path = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for entry in _imports(path):
            in_function = entry[2]
            if in_function and name in method_modules and name not in own:
                continue
            for module in _resolve(entry, package):
                parts = module.split(".")
                local = [(prefix, _local_file(prefix)) for prefix in
                         (".".join(parts[:k]) for k in range(1, len(parts) + 1))]
                if local[0][1] is not None:
                    todo += [(prefix, file) for prefix, file in local if file is not None]
                elif parts[0] and parts[0] not in stdlib and parts[0] != "__future__":
                    needed.add(parts[0])
    return needed


def env_packages(env_file: Path) -> dict[str, str | None]:
    """Package name -> pinned version (None if unpinned) of a conda environment file."""
    packages = {}
    for dep in yaml.safe_load(env_file.read_text())["dependencies"]:
        specs = dep["pip"] if isinstance(dep, dict) else [dep]
        for spec in specs:
            if spec.startswith("-"):
                continue
            match = re.match(r"([A-Za-z0-9_.-]+)\s*(?:==?\s*([^\s,;]+))?", spec)
            packages[match.group(1)] = match.group(2)
    return packages


def lock_versions() -> dict[str, str]:
    return {m.group(1).lower(): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", LOCK.read_text(), re.M)}


#: The common.smk functions that give a job its method's env (a batch shares one).
PER_METHOD_ENVS = ("batch_env", "method_env")


def env_file_of(expression: str, method: str | None) -> Path:
    if expression in PER_METHOD_ENVS:
        return ENVS / f"{get_method(method).env}.yaml"
    return (REPO / "workflow" / "rules" / expression).resolve()


CASES = [(rule, method, conda, script) for rule, conda, script in rule_blocks()
         for method in (cbmm.available_methods() if conda in PER_METHOD_ENVS else [None])]


def test_every_script_rule_was_found():
    rules = {rule for rule, _, _, _ in CASES}
    assert {"fit_simulation", "fit_real", "build_dataset", "render_sensitivity",
            "aggregate_runtime", "metrics_real"} <= rules
    # as many as the rule files have script: directives
    directives = sum(line.strip() == "script:" for path in (REPO / "workflow" / "rules").glob(
        "*.smk") for line in path.read_text().splitlines())
    assert len(rules) == directives


@pytest.mark.parametrize("rule,method,conda,script", CASES,
                         ids=[f"{r}-{m}" if m else r for r, m, _, _ in CASES])
def test_the_environment_of_a_rule_provides_what_its_script_imports(rule, method, conda,
                                                                     script):
    env = env_file_of(conda, method)
    assert env.is_file(), f"rule {rule}: no environment file {env}"
    provided = set(env_packages(env))
    missing = {}
    for module in sorted(third_party_imports(script, method) - FROM_SNAKEMAKE):
        assert module in PROVIDERS, f"{module} (imported by {script.name}): add its provider"
        if PROVIDERS[module] not in provided:
            missing[module] = PROVIDERS[module]
    assert not missing, f"rule {rule} ({method or ''}) in {env.name} lacks {missing}"


def test_the_import_scan_sees_lazy_imports_of_the_method_only():
    """The scan itself: py-irt's torch import counts for py-irt's fits only."""
    fit = SCRIPTS / "fit_simulation.py"
    assert {"torch", "py_irt"} <= third_party_imports(fit, "pyirt")
    assert "torch" not in third_party_imports(fit, "cbmm")
    assert "rpy2" in third_party_imports(fit, "mirt")
    assert "matplotlib" in third_party_imports(SCRIPTS / "render.py", None)


@pytest.mark.parametrize("env", sorted(ENVS.glob("*.yaml")), ids=lambda p: p.stem)
def test_environment_versions_are_the_locked_ones(env):
    locked = lock_versions()
    packages = env_packages(env)
    pinned = {name: version for name, version in packages.items() if version}
    for name, version in pinned.items():
        if name == "python":
            assert version.startswith("3.11")  # the lock's Python
            continue
        pypi = PYPI_NAME.get(name, name).lower()
        if pypi in locked:
            assert locked[pypi] == version, (env.name, name, version, locked[pypi])
    # every Python package an environment lists is pinned (R, compilers and pip aside)
    loose = [n for n, v in packages.items() if v is None and n not in
             ("c-compiler", "pip", "wheel") and not n.startswith("r-")]
    assert not loose, f"{env.name}: unpinned {loose}"


@pytest.mark.parametrize("env", sorted(ENVS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_environment_installs_cbmm_from_the_repository(env):
    deploy = env.with_name(f"{env.stem}.post-deploy.sh")
    text = deploy.read_text()
    assert re.search(r'pip install --no-deps --no-build-isolation "\$\{CBMM_REPO', text)
    # the version in the script: a new release changes the file, so Snakemake rebuilds
    assert f"(cbmm {cbmm.__version__})" in text
    assert "CBMM_REPO" in (REPO / "Snakefile").read_text()
    # what building cbmm needs
    assert {"setuptools", "wheel", "pip", "c-compiler"} <= set(env_packages(env))


def pyproject_requirements() -> tuple[list[Requirement], list[Requirement]]:
    """(core dependencies, every requirement of the extras) of pyproject.toml that apply to
    the lock's Python (3.11); the extras' references to cbmm itself left out."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = [Requirement(spec) for spec in project["dependencies"]]
    extras = [Requirement(spec) for specs in project["optional-dependencies"].values()
              for spec in specs]
    applies = [r for r in core + extras if r.name != "cbmm"
               and (r.marker is None or r.marker.evaluate({"python_version": "3.11"}))]
    return [r for r in applies if r in core], [r for r in applies if r not in core]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", PYPI_NAME.get(name, name)).lower()


@pytest.mark.parametrize("env", sorted(ENVS.glob("*.yaml")), ids=lambda p: p.stem)
def test_environments_hold_cbmms_dependencies_within_its_bounds(env):
    """cbmm goes in with --no-deps, so each environment must list its core dependencies;
    and a pin outside pyproject's bounds (e.g. huggingface_hub < 1.0) would break it."""
    packages = {canonical(name): version for name, version in env_packages(env).items()}
    core, extras = pyproject_requirements()
    missing = [str(r) for r in core if canonical(r.name) not in packages]
    assert not missing, f"{env.name} lacks cbmm's core dependencies {missing}"
    for requirement in core + extras:
        version = packages.get(canonical(requirement.name))
        if version is not None:
            version = version.split("+")[0]  # torch's local tag (+cpu)
            assert requirement.specifier.contains(version, prereleases=True), \
                f"{env.name}: {requirement.name} {version} is outside pyproject's {requirement}"
