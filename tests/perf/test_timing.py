"""labkit.perf.timing's short-kernel clocks: a CUDA graph replay timed from GPU time, not the host's; the
median timer; one call timed alone, and a phase timed with its result."""
import time

import pytest
import torch

from labkit.perf.timing import MedianTimer, copy_ms, copy_times, graph_time, kernel_copy, rotation, time_call, timed

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_rotation_exceeds_l2_three_times_and_keeps_two_copies():
    assert rotation(10, 100) == 30
    assert rotation(1000, 100) == 2
    assert rotation(1, 10 ** 9) == 64


def test_median_timer_on_cpu_warms_up_untimed_and_takes_the_median_in_ms():
    calls = []

    def fn():
        calls.append(None)
        time.sleep(0.02 if len(calls) <= 2 else 0.001)  # the warm-up calls are slow: kept out of the median

    ms = MedianTimer("cpu", reps=3, warmup=2)(fn)
    assert len(calls) == 5 and 0.5 < ms < 15, ms


def test_time_call_times_one_call_in_seconds():
    calls = []
    s = time_call(lambda: (calls.append(None), time.sleep(0.01)), "cpu")
    assert calls == [None] and 0.009 < s < 0.5, s


def test_timed_returns_the_seconds_of_one_call_and_its_result():
    calls = []
    s, out = timed(lambda: (calls.append(None), time.sleep(0.01), "done")[-1], "cpu")
    assert calls == [None] and out == "done" and 0.009 < s < 0.5, s


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


@pytest.mark.cuda
@needs_gpu
def test_median_timer_on_cuda_flushes_l2_and_times_the_gpu():
    x = torch.ones(1 << 20, device="cuda")
    timer = MedianTimer("cuda", reps=5, warmup=1)
    assert timer.flush.numel() >= 2 * torch.cuda.get_device_properties(0).L2_cache_size
    assert 0 < timer(lambda: x.add_(1)) < 5


@pytest.mark.parametrize("nbytes", [4096, 4099, 1])
def test_kernel_copy_moves_every_byte(nbytes):
    # the roofline's SM copy must really copy: every byte, also where the size is no multiple of 4-byte words
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8)
    dst = torch.zeros_like(src)
    kernel_copy(src, dst)
    assert torch.equal(dst, src)


def test_copy_ms_is_the_faster_way_of_copying(monkeypatch):
    from labkit.perf import timing

    monkeypatch.setattr(timing, "copy_times", lambda nbytes, copies, device: {"memcpy": 0.9, "kernel": 0.6})
    assert copy_ms(1 << 20, 2, "cuda") == 0.6


@pytest.mark.cuda
@needs_gpu
def test_copy_times_time_a_memcpy_and_a_kernel_copy_on_the_gpu():
    times = copy_times(1 << 24, 2, "cuda")
    assert set(times) == {"memcpy", "kernel"} and all(t > 0 for t in times.values())
    src = torch.randint(0, 256, (4099,), dtype=torch.uint8, device="cuda")
    dst = torch.zeros_like(src)
    kernel_copy(src, dst)
    assert torch.equal(dst, src)
