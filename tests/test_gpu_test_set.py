"""The GPU test set's plumbing, checked on a CPU: the flag helper CUDA tests use instead of monkeypatch, and
``make test-gpu``'s rule that a skipped CUDA test is a failure (LABKIT_REQUIRE_CUDA=1)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from _flags import flag

HERE = Path(__file__).resolve().parent


class FakeCuBLAS:
    """Shaped like torch.backends.cuda.cuBLASModule: no instance attributes, flags kept elsewhere, unknown
    names refused by both __getattr__ and __setattr__ (and so by delattr's fallback)."""
    _store = {}

    def __getattr__(self, name):
        if name == "allow_tf32":
            return FakeCuBLAS._store.get(name, True)
        raise AttributeError(f"'FakeCuBLAS' object has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name != "allow_tf32":
            raise AttributeError("Unknown attribute " + name)
        FakeCuBLAS._store[name] = value


def test_flag_sets_and_restores_through_getattr_and_setattr():
    fake = FakeCuBLAS()
    with flag(fake, "allow_tf32", False):
        assert fake.allow_tf32 is False
    assert fake.allow_tf32 is True and vars(fake) == {}
    with pytest.raises(RuntimeError, match="boom"), flag(fake, "allow_tf32", False):
        raise RuntimeError("boom")
    assert fake.allow_tf32 is True  # restored when the test body fails too
    with pytest.raises(AttributeError):  # an unknown flag is an error, not a silently added attribute
        with flag(fake, "allow_tf33", False):
            pass


def test_flag_on_torchs_own_cublas_flags():
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    with flag(matmul, "allow_tf32", not before):
        assert matmul.allow_tf32 is (not before)
    assert matmul.allow_tf32 is before


def test_set_flag_fixture_restores_at_teardown(set_flag):
    # the CUDA tests' use: if this fixture could not restore the flag, this test would error at teardown
    set_flag(torch.backends.cuda.matmul, "allow_tf32", False)
    assert torch.backends.cuda.matmul.allow_tf32 is False


def test_require_cuda_turns_a_skipped_cuda_test_into_a_failure(tmp_path):
    shutil.copy(HERE / "conftest.py", tmp_path)
    shutil.copy(HERE / "_flags.py", tmp_path)
    shutil.copy(HERE / "_process_groups.py", tmp_path)
    (tmp_path / "test_gpu_only.py").write_text(
        "import pytest\n\n\n@pytest.mark.cuda\n@pytest.mark.skipif(True, reason='needs a CUDA GPU')\n"
        "def test_kernel():\n    pass\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
           "ignore::pytest.PytestUnknownMarkWarning", "-m", "cuda", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if k != "LABKIT_REQUIRE_CUDA"}
    plain = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert plain.returncode == 0 and "1 skipped" in plain.stdout, plain.stdout
    required = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path,
                              env={**env, "LABKIT_REQUIRE_CUDA": "1"})
    assert required.returncode == 1 and "1 error" in required.stdout, required.stdout  # skipped in its setup
    assert "LABKIT_REQUIRE_CUDA=1: this CUDA test was skipped (Skipped: needs a CUDA GPU)" in required.stdout
