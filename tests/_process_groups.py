"""`make test`'s pytest-xdist process groups (tests/conftest.py's scheduler).

Under pytest-xdist (`make test`, --dist loadgroup) the tests named here run in one process, in collection order:
the notebooks' smoke tests check the runs the browser tests leave in tests/_executions.py, and the dashboard test
reads the Lab 2 run's studies. (xdist's own xdist_group mark does not group under pytest 9.2: it renames
item._nodeid, which pytest 9 no longer reads.)
"""

PROCESS_GROUPS = {"notebooks": ("tests/browser/test_jupyterlab.py::", "tests/browser/test_optuna_dashboard.py::",
                                "tests/run/test_notebooks.py::test_notebook_runs_in_smoke_profile[")}


def process_group(nodeid: str) -> str:
    """The xdist scheduling unit of a test: its group's name, else its own node id (spread one by one)."""
    return next((name for name, starts in PROCESS_GROUPS.items() if nodeid.startswith(starts)), nodeid)
