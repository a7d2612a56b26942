"""One compile-study worker: ``python -m labkit.perf._compile_worker JOB.json OUT.jsonl``.

Writes a ``meta`` line, then one ``result`` line per (variant, state) as soon as it is measured, so a
worker killed for overrunning its budget still leaves what it finished.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity

from .. import models
from .compile_study import STATES, VARIANTS, Job, op_shares
from .timing import check_device, device_label, quiet_profile, synchronize, time_calls


def _emit(out, record: dict) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def main(spec_path: str, out_path: str) -> None:
    job = Job(**json.loads(Path(spec_path).read_text()))
    torch.set_num_threads(job.threads)
    dev = check_device(job.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(job.seed)
    model, source = models.resnet18()
    model = model.to(dev)
    x = torch.randn(job.batch, 3, job.image, job.image, device=dev)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with open(out_path, "a") as out:
        _emit(out, {"kind": "meta", "model_source": source, "device_name": device_label(dev),
                    "threads": torch.get_num_threads(),
                    "torch": torch.__version__, "job": asdict(job),
                    "tf32": {"cudnn": torch.backends.cudnn.allow_tf32,
                             "matmul_precision": torch.get_float32_matmul_precision()} if cuda else None})
        for variant, state in job.expected():
            train, grad = STATES[state]
            model.train(train)
            torch._dynamo.reset()  # each (variant, state) compiles from scratch
            run = model if VARIANTS[variant] is None else torch.compile(model, **VARIANTS[variant])
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(dev)
            with torch.set_grad_enabled(grad):
                timing = time_calls(partial(run, x), job.repeats, dev, job.warmup)
                # clone: CUDA-graph outputs are overwritten by the next replay
                got = None if variant == "eager" else run(x).detach().clone()
            peak = torch.cuda.max_memory_allocated(dev) if cuda else None
            try:  # where one steady call spends its time (after timing, so it never disturbs it)
                with torch.set_grad_enabled(grad), quiet_profile(activities=activities) as prof:
                    run(x)
                    synchronize(dev)
                shares = op_shares(prof, dev.type)
            except Exception as err:  # a profiler failure must not cost the timing
                shares = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
            diff = None
            if got is not None:  # the compiled model must compute what the eager one does
                with torch.no_grad():
                    diff = (got.float() - model(x).float()).abs().max().item()
            _emit(out, {"kind": "result", "variant": variant, "state": state, "status": "ok",
                        "batch": job.batch, "image": job.image, "timing": timing.summary(),
                        "max_abs_diff_vs_eager": diff, "peak_memory_bytes": peak,
                        "op_shares": shares})
            del run, got


if __name__ == "__main__":
    main(*sys.argv[1:3])
