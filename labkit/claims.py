"""The ``python -m labkit.claims`` command: the labs' headline claims against the committed JSON (the checks
live in ``labkit.maintain.claims``)."""
from .maintain.claims import main

if __name__ == "__main__":
    raise SystemExit(main())
