"""Seeded training and evaluation loops for sequence classifiers, returning plain metrics dicts.

A short loop of our own rather than the HF Trainer: the labs wrap models in quantizers, masks and
searches, and a loop that is 40 lines long is easier to read and to reason about than Trainer callbacks.
Settings match the course's Trainer defaults: AdamW, linear decay to zero, no warm-up.
"""
from __future__ import annotations

import contextlib
import random
import time

import numpy as np
import torch

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


def autocast(device: torch.device, mixed_precision: bool = True):
    """bf16 autocast on CUDA (no loss scaling needed); full fp32 on CPU."""
    if mixed_precision and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _to(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def make_optimizer(params, lr: float, weight_decay: float, device: torch.device) -> torch.optim.AdamW:
    """AdamW; fused on CUDA (one kernel for all parameters instead of several per tensor)."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=device.type == "cuda" or None)


def train(model: torch.nn.Module, loader, epochs: float = 1.0, lr: float = 5e-5, weight_decay: float = 0.0,
          device: str = "auto", mixed_precision: bool = True, seed: int = 0, desc: str = "train",
          progress: bool = True, log_every: int = 50) -> dict:
    """Train ``model`` in place on ``loader`` (batches of ``input_ids``/``attention_mask``/``labels``): a
    ``DataLoader`` or ``labkit.batches.TensorBatches``.

    ``epochs`` may be fractional (e.g. 0.5 stops half-way through the first epoch). Losses stay on the
    device and are read every ``log_every`` steps for the progress bar (never when ``progress`` is off)
    and once at the end, so the host never waits on the GPU inside the loop.
    """
    if epochs <= 0:
        raise ValueError(f"epochs must be > 0, got {epochs}")
    seed_everything(seed)
    # A shuffling loader carries its own generator, advanced by every epoch it serves; reseed it so a
    # call's data order depends on `seed` alone, not on how often the loader was used before (Lab 2
    # trains many trials on one loader: the same architecture must see the same batches every time).
    if getattr(loader, "generator", None) is not None:
        loader.generator.manual_seed(seed)
    dev = pick_device(device)
    model.to(dev).train()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    total = max(1, round(len(loader) * epochs))
    opt = make_optimizer(params, lr, weight_decay, dev)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: max(0.0, 1 - step / total))
    losses = torch.zeros(total, device=dev)
    step, start = 0, time.perf_counter()
    # a widget in JupyterLab; under papermill (LABKIT_PROGRESS=lines) a [labkit] line at most every 30 s
    bar = _progress.bar(total=total, desc=desc, leave=False, unit="steps", progress=progress)
    while step < total:
        for batch in loader:
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
    return {"train_loss_first": float(np.mean(values[:10])), "train_loss_last": float(np.mean(values[-10:])),
            "steps": step, "train_seconds": time.perf_counter() - start, "losses": values}


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, device: str = "auto", mixed_precision: bool = True,
             desc: str = "eval", progress: bool = True) -> dict:
    """Accuracy and mean loss over ``loader`` (model left in eval mode); sums stay on the device."""
    dev = pick_device(device)
    model.to(dev).eval()
    correct = torch.zeros((), dtype=torch.int64, device=dev)
    positive = torch.zeros((), dtype=torch.int64, device=dev)
    loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
    seen = 0
    start = time.perf_counter()
    for batch in _progress.bar(loader, desc=desc, leave=False, unit="batches", progress=progress):
        batch = _to(batch, dev)
        with autocast(dev, mixed_precision):
            out = model(**batch)
        n = batch["labels"].numel()
        loss_sum += out.loss.double() * n  # float64, as Python floats summed it before
        pred = out.logits.argmax(-1)
        correct += (pred == batch["labels"]).sum()
        positive += (pred == 1).sum()
        seen += n
    # positive_share: a model at exactly chance usually predicts one class for every review (share 0 or 1)
    return {"accuracy": correct.item() / seen, "loss": loss_sum.item() / seen, "n": seen,
            "positive_share": positive.item() / seen, "eval_seconds": time.perf_counter() - start}
