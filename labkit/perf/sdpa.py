"""Naive attention (matmul, scale, softmax, matmul) vs fused ``F.scaled_dot_product_attention``.

Checks the two agree, profiles both with ``torch.profiler``, forces each fused backend with
``torch.nn.attention.sdpa_kernel`` (recording the reason one is unavailable), and sweeps the sequence
length for time and peak memory.

Memory: on CUDA, ``torch.cuda.max_memory_allocated`` during one call minus what was allocated before it;
on CPU (no allocator peak counter) the peak of the profiler's allocation records (allocations minus frees,
in order) during one call. Both include the output. The analytic size of one attention matrix,
batch x heads x seq^2 x element size, is reported beside them.
"""
from __future__ import annotations

import gc
import os
import warnings
from functools import partial

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity

from ..report import clip
from .compile_study import per_device
from .timing import (PROFILER_BOOKKEEPING, check_device, device_label, is_bookkeeping, quiet_profile,
                     synchronize, time_calls)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# max |error| vs a float64 reference allowed, as a fraction of the reference's largest |value| (attention
# outputs shrink as seq grows, so an absolute bound would loosen with it), by working dtype
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 2e-2, torch.float16: 4e-3}
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "memory-efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
CPU_BACKENDS = ("flash", "math")
# the ATen op SDPA dispatched to (seen in a profile) -> backend
SDPA_OPS = {"aten::_scaled_dot_product_flash_attention": "flash",
            "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU kernel)",
            "aten::_scaled_dot_product_efficient_attention": "memory-efficient",
            "aten::_scaled_dot_product_cudnn_attention": "cudnn",
            "aten::_scaled_dot_product_attention_math": "math",
            "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable"}
MEMORY_METHOD = {
    "cuda": "torch.cuda.max_memory_allocated during one call minus memory allocated before it (output included)",
    "cpu": "peak of torch.profiler's CPU allocation records during one call (allocations minus frees, "
           "output included)"}


def check_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise KeyError(f"unknown dtype {name!r}; allowed: {', '.join(DTYPES)}")
    return DTYPES[name]


def naive_attention(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """softmax(Q K^T * scale + mask) V as the sheet writes it: every intermediate is a (seq x seq) tensor."""
    if attn_mask is not None and is_causal:
        raise ValueError("pass attn_mask or is_causal, not both (as scaled_dot_product_attention)")
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:  # query i sees keys 0..i (top-left aligned, as SDPA)
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    elif attn_mask is not None:  # bool: True = attend; float: added to the scores
        scores = (scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    return torch.softmax(scores, dim=-1) @ v


def fused_attention(q, k, v, attn_mask=None, is_causal=False, scale=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale)


def random_qkv(batch, heads, seq, head_dim, dtype=torch.float32, device="cpu", seed=0):
    """Unit-normal Q, K, V of shape (batch, heads, seq, head_dim), drawn on ``device`` (no host copies)."""
    dev = check_device(device)
    gen = torch.Generator(device=dev).manual_seed(seed)
    shape = (batch, heads, seq, head_dim)
    return [torch.randn(shape, generator=gen, device=dev, dtype=dtype) for _ in range(3)]


def check_equal(q, k, v, attn_mask=None, is_causal=False, heads_checked: int = 2) -> dict:
    """Naive and fused outputs vs a float64 evaluation, on batch 0 and the first ``heads_checked`` heads."""
    sl = (slice(0, 1), slice(0, heads_checked))
    q, k, v = (t[sl] for t in (q, k, v))
    mask = attn_mask[sl] if attn_mask is not None and attn_mask.dim() == 4 else attn_mask  # else broadcast
    ref_mask = mask if mask is None or mask.dtype == torch.bool else mask.double()
    ref = naive_attention(q.double(), k.double(), v.double(), ref_mask, is_causal)
    naive = naive_attention(q, k, v, mask, is_causal).double()
    fused = fused_attention(q, k, v, mask, is_causal).double()
    tol = TOLERANCE[q.dtype] * ref.abs().max().item()
    out = {"dtype": str(q.dtype).replace("torch.", ""), "shape_checked": list(q.shape), "is_causal": is_causal,
           "mask": None if attn_mask is None else str(attn_mask.dtype), "tolerance": tol,
           "relative_tolerance": TOLERANCE[q.dtype], "reference_max_abs": ref.abs().max().item(),
           "naive_vs_float64": (naive - ref).abs().max().item(),
           "fused_vs_float64": (fused - ref).abs().max().item(),
           "naive_vs_fused": (naive - fused).abs().max().item()}
    out["ok"] = out["naive_vs_float64"] <= tol and out["fused_vs_float64"] <= tol
    return out


def _profiled_peak_bytes(prof) -> int | None:
    """Peak of the running sum of the profiler's allocation records (CPU tensors), or None if absent."""
    try:
        from torch._C._profiler import _EventType  # the record type torch.profiler's memory timeline reads
    except ImportError:
        return None
    allocs = []

    def walk(events):
        for e in events:
            if e.tag == _EventType.Allocation and e.extra_fields.device.type == "cpu":
                allocs.append((e.start_time_ns, e.extra_fields.alloc_size))
            walk(e.children)

    walk(prof.profiler.kineto_results.experimental_event_tree())
    if not allocs:
        return None
    total = peak = 0
    for _, size in sorted(allocs, key=lambda a: a[0]):
        total += size
        peak = max(peak, total)
    return peak


def peak_memory(fn, device) -> tuple[int | None, str]:
    """Extra bytes at the peak of one call of ``fn`` on ``device``, and how they were measured."""
    dev = check_device(device)
    if dev.type == "cuda":
        synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        out = fn()
        synchronize(dev)
        peak = torch.cuda.max_memory_allocated(dev) - before
        del out
        return peak, MEMORY_METHOD["cuda"]
    with quiet_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    del out
    return _profiled_peak_bytes(prof), MEMORY_METHOD["cpu"]


def profile_call(fn, device, row_limit: int = 10) -> dict:
    """A torch.profiler table of one call (after one unprofiled call), its top ops, and the SDPA backend."""
    dev = check_device(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    fn()
    synchronize(dev)
    with quiet_profile(activities=activities, profile_memory=True, record_shapes=True) as prof:
        fn()
        synchronize(dev)
    from torch.autograd import DeviceType

    cuda = dev.type == "cuda"
    sort = "self_device_time_total" if cuda else "self_cpu_time_total"
    averages = [e for e in prof.key_averages() if not is_bookkeeping(e)]
    ops = [e for e in averages if e.device_type == DeviceType.CPU]  # ATen ops (CUDA: their kernels' time)
    kernels = [e for e in averages
               if e.device_type != DeviceType.CPU and not getattr(e, "is_user_annotation", False)]

    def rows(events):
        return [{"name": e.key, "calls": e.count, "self_cpu_us": e.self_cpu_time_total,
                 "self_device_us": getattr(e, "self_device_time_total", 0),
                 "self_cpu_mem_bytes": e.self_cpu_memory_usage,
                 "self_device_mem_bytes": getattr(e, "self_device_memory_usage", 0)}
                for e in sorted(events, key=lambda e: getattr(e, sort, 0), reverse=True)[:row_limit]]

    names = {e.key for e in ops}
    return {"table": prof.key_averages().table(sort_by=sort, row_limit=row_limit), "sorted_by": sort, "top": rows(ops),
            "kernels": rows(kernels) if cuda else [],
            "backend": next((b for op, b in SDPA_OPS.items() if op in names), None),
            "total_self_cpu_us": sum(e.self_cpu_time_total for e in ops),
            "total_self_device_us": sum(getattr(e, "self_device_time_total", 0) for e in kernels)}


def measure(fn, device, repeats: int, warmup: int) -> dict:
    """Timing summary and peak memory of ``fn``; an out-of-memory error becomes a recorded reason."""
    try:
        timing = time_calls(fn, repeats, device, warmup).summary()
        peak, method = peak_memory(fn, device)
    except torch.OutOfMemoryError as err:
        _free(device)
        return {"status": "oom", "reason": f"out of memory: {clip(str(err).splitlines()[0], 200)}"}
    return {"status": "ok", "timing": timing, "peak_bytes": peak, "memory_method": method}


def _free(device) -> None:
    gc.collect()
    if check_device(device).type == "cuda":
        torch.cuda.empty_cache()


def _available_ram() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable"))
    except (OSError, StopIteration, ValueError):
        return None


def compare_backends(q, k, v, device, repeats: int, warmup: int, is_causal=False) -> list[dict]:
    """Each fused backend forced alone: its time, or why it cannot run these inputs."""
    rows = []
    for name, backend in BACKENDS.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # SDPA explains each rejected backend in a UserWarning
            try:
                with sdpa_kernel([backend]):
                    fn = partial(fused_attention, q, k, v, is_causal=is_causal)
                    out = fn()
                    row = {"backend": name, **measure(fn, device, repeats, warmup)}
                    row["max_abs_diff_vs_naive"] = None
                    if row["status"] == "ok":  # against naive in float32 on the first head only
                        ref = naive_attention(*(t[:1, :1].float() for t in (q, k, v)), is_causal=is_causal)
                        row["max_abs_diff_vs_naive"] = (out[:1, :1].float() - ref).abs().max().item()
                    del out
            except RuntimeError as err:
                why = [clip(str(w.message), 300) for w in caught]
                if check_device(device).type == "cpu" and name not in CPU_BACKENDS:
                    why.insert(0, "no CPU kernel (PyTorch's CPU SDPA has flash and math only)")
                row = {"backend": name, "status": "unavailable",
                       "reason": "; ".join([*why, "torch: " + clip(str(err).splitlines()[0], 200)])}
        rows.append(row)
        _free(device)
    return rows


def sweep(device, batch, heads, head_dim, dtype, seqs, repeats, warmup, is_causal=False, log=print) -> list[dict]:
    """Time and peak memory of naive and fused attention at each sequence length."""
    dev = check_device(device)
    rows = []
    for seq in seqs:
        q, k, v = random_qkv(batch, heads, seq, head_dim, dtype, dev, seed=seq)
        matrix = batch * heads * seq * seq * q.element_size()
        row = {"seq": seq, "attention_matrix_bytes": matrix}
        ram = _available_ram() if dev.type == "cpu" else None
        for name, impl in (("naive", naive_attention), ("fused", fused_attention)):
            if name == "naive" and ram is not None and 3 * matrix > 0.7 * ram:  # an OOM kill is not catchable
                row[name] = {"status": "skipped", "reason": f"needs ~{3 * matrix / 2**30:.1f} GiB, "
                                                             f"{ram / 2**30:.1f} GiB available"}
                continue
            row[name] = measure(partial(impl, q, k, v, is_causal=is_causal), dev, repeats, warmup)
            _free(dev)
        if row["naive"]["status"] == "ok" and row["fused"]["status"] == "ok":
            row["max_abs_diff"] = (naive_attention(q, k, v, is_causal=is_causal).float()
                                   - fused_attention(q, k, v, is_causal=is_causal).float()).abs().max().item()
        log(f"[sdpa {dev.type}] seq {seq}: " + ", ".join(
            f"{n} {1e3 * row[n]['timing']['steady_median_s']:.2f} ms" if row[n]["status"] == "ok"
            else f"{n} {row[n]['status']}" for n in ("naive", "fused")))
        rows.append(row)
        del q, k, v
        _free(dev)
    return rows


def run_study(settings: dict, device: str, log=print) -> dict:
    """Equality checks, profiles, backends (at ``sdpa_profile_seq``) and the sequence sweep on ``device``."""
    dev = check_device(device)
    get = lambda key: per_device(settings[key], dev.type)  # noqa: E731
    load = [os.getloadavg()]  # a busy machine distorts CPU timings: recorded with them
    dtype = check_dtype(get("sdpa_dtype"))
    shape = dict(batch=get("sdpa_batch"), heads=get("sdpa_heads"), head_dim=get("sdpa_head_dim"))
    reps = dict(repeats=get("sdpa_repeats"), warmup=get("sdpa_warmup"))
    causal = bool(get("sdpa_causal"))
    seq = get("sdpa_profile_seq")
    q, k, v = random_qkv(seq=seq, dtype=dtype, device=dev, seed=settings.get("seed", 0), **shape)
    mask = torch.rand(seq, seq, generator=torch.Generator().manual_seed(1)).gt(0.2).to(dev)
    mask.fill_diagonal_(True)  # every query keeps at least one key
    checks = [check_equal(q, k, v), check_equal(q, k, v, is_causal=True), check_equal(q, k, v, attn_mask=mask)]
    del mask
    profiles = {"naive": profile_call(partial(naive_attention, q, k, v, is_causal=causal), dev),
                "fused": profile_call(partial(fused_attention, q, k, v, is_causal=causal), dev)}
    _free(dev)
    backends = compare_backends(q, k, v, dev, is_causal=causal, **reps)
    del q, k, v
    _free(dev)
    rows = sweep(dev, dtype=dtype, seqs=get("sdpa_seqs"), is_causal=causal, log=log, **shape, **reps)
    load.append(os.getloadavg())
    return {"device": dev.type, "device_name": device_label(dev), "torch": torch.__version__,
            "dtype": str(dtype).replace("torch.", ""), **shape, "is_causal": causal, "profile_seq": seq,
            "memory_method": MEMORY_METHOD[dev.type], "checks": checks, "profiles": profiles,
            "default_backend": profiles["fused"]["backend"], "backends": backends, "sweep": rows,
            "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "loadavg_1_5_15": load}


def sweep_rows(study: dict) -> list[dict]:
    rows = []
    for r in study["sweep"]:
        row = {"seq": r["seq"], "attn matrix (MiB)": r["attention_matrix_bytes"] / 2**20}
        for n in ("naive", "fused"):
            m = r[n]
            ok = m["status"] == "ok"
            row[f"{n} (ms)"] = 1e3 * m["timing"]["steady_median_s"] if ok else m["status"]
            row[f"{n} peak (MiB)"] = (m["peak_bytes"] / 2**20 if ok and m["peak_bytes"] is not None
                                      else "n/a")
        row["speedup"] = (r["naive"]["timing"]["steady_median_s"] / r["fused"]["timing"]["steady_median_s"]
                          if r["naive"]["status"] == r["fused"]["status"] == "ok" else "n/a")
        rows.append(row)
    return rows


def backend_rows(study: dict) -> list[dict]:
    return [{"backend": b["backend"], "status": b["status"],
             "time (ms)": 1e3 * b["timing"]["steady_median_s"] if b["status"] == "ok" else "-",
             "peak (MiB)": b["peak_bytes"] / 2**20 if b["status"] == "ok" and b["peak_bytes"] is not None else "-",
             "reason": clip(b.get("reason", ""), 160)} for b in study["backends"]]


def profile_rows(study: dict, which: str, part: str = "top") -> list[dict]:
    """The top ops (``part="top"``) or, on CUDA, kernels (``"kernels"``) of the ``which`` profile."""
    cuda = study["device"] == "cuda"
    return [{"op" if part == "top" else "kernel": r["name"][:90], "calls": r["calls"],
             **({"self CPU (ms)": r["self_cpu_us"] / 1e3} if part == "top" else {}),
             **({"self CUDA (ms)": r["self_device_us"] / 1e3} if cuda else {}),
             **({"self mem (MiB)": (r["self_device_mem_bytes"] if cuda else r["self_cpu_mem_bytes"]) / 2**20}
                if part == "top" else {})}
            for r in study["profiles"][which].get(part, [])
            if r["name"] not in PROFILER_BOOKKEEPING]  # results stored before labkit left them out


def sweep_point(study: dict | None, seq: int) -> dict | None:
    return next((r for r in (study or {}).get("sweep", []) if r["seq"] == seq), None)
