"""The library's checks of plain arguments (counts, seeds, positive numbers, interval
levels), each with the one message every public function gives for it."""

from __future__ import annotations

import math
import numbers

__all__ = ["check_integer", "check_level", "check_positive", "is_integer"]


def is_integer(value, minimum: int) -> bool:
    """Whether ``value`` is an integer (NumPy integers and Python ints of any size
    included; not a bool) of at least ``minimum``."""
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) \
        and value >= minimum


def check_integer(name: str, value, *, minimum: int, maximum: int | None = None) -> int:
    """``value`` as an int (:func:`is_integer`), or a ValueError naming ``name`` and the
    allowed range."""
    ok = is_integer(value, minimum)
    if ok and maximum is not None:
        ok = value <= maximum
    if not ok:
        what = (f"an integer in [{minimum}, {maximum}]" if maximum is not None
                else "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}")
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value)


def check_positive(name: str, value) -> float:
    """``value`` as a float if it is a finite real number > 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_level(level) -> float:
    """The coverage of an interval: a real number in (0, 1), as a float."""
    if isinstance(level, bool) or not isinstance(level, numbers.Real) \
            or not (math.isfinite(level) and 0 < level < 1):
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    return float(level)
