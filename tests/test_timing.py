"""labkit.kernels.timing: how long a CUDA graph replay is, from GPU time, not the host's."""
import time

import pytest
import torch

from labkit.kernels.timing import graph_time, rotation

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_rotation_exceeds_l2_three_times_and_keeps_two_copies():
    assert rotation(10, 100) == 30
    assert rotation(1000, 100) == 2
    assert rotation(1, 10 ** 9) == 64


@pytest.mark.cuda
@needs_gpu
def test_graph_time_sizes_replays_from_gpu_time_not_the_hosts():
    """A call with 0.2 ms of host work and microseconds of GPU work: sized from an eager pass (the host's
    0.4 ms), a replay held 10 calls; sized from a graphed pass, it holds hundreds and the time per call is the
    GPU's."""
    x = torch.ones(1024, device="cuda")
    out = torch.empty_like(x)

    def slow_host():
        time.sleep(2e-4)
        return torch.add(x, 1, out=out)

    ms, reps = graph_time([slow_host, slow_host])
    assert 2 * reps >= 200, reps
    assert ms < 0.05, ms  # a 1024-element add: a few microseconds, far under the host's 0.2 ms
    assert graph_time([slow_host, slow_host], reps=3)[1] == 3
