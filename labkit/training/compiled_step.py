"""The training step's forward and backward compiled by TorchInductor (``LABKIT_STEP_COMPILE=1``), for the graphed step.

Why: a graphed Lab 2 step is bound by the small kernels around its GEMMs (a 2 x 128 model on an H100: 1.6 ms of
kernels a step, its GEMMs ~0.15 ms; benchmarks/training/lab2_trial_kernels.json). Inductor fuses those elementwise
ops and reductions (casts, dropout, residual adds, LayerNorm, GELU, the mask) into fewer kernels. The compiled
loss function is a function of the model (``loss(model, batch)``), so a process compiles once per architecture
and every later model of that architecture (the search's next trial) reuses the code; Inductor's on-disk cache
makes a later process's compile of a known architecture cheaper.

Kept reproducible: Inductor's ``deterministic`` mode (no on-device benchmarking that would pick kernels, and so
rounding, by timing) whenever labkit's determinism is not ``off``, and a recompile limit that raises instead of
silently running eagerly. The compiled step draws its dropout masks from Inductor's RNG, so its bits differ from
the eager graphed step's: ``CACHE_KEY`` names it in the cache keys of trained results.

Measured (H200, benchmarks/training/lab2_step_compiled_strict.json): a step 1.12-1.20x faster than the step kernels'
for 2 x 128 to 8 x 512 models, 6-15 s to compile an architecture. A Lab 2 trial is nearly always a new graph (its
Identity choices), so the search lost by it: 25.8 trials/min against 36.8 (benchmarks/search/search_throughput.json).
Hence off by default; it could pay where one architecture trains long (not measured there).

``LABKIT_STEP_COMPILE`` = ``0`` (default: the graphed step of ``labkit.training.step_kernels``) | ``1``.
"""
from __future__ import annotations

import contextlib
import os

import torch

ENV = "LABKIT_STEP_COMPILE"
CACHE_KEY = "inductor-2"  # in place of step_kernels.VERSION in CUDA trials' cache keys (train.step_key)
RECOMPILES = 64  # architectures one process may compile; the next one raises (never a silent eager fallback)
_COMPILED = {}  # deterministic (True/False) -> the compiled loss function


def enabled(env: dict | None = None) -> bool:
    """``LABKIT_STEP_COMPILE`` (default off): 1/0; another value is an error naming the allowed ones."""
    value = (os.environ if env is None else env).get(ENV, "0").strip() or "0"
    if value not in ("0", "1"):
        raise ValueError(f"{ENV}={value!r}: allowed values are 0 (the graphed step's kernels), 1 (compiled by Inductor)")
    return value == "1"


def _loss(model: torch.nn.Module, batch: dict, device_type: str, dtype):
    if dtype is None:
        return model(**batch).loss
    with torch.autocast(device_type, dtype=dtype):
        return model(**batch).loss


def loss_function(deterministic: bool):
    """``fn(model, batch, device_type, dtype) -> loss``: ``_loss`` compiled whole (``fullgraph``: a graph break is an
    error, not a silent split) for static shapes; one per process and ``deterministic`` setting."""
    key = bool(deterministic)
    if key not in _COMPILED:
        import torch._inductor.config as inductor_config

        if deterministic and not hasattr(inductor_config, "deterministic"):
            raise RuntimeError(f"{ENV}=1 under labkit's determinism needs torch._inductor.config.deterministic "
                               f"(torch {torch.__version__} lacks it); set {ENV}=0 or LABKIT_DETERMINISM=off")
        options = {"deterministic": True} if deterministic else {}
        _COMPILED[key] = torch.compile(_loss, fullgraph=True, dynamic=False, options=options)
    return _COMPILED[key]


def loss(model: torch.nn.Module, batch: dict, dtype, deterministic: bool) -> torch.Tensor:
    """The model's training loss on ``batch``, compiled; ``dtype``: autocast's (bf16) or None (fp32)."""
    import torch._dynamo

    device_type = next(iter(batch.values())).device.type
    fn = loss_function(deterministic)
    # dynamo's limits for these calls only (a graph replay calls nothing): other compiled code keeps its own
    limits = torch._dynamo.config.patch(recompile_limit=RECOMPILES, fail_on_recompile_limit_hit=True)
    with opaque_embeddings(model), limits:
        return fn(model, batch, device_type, dtype)


# Embeddings as an op Inductor does not decompose. Inductor writes an embedding's backward as an accumulating
# index_put, and under deterministic algorithms that falls back to a kernel which sums each row's duplicates one
# after another: 3.8 ms a step of a 2 x 128 model's 4.8 (token types: 8,192 lookups of one row), against 0.1 ms for
# torch's own embedding backward (sort-based, deterministic); benchmarks/training/lab2_step_compiled_strict.json.
@torch.library.custom_op("labkit::embedding", mutates_args=())
def embedding(weight: torch.Tensor, ids: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """``F.embedding(ids, weight, padding_idx)``; its backward is torch's ``embedding_dense_backward``."""
    return torch.nn.functional.embedding(ids, weight, None if padding_idx < 0 else padding_idx)


@embedding.register_fake
def _(weight, ids, padding_idx):
    return weight.new_empty((*ids.shape, weight.shape[1]))


@torch.library.custom_op("labkit::embedding_backward", mutates_args=())
def embedding_backward(grad: torch.Tensor, ids: torch.Tensor, rows: int, padding_idx: int) -> torch.Tensor:
    return torch.ops.aten.embedding_dense_backward(grad, ids, rows, padding_idx, False)


@embedding_backward.register_fake
def _(grad, ids, rows, padding_idx):
    return grad.new_empty((rows, grad.shape[-1]))


def _setup(ctx, inputs, output):
    weight, ids, padding_idx = inputs
    ctx.save_for_backward(ids)
    ctx.rows, ctx.padding_idx = weight.shape[0], padding_idx


def _backward(ctx, grad):
    (ids,) = ctx.saved_tensors
    return embedding_backward(grad.contiguous(), ids, ctx.rows, ctx.padding_idx), None, None


embedding.register_autograd(_backward, setup_context=_setup)


class OpaqueEmbedding(torch.nn.Embedding):
    """``nn.Embedding`` through ``labkit::embedding`` (a class swapped in by ``opaque_embeddings``, so the compiled
    code's guard on the module's type holds from one call to the next)."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return embedding(self.weight, ids, -1 if self.padding_idx is None else self.padding_idx)


@contextlib.contextmanager
def opaque_embeddings(model: torch.nn.Module):
    """Inside: the model's plain ``nn.Embedding`` modules (no max_norm, dense gradients, unscaled) are
    ``OpaqueEmbedding``s; restored after."""
    swapped = [m for m in model.modules() if type(m) is torch.nn.Embedding and m.max_norm is None
               and not m.sparse and not m.scale_grad_by_freq]
    for m in swapped:
        m.__class__ = OpaqueEmbedding
    try:
        yield
    finally:
        for m in swapped:
            m.__class__ = torch.nn.Embedding
