"""``python -m cbmm``: see :mod:`cbmm.cli`."""

import sys

from .cli import main

sys.exit(main())
