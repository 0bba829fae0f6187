"""``python -m cbmm``: see :mod:`cbmm.cli`."""

import sys

try:
    from .cli import main
except KeyboardInterrupt:  # while Python loads the modules: the same line as later on
    print("error: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
