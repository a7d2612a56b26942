"""``python -m labkit.search --plans FILE --storage URL --worker N``: one trial worker process."""
import sys

from .worker import main

sys.exit(main())
