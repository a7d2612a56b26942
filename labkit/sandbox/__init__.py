"""What runs on the student's side of grading: it imports the standard library, torch and optuna, never labkit.

``labkit grade`` copies this folder into a fresh interpreter that cannot import labkit (``child.py`` is its main
loop, ``guard.py`` its limits and tripwires); ``harness.py`` calls a function on one case and ``codec.py`` carries
the plain values it returns. The formative ``check()`` in a notebook calls the same harness in the kernel.
"""
