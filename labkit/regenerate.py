"""The ``python -m labkit.regenerate`` command, as ``labkit regenerate`` (the regeneration lives in
``labkit.maintain.regenerate``)."""
from .maintain.regenerate import main

if __name__ == "__main__":
    raise SystemExit(main())
