"""Skip marks for tests of methods whose software may be missing (mirt, py-irt), with the
method's own install message as the reason (tests only)."""

from __future__ import annotations

import pytest

import cbmm


def missing_reason(name):
    """Why method ``name`` cannot run here (its install message), or None."""
    try:
        cbmm.check_methods([name])
    except cbmm.MethodUnavailableError as exc:
        return " ".join(str(exc).split())
    return None


def needs(name):
    """``pytest.mark.skipif`` the method's software is missing, saying why."""
    reason = missing_reason(name)
    return pytest.mark.skipif(reason is not None, reason=f"{name} not installed: {reason}")
