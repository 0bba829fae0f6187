"""What a figure's fits are: the sentence each workflow caption ends with.

A figure drawn from fits that are not an optimum (any status but ``converged``,
docs/trust.md) must say so where it is shown; the sentence is built here from the
``status`` column of the figure's tables, so that every caption says it the same way.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..tables import failed_mask, read_result_table

__all__ = ["PER_FILE", "PER_ROW", "fit_statuses", "status_sentence"]

#: How a table holds the statuses of the fits behind it: ``PER_FILE``, one fit per file
#: (its status repeated on every row: a ranking, the MATH-500 tables); ``PER_ROW``, one fit
#: per row (the runtime and simulation tables, the discrimination summary).
PER_FILE, PER_ROW = "file", "row"


def _files(arg) -> list:
    """The table files of one plot argument: a path, or a mapping dataset -> path."""
    return list(arg.values()) if isinstance(arg, dict) else [arg]


def fit_statuses(arg, per: str) -> list[str]:
    """The statuses of the fits behind one plot argument (``per``: :data:`PER_FILE` or
    :data:`PER_ROW`); a failed fit's ``failed: <reason>`` counts as ``failed``."""
    statuses = []
    for source in _files(arg):
        column = read_result_table(source, ("status",),
                                   name=str(source) if isinstance(source, (str, Path))
                                   else None)["status"].astype(str)
        column = column.where(~failed_mask(column), "failed")
        statuses += list(column.iloc[:1] if per == PER_FILE else column)
    return statuses


def status_sentence(statuses) -> str:
    """One sentence on the fits shown: that they converged, or how many did not and what
    that means."""
    counts = Counter(statuses)
    if not counts:
        return ""
    total = sum(counts.values())
    if set(counts) == {"converged"}:
        return ("The fit shown converged (a stationary point of its objective)." if total == 1
                else f"All {total} fits shown converged (stationary points of their "
                     "objectives).")
    meaning = "not an optimum, and its estimates are not an answer (docs/trust.md)."
    if total == 1 and "unbounded" in counts:  # the paper's ML fit of MATH-500's 11 all-wrong items
        return ("The fit shown is unbounded: under maximum likelihood its items or models "
                "separated by ability (all-correct and all-wrong ones included) have no finite "
                "optimum, so their estimates are not an answer (docs/trust.md).")
    if total == 1:
        return f"The fit shown did not converge (status {next(iter(counts))}): it is {meaning}"
    listed = ", ".join(f"{n} {status}" for status, n in sorted(
        counts.items(), key=lambda item: (item[0] != "converged", -item[1], item[0])))
    return (f"Statuses of the {total} fits shown: {listed}; a fit that did not converge is "
            f"{meaning}")
