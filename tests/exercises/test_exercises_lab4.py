"""Lab 4's exercises beyond the generic self-test: the notebooks' own solutions pass their checks, the timer's
shared loop (``labkit.perf.timing.clock_calls``) waits for the device where it must, and the bit-assembly
decode the exercise asks for equals labkit's exact decode on the whole domain the quantizer writes."""
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from labkit.exercises import check, editions
from labkit.exercises.lab4 import time_calls
from labkit.sandbox.harness import FakeDevice
from labkit.kernels.sheet_decode import bits_of
from labkit.quant.formats import mxint
from labkit.perf import timing

SRC = Path(__file__).resolve().parents[2] / "notebooks" / "src"


def solutions(stem: str) -> dict:
    """The functions the solution edition's exercise cells define."""
    ns = {"math": math, "time": time, "torch": torch, "F": F}
    for cell in editions.parse((SRC / f"{stem}.py").read_text()).cells:
        if "exercise" in cell.metadata.get("tags", []):
            exec(cell.source, ns)
    return ns


def test_the_notebooks_solutions_pass_their_checks():
    perf, mx = solutions("lab4_perf"), solutions("lab4_mxint8")
    for exercise_id, fn in (("lab4.timer", perf["time_calls"]), ("lab4.naive_attention", perf["naive_attention"]),
                            ("lab4.mxint8_quantize", mx["quantize_mxint8"]),
                            ("lab4.mxint8_decode", mx["decode_mxint8"])):
        result = check(exercise_id, fn, quiet=True)
        assert result.ok and result.fn is fn, result.summary()


def test_clock_calls_syncs_before_starting_and_before_reading_the_clock():
    events = []
    dev = FakeDevice([3.0, 1.0, 0.5], launch=0.25)

    def sync():
        events.append("sync")
        dev.sync()

    def clock():
        events.append("clock")
        return dev.clock()

    def fn():
        events.append("fn")
        dev.work()

    assert timing.clock_calls(fn, 3, clock, sync) == [3.0, 1.0, 0.5]
    assert events == ["sync", "clock", "fn", "sync", "clock"] * 3
    # without sync only the launch is timed: the reason the exercise's fake device finishes work at sync
    dev = FakeDevice([3.0, 1.0], launch=0.25)
    assert timing.clock_calls(dev.work, 2, dev.clock) == [0.25, 0.25]


def test_the_reference_timer_is_labkits_timing():
    dev = FakeDevice([10.0, 2.0, 1.0, 3.0, 2.0, 4.0])
    assert time_calls.reference(dev.work, 4, 1, dev.clock, dev.sync) == {"first": 10.0, "median": 2.5}
    t = timing.Timing("cpu", 1, [10.0, 2.0, 1.0, 3.0, 2.0, 4.0])
    assert (t.first, t.steady_median) == (10.0, 2.5)


def test_the_exercise_decode_is_exact_on_the_quantizers_domain():
    decode = solutions("lab4_mxint8")["decode_mxint8"]
    m = torch.arange(-127, 128, dtype=torch.int32).to(torch.int8).repeat(254, 1)          # (E, m) pairs
    e = torch.arange(1, 255, dtype=torch.int32).to(torch.uint8).reshape(-1, 1)
    mine = decode(m, e.expand(-1, 255).contiguous(), 1)
    exact = mxint.dequantize_mxint8(m, e.expand(-1, 255).contiguous(), 1)
    assert torch.equal(bits_of(mine), bits_of(exact))
    zeros = decode(torch.zeros(1, 4, dtype=torch.int8), torch.zeros(1, 1, dtype=torch.uint8), 4)
    assert torch.equal(bits_of(zeros), torch.zeros(1, 4, dtype=torch.int32))
