"""The ``labkit`` command (``commands``: the console script and ``python -m labkit``) and the front end it
starts (``frontend``: ``labkit lab``, ``labkit dashboard``)."""
from .commands import UsageError, main

__all__ = ["UsageError", "main"]
