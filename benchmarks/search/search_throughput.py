"""Search throughput: Lab 2 trials per minute and GPU busy fraction for 1, 2, 4, 8 ... trial workers,
beside the serial loop labkit had before (collating DataLoader with 4 loader processes, a host sync and
a progress update every step, non-fused AdamW), measured in one run.

Every configuration trains the same architectures (a fixed random sample of the Lab 2 space, queued in
order; a configuration with W workers runs the list ceil(per_worker * W / len) times so every worker has
work), with the result cache off. ``--graphs on,off``: the training and evaluation steps as CUDA graphs
(labkit.training.cuda_graphs, labels "graphs, W worker(s)") and/or the eager loop (labels "lean, W worker(s)"). Rates: ``sustained`` = trials / (last finish - first start), i.e. with workers warm;
``wall`` also counts worker start-up (imports, data loading); ``steady`` only the window where every worker is busy
(``steady_rate``), the rate a long search runs at. The serial baseline is timed on the first
``--serial-trials`` architectures and compared with the 1-worker lean loop on the same ones.

    python benchmarks/search/search_throughput.py [--profile full|quick] [--workers 1,2,4,8] [--mps 8]
        [--serial-trials 4] [--archs 8] [--graphs on,off] [--per-worker 2] [--seeds 1] [--out benchmarks/search/search_throughput.json]
    python benchmarks/search/search_throughput.py --compare-accuracy "NEW ROW" "OLD ROW" [--out ...]

``--seeds K`` trains every architecture with K training seeds (one study each), so a row records each
architecture's accuracy per seed; ``--compare-accuracy`` then reads two such rows (e.g. a setting on and off, the
label's note from ``LABKIT_BENCH_LABEL``) as the labs read a difference: paired per seed, with seed and test-set SE.

Each configuration's numbers are written to ``--out`` as soon as it ends (``--resume`` keeps those
already there), so a run cut short keeps what it measured. At the end every configuration gets its roofline: the
FLOPs its trials did (labkit.perf.flops, counted from the seeded epoch's batch shapes) per second, against the
card's dense bf16 peak; the file's ``roofline`` holds each architecture's trial FLOPs and the rate the peak allows.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from unittest import mock

import numpy as np
import optuna
import torch

from labkit import recipes
from labkit.perf import flops
from labkit.perf.timing import timed
from labkit.training import cuda_graphs, train
from labkit.run.profiles import lab_settings
from labkit.results import provenance, write_json
from labkit.search import StudyPlan, run_studies
from labkit.search.storage import WORKER_ATTR
from labkit.labs.lab2_space import build_model, sample_architecture

optuna.logging.set_verbosity(optuna.logging.WARNING)


class BusySampler:
    """GPU utilisation (% of time a kernel ran) sampled every ``interval`` s through NVML."""

    def __init__(self, interval: float = 0.2):
        self.samples, self.interval, self._stop = [], interval, threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self._nvml = pynvml
        except Exception:  # no NVML (CPU machine): no busy fraction
            self._nvml = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _cpu_times() -> tuple[int, int] | None:
        """(busy, total) jiffies of all cores from /proc/stat (None elsewhere)."""
        try:
            with open("/proc/stat") as fh:
                v = [int(x) for x in fh.readline().split()[1:]]
        except OSError:
            return None
        idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
        return sum(v) - idle, sum(v)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append([self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles])
            time.sleep(self.interval)

    def __enter__(self):
        self._cpu0 = self._cpu_times()
        if self._nvml:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        cpu1 = self._cpu_times()
        self.cpu = ((cpu1[0] - self._cpu0[0]) / max(1, cpu1[1] - self._cpu0[1])
                    if cpu1 and self._cpu0 else None)  # share of all cores' time spent busy
        self._stop.set()
        if self._nvml:
            self._thread.join()

    def busy(self) -> float | None:
        return float(np.mean(self.samples)) / 100 if self.samples else None


def architectures(n: int, space, seed: int = 0) -> list[dict]:
    """``n`` Lab 2 architectures (full parameter dicts) drawn at random from ``space``."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    while len(out) < n:
        trial = study.ask()
        try:
            sample_architecture(trial, True, space)
        except optuna.TrialPruned:
            continue
        out.append(dict(trial.params))
    return out


def legacy_train(model, loader, epochs, lr, device):
    """labkit's training loop before the lean loop, kept here as the baseline (the "serial (old loop)" row)."""
    from tqdm.auto import tqdm

    train.seed_everything(0)
    loader.generator.manual_seed(0)
    model.to(device).train()
    total = max(1, round(len(loader) * epochs))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: max(0.0, 1 - step / total))
    losses, step = [], 0
    bar = tqdm(total=total, disable=True)
    while step < total:
        for batch in loader:
            with train.autocast(device):
                loss = model(**{k: v.to(device, non_blocking=True) for k, v in batch.items()}).loss
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())  # a host sync every step
            step += 1
            bar.update()
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
            if step >= total:
                break


@torch.no_grad()
def legacy_evaluate(model, loader, device):
    model.to(device).eval()
    correct = seen = 0
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        with train.autocast(device):
            out = model(**batch)
        correct += (out.logits.argmax(-1) == batch["labels"]).sum().item()
        seen += batch["labels"].numel()
    return correct / seen


def serial_baseline(s: dict, archs: list[dict]) -> dict:
    dl = recipes.loaders(s, lean=False)
    dev = train.pick_device(s["device"])
    seconds = []
    with BusySampler() as busy:
        for params in archs:
            def one(params=params):
                torch.manual_seed(s["seed"])
                model = build_model(_arch(params))
                legacy_train(model, dl.train, s["epochs"], s["lr"], dev)
                legacy_evaluate(model, dl.test, dev)

            seconds.append(timed(one, dev)[0])
    return {"config": "serial (old loop)", "workers": 1, "trials": len(archs), "trial_seconds": seconds,
            "trials_per_min_sustained": 60 * len(seconds) / sum(seconds), "gpu_busy": busy.busy()}


def _arch(params: dict) -> dict:
    sizes = {k: v for k, v in params.items() if "." not in k}
    return {"config": sizes, "linears": {k: v for k, v in params.items() if "." in k}}


def steady_rate(runs: list[tuple]) -> dict:
    """Trials per minute while every worker is busy: ``runs`` = (worker, start, end) per trial (seconds or
    datetimes). The window opens when the last worker starts its first trial and closes when the first worker
    ends its last one; the rate counts the trials that end inside it. ``sustained`` also counts the ramps at
    either end, where workers are still starting or already done: a run of few trials per worker reads low there.
    None where the window holds fewer trials than there are workers (too short to read)."""
    if not runs:
        return {"trials_per_min_steady": None, "steady_seconds": 0.0, "steady_trials": 0}
    first, last = {}, {}
    for worker, start, end in runs:
        first[worker] = min(first.get(worker, start), start)
        last[worker] = max(last.get(worker, end), end)
    opens, closes = max(first.values()), min(last.values())
    span = closes - opens
    seconds = span.total_seconds() if hasattr(span, "total_seconds") else float(span)
    inside = sum(1 for _, _, end in runs if opens < end <= closes)
    rate = 60 * inside / seconds if seconds > 0 and inside >= len(first) else None
    return {"trials_per_min_steady": rate, "steady_seconds": max(seconds, 0.0), "steady_trials": inside}


def lean_config(s: dict, archs: list[dict], workers: int, mps: bool, folder: Path, graphs: bool = True,
                per_worker: int = 2, seeds: int = 1) -> dict:
    """One configuration's row. ``seeds`` > 1: the architectures train with that many training seeds (settings'
    ``seed``, ``seed + 1``, ...; one study each), so the row holds each architecture's accuracy per seed."""
    reps = max(1, math.ceil(per_worker * workers / (len(archs) * seeds)))
    queue = archs * reps
    name = f"bench-w{workers}{'-mps' if mps else ''}{'' if graphs else '-eager'}"
    plans = [StudyPlan(name=name + (f"-s{k}" if seeds > 1 else ""), objective="lab2",
                       settings={**s, "seed": s["seed"] + k}, options={"use_cache": False}, sampler="random",
                       seed=0, n_trials=len(queue), enqueue=queue) for k in range(seeds)]
    url = f"journal:{folder / (name + '.journal')}"
    start = time.time()
    with BusySampler() as busy:
        studies = run_studies(plans, storage=url, workers=workers, progress="lines", mps=mps, log_dir=folder / name)
    wall = time.time() - start
    by_seed = {plan.settings["seed"]: [t for t in studies[plan.name].get_trials(deepcopy=False)
                                       if t.state.name == "COMPLETE"] for plan in plans}
    done = [t for ts in by_seed.values() for t in ts]
    first = min(t.datetime_start for t in done)
    last = max(t.datetime_complete for t in done)
    sustained = (last - first).total_seconds()
    per_arch = {}
    for t in done:
        per_arch.setdefault(str(queue.index(t.params) % len(archs)), []).append(t.user_attrs["trial_seconds"])
    failures = sorted({str(t.user_attrs.get("train_graphs", {}).get("graph_failure")) for t in done
                       if t.user_attrs.get("train_graphs", {}).get("graph_failure")})
    # where a trial's time goes: training, the rest of the objective (build, evaluation, bookkeeping) and what
    # runs outside the objective (the sampler's ask, the storage's writes, the cache lookup)
    phases = {"train_s": [t.user_attrs["train_seconds"] for t in done],
              "objective_rest_s": [t.user_attrs["trial_seconds"] - t.user_attrs["train_seconds"] for t in done],
              "outside_objective_s": [(t.datetime_complete - t.datetime_start).total_seconds()
                                      - t.user_attrs["trial_seconds"] for t in done]}
    return {"config": label(workers, mps, graphs), "workers": workers, "mps": mps, "cuda_graphs": graphs,
            "trial_phases_median": {k: statistics.median(v) for k, v in phases.items()},
            "graph_failures": failures, "trials": len(done), "wall_seconds": wall, "sustained_seconds": sustained,
            "trials_per_min_sustained": 60 * len(done) / sustained, "trials_per_min_wall": 60 * len(done) / wall,
            **steady_rate([((t.user_attrs.get(WORKER_ATTR) or {}).get("worker"), t.datetime_start, t.datetime_complete)
                           for t in done]),
            "gpu_busy": busy.busy(), "cpu_busy": busy.cpu, "trial_seconds_by_arch": per_arch,
            "gpu_peak_gib_max": max((t.user_attrs.get("gpu_peak_gib", 0.0) for t in done), default=None),
            # the SMs each worker saw (fewer under an MPS share): its kernels, and so its bits, follow that count
            "gpu_sm_counts": sorted({t.user_attrs["gpu_sm_count"] for t in done if "gpu_sm_count" in t.user_attrs}),
            "accuracy_by_arch": {str(queue.index(t.params) % len(archs)): t.value for t in by_seed[s["seed"]]},
            **({"accuracy_by_arch_seed": {str(a): {str(k): next(t.value for t in ts
                                                                 if queue.index(t.params) % len(archs) == a)
                                                   for k, ts in by_seed.items()} for a in range(len(archs))}}
               if seeds > 1 else {})}


def compare_accuracy(report: dict, new: str, old: str) -> dict:
    """Each architecture's accuracy in row ``new`` minus row ``old``, paired per training seed, judged as the
    labs judge a difference (``labkit.readings.stats.difference``: seed and test-set parts of its SE); both rows
    measured with ``--seeds``."""
    from labkit.readings import stats

    rows = {r["config"]: r for r in report["results"]}
    missing = [c for c in (new, old) if "accuracy_by_arch_seed" not in rows.get(c, {})]
    if missing:
        raise SystemExit(f"--compare-accuracy: no per-seed accuracies in row(s) {missing} (measure them with --seeds)")
    n = report["settings"].get("test_size") or 25_000
    out = {}
    for arch, accs in rows[new]["accuracy_by_arch_seed"].items():
        seeds = sorted(accs, key=int)
        d = stats.difference([accs[k] for k in seeds], [rows[old]["accuracy_by_arch_seed"][arch][k] for k in seeds], n)
        out[arch] = {"difference": d.mean, "se": d.se, "per_seed": list(d.per_seed), "verdict": d.verdict(),
                     "established": d.established}
        print(f"arch {arch}: {d.text()}")
    return {"new": new, "old": old, "n_test": n, "by_arch": out,
            "established": sorted(a for a, r in out.items() if r["established"])}


def trial_flops(s: dict, dl, archs: list[dict]) -> list[dict]:
    """Each architecture's FLOPs in one trial (labkit.perf.flops): training, forward and backward on every batch of
    the epoch that ``s["seed"]`` shuffles (``epochs`` times, exact for whole epochs), and the test set's evaluation."""
    train_shapes, test_shapes = dl.train.shapes(seed=s["seed"]), dl.test.shapes()
    out = []
    for params in archs:
        model = build_model(_arch(params), seed=s["seed"])
        step, forward = flops.per_length(model, train=True), flops.per_length(model, train=False)
        out.append({"train_flops": step.batches(train_shapes) * s["epochs"], "eval_flops": forward.batches(test_shapes)})
    return out


def roofline(row: dict, per_arch: list[dict]) -> dict:
    """The FLOPs a configuration's trials did, per second of its sustained wall time, against the card's peak."""
    if "trial_seconds_by_arch" in row:
        counts, seconds = {int(a): len(v) for a, v in row["trial_seconds_by_arch"].items()}, row["sustained_seconds"]
    else:  # the serial row: its trials one after the other, the first architectures once each
        counts, seconds = {i: 1 for i in range(row["trials"])}, sum(row["trial_seconds"])
    done = sum(n * (per_arch[a]["train_flops"] + per_arch[a]["eval_flops"]) for a, n in counts.items())
    return flops.roofline(done, seconds, row["provenance"]["device"])


def add_roofline(report: dict, s: dict, dl) -> None:
    """Roofline rows: each architecture's trial FLOPs and the trials per minute the card's peak would allow
    (``report["roofline"]``), and each measured configuration's achieved TFLOP/s (``row["roofline"]``)."""
    per_arch = trial_flops(s, dl, report["archs"])
    device = report["provenance"]["device"]
    mean = statistics.mean(a["train_flops"] + a["eval_flops"] for a in per_arch)
    peak = flops.peak_tflops(device)
    report["roofline"] = {"device": device, "peak_bf16_tflops": peak, "per_arch": per_arch, "mean_trial_flops": mean,
                          "trials_per_min_at_peak": 60 * peak * 1e12 / mean if peak else None,
                          "counted": "matrix products of the model (labkit.perf.flops: FlopCounterMode, attention as "
                                     "the math backend's products), forward and backward; no optimizer or elementwise"}
    for row in report["results"]:
        row["roofline"] = roofline(row, per_arch)


def label(workers: int, mps: bool, graphs: bool) -> str:
    """Eager configurations keep the label they had before CUDA graphs (earlier JSONs compare);
    ``LABKIT_BENCH_LABEL`` appends a note (e.g. the setting a run varies)."""
    note = os.environ.get("LABKIT_BENCH_LABEL", "")
    return f"{'graphs' if graphs else 'lean'}, {workers} worker(s)" + (" + MPS" if mps else "") + \
        (f" {note}" if note else "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="full" if torch.cuda.is_available() else "quick")
    parser.add_argument("--workers", default="1,2,4,8", help="comma-separated worker counts (lean loop)")
    parser.add_argument("--mps", default="", help="comma-separated worker counts to run under CUDA MPS too")
    parser.add_argument("--serial-trials", type=int, default=4, help="0 skips the old serial loop")
    parser.add_argument("--archs", type=int, default=8)
    parser.add_argument("--graphs", default="on", help="comma-separated: on (CUDA graphs), off (eager loop)")
    parser.add_argument("--per-worker", type=int, default=2, help="trials queued per worker (at least)")
    parser.add_argument("--seeds", type=int, default=1, help="training seeds per architecture (> 1: per-seed accuracy)")
    parser.add_argument("--compare-accuracy", nargs=2, metavar=("NEW", "OLD"),
                        help="measure nothing: two --seeds rows' accuracies per architecture, paired per seed")
    parser.add_argument("--commit", default=os.environ.get("LABKIT_COMMIT"), help="the code's git commit")
    parser.add_argument("--out", default="benchmarks/search/search_throughput.json")
    parser.add_argument("--resume", action="store_true", help="keep configurations already in --out")
    parser.add_argument("--roofline-only", action="store_true",
                        help="measure nothing: add the roofline rows to the configurations already in --out")
    args = parser.parse_args(argv)
    if args.compare_accuracy:
        out = Path(args.out)
        report = json.loads(out.read_text())
        report.setdefault("accuracy_comparisons", []).append(compare_accuracy(report, *args.compare_accuracy))
        write_json(out, report)
        return 0
    if args.roofline_only:
        out = Path(args.out)
        report = json.loads(out.read_text())
        add_roofline(report, report["settings"], recipes.loaders({**report["settings"], "device": "cpu"}))
        write_json(out, report)
        print_roofline(report)
        return 0

    s = lab_settings("lab2_search", args.profile)
    archs = architectures(args.archs, s["space"])
    out = Path(args.out)
    report = json.loads(out.read_text()) if args.resume and out.is_file() else {"results": []}
    if args.commit:
        os.environ["LABKIT_COMMIT"] = args.commit
    prov = provenance()
    if report.get("archs") not in (None, archs):
        raise SystemExit(f"--resume: {out} was measured on other architectures; start a new file")
    runs_before = report.get("runs", [])
    report.update({"benchmark": "search_throughput", "profile": args.profile, "settings": s, "archs": archs,
                   "runs": runs_before + [prov], "provenance": prov, "cpu_count": os.cpu_count()})
    have = {r["config"] for r in report["results"]}

    def save(result):
        result["provenance"] = prov
        report["results"] = [r for r in report["results"] if r["config"] != result["config"]] + [result]
        write_json(out, report)
        print(f"{result['config']}: {result['trials_per_min_sustained']:.2f} trials/min sustained"
              + (f", {result['trials_per_min_wall']:.2f} with start-up" if "trials_per_min_wall" in result else "")
              + (f", {result['trials_per_min_steady']:.2f} steady (every worker busy, {result['steady_seconds']:.0f} s)"
                 if result.get("trials_per_min_steady") else "")
              + (f", GPU busy {result['gpu_busy']:.0%}" if result.get("gpu_busy") is not None else "")
              + (f", CPU busy {result['cpu_busy']:.0%}" if result.get("cpu_busy") is not None else "")
              + (f", peak {result['gpu_peak_gib_max']:.2f} GiB reserved by a trial" if result.get("gpu_peak_gib_max")
                 else ""), flush=True)

    dl = recipes.loaders(s)  # tokenise once here, so workers read the datasets cache; the roofline counts its batches
    if args.serial_trials and "serial (old loop)" not in have:
        save(serial_baseline(s, archs[: args.serial_trials]))
    with tempfile.TemporaryDirectory() as tmp:
        modes = [{"on": True, "off": False}[g] for g in args.graphs.split(",") if g]
        runs = [(int(w), False, g) for g in modes for w in args.workers.split(",") if w] + \
               [(int(w), True, g) for g in modes for w in args.mps.split(",") if w]
        for workers, mps, graphs in runs:
            if label(workers, mps, graphs) in have:
                continue
            if graphs and not torch.cuda.is_available():
                print(f"{label(workers, mps, graphs)}: not measured: no CUDA device (graphs are CUDA graphs)")
                continue
            try:
                # the workers inherit the switch; the launcher's own setting is put back afterwards
                with mock.patch.dict(os.environ, {cuda_graphs.ENV: "1" if graphs else "0"}):
                    save(lean_config(s, archs, workers, mps, Path(tmp), graphs, args.per_worker, args.seeds))
            except RuntimeError as err:  # e.g. no MPS control binary: report, measure the rest
                print(f"{label(workers, mps, graphs)}: not measured: {err}", flush=True)

    add_roofline(report, s, dl)
    write_json(out, report)
    print_roofline(report)
    rows = report["results"]
    serial = next((r for r in rows if r["config"] == "serial (old loop)"), None)
    one = next((r for r in rows if r["config"] in ("graphs, 1 worker(s)", "lean, 1 worker(s)")), None)
    print(f"\nLab 2 {args.profile} profile on {prov['device']}, torch {torch.__version__}, {os.cpu_count()} CPUs")
    print(f"{'config':28s} {'trials/min':>10s} {'x serial':>9s} {'GPU busy':>9s}")
    for r in rows:
        ratio = r["trials_per_min_sustained"] / serial["trials_per_min_sustained"] if serial else float("nan")
        busy = f"{r['gpu_busy']:.0%}" if r.get("gpu_busy") is not None else "-"
        print(f"{r['config']:28s} {r['trials_per_min_sustained']:10.2f} {ratio:9.2f} {busy:>9s}")
    if serial and one:
        same = [statistics.median(one["trial_seconds_by_arch"][str(i)]) for i in range(len(serial["trial_seconds"]))]
        print(f"same architectures, one process: old loop {sum(serial['trial_seconds']):.1f} s, {one['config']} "
              f"{sum(same):.1f} s ({sum(serial['trial_seconds']) / sum(same):.2f}x)")
    return 0


def print_roofline(report: dict) -> None:
    r = report["roofline"]
    ceiling = (f"at the {r['device']}'s bf16 peak ({r['peak_bf16_tflops']} TFLOP/s) {r['trials_per_min_at_peak']:.0f} "
               "trials/min" if r["peak_bf16_tflops"] else f"no bf16 peak known for {r['device']}")
    print(f"a trial: {r['mean_trial_flops'] / 1e12:.3f} TFLOP on average; {ceiling}")
    for row in report["results"]:
        f = row["roofline"]
        share = f" = {f['share_of_peak']:.2%} of peak" if f["share_of_peak"] is not None else ""
        print(f"{row['config']:28s} {f['achieved_tflops']:7.3f} TFLOP/s{share}")


if __name__ == "__main__":
    sys.exit(main())
