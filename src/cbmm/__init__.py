"""cbmm: interpretable and scalable 2PL evaluation of LLMs by constrained block MM.

>>> import cbmm
>>> result = cbmm.fit(responses)            # N x J, 1/0/NaN  # doctest: +SKIP
>>> result.theta, result.a, result.b        # abilities, discriminations, easiness
"""

from . import methods as _methods  # noqa: F401  (registers the methods)
from .api import DegenerateDataWarning, fit
from .initialization import initial_values
from .model import loss, loss_and_gradient
from .registry import (MethodUnavailableError, available_methods, check_methods,
                       register_method)
from .responses import ResponseError, Responses, as_responses
from .result import FitResult, SolverOutput, canonicalize

__version__ = "0.1.0"

__all__ = [
    "fit", "FitResult", "SolverOutput", "canonicalize", "check_methods",
    "available_methods", "register_method", "MethodUnavailableError",
    "DegenerateDataWarning", "Responses", "ResponseError", "as_responses",
    "initial_values", "loss", "loss_and_gradient", "__version__",
]
