"""Where training and evaluation run in bf16 autocast: always on CUDA; on a CPU only where the settings ask
(``cpu_autocast``) and, for ``"auto"``, where the CPU multiplies bf16 natively.

A CPU with AVX512-BF16 or AMX runs a bf16 GEMM in about half an fp32 one's time: a MiniLM-L2 training step
(32 x 128 tokens) took 0.29 s against 0.50 s, its forward 0.067 s against 0.168 s on 2 cores of this
project's CI machine (AVX512-BF16). Without such instructions oneDNN emulates bf16, slower than fp32, so
``"auto"`` keeps fp32 there. The quick profile (the CPU approximation of the full one, which runs bf16 on a GPU)
asks for ``"auto"``; smoke keeps fp32, the reference its tests compare with.

    cpu_autocast "off"  : fp32 on a CPU (the default, and what settings without the key mean)
                 "auto" : bf16 where the CPU has native bf16 GEMMs, else fp32
                 "bf16" : bf16 on any CPU
"""
from __future__ import annotations

import functools

import torch

from . import train as _train  # its pick_device looked up at each call (tests stand a GPU in for it)

CPU_AUTOCAST = ("off", "auto", "bf16")


def check_cpu_autocast(value) -> str:
    """The settings' choice checker: ``value`` if allowed, else a ValueError naming the allowed values."""
    if value not in CPU_AUTOCAST:
        raise ValueError(f"cpu_autocast={value!r}: allowed values are {', '.join(map(repr, CPU_AUTOCAST))}")
    return value


@functools.lru_cache(maxsize=None)
def cpu_bf16_native() -> bool:
    """Whether this CPU runs bf16 GEMMs in hardware (AVX512-BF16 or AMX), as oneDNN reports it."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN's query
        return False


def cpu_bf16(s: dict) -> bool:
    """Whether settings ``s`` run in bf16 autocast when their device is a CPU."""
    mode = check_cpu_autocast(s.get("cpu_autocast", "off"))
    return mode == "bf16" or (mode == "auto" and cpu_bf16_native())


def on_cpu_bf16(s: dict) -> bool:
    """Whether settings ``s`` train and evaluate on a CPU in bf16 autocast (their device resolved here)."""
    return _train.pick_device(s.get("device", "auto")).type == "cpu" and cpu_bf16(s)


def mixed_precision(s: dict) -> bool | str:
    """``train.train``/``train.evaluate``'s ``mixed_precision`` for settings ``s``: ``"bf16"`` (CPU too) where
    they ask for bf16 on a CPU that they run on (said once per process), else True (bf16 on CUDA, fp32 on a CPU)."""
    if on_cpu_bf16(s):
        announce()
        return "bf16"
    return True


def on(s: dict) -> dict:
    """The device and precision keywords of ``train.train``/``train.evaluate`` for settings ``s``."""
    return {"device": s.get("device", "auto"), "mixed_precision": mixed_precision(s)}


def cache_key(s: dict) -> dict:
    """What the cache keys of trained or measured results add for settings ``s``: ``{"cpu_autocast": "bf16"}``
    where they ran on a CPU in bf16, else nothing (so every key stored before this setting stays valid)."""
    return {"cpu_autocast": "bf16"} if on_cpu_bf16(s) else {}


def _native() -> str:
    return "native bf16 GEMMs" if cpu_bf16_native() else "no native bf16 GEMMs: emulated, slower than fp32"


_ANNOUNCED: list[bool] = []


def announce() -> None:
    """Say once per process that a CPU runs in bf16 autocast (never silently: its numbers differ from fp32's)."""
    if not _ANNOUNCED:
        _ANNOUNCED.append(True)
        print(f"[labkit] training and evaluation on the CPU in bf16 autocast ({_native()}); "
              "cpu_autocast='off' keeps fp32", flush=True)


def describe(s: dict) -> str:
    """One line saying which precision settings ``s`` run in here."""
    dev = _train.pick_device(s.get("device", "auto"))
    if dev.type == "cuda":
        return "bf16 autocast on CUDA"
    if cpu_bf16(s):
        return f"bf16 autocast on the CPU ({_native()}; cpu_autocast={s.get('cpu_autocast')!r})"
    why = "" if s.get("cpu_autocast", "off") == "off" else " (this CPU has no native bf16 GEMMs)"
    return f"fp32 on the CPU{why}"
