"""A Lab 2 training step with labkit.training.step_kernels on and off (``--compare kernels``), with its attention
as flash segments against transformers' masked SDPA (``--compare attention``: labkit.training.varlen_attention, on
batches padded as IMDb's are), or compiled by Inductor against the step kernels (``--compare compiled``:
labkit.training.compiled_step): GPU time per graphed step, the losses of both, and each variant's first three calls
(two eager, the capture: where a compile happens).

For each architecture, two models from the same initialisation train on the same batches (32 x 256 tokens of
real IMDb-length shape, random ids) through ``train._graphed_step`` (the Lab 2 search's step: forward, backward,
fused AdamW, captured as a CUDA graph), one with the step kernels (bias gradients as GEMVs, LayerNorm's
backward in Triton) and one with torch's modules (dropout off for the loss curves, on for the timing). Timed: CUDA events around ``--steps`` replays after warm-up,
the two variants interleaved over ``--rounds``. Printed: ms per step, the ratio, and the largest relative
difference between the two loss curves.

    python benchmarks/training/lab2_step_kernels.py [--compare kernels|attention|compiled] [--padding none|imdb]
        [--archs 2x128x512,4x256x1024,8x512x2048] [--kernels] [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import statistics

import torch


def _model(layers: int, hidden: int, inter: int, dropout: bool, seed: int = 0):
    from labkit.labs.lab2_space import build_model

    torch.manual_seed(seed)
    heads = max(2, hidden // 64)
    off = {} if dropout else {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    return build_model({"config": {"num_hidden_layers": layers, "num_attention_heads": heads,
                                   "hidden_size": hidden, "intermediate_size": inter}}, **off).cuda().train()


# what --compare switches: the environment variable read when a step is captured, its (new, reference) values
COMPARE = {"kernels": ("LABKIT_STEP_KERNELS", ("1", "0")), "attention": ("LABKIT_ATTENTION", ("varlen", "sdpa")),
           "compiled": ("LABKIT_STEP_COMPILE", ("1", "0"))}
NAMES = {"kernels": ("step kernels", "torch"), "attention": ("varlen", "sdpa"), "compiled": ("compiled", "step kernels")}


class _Step:
    """One model's graphed Lab 2 step, with the compared variant on or off (read when a step is captured)."""

    def __init__(self, model, on: bool, total: int, compare: str):
        from labkit.training import train

        env, values = COMPARE[compare]
        self.env, self.value = env, values[0] if on else values[1]
        os.environ[self.env] = self.value  # the compiled step's choice is read here, the others' at capture
        params = [p for p in model.parameters() if p.requires_grad]
        self.step = train._graphed_step(model, params, 5e-4, 0.0, total, torch.device("cuda"), True, "bench", None)

    def __call__(self, batch):
        os.environ[self.env] = self.value
        return self.step(batch)[0]


def _mask(padding: str, g: torch.Generator) -> torch.Tensor:
    """[32, 256]: no padding, or IMDb's at 256 tokens (``labkit.training.batches.imdb_like_lengths``)."""
    if padding == "none":
        return torch.ones(32, 256, dtype=torch.long)
    from labkit.training.batches import imdb_like_lengths

    lengths = imdb_like_lengths(32, 256, g)
    lengths[0] = 256  # every batch at the window, as a shuffled IMDb batch of 32 almost always is
    return (torch.arange(256)[None, :] < lengths[:, None]).long()


def _top_kernels(stepper, batches: list[dict], steps: int, top: int = 12) -> list[dict]:
    """torch.profiler over ``steps`` replays: the kernels with the most GPU time, in ms per step."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(steps):
            stepper(batches[i % 4])
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.self_device_time_total, reverse=True)
    total = sum(e.self_device_time_total for e in kernels) / 1e3 / steps
    return [{"kernel": "(all kernels)", "ms_per_step": total}] + [
        {"kernel": e.key[:120], "calls_per_step": e.count / steps, "ms_per_step": e.self_device_time_total / 1e3 / steps}
        for e in kernels[:top]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default="2x128x512,4x256x1024,8x512x2048", help="layers x hidden x intermediate")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare", choices=sorted(COMPARE), default="kernels")
    ap.add_argument("--determinism", choices=("strict", "off"), default="strict",
                    help="strict: as labkit trains (rows before this option ran off)")
    ap.add_argument("--padding", choices=("none", "imdb"), default=None, help="default: imdb for attention, else none")
    ap.add_argument("--kernels", action="store_true", help="also each variant's top kernels over 10 replays (profiler)")
    ap.add_argument("--out", default=None, help="default: benchmarks/training/lab2_step_<compare>.json "
                                                "(compiled: lab2_step_compiled_<determinism>.json)")
    args = ap.parse_args(argv)
    padding = args.padding or ("imdb" if args.compare == "attention" else "none")
    mode = f"_{args.determinism}" if args.compare == "compiled" else ""
    args.out = args.out or f"benchmarks/training/lab2_step_{args.compare}{mode}.json"
    if not torch.cuda.is_available():
        print("needs a CUDA device: GPU step timings")
        return 2
    from labkit.results import provenance, write_json
    from labkit.training import determinism

    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        mask = _mask(padding, g)
        batches.append({"input_ids": (torch.randint(1000, 30000, (32, 256), generator=g) * mask).cuda(),
                        "attention_mask": mask.cuda(), "token_type_ids": torch.zeros(32, 256, dtype=torch.long).cuda(),
                        "labels": torch.randint(0, 2, (32,), generator=g).cuda()})
    what = {"kernels": "labkit.training.step_kernels on vs off (torch's modules)",
            "attention": "attention as flash segments (LABKIT_ATTENTION=varlen) vs transformers' masked SDPA",
            "compiled": "forward and backward compiled by Inductor (LABKIT_STEP_COMPILE=1) vs the step kernels"}
    out = {"what": f"Lab 2 graphed training step: {what[args.compare]}", "compare": args.compare,
           "padding": padding, "variants": dict(zip(("fast", "torch"), NAMES[args.compare])),
           "determinism": args.determinism, "batch": [32, 256], "steps": args.steps,
           "rounds": args.rounds, "rows": [], "provenance": provenance()}
    # the kernels training runs: labkit.training.train steps inside determinism.deterministic (strict by default),
    # where attention's backward takes its deterministic path and cuDNN's attention is left out
    with determinism.deterministic(torch.device("cuda"), args.determinism):
        for spec in args.archs.split(","):
            _arch(spec, args, batches, out)
            torch.cuda.empty_cache()  # the row's models and graphs are gone
            write_json(args.out, out)  # each row as it ends: a run cut short keeps what it measured
    return 0


def _arch(spec: str, args, batches: list[dict], out: dict) -> None:
    """One architecture's row: the two variants' loss curves (dropout off) and graphed step times (dropout on)."""
    from labkit.perf.timing import time_call, timed

    layers, hidden, inter = map(int, spec.split("x"))
    # the two loss curves: dropout off, so the two models differ only by the kernels
    losses = {}
    for on in (True, False):
        stepper = _Step(_model(layers, hidden, inter, dropout=False), on, args.steps, args.compare)
        losses[on] = [stepper(batches[i % 4]).clone() for i in range(args.steps)]
        del stepper
    # timing: the Lab 2 model (dropout on), warmed up and captured, the two variants interleaved
    steppers = {on: _Step(_model(layers, hidden, inter, dropout=True), on, 10 + args.steps * args.rounds,
                          args.compare) for on in (True, False)}
    first = {True: 0.0, False: 0.0}  # each variant's first three calls: two eager, the capture
    for i in range(10):
        for on in (True, False):
            if i < 3:
                first[on] += timed(lambda: steppers[on](batches[i % 4]), "cuda")[0]
            else:
                steppers[on](batches[i % 4])
    times = {True: [], False: []}
    for _ in range(args.rounds):
        for on in (True, False):
            block = time_call(lambda: [steppers[on](batches[i % 4]) for i in range(args.steps)], "cuda")
            times[on].append(1e3 * block / args.steps)
    kernels = {on: _top_kernels(steppers[on], batches, 10) for on in (True, False)} if args.kernels else None
    curves = {on: [float(v) for v in losses[on]] for on in losses}
    rel = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(curves[True], curves[False]))
    fast, ref = statistics.median(times[True]), statistics.median(times[False])
    row = {"arch": spec, "ms_per_step_fast": fast, "ms_per_step_torch": ref, "torch_over_fast": ref / fast,
           "times_fast": times[True], "times_torch": times[False], "max_rel_loss_diff": rel,
           "first_three_calls_s_fast": first[True], "first_three_calls_s_torch": first[False],
           "loss_first_last_fast": [curves[True][0], curves[True][-1]],
           "loss_first_last_torch": [curves[False][0], curves[False][-1]],
           **({"top_kernels_fast": kernels[True], "top_kernels_torch": kernels[False]} if kernels else {})}
    out["rows"].append(row)
    names = NAMES[args.compare]
    print(f"{spec}: {names[0]} {fast:.3f} ms, {names[1]} {ref:.3f} ms ({ref / fast:.3f}x); losses differ by at most "
          f"{rel:.2e} (relative) over {len(curves[True])} steps; first three calls {first[True]:.1f} s against "
          f"{first[False]:.1f} s", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
