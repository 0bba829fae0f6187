"""Checks that a baseline's third-party software is installed.

Each baseline registers an ``availability`` callable built from these
helpers; :func:`cbmm.fit` and :func:`cbmm.check_methods` call it, so a
missing library is reported once, before any work, with the exact command to
install it (or to drop the method from the workflow).
"""

from __future__ import annotations

import importlib

from ..registry import MethodUnavailableError

__all__ = ["BASELINES_EXTRA", "DROP_HINT", "require_python_modules"]

#: pip command installing every Python baseline (torch must be the CPU wheel).
BASELINES_EXTRA = "pip install torch==2.13.0 && pip install 'cbmm[baselines]'"

#: How to run the workflow without a method.
DROP_HINT = ("or run without {method!r} (in the workflow: leave it out of `methods:` in your "
             "configuration)")


def require_python_modules(method: str, modules, install: str = BASELINES_EXTRA) -> None:
    """Import ``modules``; raise :class:`MethodUnavailableError` naming the first missing one.

    Parameters
    ----------
    method : str
        Registered method name (for the message).
    modules : iterable of str
        Importable module names the method needs.
    install : str
        Shell command that installs them.
    """
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise MethodUnavailableError(
                f"method {method!r} needs the Python package {name!r}, which cannot be "
                f"imported ({exc}). Install it with: {install} ; "
                + DROP_HINT.format(method=method)
            ) from exc
