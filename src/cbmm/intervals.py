"""Where a fit's intervals are known to claim more than the data know, said at the fit.

:func:`cbmm.coverage_check` measures the intervals on draws from the fit; some
shortfalls it cannot see, because draws from the fit reproduce them (docs/trust.md).
This module holds what is known of those and the warning that says it.
"""

from __future__ import annotations

import math

import numpy as np

from ._warn import CbmmWarning, warn

__all__ = ["FEW_MODELS", "FEW_CALIBRATION_MODELS", "ITEMS_PER_CALIBRATION_MODEL",
           "PRIOR_BIAS", "PRIOR_BIASED_SHARE", "PRIOR_BIASED_GROUP", "IntervalWarning",
           "prior_biased",
           "warn_few_models", "warn_prior_biased", "warn_small_calibration"]


class IntervalWarning(CbmmWarning):
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


#: Below this many calibration models the 95 % intervals of :func:`cbmm.score` fall short by
#: more than :data:`cbmm.coverage.COVERAGE_SLACK` with the items held fixed, and below half
#: of it even with the calibration's item error carried (a calibration fitted with
#: ``se=True``).  New models drawn from MATH-500's fit, answering all 500 items
#: (``bench_coverage.py --score MATH_500.csv``): items fixed 0.82, 0.90, 0.93 and 0.95 at 40,
#: 80, 160 and 320 calibration models; with the item error 0.88, 0.93, 0.94 and 0.96.
FEW_CALIBRATION_MODELS = 160

#: With the item error carried, the intervals of a model that answered more than this many
#: items per calibration model fall short too: the items' errors are correlated through the
#: abilities' scale, which the delta method leaves out, and count for more the more items a
#: model answered.  A user's generator (a ~ U(0.5, 2), flatter than MATH-500's items):
#: 0.889 at 80 models x 500 items (6.25 per model), 0.904 at 100 x 500, 0.911 at 80 x 300,
#: 0.923 at 100 x 300, 0.932 at 160 x 500 (docs/trust.md, "Scoring new models").
ITEMS_PER_CALIBRATION_MODEL = 4


def warn_small_calibration(n_models: int, most_answered: int, has_se: bool,
                           carried: bool) -> None:
    """The :class:`IntervalWarning` of abilities scored against a calibration of too few
    models for their intervals: fewer than :data:`FEW_CALIBRATION_MODELS` with the items
    held fixed; with their error carried, fewer than half of it, or a model that answered
    more than :data:`ITEMS_PER_CALIBRATION_MODEL` items per calibration model."""
    if carried:
        if n_models < FEW_CALIBRATION_MODELS // 2:
            why = f"fewer than {FEW_CALIBRATION_MODELS // 2} models"
        elif most_answered > ITEMS_PER_CALIBRATION_MODEL * n_models:
            why = (f"a scored model answered {most_answered} items, more than "
                   f"{ITEMS_PER_CALIBRATION_MODEL} per calibration model")
        else:
            return
        warn(f"the calibration has {n_models} models and {why}: the scores' intervals "
             "carry its items' standard errors, but not their correlation through the "
             "abilities' scale, and fall short (95 % intervals held 0.88 of the time at 40 "
             "calibration models on MATH-500's items, 0.89 at 80 models with 500 items "
             "answered; docs/trust.md, scoring new models)", IntervalWarning)
    elif n_models < FEW_CALIBRATION_MODELS:
        advice = ("item_error=False holds them fixed" if has_se else "it has no standard "
                  "errors: fit it with se=True and score carries its items' error")
        warn(f"the calibration has {n_models} models (fewer than {FEW_CALIBRATION_MODELS}) "
             "and the scores' intervals hold its items fixed, falling short of their level "
             "(95 % intervals held 0.82 of the time at 40 calibration models, 0.90 at 80); "
             f"{advice} (docs/trust.md, scoring new models)", IntervalWarning)


#: An ability the ability prior can bias by more than this many standard errors (where the
#: models lie up to one prior sd from where the prior puts them, in any pattern;
#: :func:`cbmm.inference._canonical_rows`) rests on the prior as much as on the answers.  Were
#: each ability set by its own answers alone (a diagonal covariance) the bound would be at
#: most one; it is several where groups of models are compared by the prior: its theta ~
#: N(0, 1) for every model pulls together groups that answered different items and few
#: answers link, and the intervals do not widen (docs/trust.md, "Weakly linked groups").
PRIOR_BIAS = 1.0

#: The fit warns where more than this share of its models are beyond :data:`PRIOR_BIAS`, or
#: where :data:`PRIOR_BIASED_GROUP` of them form a group the prior places together.  In the
#: simulations and real merged splits of docs/trust.md, fits above it held 0.40-0.89 of
#: the abilities in their 95 % intervals where the groups differed (0.98-0.995 where they
#: were drawn at random: the answers cannot tell which); fits of every model answering
#: enough items stayed at 0.00-0.09.  Where each model answers few items the share grows
#: without a group: MATH-500 with each model answering a random 8 % of its items, 0.38-0.51
#: (its intervals held 0.92-0.95).
PRIOR_BIASED_SHARE = 0.25

#: A group of this many models beyond :data:`PRIOR_BIAS` whose estimates are linked by
#: correlations above :data:`cbmm.inference.PRIOR_BIAS_CORRELATION` makes the fit warn
#: whatever their share (in proportion where the bound is computed for a sample of the
#: models).  10-20 of MATH-500's 140 models drawn at random on their own half of its items,
#: linked to the rest by 2-5 models: it warned in 13 of 15 draws (the share alone in 4)
#: while their intervals held 0.10-0.85 of their abilities; the two it missed held 0.42
#: and 0.60.  No well-linked, few-item or randomly sparse design formed a group above 1.
PRIOR_BIASED_GROUP = 5


def prior_biased(bias, label_rows, n_models: int) -> dict:
    """What ``info["prior_bias"]`` of a fit records of a :class:`cbmm.inference.PriorBias`:
    the models its bound was computed for, the share and count of them beyond
    :data:`PRIOR_BIAS`, the largest group of them the prior places together and its first
    models, the group size at which the fit warns (``group_limit``:
    :data:`PRIOR_BIASED_GROUP`, in proportion where the bound was computed for a sample of
    the ``n_models`` models that have standard errors, and at least 3), whether it warns
    (``exceeds_limit``: that or :data:`PRIOR_BIASED_SHARE`; unless its status says more),
    the bound's median and the first models by it (labelled by ``label_rows``,
    :meth:`cbmm.Responses.label_rows`).  The per-model bounds are the fit's
    ``prior_bias``."""
    bound = np.asarray(bias.bound, dtype=float)
    checked = np.flatnonzero(np.isfinite(bound))
    beyond = checked[bound[checked] > PRIOR_BIAS]
    first = beyond[np.argsort(-bound[beyond], kind="stable")[:5]]
    groups = np.asarray(bias.group)
    sizes = np.bincount(groups[groups >= 0], minlength=1)   # [0] where there is no group
    largest = np.flatnonzero(groups == np.argmax(sizes))[:5]
    share = beyond.size / max(checked.size, 1)
    limit = PRIOR_BIASED_GROUP if checked.size >= n_models else max(
        3, math.ceil(PRIOR_BIASED_GROUP * checked.size / max(n_models, 1)))

    def labelled(rows):
        return [label.item() if isinstance(label, np.generic) else label
                for label in label_rows(rows)]

    return {"models_checked": int(checked.size),
            "models_beyond": int(beyond.size),
            "share_beyond": round(share, 4),
            "largest_group": int(sizes.max()),
            "group_models": labelled(largest),
            "group_limit": int(limit),
            "exceeds_limit": bool(share > PRIOR_BIASED_SHARE or sizes.max() >= limit),
            "median_se": round(float(np.median(bound[checked])), 3) if checked.size else None,
            "first_models": labelled(first)}


def warn_prior_biased(record: dict, degenerate_models: int = 0) -> None:
    """The :class:`IntervalWarning` of a fit whose ability prior may bias more than
    :data:`PRIOR_BIASED_SHARE` of its models, or a group of them, by more than a standard
    error; where it kept ``degenerate_models`` models that answered every item alike, it
    names them as a possible cause."""
    if not record["exceeds_limit"]:
        return
    if record["largest_group"] >= record["group_limit"]:
        which = (f"a group of {record['largest_group']} whose estimates it moves together "
                 f"(first: {', '.join(map(str, record['group_models']))})")
    else:
        which = f"first: {', '.join(map(str, record['first_models']))}"
    degenerate = (f"; or the {degenerate_models} model{'' if degenerate_models == 1 else 's'} that "
                  "answered every item alike, which the prior alone places, and so the "
                  "scale's mean and sd (degenerate='set_aside' leaves them out)"
                  if degenerate_models else "")
    warn(f"the prior, not the answers, could bias {record['share_beyond']:.0%} of the models' "
         f"abilities by more than one standard error ({which}): their intervals hold only as "
         "far as one N(0, 1) population describes every model (as where models were "
         "assigned to items at random). Usual causes: groups of models that answered "
         "different items, linked by few answers (a merged leaderboard), which the prior "
         f"pulls together; few items per model{degenerate}. Compare models within a group, or "
         "add models that answer both groups' items (per model: the fit's prior_bias; "
         "docs/trust.md, weakly linked groups)", IntervalWarning)
