"""Method registry: every estimator plugs in here, :func:`cbmm.fit` only looks up.

A method is a solver function with the signature ::

    solve(y, theta0, a0, b0, *, sigma, tol, max_iter, **options) -> SolverOutput

where ``y`` is the int8 +-1/0 matrix and ``(theta0, a0, b0)`` the shared start
from :func:`cbmm.initialization.initial_values`, plus an ``availability``
callable that raises :class:`MethodUnavailableError` (saying what to install)
when the method's software is missing, and optionally a ``check_options``
callable (same keyword options as ``solve``) that raises ``ValueError`` for bad
option values before any work starts; an error inside ``solve`` itself is a
failed fit, not bad input.  Solvers import their heavy libraries
lazily so that ``import cbmm`` stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["Method", "MethodUnavailableError", "register_method", "get_method",
           "available_methods", "check_methods"]


class MethodUnavailableError(RuntimeError):
    """A method's software is missing; the message says how to install it or drop it."""


@dataclass(frozen=True)
class Method:
    name: str
    label: str
    solve: Callable
    availability: Callable[[], None]
    description: str = ""
    check_options: Callable[..., None] | None = None


_METHODS: dict[str, Method] = {}


def _always_available() -> None:
    return None


def register_method(name: str, solve: Callable, *, label: str | None = None,
                    availability: Callable[[], None] | None = None,
                    description: str = "",
                    check_options: Callable[..., None] | None = None) -> Method:
    """Register ``solve`` under ``name`` (replacing an earlier registration)."""
    method = Method(name=name, label=label or name, solve=solve,
                    availability=availability or _always_available, description=description,
                    check_options=check_options)
    _METHODS[name] = method
    return method


def get_method(name: str) -> Method:
    try:
        return _METHODS[name]
    except KeyError:
        raise ValueError(
            f"unknown method {name!r}; registered methods: {', '.join(sorted(_METHODS))}"
        ) from None


def available_methods() -> list[str]:
    """Names of all registered methods (installed or not)."""
    return sorted(_METHODS)


def check_methods(names) -> None:
    """Raise one :class:`MethodUnavailableError` listing every unusable method in ``names``.

    Call it before a long run: it reports unknown names and missing software
    (with the exact install command) for all methods at once.
    """
    problems = []
    for name in names:
        if name not in _METHODS:
            problems.append(f"- {name}: unknown method (registered: {', '.join(sorted(_METHODS))})")
            continue
        try:
            _METHODS[name].availability()
        except MethodUnavailableError as exc:
            problems.append(f"- {name}: {exc}")
    if problems:
        raise MethodUnavailableError(
            "some requested methods cannot run:\n" + "\n".join(problems)
        )
