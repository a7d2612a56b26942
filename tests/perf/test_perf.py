"""labkit.perf: timing (first call and warm-up kept out of the steady state, CUDA path guarded),
break-even, the compile-study plumbing (budgets, bad names), naive vs fused attention against an
independent float64 reference, profiling and memory measurement."""
import contextlib
import math
import time

import numpy as np
import pytest
import torch

from labkit.perf import compile_study, sdpa, timing
from labkit.perf.timing import Timing, break_even_calls, time_calls


class FakeClock:
    """perf_counter replacement: ``fn`` advances it by the next scripted duration."""

    def __init__(self, durations):
        self.now, self.durations, self.calls = 100.0, list(durations), 0

    def __call__(self):
        return self.now

    def fn(self):
        self.now += self.durations[self.calls]
        self.calls += 1


DURATIONS = [5.0, 1.5, 1.2, 1.0, 1.1, 0.9, 1.0, 1.3]  # compile, 2 warm-up, 5 steady


def test_first_call_and_warmup_are_kept_out_of_the_steady_state(monkeypatch):
    clock = FakeClock(DURATIONS)
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    t = time_calls(clock.fn, repeats=5, device="cpu", warmup=2)
    assert clock.calls == 8 and t.per_call == pytest.approx(DURATIONS)
    assert t.first == pytest.approx(DURATIONS[0])
    assert t.warmup_calls == pytest.approx(DURATIONS[1:3])
    assert t.steady == pytest.approx(DURATIONS[3:])
    steady = np.array(DURATIONS[3:])
    assert t.steady_median == pytest.approx(np.median(steady))
    assert t.steady_quartiles == pytest.approx(tuple(np.percentile(steady, [25, 75])))
    assert (t.steady_min, t.steady_max) == pytest.approx((steady.min(), steady.max()))
    assert t.cumulative() == pytest.approx(np.cumsum(DURATIONS))
    assert t.mean_of_first(5) == pytest.approx(np.mean(DURATIONS[:5]))
    # the slow first call dominates a no-warm-up average but not the median
    assert t.mean_of_first(5) > 1.5 * t.steady_median
    assert t.startup_excess == pytest.approx(sum(DURATIONS[:3]) - 3 * np.median(steady))
    again = Timing.from_summary(t.summary())
    assert again.per_call == t.per_call and again.steady_median == t.steady_median


def test_real_sleeps_first_call_recorded_separately():
    calls = []

    def fn():
        time.sleep(0.15 if not calls else 0.005)
        calls.append(1)

    t = time_calls(fn, repeats=4, device="cpu", warmup=1)
    assert len(t.per_call) == 6 and t.first >= 0.15
    assert t.steady_max < 0.1  # the slow call is not in the steady state
    assert t.first > 3 * t.steady_median


@pytest.mark.parametrize("kwargs, error", [({"repeats": 0}, ValueError), ({"repeats": 2, "warmup": -1}, ValueError),
                                           ({"repeats": 2, "device": "tpu"}, ValueError),
                                           ({"repeats": 2, "device": "banana"}, ValueError)])
def test_bad_arguments_are_errors(kwargs, error):
    with pytest.raises(error, match="repeats|warmup|device"):
        time_calls(lambda: None, **kwargs)


def test_cuda_request_without_gpu_is_a_clear_error_or_is_timed_with_events():
    if torch.cuda.is_available():
        t = time_calls(lambda: torch.ones(8, device="cuda").sum(), repeats=3, device="cuda", warmup=1)
        assert t.clock == "cuda_event" and len(t.per_call) == 5 and all(x >= 0 for x in t.per_call)
    else:
        with pytest.raises(RuntimeError, match="is_available"):
            time_calls(lambda: None, repeats=2, device="cuda")
        with pytest.raises(RuntimeError, match="cuda"):
            timing.synchronize("cuda")


def test_cpu_path_never_touches_cuda(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the CPU path called into torch.cuda")

    for name in ("synchronize", "Event", "device", "is_available", "get_device_name"):
        monkeypatch.setattr(torch.cuda, name, forbidden)
    t = time_calls(lambda: torch.ones(4).sum(), repeats=2, device="cpu", warmup=1)
    timing.synchronize("cpu")
    assert t.clock == "perf_counter" and len(t.per_call) == 4


def test_cuda_path_synchronises_around_every_call_and_uses_events(monkeypatch):
    """The CUDA branch run against fakes: events bracket each call, the device is synchronised before and
    after it, and event milliseconds become seconds."""
    clock = FakeClock(DURATIONS)
    syncs = []

    class FakeEvent:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.t = None

        def record(self):
            self.t = clock()

        def elapsed_time(self, end):
            return (end.t - self.t) * 1e3

    monkeypatch.setattr(timing.time, "perf_counter", clock)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda dev=None: syncs.append(clock.calls))
    monkeypatch.setattr(torch.cuda, "device", lambda dev: contextlib.nullcontext())
    t = time_calls(clock.fn, repeats=5, device="cuda", warmup=2)
    assert t.clock == "cuda_event" and t.per_call == pytest.approx(DURATIONS)
    # one synchronize before each call (after the previous one finished) and one after it
    assert syncs == [i // 2 + (i % 2) for i in range(2 * len(DURATIONS))]


def test_break_even():
    assert break_even_calls(10.0, eager_s=2.0, compiled_s=1.0) == pytest.approx(10.0)
    assert math.isinf(break_even_calls(10.0, eager_s=1.0, compiled_s=1.0))
    assert math.isinf(break_even_calls(10.0, eager_s=1.0, compiled_s=1.5))
    assert break_even_calls(0.0, eager_s=2.0, compiled_s=1.0) == 0.0


def _run(variant, state, per_call, warmup=2):
    t = Timing(device="cpu", warmup=warmup, per_call=per_call)
    return {"variant": variant, "state": state, "status": "ok", "batch": 4, "image": 32, "timing": t.summary()}


def test_compare_break_even_is_where_the_cumulative_costs_cross():
    eager = [2.4, 2.1, 2.0] + [2.0, 2.1, 1.9, 2.0, 2.0]
    compiled = [40.0, 3.0, 1.6] + [1.5, 1.5, 1.6, 1.4, 1.5]
    (c,) = compile_study.compare([_run("eager", "eval+no_grad", eager), _run("inductor", "eval+no_grad", compiled)])
    te, tc = Timing(device="cpu", warmup=2, per_call=eager), Timing(device="cpu", warmup=2, per_call=compiled)
    assert c["steady_speedup"] == pytest.approx(te.steady_median / tc.steady_median)
    assert c["sheet_speedup"] == pytest.approx(np.mean(eager[:5]) / np.mean(compiled[:5])) and c["sheet_speedup"] < 1

    def cumulative(t, n):  # measured start-up, then the steady median per call
        return sum(t.per_call[:3]) + (n - 3) * t.steady_median

    n = c["break_even_calls"]
    assert cumulative(tc, math.floor(n) - 1) > cumulative(te, math.floor(n) - 1)
    assert cumulative(tc, math.ceil(n) + 1) < cumulative(te, math.ceil(n) + 1)
    slower = [40.0, 3.0, 2.5] + [2.5] * 5
    (c2,) = compile_study.compare([_run("eager", "eval+no_grad", eager), _run("inductor", "eval+no_grad", slower)])
    assert math.isinf(c2["break_even_calls"])


SETTINGS = dict(compile_variants={"eager": ["eval+no_grad"], "cudagraphs": ["eval+no_grad"]}, compile_batch=2,
                compile_image=32, compile_repeats={"cpu": 2, "cuda": 5}, compile_warmup=1, compile_timeout_s=60,
                compile_cold_cache=True, small_variant=None, small_states=[], small_batch=1, small_image=32,
                small_timeout_s=30, seed=0, threads=1)


def test_plan_resolves_per_device_values_and_skips_cuda_graphs_on_cpu():
    jobs, skipped = compile_study.plan(SETTINGS, "cpu")
    assert [(j.variant, j.states, j.repeats) for j in jobs] == [("eager", ["eval+no_grad"], 2)]
    assert skipped and skipped[0]["variant"] == "cudagraphs" and "CUDA" in skipped[0]["reason"]


@pytest.mark.parametrize("change, match", [
    ({"compile_variants": {"turbo": ["eval+no_grad"]}}, "turbo.*allowed"),
    ({"compile_variants": {"eager": ["sideways"]}}, "sideways.*allowed"),
    ({"compile_repeats": {"cuda": 5}}, "cpu"),
    ({"small_variant": "max-autotune", "small_states": ["nope"]}, "nope.*allowed")])
def test_plan_rejects_unknown_names(change, match):
    with pytest.raises(KeyError, match=match):
        compile_study.plan({**SETTINGS, **change}, "cpu")


def test_worker_over_budget_is_killed_and_reported():
    job = compile_study.Job("inductor", ["train+grad", "eval+no_grad"], device="cpu", batch=2, image=32,
                            repeats=2, warmup=1, timeout_s=0.5, threads=1)
    start = time.perf_counter()
    records, _ = compile_study.run_job(job)
    assert time.perf_counter() - start < 30
    assert [(r["variant"], r["state"], r["status"]) for r in records] == [
        ("inductor", "train+grad", "timeout"), ("inductor", "eval+no_grad", "timeout")]
    assert all("budget" in r["reason"] for r in records)


def test_worker_measures_eager_and_compiled_and_they_agree():
    job = compile_study.Job("aot_eager", ["eval+no_grad"], device="cpu", batch=1, image=32, repeats=2, warmup=1,
                            timeout_s=300, baseline=True, threads=1)
    records, meta = compile_study.run_job(job)
    assert [(r["variant"], r["status"]) for r in records] == [("eager", "ok"), ("aot_eager", "ok")], records
    assert "ResNet" in meta["model_source"] or "torchvision" in meta["model_source"]
    compiled = records[1]
    assert len(compiled["timing"]["per_call_s"]) == 4
    assert compiled["max_abs_diff_vs_eager"] < 1e-4
    assert compiled["timing"]["first_s"] > compiled["timing"]["steady_median_s"]  # capture happens on call 1
    assert compile_study.share(records[0], "convolution") > 0.3  # ResNet's time is mostly convolution


# ---- attention -------------------------------------------------------------------------------------------

def reference_attention(q, k, v, mask=None, causal=False):
    """float64 numpy: softmax(q k^T / sqrt(d) + mask) v, written independently of labkit and torch."""
    q, k, v = (np.asarray(t.double()) for t in (q, k, v))
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        allowed = np.tril(np.ones(scores.shape[-2:], dtype=bool))
        scores = np.where(allowed, scores, -np.inf)
    elif mask is not None:
        m = np.asarray(mask.double() if mask.dtype != torch.bool else mask)
        scores = np.where(m, scores, -np.inf) if m.dtype == bool else scores + m
    scores = scores - scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", p, v)


SHAPES = [(1, 1, 8, 8, 4), (2, 3, 17, 17, 16), (1, 2, 5, 33, 8), (2, 4, 64, 64, 64)]  # b, h, q len, k len, d


def _qkv(b, h, lq, lk, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, lq, d, generator=g).to(dtype), torch.randn(b, h, lk, d, generator=g).to(dtype),
            torch.randn(b, h, lk, d, generator=g).to(dtype))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["plain", "causal", "bool_mask", "float_mask"])
def test_naive_and_fused_match_float64_reference(shape, kind):
    q, k, v = _qkv(*shape, seed=sum(shape))
    g = torch.Generator().manual_seed(1)
    mask, causal = None, kind == "causal"
    if kind == "bool_mask":
        mask = torch.rand(shape[2], shape[3], generator=g) > 0.3
        mask[:, 0] = True  # every query keeps a key
    elif kind == "float_mask":
        mask = torch.randn(shape[2], shape[3], generator=g)
    ref = reference_attention(q, k, v, mask, causal)
    for impl in (sdpa.naive_attention, sdpa.fused_attention):
        out = impl(q, k, v, attn_mask=mask, is_causal=causal).double().numpy()
        assert np.abs(out - ref).max() < 1e-5, impl.__name__


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_within_stated_tolerance(dtype):
    q, k, v = _qkv(2, 2, 96, 96, 32, dtype=dtype)
    ref = reference_attention(q, k, v)
    for impl in (sdpa.naive_attention, sdpa.fused_attention):
        err = np.abs(impl(q, k, v).double().numpy() - ref).max()
        assert err < sdpa.TOLERANCE[dtype] * np.abs(ref).max(), (impl.__name__, err)


def test_check_equal_passes_and_catches_a_wrong_kernel(monkeypatch):
    q, k, v = _qkv(2, 4, 32, 32, 16)
    for kwargs in ({}, {"is_causal": True}, {"attn_mask": torch.ones(32, 32, dtype=torch.bool).tril()}):
        assert sdpa.check_equal(q, k, v, **kwargs)["ok"]
    monkeypatch.setattr(sdpa, "fused_attention",
                        lambda q, k, v, attn_mask=None, is_causal=False: torch.softmax(q @ k.transpose(-2, -1), -1) @ v)
    bad = sdpa.check_equal(q, k, v)  # forgot the 1/sqrt(d) scale
    assert not bad["ok"] and bad["fused_vs_float64"] > bad["tolerance"]


def test_naive_rejects_mask_and_causal_together():
    q, k, v = _qkv(1, 1, 4, 4, 4)
    with pytest.raises(ValueError, match="not both"):
        sdpa.naive_attention(q, k, v, attn_mask=torch.ones(4, 4, dtype=torch.bool), is_causal=True)


def test_cpu_peak_memory_naive_holds_the_matrix_fused_does_not():
    q, k, v = _qkv(1, 4, 256, 256, 32)
    matrix = 4 * 256 * 256 * 4
    naive, method = sdpa.peak_memory(lambda: sdpa.naive_attention(q, k, v), "cpu")
    fused, _ = sdpa.peak_memory(lambda: sdpa.fused_attention(q, k, v), "cpu")
    assert "profiler" in method
    assert naive >= 2 * matrix  # scores and the scaled scores are alive together
    assert q.numel() * 4 <= fused < matrix  # the output, plus tiles


def test_profile_names_the_backend_and_forced_backends_report_reasons():
    q, k, v = _qkv(1, 2, 64, 64, 16)
    naive = sdpa.profile_call(lambda: sdpa.naive_attention(q, k, v), "cpu")
    fused = sdpa.profile_call(lambda: sdpa.fused_attention(q, k, v), "cpu")
    assert naive["backend"] is None and any("bmm" in r["name"] for r in naive["top"])
    assert fused["backend"] == "flash (CPU kernel)" and "scaled_dot_product" in fused["table"]
    rows = {r["backend"]: r for r in sdpa.compare_backends(q, k, v, "cpu", repeats=2, warmup=1)}
    assert set(rows) == set(sdpa.BACKENDS)
    assert rows["flash"]["status"] == rows["math"]["status"] == "ok"
    assert rows["math"]["max_abs_diff_vs_naive"] < 1e-5
    for name in ("memory-efficient", "cudnn"):  # CUDA-only kernels
        assert rows[name]["status"] == "unavailable" and rows[name]["reason"]


def test_dtype_and_device_names_are_checked():
    with pytest.raises(KeyError, match="allowed"):
        sdpa.check_dtype("float8")
    with pytest.raises(ValueError, match="allowed"):
        timing.resolve_devices(["tpu"])
    with pytest.raises(ValueError, match="at least one"):
        timing.resolve_devices([])
    assert timing.resolve_devices("auto") == ["cuda" if torch.cuda.is_available() else "cpu"]


def test_profiler_bookkeeping_rows_are_not_counted_as_work():
    # CUPTI's "Activity Buffer Request" row carries device time of its own; counting it made a CUDA call's
    # kernels add up to more than the call (Lab 4: 7.47 ms of a 6.44 ms call).
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from labkit.perf import compile_study, sdpa

    events = [SimpleNamespace(key="aten::mm", device_type=DeviceType.CPU, self_device_time_total=3000.0,
                              self_cpu_time_total=50.0),
              SimpleNamespace(key="Activity Buffer Request", device_type=DeviceType.CPU,
                              self_device_time_total=1200.0, self_cpu_time_total=1800.0)]
    prof = SimpleNamespace(key_averages=lambda: events)
    shares = compile_study.op_shares(prof, "cuda")
    assert shares["total_s"] == pytest.approx(0.003)
    stored = {"device": "cuda", "profiles": {"naive": {"top": [
        {"name": "aten::mm", "calls": 1, "self_cpu_us": 50.0, "self_device_us": 3000.0, "self_cpu_mem_bytes": 0,
         "self_device_mem_bytes": 0},
        {"name": "Activity Buffer Request", "calls": 1, "self_cpu_us": 1800.0, "self_device_us": 1200.0,
         "self_cpu_mem_bytes": 0, "self_device_mem_bytes": 0}]}}}
    assert [r["op"] for r in sdpa.profile_rows(stored, "naive")] == ["aten::mm"]
