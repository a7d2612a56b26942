"""CUDA graphs for the training and evaluation loops: each batch shape's step captured once, then replayed.

Why: a small BERT's training step on a GPU is hundreds of kernels of a few microseconds each, and the host
needs longer to launch them than the GPU needs to run them (Lab 2 on an H100, a 2-layer, 128-wide model:
16 ms a step eager, of which the kernels take ~3 ms; benchmarks/training/lab2_trial_profile.json). A captured
graph launches the whole step at once. The eager loop stays the reference (``graphs=False`` or
``LABKIT_CUDA_GRAPHS=0``); tests compare both. On the H100 (torch 2.11) a Lab 2 epoch of a 2 x 128 model took 1.3 s graphed against 12.5 s eager
(benchmarks/training/graph_after_effect.json), and a quarter epoch of the labs' fine-tuning 1.25-2.9 s against
2.5-4.4 s (benchmarks/training/finetune_graphs.json), so training uses graphs on CUDA by default; graphed
evaluation gained nothing measurable (Lab 3's quantized evaluations within 4%:
benchmarks/quant/lab3_trial_graphs.json), so evaluation stays eager unless asked.

A shape's first ``warmup`` batches run eagerly (real steps, on a side stream as PyTorch's docs ask: lazy
state such as the optimizer's is created there), the next one is captured and every later one replayed.
Capture is refused, loudly, where a replay could silently differ from eager code: a model with hooks (a hook
may record something per batch, which a replay skips), unless each hook has ``graph_safe = True`` (a function of
its inputs and the module's tensors that keeps no per-call record, such as activation pruning's mask: a replay
recomputes it), and a module whose ``why_not_graphed()`` gives a reason (a quantized Linear while a student's
function computes its format: every forward must call that function). A capture that fails (an op that waits on
the host, e.g. ``.item()``) warns once with the reason and leaves that run eager.
"""
from __future__ import annotations

import os
import warnings
from typing import Callable

import torch

RAN = ("graph_replays", "eager_calls", "graph_failure")  # the summary keys a search trial records
ENV = "LABKIT_CUDA_GRAPHS"  # "0": never capture (the eager reference path)
MAX_SHAPES = 4  # graphs per loop; the labs' batches have one or two shapes (full batch, last batch)
_WARNED: set = set()


def wanted(device: torch.device, graphs: bool | None) -> bool:
    """``graphs``: None = on CUDA unless ``LABKIT_CUDA_GRAPHS=0``; True without CUDA is an error.
    (train defaults to None, evaluate to False.)"""
    if graphs is None:
        value = os.environ.get(ENV, "1")
        if value not in ("0", "1"):
            raise ValueError(f"{ENV}={value!r}: allowed values are '0' (eager) and '1' (graphs on CUDA)")
        return device.type == "cuda" and value == "1"
    if graphs and device.type != "cuda":
        raise ValueError(f"graphs=True needs a CUDA device, got device {str(device)!r}; allowed on this "
                         f"device: graphs=False or None")
    return bool(graphs)


def why_not(model: torch.nn.Module) -> str | None:
    """Why ``model``'s forward must not be replayed from a graph (None: it may)."""
    from torch.nn.modules import module as _module

    if _module._global_forward_hooks or _module._global_forward_pre_hooks or _module._global_backward_hooks:
        return "global module hooks are registered (a replay would skip them)"
    for name, m in model.named_modules():
        hooks = [*m._forward_hooks.values(), *m._forward_pre_hooks.values(), *m._backward_hooks.values(),
                 *m._backward_pre_hooks.values()]
        if any(not getattr(h, "graph_safe", False) for h in hooks):
            return f"module {name or type(m).__name__!r} has hooks (a replay would skip them)"
        own = getattr(m, "why_not_graphed", None)
        reason = own() if callable(own) else None
        if reason:
            return f"module {name or type(m).__name__!r}: {reason}"
    return None


def allowed(model: torch.nn.Module, device: torch.device, graphs: bool | None, desc: str) -> bool:
    """``wanted`` and ``why_not`` together: False (with a warning, once, naming why) where ``model`` has hooks."""
    if not wanted(device, graphs):
        return False
    reason = why_not(model)
    if reason:
        warn_once(f"{desc}:{reason}", f"labkit: {desc} runs eagerly, no CUDA graph: {reason}")
    return reason is None


def warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


class ShapeGraphs:
    """``run(batch)`` = ``fn(batch)``: eager for a shape's first ``warmup`` batches, then a CUDA graph.

    ``fn`` takes a dict of CUDA tensors and returns a tuple of tensors; from a replay these are the graph's
    static outputs, overwritten by the next call (use them before). ``before`` runs ahead of every eager call
    and of the capture (the training step clears gradients there, so the graph owns its own).
    """

    def __init__(self, fn: Callable, desc: str, warmup: int = 2, before: Callable | None = None):
        self.fn, self.desc, self.warmup, self.before = fn, desc, warmup, before or (lambda: None)
        self.graphs: dict = {}  # shape key -> (graph, static inputs, static outputs)
        self.seen: dict = {}
        self.failed: str | None = None
        self.replays = self.eager = 0
        self._side = torch.cuda.Stream()

    @staticmethod
    def _key(batch: dict) -> tuple:
        return tuple((k, tuple(v.shape), v.dtype) for k, v in batch.items())

    def _eager(self, batch: dict):
        self.eager += 1
        self.before()
        main = torch.cuda.current_stream()
        self._side.wait_stream(main)
        with torch.cuda.stream(self._side):
            out = self.fn(batch)
        main.wait_stream(self._side)
        return out

    def _capture(self, key, batch: dict):
        static = {k: v.clone() for k, v in batch.items()}
        graph = torch.cuda.CUDAGraph()
        self.before()
        try:
            with torch.cuda.graph(graph):
                out = self.fn(static)
        except Exception as e:  # noqa: BLE001 - any capture error means: stay eager, and say so
            self.failed = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            warn_once(f"{self.desc}:{self.failed}", f"labkit: CUDA graph capture of {self.desc} failed "
                      f"({self.failed}); this loop runs eagerly")
            return None
        self.graphs[key] = (graph, static, out)
        return self.graphs[key]

    def __call__(self, batch: dict):
        key = self._key(batch)
        entry = self.graphs.get(key)
        if entry is None:
            self.seen[key] = self.seen.get(key, 0) + 1
            if self.failed or self.seen[key] <= self.warmup or len(self.graphs) >= MAX_SHAPES:
                return self._eager(batch)
            entry = self._capture(key, batch)
            if entry is None:
                return self._eager(batch)
        graph, static, out = entry
        for k, v in batch.items():
            static[k].copy_(v, non_blocking=True)
        graph.replay()
        self.replays += 1
        return out

    def summary(self) -> dict:
        """What ran: counts of replayed and eager calls, graphs captured, why capture failed (if it did);
        ``RAN`` names the keys a trial records."""
        return {"graph_replays": self.replays, "eager_calls": self.eager, "graphs": len(self.graphs),
                "graph_failure": self.failed}
