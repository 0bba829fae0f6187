"""``import cbmm`` loads NumPy, the C extensions and the standard library only; the heavy
modules a solver needs (SciPy's optimizers, torch._dynamo) are imported by cbmm.fit in the
caller before it forks the worker (``Method.preload``), so that forked workers inherit them
instead of importing them again on every fit.

Each check runs in a fresh interpreter: the test session has long imported everything.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

import cbmm
from cbmm.registry import _METHODS, Option

HEAVY = ("pandas", "scipy", "pyarrow", "matplotlib")


def run_python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it leaves its findings in ``report`` (a dict)."""
    script = f"import json\nreport = {{}}\n{code}\nprint(json.dumps(report))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_import_cbmm_loads_no_pandas_scipy_pyarrow_or_matplotlib():
    report = run_python(f"import sys, cbmm\n"
                        f"report['heavy'] = sorted(m for m in sys.modules "
                        f"if m.split('.')[0] in {HEAVY!r})")
    assert report["heavy"] == []


@pytest.mark.skipif(not cbmm.api.FORK_AVAILABLE, reason="needs os.fork")
@pytest.mark.parametrize("method,options,module", [
    ("lbfgsb", {}, "scipy.optimize"),
    ("cbmm", {"accelerate": "auto"}, "scipy.optimize"),
    pytest.param("pyirt", {"max_iter": 3}, "torch._dynamo",
                 marks=pytest.mark.skipif(importlib.util.find_spec("py_irt") is None,
                                          reason="py-irt not installed")),
])
def test_fit_imports_what_the_solver_needs_in_the_caller_before_the_fork(method, options,
                                                                         module):
    # the worker's own imports are recorded by wrapping the solver call it makes
    report = run_python(f"""
import sys
import cbmm
from cbmm import api
from cbmm.simulate import simulate

solve = api._solve

def traced(*args):
    before = set(sys.modules)
    out = solve(*args)
    out.info["worker_imports"] = sorted(set(sys.modules) - before)
    return out

api._solve = traced
data = simulate(40, 20, seed=3).responses
report["before"] = {module!r} in sys.modules
result = cbmm.fit(data, method={method!r}, **{options!r})
report["status"] = result.status
report["after"] = {module!r} in sys.modules
report["worker_imports"] = result.info["worker_imports"]
""")
    assert not report["status"].startswith("failed"), report["status"]
    assert not report["before"] and report["after"]
    assert not [m for m in report["worker_imports"]  # sympy: what torch._dynamo brings
                if m.split(".")[0] in HEAVY + ("sympy",) or m.startswith(module)]


@pytest.fixture
def toy():
    yield "toy_preload"
    _METHODS.pop("toy_preload", None)


def test_preload_is_called_with_the_checked_options(toy):
    seen = []

    def preload(options):
        seen.append(dict(options))
        return ("cbmm.tables",)

    def solve(responses, theta0, a0, b0, **kw):
        return cbmm.SolverOutput(theta0, a0, b0, [], 0, "converged", 0.0)

    cbmm.register_method(toy, solve, preload=preload,
                         options={"steps": Option("int", 3), "mode": Option("str", "fast")})
    y = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]])
    assert not cbmm.fit(y, method=toy, steps=5, isolate=False).failed
    assert seen == [{"steps": 5, "mode": "fast"}]
    assert "cbmm.tables" in sys.modules


# ----------------------------------------------------------------- the import graph

def module_imports(package_dir):
    """{module: modules of the package it imports}, at any depth of the code (imports
    inside functions included), from the source files."""
    import ast
    from pathlib import Path

    root = Path(package_dir)
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                    if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                submodules = [f"{target}.{a.name}" for a in node.names
                              if f"{target}.{a.name}" in modules]
                edges.update(submodules or [target])  # "from . import x" imports x
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
        graph[name] = {m for m in edges if m in modules and m != name}
    return graph


def test_the_librarys_modules_import_each_other_without_a_cycle():
    from pathlib import Path

    graph = module_imports(Path(cbmm.__file__).parent)
    # the package itself imports everything for its namespace: not an edge of a cycle
    graph = {m: deps - {"cbmm"} for m, deps in graph.items() if m != "cbmm"}
    assert {"cbmm.engine", "cbmm.mm", "cbmm.solver", "cbmm.hybrid"} <= set(graph)
    assert "cbmm.solver" not in graph["cbmm.hybrid"] and "cbmm.solver" not in graph["cbmm.model"]
    state = {}

    def visit(module, path):
        state[module] = "open"
        for dependency in sorted(graph[module]):
            if state.get(dependency) == "open":
                raise AssertionError("import cycle: " + " -> ".join(path + [dependency]))
            if dependency not in state:
                visit(dependency, path + [dependency])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
