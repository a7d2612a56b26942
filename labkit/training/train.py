"""Seeded training and evaluation loops for sequence classifiers, returning plain metrics dicts.

A short loop of our own rather than the HF Trainer: the labs wrap models in quantizers, masks and
searches, and a loop that is 40 lines long is easier to read and to reason about than Trainer callbacks.
Settings match the course's Trainer defaults: AdamW, linear decay to zero, no warm-up unless ``warmup`` asks
for one (Lab 2 trains post-LN BERTs from random initialisation, whose deeper models need it).
"""
from __future__ import annotations

import contextlib
import random
import time

import numpy as np
import torch

from . import batches, compiled_step, cuda_graphs, determinism, step_kernels, varlen_attention
from . import progress as _progress


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def pick_device(device: str = "auto") -> torch.device:
    """``auto``: CUDA when available, else CPU. ``cuda`` without a GPU is an error, never a silent CPU run."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} but CUDA is not available here; use 'auto' or 'cpu'")
    if device.split(":")[0] not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}: allowed values are 'auto', 'cpu', 'cuda', 'cuda:N'")
    return torch.device(device)


def autocast(device: torch.device, mixed_precision: bool | str = True):
    """bf16 autocast (no loss scaling needed). ``mixed_precision``: True (default) on CUDA only, fp32 on a
    CPU; ``"bf16"`` on a CPU too (``labkit.training.precision``: settings' ``cpu_autocast``); False: fp32."""
    if mixed_precision not in (True, False, "bf16"):
        raise ValueError(f"mixed_precision={mixed_precision!r}: allowed values are True, False, 'bf16'")
    if mixed_precision and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if mixed_precision == "bf16" and device.type == "cpu":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# Evaluation attention on CUDA: any SDPA backend but cuDNN's. cuDNN builds a plan for each new batch shape, and
# an evaluation's batches are trimmed to their longest review (57 shapes over IMDb's test set): a new model's
# first evaluation spent ~4 s building plans where flash / memory-efficient attention took 0.4-1.5 s in all
# (Lab 2 trials on an H100, benchmarks/training/lab2_eval_sdpa.json; warm, both backends ran equally fast and their
# logits agreed within 0.002). Training keeps cuDNN: its batches have one or two shapes.
EVAL_SDPA = "no-cudnn"  # in the search's cache keys for CUDA trials (labkit.labs.lab2_objectives.trial_settings)


def eval_attention(device: torch.device):
    """The attention backends an evaluation on ``device`` may use (see EVAL_SDPA)."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def _to(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def make_optimizer(params, lr: float, weight_decay: float, device: torch.device) -> torch.optim.AdamW:
    """AdamW, fused (one kernel for all parameters instead of several per tensor): on a CPU too, where a MiniLM-L2
    step's update took 9 ms against 45 ms, a 2 x 192 Lab 2 model's 3 ms against 24 ms (2 cores)."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay,
                             fused=device.type in ("cuda", "cpu") or None)


def train(model: torch.nn.Module, loader, epochs: float = 1.0, lr: float = 5e-5, weight_decay: float = 0.0,
          device: str = "auto", mixed_precision: bool | str = True, seed: int = 0, desc: str = "train",
          progress: bool = True, log_every: int = 50, graphs: bool | None = None,
          deterministic: str | None = None, warmup: float = 0.0) -> dict:
    """Train ``model`` in place on ``loader`` (batches of ``input_ids``/``attention_mask``/``labels``): a
    ``DataLoader`` or ``labkit.training.batches.TensorBatches``.

    ``epochs`` may be fractional (e.g. 0.5 stops half-way through the first epoch). Losses stay on the
    device and are read every ``log_every`` steps for the progress bar (never when ``progress`` is off)
    and once at the end, so the host never waits on the GPU inside the loop.

    ``graphs``: None (default: on CUDA unless ``LABKIT_CUDA_GRAPHS=0``) or True: each batch shape's step
    (forward, backward, AdamW, learning rate) is captured as a CUDA graph and replayed
    (``labkit.training.cuda_graphs``); the metrics then carry what ran (``graph_replays``, ``eager_calls``,
    ``graph_failure``). False: the eager loop, the reference. A small BERT's step is launch-bound on a GPU:
    a quarter epoch of MiniLM-L2 at 512 tokens on an H100 took 1.25-2.9 s graphed against 2.5-4.4 s eager
    for plain, pruned, QAT and LoRA models (benchmarks/training/finetune_graphs.json). Graphed and eager
    runs are each repeatable but differ in bits (dropout draws from another RNG stream): ``step_key`` names
    the path in the cache keys of trained results.

    ``deterministic``: ``strict`` (default, or ``$LABKIT_DETERMINISM``), ``warn`` or ``off``; see
    ``labkit.training.determinism``. Strict on CUDA: an op without a deterministic kernel raises.

    ``warmup``: the fraction of the steps over which the learning rate rises linearly from 0 to ``lr``
    before its linear decay to zero (``lr_factor``); 0 (default): no warm-up, the schedule as before.
    """
    if epochs <= 0:
        raise ValueError(f"epochs must be > 0, got {epochs}")
    if isinstance(warmup, bool) or not isinstance(warmup, (int, float)) or not 0 <= warmup < 1:
        raise ValueError(f"warmup={warmup!r}: allowed values are numbers with 0 <= warmup < 1 (a fraction of "
                         "the training steps)")
    how = determinism.mode(deterministic)
    dev = pick_device(device)
    with determinism.deterministic(dev, how):
        out = _train(model, loader, epochs, lr, weight_decay, dev, mixed_precision, seed, desc, progress,
                     log_every, graphs, warmup)
    return {**out, "determinism": how}


def step_key(device: str = "auto") -> str | None:
    """What a training step on ``device`` runs, for the cache keys of trained results: None on CPU (the eager
    loop); on CUDA the graphed step's kernels by version, or ``torch`` where graphs are off
    (``LABKIT_CUDA_GRAPHS=0``), with ``+varlen-attn`` where its attention runs as flash segments."""
    dev = pick_device(device)
    if dev.type != "cuda":
        return None
    graphed = cuda_graphs.wanted(dev, None)
    varlen = graphed and varlen_attention.choice() == "varlen"
    if graphed and compiled_step.enabled():
        _one_step_variant(varlen)
        return compiled_step.CACHE_KEY
    return step_kernels.cache_key(graphed) + (f"+{varlen_attention.CACHE_KEY}" if varlen else "")


def device_key(device: str = "auto") -> dict:
    """What a trained result's cache key holds of where it trained: nothing on CPU; on CUDA the step that ran
    (``step_key``) and the card with this process's share of it (``determinism.gpu_identity``)."""
    step = step_key(device)
    return {"train_step": step, **determinism.gpu_identity()} if step else {}


def _one_step_variant(varlen: bool) -> None:
    """The compiled step and varlen attention are not combined (varlen's segments are computed per step outside
    what Inductor traces): asking for both is an error naming the two settings."""
    if varlen:
        raise ValueError(f"{compiled_step.ENV}=1 with {varlen_attention.ENV}=varlen: allowed are one or the other "
                         f"({varlen_attention.ENV}=sdpa with the compiled step)")


def warmup_steps(warmup: float, total: int) -> int:
    """Steps of warm-up for a fraction ``warmup`` of ``total`` steps: 0 only when ``warmup`` is 0 (a warm-up
    asked for lasts at least one step), at most ``total - 1`` (the decay keeps a step; one step in all: none)."""
    return 0 if warmup == 0 else min(max(1, round(warmup * total)), total - 1)


def lr_factor(step: int, total: int, warm: int = 0) -> float:
    """The learning rate's multiplier at ``step`` of ``total`` with ``warm`` warm-up steps: ``step / warm``
    during warm-up, then linear decay to zero over the remaining steps (Hugging Face's
    ``get_linear_schedule_with_warmup``). ``warm`` 0 keeps the original expression, so a run without
    warm-up trains bit for bit as before."""
    if warm == 0:
        return max(0.0, 1 - step / total)
    if step < warm:
        return step / warm
    return max(0.0, (total - step) / (total - warm))


def lr_factor_tensor(counter: torch.Tensor, total: int, warm: int = 0) -> torch.Tensor:
    """``lr_factor`` on a step-counter tensor, computed where the counter lives (the CUDA-graph step sets
    its learning rate on the device). ``warm`` 0: the original expression, op for op."""
    if warm == 0:
        return torch.clamp(1 - counter / total, min=0)
    return torch.where(counter < warm, counter / warm, torch.clamp((total - counter) / (total - warm), min=0))


def _train(model, loader, epochs, lr, weight_decay, dev, mixed_precision, seed, desc, progress, log_every,
           graphs, warmup=0.0) -> dict:
    seed_everything(seed)
    # Lab 2 trains many trials on one loader: the same architecture must see the same batches every time
    batches.reseed(loader, seed)
    model.to(dev).train()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    if len(loader) == 0:
        raise ValueError(f"{desc}: the loader has no batches")
    total = max(1, round(len(loader) * epochs))
    warm = warmup_steps(warmup, total)
    graphed = _graphed_step(model, params, lr, weight_decay, total, dev, mixed_precision, desc, graphs, warm)
    if graphed is None:
        opt = make_optimizer(params, lr, weight_decay, dev)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, total, warm))
    losses = torch.zeros(total, device=dev)
    step, start = 0, time.perf_counter()
    # a widget in JupyterLab; under papermill (LABKIT_PROGRESS=lines) a [labkit] line at most every 30 s
    bar = _progress.bar(total=total, desc=desc, leave=False, unit="steps", progress=progress)
    while step < total:
        for batch in loader:
            if graphed is not None:
                (loss,) = graphed(_to(batch, dev))
            else:
                with autocast(dev, mixed_precision):
                    loss = model(**_to(batch, dev)).loss
                loss.backward()
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
            losses[step] = loss.detach()
            step += 1
            if progress:
                bar.update()
                if step % log_every == 0:
                    bar.set_postfix(loss=f"{losses[step - log_every:step].mean().item():.3f}")
            if step >= total:
                break
    bar.close()
    losses = losses.cpu()  # the loop's one wait for the device
    if not torch.isfinite(losses).all():
        raise FloatingPointError(f"{desc}: non-finite training loss at step "
                                 f"{int((~torch.isfinite(losses)).nonzero()[0])}")
    values = losses.tolist()
    if graphed is not None:
        model.zero_grad(set_to_none=True)  # the graph's gradient buffers: not the model's to keep
    return {"train_loss_first": float(np.mean(values[:10])), "train_loss_last": float(np.mean(values[-10:])),
            "steps": step, "train_seconds": time.perf_counter() - start, "losses": values,
            **(graphed.summary() if graphed is not None else {})}


def _graphed_step(model, params, lr, weight_decay, total, dev, mixed_precision, desc, graphs, warm=0):
    """The training step as ``cuda_graphs.ShapeGraphs`` (None: the eager loop runs).

    Everything a replay changes lives on the device: AdamW is fused and capturable with its learning rate
    a tensor, set each step from a device step counter by the eager loop's schedule (``lr_factor_tensor``).
    """
    if not cuda_graphs.allowed(model, dev, graphs, desc):
        return None
    compiled = compiled_step.enabled()
    if compiled:
        _one_step_variant(varlen_attention.choice() == "varlen")
    dtype = torch.bfloat16 if mixed_precision else None  # autocast's on CUDA (the graphed step runs only there)
    strict = torch.are_deterministic_algorithms_enabled()  # labkit's determinism, strict or warn
    lr_t = torch.tensor(float(lr), device=dev)
    opt = torch.optim.AdamW(params, lr=lr_t, weight_decay=weight_decay, fused=True, capturable=True)
    counter = torch.zeros((), device=dev)

    def step(batch):
        # bias gradients as GEMVs and LayerNorm's backward in Triton (labkit.training.step_kernels;
        # LABKIT_STEP_KERNELS=0: torch's modules): a graphed step is bound by such small kernels;
        # LABKIT_ATTENTION=varlen: attention as unmasked flash segments (labkit.training.varlen_attention)
        # LABKIT_STEP_COMPILE=1: forward and backward compiled by Inductor instead (labkit.training.compiled_step)
        if compiled:
            loss = compiled_step.loss(model, batch, dtype, strict)
        else:
            with autocast(dev, mixed_precision), step_kernels.fast_layers(model), varlen_attention.use(model):
                loss = model(**batch).loss
        loss.backward()
        # LambdaLR's schedule on the device: step i uses lr * lr_factor(i, total, warm)
        torch.mul(lr_factor_tensor(counter, total, warm), lr, out=lr_t)
        opt.step()
        counter.add_(1)
        return (loss.detach(),)

    return cuda_graphs.ShapeGraphs(step, desc=f"{desc} step", before=lambda: opt.zero_grad(set_to_none=True))


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, device: str = "auto", mixed_precision: bool | str = True,
             desc: str = "eval", progress: bool = True, graphs: bool = False) -> dict:
    """Accuracy and mean loss over ``loader`` (model left in eval mode); sums stay on the device.

    ``graphs=True``: each batch shape's forward pass captured once as a CUDA graph and replayed. Off by
    default: no gain measured on the H100 (torch 2.11): Lab 3's quantized evaluations took the same time
    within 4% (their elementwise passes are GPU-bound), and a Lab 2 evaluation is ~0.5 s eager.
    """
    dev = pick_device(device)
    model.to(dev).eval()
    forward = _graphed_forward(model, dev, mixed_precision, desc, graphs)
    correct = torch.zeros((), dtype=torch.int64, device=dev)
    positive = torch.zeros((), dtype=torch.int64, device=dev)
    loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
    seen = 0
    start = time.perf_counter()
    with eval_attention(dev):
        for batch in _progress.bar(loader, desc=desc, leave=False, unit="batches", progress=progress):
            batch = _to(batch, dev)
            loss, logits = forward(batch)
            n = batch["labels"].numel()
            loss_sum += loss.double() * n  # float64, as Python floats summed it before
            pred = logits.argmax(-1)
            correct += (pred == batch["labels"]).sum()
            positive += (pred == 1).sum()
            seen += n
    # positive_share: a model at exactly chance usually predicts one class for every review (share 0 or 1)
    return {"accuracy": correct.item() / seen, "loss": loss_sum.item() / seen, "n": seen,
            "positive_share": positive.item() / seen, "eval_seconds": time.perf_counter() - start,
            **(forward.summary() if isinstance(forward, cuda_graphs.ShapeGraphs) else {})}


def _graphed_forward(model, dev, mixed_precision, desc, graphs):
    """``batch -> (loss, logits)``: a ``cuda_graphs.ShapeGraphs`` where graphs are wanted and allowed."""

    def forward(batch):
        with autocast(dev, mixed_precision):
            out = model(**batch)
        return out.loss, out.logits

    if not cuda_graphs.allowed(model, dev, graphs, desc):
        return forward
    return cuda_graphs.ShapeGraphs(forward, desc=f"{desc} forward")
