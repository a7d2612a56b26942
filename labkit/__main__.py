"""``python -m labkit``: the ``labkit`` command."""
import sys

from .cli import main

sys.exit(main())
