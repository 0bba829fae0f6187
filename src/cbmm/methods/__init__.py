"""Registered estimation methods.  Each module registers itself on import.

The baselines import their third-party libraries lazily (inside the solver
or the availability check), so registering them keeps ``import cbmm`` cheap
and works without the optional dependencies installed.
"""

from . import cbmm_method  # noqa: F401
from . import lbfgsb  # noqa: F401
from . import manopt  # noqa: F401
from . import mirt  # noqa: F401
from . import mml  # noqa: F401
from . import pyirt  # noqa: F401
