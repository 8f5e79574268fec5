"""``python -m theorycheck.cli``: the ``theorycheck`` command."""

import sys

from . import main

sys.exit(main())
