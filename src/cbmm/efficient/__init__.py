"""Efficient evaluation with a calibrated item bank: the fewest items that keep the answer.

* :func:`select_items`: which k items to keep (stratified, random, maximal information,
  anchors, or chosen on the calibration models' answers for what they predict);
* :func:`predict_accuracy`: full-benchmark accuracy of models that answered any subset of
  the items, with an interval; :func:`selection_error`, how closely k items predict it,
  cross-validated on the calibration models (how many items a benchmark needs);
* :func:`adaptive_test`: one item at a time, from random items to the most informative
  ones (the progressive method), with exposure control, until the ability's standard
  error is small enough; :func:`adaptive_interval_scale`, the width its accuracy's
  interval needs to hold on the calibration models;
* :func:`item_audit`: items not identified, without information, discriminating the wrong
  way (likely mislabelled) or outside the models' abilities; :func:`ability_agreement`,
  whether the fit's ability ranks the models as their accuracy does, and
  :class:`WrongWayDependence`, whether the wrong-way items share a dimension of their own.

All of them read the calibration from a fit (``FitResult``, ``items.csv`` or a table of
``a`` and ``b``) and put abilities on its canonical scale.  docs/efficiency.md says what
was measured.
"""

from .adaptive import (AdaptiveTest, ItemExposure, adaptive_interval_scale, adaptive_test,
                       item_list)
from .audit import (FLAGS, AbilityAgreement, AbilityAgreementWarning, WrongWayDependence,
                    WrongWayDependenceWarning, ability_agreement, item_audit)
from .prediction import InSampleReferenceWarning, predict_accuracy, selection_error
from .selection import STRATEGIES, select_items

__all__ = ["select_items", "STRATEGIES", "predict_accuracy", "selection_error", "adaptive_test",
           "adaptive_interval_scale", "AdaptiveTest", "ItemExposure", "item_audit", "FLAGS",
           "ability_agreement", "AbilityAgreement", "AbilityAgreementWarning",
           "WrongWayDependence", "WrongWayDependenceWarning", "InSampleReferenceWarning",
           "item_list"]
