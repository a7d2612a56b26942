"""torch.compile on ResNet-18: eager vs compiled per call, the cost of compiling, and when it pays off.

Every variant (eager, or one ``torch.compile`` backend/mode) runs in its own subprocess
(``labkit/perf/_compile_worker.py``) with a fresh Inductor/Triton cache, so its first call is a cold
compile, as on a student's first run, and with a time budget: a worker that overruns is killed (its
whole process group: Inductor's compile workers too) and the overrun is reported, never a hang.

The model is ``labkit.models.resnet18()`` with **random weights** (the timing does not depend on them);
the input is a batch of random images. A ``state`` is the module mode and grad mode the calls run in:
the lab sheet calls a freshly built model (train mode) without ``torch.no_grad()``: ``train+grad``.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..report import clip
from .timing import DEVICE_TYPES, Timing, break_even_calls, check_device, is_bookkeeping, within_noise

# name -> torch.compile keyword arguments (None: the model itself, uncompiled)
VARIANTS: dict[str, dict | None] = {
    "eager": None,
    "aot_eager": {"backend": "aot_eager"},        # graph capture (Dynamo + AOTAutograd) without code generation
    "inductor": {"backend": "inductor"},          # torch.compile's default
    "max-autotune": {"backend": "inductor", "mode": "max-autotune"},
    "reduce-overhead": {"backend": "inductor", "mode": "reduce-overhead"},  # Inductor code in CUDA graphs
    "cudagraphs": {"backend": "cudagraphs"},      # eager ATen kernels replayed from CUDA graphs
}
CUDA_ONLY = ("reduce-overhead", "cudagraphs")  # CUDA graphs: nothing to capture on a CPU
# state -> (module.train(...), torch.set_grad_enabled(...))
STATES = {"train+grad": (True, True), "train+no_grad": (True, False),
          "eval+grad": (False, True), "eval+no_grad": (False, False)}
SHEET_STATE, SHEET_CALLS = "train+grad", 5  # the sheet: a fresh model, grad on, 5 calls averaged


def per_device(value, device: str):
    """A setting that is either one value or ``{"cpu": ..., "cuda": ...}`` (a dict keyed by device types)."""
    if isinstance(value, dict) and value and set(value) <= set(DEVICE_TYPES):
        if device not in value:
            raise KeyError(f"no value for device {device!r} in {value}; allowed keys: {DEVICE_TYPES}")
        return value[device]
    return value


def check_variant(name: str) -> str:
    if name not in VARIANTS:
        raise KeyError(f"unknown compile variant {name!r}; allowed: {', '.join(VARIANTS)}")
    return name


def check_state(name: str) -> str:
    if name not in STATES:
        raise KeyError(f"unknown state {name!r}; allowed: {', '.join(STATES)}")
    return name


def check_states(names: list[str]) -> list[str]:
    return [check_state(n) for n in names]


def check_variants(variants: dict[str, list[str]]) -> dict[str, list[str]]:
    """``{variant: [state, ...]}`` with every variant and state checked."""
    return {check_variant(v): check_states(states) for v, states in variants.items()}


# profiler op name fragment -> category, first match wins (eager ATen ops and compiled regions alike)
OP_CATEGORIES = (("CompiledFxGraph", "compiled region"), ("CompiledFunction", "compiled region"),
                 ("conv", "convolution"), ("batch_norm", "batch norm"), ("mm", "matmul (fc)"),
                 ("linear", "matmul (fc)"), ("relu", "ReLU / add"), ("clamp", "ReLU / add"),
                 ("threshold", "ReLU / add"), ("add", "ReLU / add"), ("pool", "pooling"))


def op_shares(prof, device: str) -> dict:
    """Seconds of self time per category in one profiled call (CPU: host self time; CUDA: kernel time,
    each kernel counted once through the op or compiled region that launched it)."""
    from torch.autograd import DeviceType

    cuda = device == "cuda"
    shares: dict[str, float] = {}
    for e in prof.key_averages():
        if e.device_type != DeviceType.CPU or is_bookkeeping(e):  # kernels: counted via their launcher
            continue
        t = (getattr(e, "self_device_time_total", 0) if cuda else e.self_cpu_time_total) / 1e6
        if t > 0:
            cat = next((c for frag, c in OP_CATEGORIES if frag in e.key), "other")
            shares[cat] = shares.get(cat, 0.0) + t
    return {"seconds": shares, "total_s": sum(shares.values()), "clock": "cuda kernels" if cuda else "cpu self"}


@dataclass
class Job:
    """One worker: ``variant`` timed in each of ``states`` (plus eager first when ``baseline``)."""

    variant: str
    states: list[str]
    device: str
    batch: int
    image: int
    repeats: int
    warmup: int
    timeout_s: float
    seed: int = 0
    baseline: bool = False
    cold_cache: bool = True
    threads: int = field(default_factory=torch.get_num_threads)  # the caller's, so workers match it

    def __post_init__(self):
        check_variant(self.variant)
        for s in self.states:
            check_state(s)
        check_device(self.device)

    def expected(self) -> list[tuple[str, str]]:
        variants = (["eager"] if self.baseline and self.variant != "eager" else []) + [self.variant]
        return [(v, s) for v in variants for s in self.states]


def plan(settings: dict, device: str) -> tuple[list[Job], list[dict]]:
    """The workers a study runs on ``device``, and the (variant, state) pairs skipped with their reason."""
    dev = check_device(device).type
    get = lambda key: per_device(settings[key], dev)  # noqa: E731
    common = dict(device=dev, repeats=get("compile_repeats"), warmup=get("compile_warmup"),
                  seed=settings.get("seed", 0), cold_cache=get("compile_cold_cache"),
                  threads=settings.get("threads") or torch.get_num_threads())
    jobs, skipped = [], []
    variants = get("compile_variants")
    for name, states in variants.items():
        check_variant(name)
        states = [check_state(s) for s in states]
        if name in CUDA_ONLY and dev != "cuda":
            skipped += [{"variant": name, "state": s, "status": "skipped",
                         "reason": "CUDA graphs need a CUDA device"} for s in states]
            continue
        jobs.append(Job(name, states, batch=get("compile_batch"), image=get("compile_image"),
                        timeout_s=get("compile_timeout_s"), **common))
    small = get("small_variant")
    if small:  # max-autotune: its own smaller size and budget, with an eager baseline in the same worker
        jobs.append(Job(check_variant(small), [check_state(s) for s in get("small_states")],
                        batch=get("small_batch"), image=get("small_image"), timeout_s=get("small_timeout_s"),
                        baseline=True, **common))
    return jobs, skipped


def run_job(job: Job) -> tuple[list[dict], dict]:
    """Run one worker under its budget; one record per expected (variant, state), and the worker's meta."""
    with tempfile.TemporaryDirectory(prefix="labkit-compile-", ignore_cleanup_errors=True) as tmp:
        tmp = Path(tmp)
        spec, out, log = tmp / "job.json", tmp / "results.jsonl", tmp / "worker.log"
        spec.write_text(json.dumps(asdict(job)))
        env = dict(os.environ)
        if job.cold_cache:  # a private, empty cache: the first call is a cold compile
            env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp / "inductor")
            env["TRITON_CACHE_DIR"] = str(tmp / "triton")
        cmd = [sys.executable, "-m", "labkit.perf._compile_worker", str(spec), str(out)]
        start = time.perf_counter()
        with open(log, "w") as logf:
            # own session: on timeout the whole group (Inductor's compile-worker pool too) is killed
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                rc = proc.wait(timeout=job.timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = None
        elapsed = time.perf_counter() - start
        lines = [json.loads(line) for line in out.read_text().splitlines()] if out.is_file() else []
        tail = log.read_text(errors="replace").strip().splitlines()[-12:] if log.is_file() else []
    meta = next((r for r in lines if r.get("kind") == "meta"), {})
    done = {(r["variant"], r["state"]): r for r in lines if r.get("kind") == "result"}
    records = []
    for variant, state in job.expected():
        if (variant, state) in done:
            records.append(done[(variant, state)])
            continue
        if rc is None:
            reason = (f"did not finish within its {job.timeout_s:.0f} s budget (worker killed after "
                      f"{elapsed:.0f} s, start-up and earlier states included)")
            status = "timeout"
        else:
            reason = f"worker exited with code {rc}: " + " | ".join(tail)[-1500:]
            status = "error"
        records.append({"kind": "result", "variant": variant, "state": state, "status": status,
                        "reason": reason, "batch": job.batch, "image": job.image})
    for r in records:
        r["worker_seconds"] = elapsed
        r["budget_s"] = job.timeout_s
    return records, meta


def compare(runs: list[dict]) -> list[dict]:
    """Each finished compiled run against eager in the same state at the same size."""
    eager = {(r["state"], r["batch"], r["image"]): r for r in runs
             if r["variant"] == "eager" and r.get("status") == "ok"}
    rows = []
    for r in runs:
        if r["variant"] == "eager" or r.get("status") != "ok":
            continue
        e = eager.get((r["state"], r["batch"], r["image"]))
        if e is None:
            continue
        tc, te = Timing.from_summary(r["timing"]), Timing.from_summary(e["timing"])
        # cumulative cost ~ startup_excess + n * steady for both; they cross after this many calls
        overhead = tc.startup_excess - te.startup_excess
        n_sheet = min(SHEET_CALLS, len(tc.per_call), len(te.per_call))
        rows.append({
            "variant": r["variant"], "state": r["state"], "batch": r["batch"], "image": r["image"],
            "eager_first_s": te.first, "compiled_first_s": tc.first,
            "eager_steady_s": te.steady_median, "compiled_steady_s": tc.steady_median,
            "steady_speedup": te.steady_median / tc.steady_median,
            "compile_overhead_s": overhead,
            "break_even_calls": break_even_calls(overhead, te.steady_median, tc.steady_median),
            "sheet_calls": n_sheet, "eager_sheet_mean_s": te.mean_of_first(n_sheet),
            "compiled_sheet_mean_s": tc.mean_of_first(n_sheet),
            "sheet_speedup": te.mean_of_first(n_sheet) / tc.mean_of_first(n_sheet),
            "max_abs_diff_vs_eager": r.get("max_abs_diff_vs_eager")})
    return rows


def run_study(settings: dict, device: str, log=print) -> dict:
    """Every planned worker on ``device``; the runs, the comparisons against eager, and provenance."""
    dev = check_device(device).type
    jobs, runs = plan(settings, dev)
    meta, load = {}, [os.getloadavg()]
    for job in jobs:
        log(f"[compile {dev}] {job.variant} {job.states} batch {job.batch} image {job.image}, "
            f"budget {job.timeout_s:.0f} s ...")
        records, m = run_job(job)
        meta = meta or m
        for r in records:
            extra = (f"first {r['timing']['first_s']:.3f} s, steady median {r['timing']['steady_median_s']:.4f} s"
                     if r.get("status") == "ok" else clip(r["reason"], 300))
            log(f"    {r['variant']:15s} {r['state']:14s} {r['status']}: {extra}")
        runs += records
        load.append(os.getloadavg())
    return {"device": dev, "device_name": meta.get("device_name"), "model_source": meta.get("model_source"),
            "weights": "random (timing does not depend on the values)", "threads": meta.get("threads"),
            "torch": meta.get("torch"), "tf32": meta.get("tf32"), "cold_cache": jobs[0].cold_cache if jobs else None,
            "cpu_count": os.cpu_count(), "loadavg_1_5_15": load, "runs": runs, "comparisons": compare(runs)}


def get_run(study: dict | None, variant: str, state: str) -> dict | None:
    """The run of ``variant`` in ``state`` (the first one: the main size before the small one)."""
    return next((r for r in (study or {}).get("runs", []) if r["variant"] == variant and r["state"] == state),
                None)


def get_comparison(study: dict | None, variant: str, state: str) -> dict | None:
    return next((c for c in (study or {}).get("comparisons", [])
                 if c["variant"] == variant and c["state"] == state), None)


def share(run: dict | None, *categories: str) -> float | None:
    """Fraction of a run's profiled time in ``categories`` (see ``OP_CATEGORIES``), None if unknown."""
    shares = (run or {}).get("op_shares") or {}
    if not shares.get("total_s"):
        return None
    return sum(shares["seconds"].get(c, 0.0) for c in categories) / shares["total_s"]


def summary_rows(study: dict) -> list[dict]:
    """One row per run, for ``labkit.report.table`` (runs that did not finish last, with their reason)."""
    rows = []
    for r in sorted(study["runs"], key=lambda r: r["status"] != "ok"):
        row = {"variant": r["variant"], "state": r["state"], "batch": r.get("batch", ""), "status": r["status"],
               "first (s)": "", "steady median (ms)": "", "IQR (ms)": "", "min-max (ms)": "", "calls": "",
               "reason": clip(r.get("reason", ""), 160)}
        if r["status"] == "ok":
            t = r["timing"]
            row.update({"first (s)": t["first_s"], "steady median (ms)": 1e3 * t["steady_median_s"],
                        "IQR (ms)": 1e3 * (t["steady_q75_s"] - t["steady_q25_s"]),
                        "min-max (ms)": f"{1e3 * t['steady_min_s']:.1f}-{1e3 * t['steady_max_s']:.1f}",
                        "calls": t["calls"]})
        rows.append(row)
    return rows


def share_rows(study: dict) -> list[dict]:
    """Per run, the percentage of one profiled steady call in each op category."""
    rows = []
    for r in study["runs"]:
        shares = r.get("op_shares") or {}
        if r["status"] != "ok" or not shares.get("total_s"):
            continue
        row = {"variant": r["variant"], "state": r["state"], "batch": r["batch"], "profiled (s)": shares["total_s"]}
        row.update({c: f"{100 * t / shares['total_s']:.0f}%" for c, t in sorted(shares["seconds"].items())})
        rows.append(row)
    cats = sorted({k for row in rows for k in row} - {"variant", "state", "batch", "profiled (s)"})
    return [{**{k: row.get(k, "") for k in ("variant", "state", "batch", "profiled (s)")},
             **{c: row.get(c, "0%") for c in cats}} for row in rows]


def comparison_rows(study: dict) -> list[dict]:
    rows = []
    for c in study["comparisons"]:
        be = c["break_even_calls"]
        rows.append({"variant": c["variant"], "state": c["state"], "batch": c["batch"],
                     "steady speedup": c["steady_speedup"],
                     f"speedup, mean of first {c['sheet_calls']}": c["sheet_speedup"],
                     "compile overhead (s)": c["compile_overhead_s"],
                     "break-even calls": "never" if be is None or math.isinf(be) else f"{be:,.0f}",
                     "max |diff| vs eager": "n/a" if c["max_abs_diff_vs_eager"] is None
                     else f"{c['max_abs_diff_vs_eager']:.1e}"})
    return rows


def run_at(study: dict, variant: str, c: dict) -> dict:
    """The finished run of ``variant`` at comparison ``c``'s state and size."""
    return next(r for r in study["runs"] if r["variant"] == variant and r["status"] == "ok"
                and (r["state"], r.get("batch"), r.get("image")) == (c["state"], c["batch"], c["image"]))


def timings(study: dict, c: dict) -> tuple[dict, dict]:
    """The eager and compiled timings behind comparison ``c``."""
    return run_at(study, "eager", c)["timing"], run_at(study, c["variant"], c)["timing"]


def noisy(study: dict, c: dict) -> bool:
    """Whether comparison ``c``'s compiled and eager steady times are within noise of each other."""
    return within_noise(*timings(study, c))
