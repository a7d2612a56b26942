"""`make test`'s pytest-xdist grouping (tests/conftest.py): the tests that must share a process are named by node ids
that exist, and everything else is spread one test at a time."""
from pathlib import Path

from _process_groups import PROCESS_GROUPS, process_group

ROOT = Path(__file__).resolve().parents[1]


def test_every_process_group_names_tests_that_exist():
    for starts in PROCESS_GROUPS.values():
        for start in starts:
            path, _, function = start.partition("::")
            assert (ROOT / path).is_file(), start
            if function:  # a renamed test would leave its group silently, and run its notebook a second time
                assert f"def {function.removesuffix('[')}(" in (ROOT / path).read_text(), start


def test_the_notebook_runs_share_a_process_and_other_tests_spread():
    for nodeid in ("tests/browser/test_jupyterlab.py::test_notebook_runs_clean_in_jupyterlab[lab2_search]",
                   "tests/browser/test_optuna_dashboard.py::test_dashboard_lists_every_trial_of_the_smoke_studies",
                   "tests/run/test_notebooks.py::test_notebook_runs_in_smoke_profile[lab2_search]"):
        assert process_group(nodeid) == "notebooks"
    for nodeid in ("tests/run/test_notebooks.py::test_notebooks_exist", "tests/browser/test_student.py::test_a"):
        assert process_group(nodeid) == nodeid
