"""``python -m compiler.cli``: the ``vta`` command."""

import sys

from .command import main

sys.exit(main())
