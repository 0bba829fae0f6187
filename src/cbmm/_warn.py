"""The library's one way to warn: attributed to the user's line that called into cbmm,
not to the library line that noticed, whatever the depth of the call."""

from __future__ import annotations

import sys
import warnings

__all__ = ["CbmmWarning", "warn"]


class CbmmWarning(UserWarning):
    """Base of the warnings cbmm gives about data, fits and what is computed from them:
    ``warnings.simplefilter("error", cbmm.CbmmWarning)`` (or ``"ignore"``) acts on them
    all.  A filter keyed on the module does not: each names the caller's line
    (:func:`warn`)."""


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` with the stack level of the first frame
    outside the ``cbmm`` package, so that the warning names the user's file and line
    and the warning filters keyed on the user's module apply."""
    frame = sys._getframe(1)
    level = 2  # the caller of this function, as warnings.warn counts
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "cbmm":
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
