"""Where a fit's intervals are known to claim more than the data know, said at the fit.

:func:`cbmm.coverage_check` measures the intervals on draws from the fit; some
shortfalls it cannot see, because draws from the fit reproduce them (docs/trust.md).
This module holds what is known of those and the warning that says it.
"""

from __future__ import annotations

from ._warn import warn

__all__ = ["FEW_MODELS", "IntervalWarning", "warn_few_models"]


class IntervalWarning(UserWarning):
    """A fit's intervals claim more than the data know: they hold the truth less often than
    their level (as :func:`cbmm.coverage_check` measured it, or where they are known to: a fit of
    few models)."""


#: Below this many models the abilities' intervals of a fit fall short of their level
#: however many items there are: each item's a and b rest on the few models' answers, and
#: their error, which the intervals of the abilities do not carry, grows no smaller with
#: more items (the incidental-parameter problem, the other way round).  95 % intervals
#: held the truth 0.52, 0.67, 0.83, 0.91 and 0.93 of the time at 5, 10, 20, 40 and 80
#: models drawn from MATH-500's fit (``bench_coverage.py --few-models``): below 40 they
#: fall short by more than :data:`cbmm.coverage.COVERAGE_SLACK` (docs/trust.md, "few models").
FEW_MODELS = 40


def warn_few_models(n_models: int) -> None:
    """The :class:`IntervalWarning` of a fit with fewer than :data:`FEW_MODELS` models (one
    message wherever it is given, so that a fit inside a bootstrap says it once)."""
    if n_models < FEW_MODELS:
        warn(f"the abilities' intervals of a fit of {n_models} models (fewer than "
             f"{FEW_MODELS}) hold the truth less often than their level: each item's a and b "
             f"rest on {n_models} answers, an error the intervals do not carry (95 % "
             "intervals held 0.67 of the time at 10 models and 0.83 at 20 on MATH-500's "
             "items, less with more items); neither coverage_check nor the bootstrap sees "
             "it (docs/trust.md, few models)", IntervalWarning)
