"""labkit's one timer: every measured time in labkit and benchmarks/ comes from one of these clocks.

``time_calls(fn, repeats, device, warmup)`` makes ``1 + warmup + repeats`` calls and keeps every one:
call 0 is ``first`` (compilation, lazy initialisation), the next ``warmup`` calls settle caches, autotuners
and CUDA-graph recording, and only the last ``repeats`` calls form the steady state that medians and
spreads are computed from. Averaging the first call in, as the lab sheet does, measures the compiler.
``time_call(fn, device)`` is its clock for one call, for loops that interleave what they compare;
``timed(fn, device)`` times one phase of seconds (an epoch, an evaluation) on the wall clock, the device
synchronized on both sides, and hands back what it returned.

CPU: ``time.perf_counter`` around each call. CUDA: a pair of CUDA events around each call, after a
device-wide synchronize, so each call is timed alone (launch overhead included, the previous call's
queued kernels excluded); the wall clock of each call (with a synchronize after it) is kept as well.
CUDA calls are made only on the CUDA path: the CPU path never touches ``torch.cuda``.

Kernels too short for a synchronize per call: ``MedianTimer`` (eager calls queued back to back, L2 flushed
before each, the median of per-call CUDA events) and ``graph_time``/``graph_ms`` (the calls captured in one
CUDA graph and replayed: no launch gaps, no Python; the GPU's time alone).
"""
from __future__ import annotations

import contextlib
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

DEVICE_TYPES = ("cpu", "cuda")


# Rows torch.profiler reports that are the profiler's own bookkeeping, not the program's work (CUPTI's
# buffer requests carry device time of their own): left out of labkit's sums and lists of ops and kernels
# (the raw profiler table still prints them).
PROFILER_BOOKKEEPING = frozenset({"Activity Buffer Request"})


def is_bookkeeping(event) -> bool:
    return getattr(event, "key", None) in PROFILER_BOOKKEEPING


def check_device(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device``; a clear error for unknown types or CUDA without a GPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r}: allowed values are 'auto', 'cpu', 'cuda', 'cuda:N'") from err
    if dev.type not in DEVICE_TYPES:
        raise ValueError(f"device={device!r}: allowed device types are {DEVICE_TYPES} (and 'auto')")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} requested but torch.cuda.is_available() is False "
                           f"(torch {torch.__version__}, CUDA build: {torch.version.cuda})")
    return dev


def parse_devices(value, label: str = "devices"):
    """A ``devices`` setting as a person gives it: "auto", a device type or a list of them (checked by
    ``resolve_devices``); returned as given."""
    if not (isinstance(value, str) or isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise TypeError(f"{label}={value!r}: must be 'auto', a device type or a list of them")
    try:
        resolve_devices(value)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise type(err)(f"{label}: {err.args[0] if err.args else err}") from None
    return value


def resolve_devices(spec: str | list[str]) -> list[str]:
    """``"auto"``: ``["cuda"]`` when a GPU is present, else ``["cpu"]``; or a list of device types, checked."""
    if spec == "auto":
        return ["cuda" if torch.cuda.is_available() else "cpu"]
    names = [spec] if isinstance(spec, str) else list(spec)
    if not names:
        raise ValueError("devices=[]: name at least one of 'cpu', 'cuda' (or 'auto')")
    return [check_device(n).type for n in names]


def device_label(device: str | torch.device) -> str:
    """A readable name for ``device``: the GPU's name, or the CPU model and thread count."""
    dev = check_device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), model)
    except OSError:
        pass
    return f"cpu ({model}, {torch.get_num_threads()} threads)"


def synchronize(device: str | torch.device) -> None:
    """Wait for queued work on ``device``; a no-op on CPU, where calls are synchronous."""
    dev = check_device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


@dataclass
class Timing:
    """Seconds per call, in call order: ``[first, *warm-up, *steady]``."""

    device: str
    warmup: int
    per_call: list[float]
    per_call_wall: list[float] = field(default_factory=list)  # perf_counter incl. sync; == per_call on CPU
    clock: str = "perf_counter"

    @property
    def first(self) -> float:
        return self.per_call[0]

    @property
    def warmup_calls(self) -> list[float]:
        return self.per_call[1:1 + self.warmup]

    @property
    def steady(self) -> list[float]:
        return self.per_call[1 + self.warmup:]

    @property
    def steady_median(self) -> float:
        return statistics.median(self.steady)

    @property
    def steady_min(self) -> float:
        return min(self.steady)

    @property
    def steady_max(self) -> float:
        return max(self.steady)

    @property
    def steady_quartiles(self) -> tuple[float, float]:
        """(25th, 75th) percentile of the steady calls (both the value itself for a single call)."""
        s = self.steady
        if len(s) < 2:
            return s[0], s[0]
        q = statistics.quantiles(s, n=4, method="inclusive")
        return q[0], q[2]

    @property
    def steady_iqr(self) -> float:
        lo, hi = self.steady_quartiles
        return hi - lo

    @property
    def startup_excess(self) -> float:
        """Seconds the first and warm-up calls took beyond as many steady calls (the compile overhead)."""
        n = 1 + self.warmup
        return sum(self.per_call[:n]) - n * self.steady_median

    def cumulative(self) -> list[float]:
        """Total seconds after 1, 2, ... calls."""
        out, total = [], 0.0
        for t in self.per_call:
            total += t
            out.append(total)
        return out

    def mean_of_first(self, n: int) -> float:
        """The average over the first ``n`` calls, compile included: what a no-warm-up loop reports."""
        if not 1 <= n <= len(self.per_call):
            raise ValueError(f"n={n}: must be between 1 and the {len(self.per_call)} calls made")
        return sum(self.per_call[:n]) / n

    def summary(self) -> dict:
        q25, q75 = self.steady_quartiles
        return {"device": self.device, "clock": self.clock, "calls": len(self.per_call), "warmup": self.warmup,
                "first_s": self.first, "warmup_s": self.warmup_calls, "steady_median_s": self.steady_median,
                "steady_q25_s": q25, "steady_q75_s": q75, "steady_min_s": self.steady_min,
                "steady_max_s": self.steady_max, "startup_excess_s": self.startup_excess,
                "per_call_s": list(self.per_call), "per_call_wall_s": list(self.per_call_wall)}

    @classmethod
    def from_summary(cls, d: dict) -> "Timing":
        return cls(device=d["device"], warmup=d["warmup"], per_call=list(d["per_call_s"]),
                   per_call_wall=list(d.get("per_call_wall_s") or []), clock=d.get("clock", "perf_counter"))


def time_calls(fn: Callable[[], object], repeats: int, device: str | torch.device = "cpu",
               warmup: int = 2) -> Timing:
    """Call ``fn()`` ``1 + warmup + repeats`` times on ``device`` and time every call."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: need at least one steady-state call")
    if warmup < 0:
        raise ValueError(f"warmup={warmup}: must be >= 0")
    dev = check_device(device)
    n = 1 + warmup + repeats
    if dev.type == "cuda":
        return _time_cuda(fn, n, warmup, dev)
    times = clock_calls(fn, n, time.perf_counter)
    return Timing(device=str(dev), warmup=warmup, per_call=times, per_call_wall=list(times))


def time_call(fn: Callable[[], object], device: str | torch.device = "cpu") -> float:
    """Seconds of one call of ``fn()`` on ``device``, on ``time_calls``' clock (no warm-up: the caller's)."""
    dev = check_device(device)
    if dev.type == "cuda":
        return _time_cuda(fn, 1, 0, dev).per_call[0]
    return clock_calls(fn, 1, time.perf_counter)[0]


def timed(fn: Callable[[], object], device: str | torch.device = "cpu") -> tuple[float, object]:
    """(wall seconds, what ``fn()`` returned) of one call, ``device`` synchronized before and after it
    (``clock_calls`` with a sync): how the benchmarks time a phase whose result they keep."""
    dev = check_device(device)
    out = []
    seconds = clock_calls(lambda: out.append(fn()), 1, time.perf_counter, sync=lambda: synchronize(dev))[0]
    return seconds, out[0]


def clock_calls(fn: Callable[[], object], n: int, clock: Callable[[], float],
                sync: Callable[[], None] | None = None) -> list[float]:
    """Seconds of each of ``n`` calls of ``fn()`` read from ``clock`` (e.g. ``time.perf_counter``), in call order.

    With ``sync`` (a device synchronize), ``sync()`` runs before the clock starts (the previous call's queued
    work stays out of this call's window) and after each call, before the clock is read (the call's own queued
    work is inside it). ``time_calls``' CPU path is this with no ``sync``: CPU calls are synchronous.
    """
    times = []
    if sync is None:
        for _ in range(n):
            start = clock()
            fn()
            times.append(clock() - start)
        return times
    for _ in range(n):
        sync()
        start = clock()
        fn()
        sync()
        times.append(clock() - start)
    return times


def _time_cuda(fn, n: int, warmup: int, dev: torch.device) -> Timing:
    events, walls = [], []
    with torch.cuda.device(dev):
        for _ in range(n):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(dev)  # the previous call's kernels must not run inside this call's window
            t0 = time.perf_counter()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(dev)  # device-wide: also waits for side streams (CUDA-graph replays)
            walls.append(time.perf_counter() - t0)
            events.append((start, end))
    # elapsed_time is in milliseconds; the start event fires at once on an idle stream, so host-side
    # work inside fn (compilation, Python, launches) is inside the window, as it is for the user.
    per_call = [s.elapsed_time(e) / 1e3 for s, e in events]
    return Timing(device=str(dev), warmup=warmup, per_call=per_call, per_call_wall=walls, clock="cuda_event")


class MedianTimer:
    """Median milliseconds of ``fn()`` over ``reps`` calls, after ``warmup`` untimed ones.

    CUDA: the calls are queued back to back, each between its own pair of CUDA events and each preceded by
    a write of twice the L2 size (outside its events), so no input is served from L2 and the host's
    launches hide behind the GPU's work. CPU: ``perf_counter`` per call, for dry runs (a CPU or the Triton
    interpreter says nothing about a GPU kernel's time)."""

    def __init__(self, device: str | torch.device, reps: int = 50, warmup: int = 5):
        self.device, self.reps, self.warmup, self.flush = check_device(device), reps, warmup, None
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            self.flush = torch.empty(2 * max(props.L2_cache_size, 1 << 20), dtype=torch.uint8, device=self.device)

    def __call__(self, fn: Callable[[], object]) -> float:
        for _ in range(self.warmup):
            fn()
        if self.flush is None:
            return statistics.median(clock_calls(fn, self.reps, time.perf_counter)) * 1e3
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        for s, e in zip(starts, ends):
            self.flush.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def rotation(nbytes: int, l2_bytes: int, factor: int = 3, most: int = 64) -> int:
    """How many copies of an ``nbytes`` operand make a cycle ``factor`` times the L2 size (at least 2), so that
    calls cycling through them never read their operand from L2."""
    return max(2, min(most, -(-factor * l2_bytes // max(nbytes, 1))))


def capture(fn):
    """``fn`` captured in a CUDA graph after one warm-up call on a side stream (as torch.cuda.graphs asks):
    (graph, the output tensor of the captured call, which each replay rewrites)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def graph_time(fns, reps: int | None = None, replays: int = 7, target_ms: float = 10.0) -> tuple[float, int]:
    """(median milliseconds per call, reps) of the ``fns`` (one per rotated input, ``rotation``) captured
    ``reps`` times over in one CUDA graph: no launch gaps and no Python, so a microsecond kernel is timed
    without its host. Without ``reps``: enough passes for ``target_ms`` of GPU time per replay, sized from one
    graphed pass, so a replay's fixed cost (launch, first kernel) is under a percent of it. Sizing from an eager
    pass counted the host's launch cost too: paths with more Python per call got shorter graphs, each call
    carrying more of that fixed cost (14 us a call at 28672x8192, one row, on an H100:
    benchmarks/mxint8/fused_linear_probe.json)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture stream, as torch.cuda.graphs asks
        for fn in fns:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    if reps is None:
        one = _graph(fns, 1)
        pass_ms = min(_replay_ms(one) for _ in range(3))
        del one
        reps = max(1, min(1000, math.ceil(target_ms / max(pass_ms, 1e-3))))
    graph = _graph(fns, reps)
    graph.replay()
    torch.cuda.synchronize()
    times = [_replay_ms(graph) / (reps * len(fns)) for _ in range(replays)]
    del graph
    return statistics.median(times), reps


def graph_ms(fns, reps: int | None = None, replays: int = 7) -> float:
    """Median milliseconds per call of the ``fns`` (one per rotated input), captured in one CUDA graph
    (``graph_time``)."""
    return graph_time(fns, reps, replays)[0]


def kernel_copy(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """``dst`` = ``src``'s bytes by an elementwise kernel on the SMs (an OR with 0 over 4-byte words), not by a
    memcpy: a ``copy_`` captured in a CUDA graph becomes a memcpy node, which moved 1 GiB at 2.77 TB/s on an H200
    where an eager copy reached 4.18 TB/s (pytorch/pytorch#191284, NVIDIA/cccl#1672: cudaMemcpy D2D at ~66% of an
    H200's bandwidth)."""
    words = src.view(torch.int32) if src.numel() % 4 == 0 else src
    return torch.bitwise_or(words, 0, out=dst.view(words.dtype))


COPY_METHODS = {"memcpy": lambda src, dst: dst.copy_(src), "kernel": kernel_copy}


def copy_times(nbytes: int, copies: int, device) -> dict[str, float]:
    """``graph_ms`` of a device copy of ``nbytes`` into each of ``copies`` destinations, per way of copying
    (``COPY_METHODS``): a copy_ (a memcpy node in the graph) and an elementwise kernel."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dsts = [torch.empty_like(src) for _ in range(copies)]
    return {name: graph_ms([lambda d=d, f=f: f(src, d) for d in dsts]) for name, f in COPY_METHODS.items()}


def copy_ms(nbytes: int, copies: int, device) -> float:
    """The faster of ``copy_times``: the bandwidth roofline that weight-streaming kernels are read against (its
    rate counts read + write), the best this card showed moving the bytes."""
    return min(copy_times(nbytes, copies, device).values())


def _graph(fns, reps: int):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            for fn in fns:
                fn()
    return graph


def _replay_ms(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def break_even_calls(overhead_s: float, eager_s: float, compiled_s: float) -> float:
    """Calls after which compiling has paid for itself: overhead / (eager - compiled) per-call saving.

    ``math.inf`` when the compiled call is not faster (compiling never pays off); 0 with no overhead.
    """
    saving = eager_s - compiled_s
    if overhead_s <= 0:
        return 0.0
    if saving <= 0:
        return float("inf")
    return overhead_s / saving


def fmt_seconds(s: float | None) -> str:
    """``s`` in the unit that reads best (us, ms, s); 'n/a' for None."""
    if s is None:
        return "n/a"
    if abs(s) < 1e-3:
        return f"{s * 1e6:.0f} us"
    if abs(s) < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


# torch's profiler library (kineto) prints "USDT:<date> <pid>:<tid> SyncActivityProfilerHandler.cpp:52]
# profiler_start" and "... profiler_stop" on the process's stderr at every profile: markers for tracing
# tools, at a level above ERROR, so KINETO_LOG_LEVEL cannot drop them without dropping kineto's errors.
_KINETO_MARKER = re.compile(r"^USDT:\S+ \S+ \S+ \S+\] profiler_(start|stop)\s*$")


@contextlib.contextmanager
def quiet_profile(**kwargs):
    """``torch.profiler.profile(**kwargs)`` with kineto's start/stop marker lines dropped from stderr; any
    other line written to stderr meanwhile (a warning, an error) is passed on."""
    from torch.profiler import profile

    try:
        fd = sys.__stderr__.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr: nothing to keep clean
        with profile(**kwargs) as prof:
            yield prof
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            with profile(**kwargs) as prof:
                yield prof
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace")
            kept = "".join(line for line in text.splitlines(keepends=True) if not _KINETO_MARKER.match(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()


def spread(t: dict) -> float:
    """Max - min of the steady calls of a ``Timing.summary()``."""
    return t["steady_max_s"] - t["steady_min_s"]


def iqr(t: dict) -> float:
    """The interquartile range of the steady calls of a ``Timing.summary()``."""
    return t["steady_q75_s"] - t["steady_q25_s"]


def within_noise(a: dict, b: dict) -> bool:
    """Two ``Timing.summary()``s whose medians differ by no more than either side's spread and whose steady calls
    overlap. Without the overlap, every call of one side beat every call of the other: a few slow calls on one
    side (another process on the machine) widen its max - min but do not make such a gap noise."""
    overlap = a["steady_min_s"] <= b["steady_max_s"] and b["steady_min_s"] <= a["steady_max_s"]
    return overlap and abs(a["steady_median_s"] - b["steady_median_s"]) <= max(spread(a), spread(b))
