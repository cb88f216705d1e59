"""``python -m opforge info|bench ...``: see opforge.cli."""

import sys

from .cli import main

sys.exit(main())
