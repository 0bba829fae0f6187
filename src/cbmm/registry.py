"""Method registry: every estimator plugs in here, and everything else looks it up.

One :class:`Method` entry per estimator holds every fact about it: the
solver, how to check its software, its display name, colour and place in the
paper's order, the conda environment the workflow runs it in, a rough cost
model (for default time limits and cluster requests) and its declared,
typed keyword options.  :func:`cbmm.fit`, the CLI, the figures and tables and
the workflow all read these entries, so a method added with
:func:`register_method` runs everywhere.

A solver has the signature ::

    solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed, progress, **options)
        -> SolverOutput

where ``responses`` is a validated :class:`cbmm.Responses` in the paper's
+-1/0 coding (dense: ``responses.y``, the int8 matrix; sparse CSR storage only
for methods that declare ``reads_sparse``), ``(theta0, a0, b0)`` the shared
start from :func:`cbmm.initialization.initial_values`, ``progress`` either
``None`` or a callable ``progress(iteration, loss)`` the solver calls after
each iteration / epoch / EM cycle (``loss`` may be NaN where the method has
no loss (3) at hand), and ``options`` the method's declared options, already
validated and completed with their defaults.  An error inside ``solve`` is a
failed fit (the paper's NA), not bad input.  Solvers import their heavy
libraries lazily so that ``import cbmm`` stays cheap (NumPy and the C
extensions only), and name them in ``preload`` so that :func:`cbmm.fit`
imports them in the caller, once, rather than in every forked worker.
"""

from __future__ import annotations

import importlib
import json
import math
import numbers
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Method", "Option", "MethodUnavailableError", "register_method", "get_method",
           "available_methods", "check_methods", "method_order", "AUTO_TIMEOUT_BASE_S",
           "AUTO_TIMEOUT_FACTOR"]

#: ``timeout_s="auto"`` allows ``AUTO_TIMEOUT_BASE_S + AUTO_TIMEOUT_FACTOR x`` the
#: method's declared cost (see :meth:`Method.default_timeout_s`).
AUTO_TIMEOUT_BASE_S = 60.0
AUTO_TIMEOUT_FACTOR = 10.0


class MethodUnavailableError(RuntimeError):
    """A method's software is missing; the message says how to install it or drop it.
    ``methods``: the methods it is about, where :func:`check_methods` raised it."""

    def __init__(self, message: str, methods=()):
        super().__init__(message)
        self.methods = list(methods)


def _no_modules(options) -> tuple:
    return ()


_KINDS = {"int": (numbers.Integral,), "float": (numbers.Real,), "str": (str,), "bool": (bool,)}


@dataclass(frozen=True)
class Option:
    """One keyword option of a method, with its type and allowed values.

    Parameters
    ----------
    kind : {"int", "float", "str", "bool"}
        Value type (an int is accepted where a float is expected).
    default
        Value used when the option is not given.
    choices : tuple, optional
        The only allowed values.
    minimum, exclusive_minimum, maximum : float, optional
        Bounds for numbers (a float option is finite in any case).
    nullable : bool
        Whether ``None`` is allowed.
    doc : str
        One line for ``cbmm methods`` and the configuration schema.
    specials : tuple of str
        Words allowed besides values of ``kind`` (e.g. ``"auto"``).
    """

    kind: str
    default: Any = None
    choices: tuple | None = None
    minimum: float | None = None
    exclusive_minimum: float | None = None
    nullable: bool = False
    doc: str = ""
    maximum: float | None = None
    specials: tuple = ()

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"Option kind must be one of {sorted(_KINDS)}, got {self.kind!r}")

    def validate(self, name: str, value):
        """Return ``value`` (an int becomes a float for float options); raise ``ValueError``
        naming the option when it has the wrong type or is out of range."""
        if value is None:
            if self.nullable:
                return None
            raise ValueError(f"option {name!r} must be {self.describe()}, got None")
        if isinstance(value, str) and value in self.specials:
            return value
        if (isinstance(value, bool) and self.kind != "bool"
                or not isinstance(value, _KINDS[self.kind])):
            raise ValueError(f"option {name!r} must be {self.describe()}, got {value!r}")
        if self.kind == "int":
            value = int(value)  # numpy integers too
        if self.kind == "float":
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"option {name!r} must be a finite number, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"option {name!r} must be one of {list(self.choices)}, got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"option {name!r} must be >= {self.minimum:g}, got {value!r}")
        if self.exclusive_minimum is not None and value <= self.exclusive_minimum:
            raise ValueError(f"option {name!r} must be > {self.exclusive_minimum:g}, got {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"option {name!r} must be <= {self.maximum:g}, got {value!r}")
        return value

    def parse(self, name: str, text: str):
        """Value of a command-line string (``--option name=text``), validated."""
        if self.nullable and text.strip().lower() in ("none", "null"):
            return None
        if text.strip() in self.specials:
            return text.strip()
        if self.kind == "str":
            return self.validate(name, text)
        if self.kind == "bool":
            lowered = text.strip().lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise ValueError(f"option {name!r} must be true or false, got {text!r}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"option {name!r} must be {self.describe()}, got {text!r}") from None
        return self.validate(name, value)

    def describe(self) -> str:
        """Plain-language type, e.g. ``"an integer >= 1"``."""
        words = {"int": "an integer", "float": "a number", "str": "a string",
                 "bool": "true or false"}[self.kind]
        if self.choices is not None:
            words = "one of " + ", ".join(map(repr, self.choices))
        if self.minimum is not None and self.maximum is not None:
            words += f" in [{self.minimum:g}, {self.maximum:g}]"
        elif self.minimum is not None:
            words += f" >= {self.minimum:g}"
        if self.exclusive_minimum is not None:
            words += f" > {self.exclusive_minimum:g}"
        if self.maximum is not None and self.minimum is None:
            words += f"{',' if self.exclusive_minimum is not None else ''} <= {self.maximum:g}"
        words = ", ".join([*map(repr, self.specials), words]) if self.specials else words
        return words + (" or null" if self.nullable else "")

    def json_schema(self) -> dict:
        """JSON-Schema fragment of the option (the workflow's config validation): the same
        bounds as :meth:`validate` (a float's finite range included; NaN, which JSON Schema
        cannot exclude, is refused by :meth:`validate`)."""
        schema: dict = {"type": {"int": "integer", "float": "number", "str": "string",
                                 "bool": "boolean"}[self.kind]}
        if self.choices is not None:
            schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.exclusive_minimum is not None:
            schema["exclusiveMinimum"] = self.exclusive_minimum
        if self.kind == "float":
            schema["maximum"] = self.maximum if self.maximum is not None else sys.float_info.max
            if self.minimum is None and self.exclusive_minimum is None:
                schema["minimum"] = -sys.float_info.max
        elif self.maximum is not None:
            schema["maximum"] = self.maximum
        alternatives = [{"const": word} for word in self.specials] + [schema]
        if self.nullable:
            alternatives.append({"type": "null"})
        schema = {"anyOf": alternatives} if len(alternatives) > 1 else schema
        schema["description"] = self.doc
        return schema


@dataclass(frozen=True)
class Method:
    """Everything the package, the figures and the workflow know about one method.

    Attributes
    ----------
    name : str
        Key used in ``cbmm.fit(method=...)``, tables, file paths and configs.
    label : str
        Display name (legends, tables).
    solve : callable
        The solver (see the module docstring for its signature).
    availability : callable
        Raises :class:`MethodUnavailableError` (saying what to install) when
        the method's software is missing.
    description : str
    options : mapping of str to Option
        The declared keyword options.
    color : str
        Matplotlib colour of the method in every figure.
    order : int
        Position in legends and tables (smaller first).
    env : str
        Conda environment of the workflow's fit jobs: ``envs/<env>.yaml``.
    seconds_per_million_cells : float
        Rough single-core cost of one fit per million matrix cells (for
        default time limits and cluster requests; deliberately generous).
    reads_sparse : bool
        Whether the solver reads sparse (CSR) :class:`cbmm.Responses`.  False
        (the default): :func:`cbmm.fit` hands it dense storage
        (``responses.y``), expanding sparse responses first.
    preload : callable
        ``preload(options)``: names of the modules the solver imports when run
        with ``options`` (validated, defaults filled in); by default none.
        :func:`cbmm.fit` imports them (:meth:`load_software`) in the caller
        before it forks the worker: a module first imported in the worker
        dies with it, so every fit would import it again (SciPy's optimizers:
        about 0.4 CPU-s).
    paper_options : mapping
        The option values under which the method is the paper's (e.g. cBMM's
        plain Algorithm 1 and no prior, where the library's defaults differ);
        :func:`cbmm.paper_settings` adds them to ``fit``'s paper arguments.
    minimises_loss : bool
        Whether the solver minimises loss (3) (plus the penalty of the shared
        ``prior`` options, :data:`cbmm.methods._prior.PRIOR_OPTIONS`, when
        it declares them).  :func:`cbmm.fit` then judges its stationarity and
        unbounded directions, compares its starts by that objective and can
        compute standard errors; a method fitting another model (mirt's
        marginal likelihood, py-irt's variational posterior) keeps its own status.
    population_scale : bool
        Whether the solver's abilities are posterior means under a ``N(0, 1)``
        population that fixes the scale (marginal likelihood): :func:`cbmm.fit` keeps
        that scale instead of standardising the abilities, whose posterior means
        shrink toward 0 (standardising them would scale every ``a`` down with them).
    standard_errors : callable, optional
        ``standard_errors(responses, result, options) -> (theta_se, a_se, b_se)``: the
        method's own standard errors of a finished fit, for ``fit(se=True)`` where
        the method does not minimise loss (3).
    objective : callable, optional
        ``objective(out) -> float`` of a finished :class:`~cbmm.result.SolverOutput`:
        what the method minimises, for a method that does not minimise loss (3) (mml's
        and mirt's: minus the marginal log-likelihood), so that :func:`cbmm.fit` can
        compare its starts (``n_starts``) and say where one start alone reached the best
        (``multimodal``).
    """

    name: str
    label: str
    solve: Callable
    availability: Callable[[], None]
    description: str = ""
    options: Mapping[str, Option] = field(default_factory=dict)
    color: str = "#555555"
    order: int = 100
    env: str = "core"
    seconds_per_million_cells: float = 60.0
    reads_sparse: bool = False
    preload: Callable[[Mapping[str, Any]], Sequence[str]] = _no_modules
    paper_options: Mapping[str, Any] = field(default_factory=dict)
    minimises_loss: bool = False
    population_scale: bool = False
    standard_errors: Callable | None = None
    objective: Callable | None = None

    def check_options(self, options: Mapping) -> dict:
        """Validate ``options`` against the declared ones and fill in defaults.

        Raises
        ------
        ValueError
            An unknown option name (the message lists the known ones) or a
            value of the wrong type or range (the message names the option).
        """
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise ValueError(f"method {self.name!r} has no option(s) "
                             f"{', '.join(map(repr, unknown))}; "
                             f"its options are: {known}")
        checked = {name: spec.default for name, spec in self.options.items()}
        for name, value in options.items():
            try:
                checked[name] = self.options[name].validate(name, value)
            except ValueError as exc:
                raise ValueError(f"method {self.name!r}: {exc}") from None
        return checked

    def load_software(self, options: Mapping) -> None:
        """Check that the method's software is installed (``availability``) and import
        the modules its solver needs with ``options`` (``preload``; ``options`` as from
        :meth:`check_options`), here in the caller: a forked worker inherits them.

        Raises
        ------
        MethodUnavailableError
            The software is missing.
        ImportError
            A preloaded module cannot be imported.
        """
        self.availability()
        for name in self.preload(options):
            importlib.import_module(name)

    def default_timeout_s(self, n_models: int, n_items: int, max_iter: int = 1000) -> float:
        """The time limit of ``timeout_s="auto"`` for an ``n_models x n_items`` fit.

        ``AUTO_TIMEOUT_BASE_S + AUTO_TIMEOUT_FACTOR * seconds_per_million_cells
        * (n_models * n_items / 1e6) * max(1, max_iter / 1000)``: ten times the
        method's declared single-core cost of a default fit (``max_iter`` 1000),
        scaled up for a larger ``max_iter``, plus a minute for start-up.  For
        cBMM (2 s per million cells) that is 80 s at 1000 x 1000 and 2060 s at
        1e8 cells; for py-irt and mirt (600 s) 6060 s at 1000 x 1000.
        """
        cells = float(n_models) * float(n_items) / 1e6
        return (AUTO_TIMEOUT_BASE_S + AUTO_TIMEOUT_FACTOR * self.seconds_per_million_cells
                * cells * max(1.0, max_iter / 1000))


_METHODS: dict[str, Method] = {}


def _always_available() -> None:
    return None


def register_method(name: str, solve: Callable, *, label: str | None = None,
                    availability: Callable[[], None] | None = None, description: str = "",
                    options: Mapping[str, Option] | None = None, color: str = "#555555",
                    order: int = 100, env: str = "core",
                    seconds_per_million_cells: float = 60.0,
                    reads_sparse: bool = False,
                    preload: Callable[[Mapping[str, Any]], Sequence[str]] | None = None,
                    paper_options: Mapping[str, Any] | None = None,
                    minimises_loss: bool = False, population_scale: bool = False,
                    standard_errors: Callable | None = None,
                    objective: Callable | None = None) -> Method:
    """Register ``solve`` under ``name`` (replacing an earlier registration).

    See :class:`Method` for the fields.  Returns the entry.
    """
    if not isinstance(name, str) or not name.isidentifier() or not name.islower():
        raise ValueError(f"method names are lower-case identifiers, got {name!r}")
    if not callable(solve):
        raise ValueError(f"method {name!r}: solve must be callable, got {solve!r}")
    for role, value in (("preload", preload), ("standard_errors", standard_errors),
                        ("objective", objective)):
        if value is not None and not callable(value):
            raise ValueError(f"method {name!r}: {role} must be callable, got {value!r}")
    bad = [key for key, spec in (options or {}).items() if not isinstance(spec, Option)]
    if bad:
        raise ValueError(f"method {name!r}: options must map names to cbmm.registry.Option, "
                         f"not {bad[0]!r}: {options[bad[0]]!r}")
    if not (isinstance(seconds_per_million_cells, (int, float))
            and math.isfinite(seconds_per_million_cells) and seconds_per_million_cells > 0):
        raise ValueError(f"method {name!r}: seconds_per_million_cells must be a number > 0, "
                         f"got {seconds_per_million_cells!r}")
    unknown = sorted(set(paper_options or {}) - set(options or {}))
    if unknown:
        raise ValueError(f"method {name!r}: paper_options names undeclared option(s) {unknown}")
    method = Method(name=name, label=label or name, solve=solve,
                    availability=availability or _always_available, description=description,
                    options=dict(options or {}), color=color, order=order, env=env,
                    seconds_per_million_cells=float(seconds_per_million_cells),
                    reads_sparse=bool(reads_sparse), preload=preload or _no_modules,
                    paper_options=dict(paper_options or {}),
                    minimises_loss=bool(minimises_loss),
                    population_scale=bool(population_scale), standard_errors=standard_errors,
                    objective=objective)
    _METHODS[name] = method
    return method


def get_method(name: str) -> Method:
    """The registry entry of ``name``; ``ValueError`` listing the registered names if unknown."""
    try:
        if not isinstance(name, str):
            raise KeyError(name)
        return _METHODS[name]
    except KeyError:
        raise ValueError(
            f"unknown method {name!r}; registered methods: {', '.join(sorted(_METHODS))}"
        ) from None


def available_methods() -> list[str]:
    """Names of all registered methods (installed or not), in the paper's order."""
    return method_order(_METHODS)


def method_order(names) -> list[str]:
    """The distinct registered method names of ``names`` in display order."""
    names = set(map(str, names))
    unknown = sorted(names - set(_METHODS))
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(map(repr, unknown))}; "
                         f"registered methods: {', '.join(sorted(_METHODS))}")
    return sorted(names, key=lambda m: (_METHODS[m].order, m))


def check_methods(names) -> None:
    """Raise one :class:`MethodUnavailableError` listing every unusable method in ``names``.

    Call it before a long run: it reports unknown names and missing software
    (with the exact install command) for all methods at once.  ``names`` is a list of
    method names, or one name.
    """
    if isinstance(names, str):  # one name, not its letters
        names = [names]
    elif isinstance(names, (bytes, bytearray)):  # not its byte values
        raise ValueError(f"check_methods takes method names (text), got {names!r}")
    names = list(names)
    if not all(isinstance(name, str) for name in names):
        raise ValueError(f"check_methods takes method names (text), got {names!r}")
    problems, unusable = [], []
    for name in names:
        if name not in _METHODS:
            problems.append(f"- {name}: unknown method (registered: {', '.join(sorted(_METHODS))})")
            unusable.append(name)
            continue
        try:
            _METHODS[name].availability()
        except MethodUnavailableError as exc:
            problems.append(f"- {name}: {exc}")
            unusable.append(name)
    if problems:
        raise MethodUnavailableError(
            "some requested methods cannot run:\n" + "\n".join(problems), unusable
        )
