"""Reproducible training: seeded initialisation and deterministic kernels.

Two things make a fresh process train the same weights as the last one:

- every random initialisation (a new classifier head, LoRA adapters, a model built from a config) draws
  from its own seed (``init_rng``), never from whatever the process's global RNG happens to hold;
- kernels run deterministically (``deterministic``): on CUDA, ``torch.use_deterministic_algorithms`` in
  strict mode, so an op without a deterministic implementation raises instead of silently changing the
  weights, cuDNN's autotuner off, and attention limited to backends whose backward has a deterministic
  path under that flag (flash and memory-efficient attention switch to it; cuDNN's is left out).

cuBLAS is reproducible only when ``CUBLAS_WORKSPACE_CONFIG`` is set before CUDA initialises, so importing
labkit sets it (``ensure_cublas_config``); ``deterministic`` refuses strict mode when CUDA started earlier
without it.

``LABKIT_DETERMINISM`` = ``strict`` (default) | ``warn`` (nondeterministic ops warn and run) | ``off``.
"""
from __future__ import annotations

import contextlib
import os
import sys

CUBLAS_WORKSPACE = ":4096:8"  # cuBLAS's documented condition for bit-reproducible results
MODES = ("strict", "warn", "off")
_ENV = "LABKIT_DETERMINISM"
# Set by ensure_cublas_config: whether CUDA had started before labkit could set the variable.
_cuda_started_without_config = False


def ensure_cublas_config() -> None:
    """Set ``CUBLAS_WORKSPACE_CONFIG`` unless the user did; note whether CUDA already started without it."""
    global _cuda_started_without_config
    if "CUBLAS_WORKSPACE_CONFIG" not in os.environ:
        torch = sys.modules.get("torch")  # not imported yet: CUDA cannot have started (and stays unimported)
        _cuda_started_without_config = bool(torch is not None and torch.cuda.is_initialized())
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE


def mode(value: str | None = None) -> str:
    """The determinism mode: ``value`` if given, else ``$LABKIT_DETERMINISM``, else ``strict``."""
    chosen = value if value is not None else os.environ.get(_ENV, "strict") or "strict"
    if chosen not in MODES:
        source = "determinism" if value is not None else _ENV
        raise ValueError(f"{source}={chosen!r}: allowed values are {', '.join(map(repr, MODES))}")
    return chosen


@contextlib.contextmanager
def init_rng(seed: int):
    """Draw initialisations from ``seed``, leaving the caller's RNG state (CPU and CUDA) as it was."""
    import torch

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed={seed!r}: must be an int")
    cuda = torch.cuda.is_initialized()  # else CUDA's RNG is untouched: seeding it would queue a lazy seed
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if cuda else []):
        torch.default_generator.manual_seed(seed)
        if cuda:
            torch.cuda.manual_seed_all(seed)
        yield


def gpu_identity(device=None) -> dict:
    """What, beside the code and the settings, decides a CUDA run's bits: the card, and how many multiprocessors
    this process may use. Under an MPS share the device reports fewer, and kernels' heuristics choose by that
    count: one Lab 2 trial trained other weights at 25% of an H200's SMs than with all of them, with or without
    MPS (benchmarks/training/sm_share_bits.json). For cache keys of results trained on CUDA."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
    return {"gpu": props.name, "gpu_sm_count": props.multi_processor_count}


def attention_backends(device) -> list:
    """The SDPA backends allowed while training deterministically on ``device`` (CUDA: flash, memory-efficient
    and math; cuDNN's attention has no deterministic backward to switch to)."""
    from torch.nn.attention import SDPBackend

    if device.type != "cuda":
        return [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@contextlib.contextmanager
def deterministic(device, how: str | None = None):
    """Deterministic kernels on ``device`` while the block runs (restored after). CPU kernels are already
    deterministic for what labkit trains, so this only acts on CUDA. ``how``: a mode of ``MODES``."""
    import torch

    how = mode(how)
    device = torch.device(device)
    if device.type != "cuda" or how == "off":
        yield
        return
    if how == "strict" and _cuda_started_without_config:
        raise RuntimeError(
            "CUDA was initialised before labkit set CUBLAS_WORKSPACE_CONFIG, so cuBLAS may not be reproducible in "
            f"this process: import labkit before the first CUDA call, or export CUBLAS_WORKSPACE_CONFIG="
            f"{CUBLAS_WORKSPACE} (or {_ENV}=warn to train anyway)")
    from torch.nn.attention import sdpa_kernel

    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
              torch.utils.deterministic.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True, warn_only=how == "warn")
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    # filling every torch.empty with NaN guards against reading uninitialised memory, which correct kernels
    # never do; it costs a memset per allocation and changes no result
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        with sdpa_kernel(attention_backends(device)):
            yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]
        torch.utils.deterministic.fill_uninitialized_memory = before[4]
