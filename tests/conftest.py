import os

# Tests run offline: the hub is never contacted (CI has no route to it).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Under pytest-xdist (`make test`: a process per core) each process, and the notebook kernels and CLIs it starts,
# keeps to its share of the cores: oversubscribed OpenMP threads spin and doubled the suite's CPU time.
_THREADS = max(1, min(2, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(_THREADS)

import contextlib  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from _flags import flag  # noqa: E402
from _process_groups import process_group  # noqa: E402

torch.set_num_threads(_THREADS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup: the tests of a group in tests/_process_groups.py share a process, the rest spread."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):  # largest unit first (loadscope's reordering): the notebooks start at once
        def _split_scope(self, nodeid: str) -> str:
            return process_group(nodeid)

    return Grouped(config, log)


def pytest_runtest_setup(item):
    if item.get_closest_marker("serial") and "PYTEST_XDIST_WORKER" in os.environ:
        pytest.fail("a test marked serial writes into the source tree: run it alone (pytest -m serial), as make test "
                    "does after the rest", pytrace=False)


@pytest.fixture()
def set_flag():
    """``set_flag(obj, name, value)``: for this test only, undone at teardown (``_flags.flag``; use it, not
    monkeypatch, for torch.backends flags)."""
    with contextlib.ExitStack() as stack:
        yield lambda obj, name, value: stack.enter_context(flag(obj, name, value))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Under ``LABKIT_REQUIRE_CUDA=1`` (``make test-gpu``) a skipped CUDA test fails: on a GPU machine a skip
    (no triton, a build that sees no GPU) would otherwise read as a pass."""
    report = yield
    if report.skipped and os.environ.get("LABKIT_REQUIRE_CUDA") == "1" and item.get_closest_marker("cuda"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"LABKIT_REQUIRE_CUDA=1: this CUDA test was skipped ({reason})"
    return report


@pytest.fixture()
def fake_cuda(monkeypatch):
    """Cache keys as a CUDA machine builds them, on one without CUDA: ``auto`` and ``cuda`` pick a CUDA device
    (``train.pick_device``), the card an H100 with all its SMs (``determinism.gpu_identity``)."""
    from labkit.training import determinism, train

    monkeypatch.setattr(train, "pick_device", lambda device="auto": torch.device("cpu" if device == "cpu" else "cuda"))
    monkeypatch.setattr(determinism, "gpu_identity", lambda device=None: {"gpu": "NVIDIA H100 80GB HBM3",
                                                                          "gpu_sm_count": 132})


@pytest.fixture(scope="session")
def tiny_bert():
    """A small random BERT classifier (fast, offline) for graph/LoRA tests."""
    from labkit import models

    torch.manual_seed(0)
    return models.from_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                              intermediate_size=128, vocab_size=30522)


@pytest.fixture(scope="session")
def default_model():
    from labkit import models

    return models.load_model()


@pytest.fixture(scope="session")
def lab3_tiny():
    """Lab 3's smoke settings on 16 short reviews, their loaders and a one-layer random BERT: ``(s, dl, base)``
    for the search-space tests."""
    from labkit import models, recipes
    from labkit.run import profiles

    s = profiles.lab_settings("lab3_search", "smoke", test_size=16, max_length=16)
    torch.manual_seed(0)
    base = models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    return s, recipes.loaders(s), base
