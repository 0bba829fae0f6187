"""Registered estimation methods.  Each module registers itself on import."""

from . import cbmm_method  # noqa: F401
