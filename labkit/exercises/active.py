"""The students' functions installed into the library right now (``CheckResult.installed``): exercise id ->
a digest of the function's code. Work cached across runs (``labkit.per_seed``) is keyed by it, so numbers a
student's function produces are never mixed with numbers labkit's produced."""
from __future__ import annotations

ACTIVE: dict[str, str] = {}
