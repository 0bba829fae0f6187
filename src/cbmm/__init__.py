"""cbmm: interpretable and scalable 2PL evaluation of LLMs by constrained block MM.

>>> import cbmm
>>> result = cbmm.fit(responses)            # N x J, 1/0/NaN  # doctest: +SKIP
>>> result.theta, result.a, result.b        # abilities, discriminations, easiness
>>> cbmm.score(new_responses, result)     # new models, items fixed  # doctest: +SKIP
"""

from . import methods as _methods  # noqa: F401  (registers the methods)
from . import simulate  # noqa: F401  (cbmm.simulate.simulate after import cbmm, as the docs write)
from ._warn import CbmmWarning
from .api import (ConvergenceWarning, DegenerateDataWarning, FitFailedError, IsolationWarning,
                  fit, paper_settings)
from .bootstrap import BootstrapResult, bootstrap
from .coverage import coverage_check
from .intervals import IntervalWarning
from .efficient import (AbilityAgreementWarning, AdaptiveTest, InSampleReferenceWarning,
                        ItemExposure, WrongWayDependenceWarning, adaptive_interval_scale,
                        adaptive_test, item_audit, predict_accuracy, select_items,
                        selection_error)
from .initialization import initial_values
from .model import loss, loss_and_gradient
from .registry import MethodUnavailableError, available_methods, check_methods, register_method
from .responses import CodingWarning, ResponseError, Responses, as_responses
from .result import FitResult, ResultFolderError, SolverOutput, canonicalize
from .score import score
from .validation import HeldOutWarning, cross_validate

__version__ = "0.2.0"

__all__ = [
    "fit", "paper_settings", "score", "bootstrap", "BootstrapResult", "cross_validate",
    "coverage_check",
    "FitResult", "SolverOutput", "canonicalize", "check_methods",
    "available_methods", "register_method", "MethodUnavailableError",
    "CbmmWarning", "DegenerateDataWarning", "ConvergenceWarning", "HeldOutWarning",
    "CodingWarning", "IntervalWarning", "InSampleReferenceWarning", "AbilityAgreementWarning",
    "WrongWayDependenceWarning", "IsolationWarning", "Responses",
    "ResponseError", "ResultFolderError", "FitFailedError",
    "as_responses",
    "initial_values", "loss", "loss_and_gradient", "__version__",
    "select_items", "predict_accuracy", "selection_error", "adaptive_test", "adaptive_interval_scale",
    "AdaptiveTest", "ItemExposure", "item_audit",
]
