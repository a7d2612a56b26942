"""How a search worker's host thread waits for its GPU: CUDA's default spin, or asleep until the GPU signals.

Why: with fewer CUDA contexts than cores, CUDA spins the waiting thread (``cudaDeviceScheduleAuto``). A worker
replaying CUDA-graphed training steps runs ahead of its GPU and then waits, so workers sharing one GPU can
hold cores that the workers with host work to do (an eager evaluation, building the next trial's model,
capturing its graphs) need. Measured (Lab 2 full, H100, 12 workers + MPS, one call): spinning 36.6 trials/min
with 68% of the 16 cores busy, blocking 37.7 with 64%: a few percent, about the run-to-run spread; 16 workers
(85% of the cores busy) ran blocking. ``LABKIT_CUDA_WAIT=block`` puts the primary context in blocking-sync
mode before the worker first uses CUDA.
"""
from __future__ import annotations

import ctypes
import os

ENV = "LABKIT_CUDA_WAIT"
MODES = ("spin", "block")  # spin: CUDA's own choice (spin/yield by core count); block: sleep on a GPU interrupt
CU_CTX_SCHED_MASK = 0x07
CU_CTX_SCHED_BLOCKING_SYNC = 0x04


def mode(env: dict | None = None) -> str:
    """The worker's wait mode from ``LABKIT_CUDA_WAIT`` (default ``spin``); a clear error for another value."""
    value = (os.environ if env is None else env).get(ENV, "spin").strip().lower() or "spin"
    if value not in MODES:
        raise ValueError(f"{ENV}={value!r}: allowed values are {', '.join(MODES)}")
    return value


def worker_env(mps: bool, env: dict | None = None) -> dict:
    """What search workers get unless the user chose: ``block`` under MPS (a dozen or more workers share the
    GPU and the host's cores: Lab 2 full on an H100, 12 workers 36.6 trials/min spinning, 37.7 blocking,
    benchmarks/search/search_throughput.json), CUDA's default otherwise (one worker per GPU waits least spinning)."""
    return {ENV: "block"} if mps and ENV not in (os.environ if env is None else env) else {}


def _driver():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _device(lib, device_index: int):
    """The driver's handle of device ``device_index`` (None where the driver does not report it)."""
    dev = ctypes.c_int()
    if lib is None or lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(dev), device_index) != 0:
        return None
    return dev


def _state(lib, dev) -> tuple[int, bool] | None:
    flags, active = ctypes.c_uint(), ctypes.c_int()
    if dev is None or lib.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active)) != 0:
        return None
    return flags.value, bool(active.value)


def primary_flags(device_index: int = 0) -> tuple[int, bool] | None:
    """(flags, active) of the device's primary context from the driver; None without a CUDA driver."""
    lib = _driver()
    return _state(lib, _device(lib, device_index))


def apply(env: dict | None = None, device_index: int = 0) -> str:
    """Set the wait mode of this process's GPU (call before CUDA is first used). Returns what was done, for
    the worker's log; raises if ``block`` was asked for and the driver refused it (never silently spins)."""
    wanted = mode(env)
    if wanted == "spin":
        return "CUDA wait: spin (CUDA's default)"
    lib = _driver()
    if lib is None:
        raise RuntimeError(f"{ENV}=block: no CUDA driver (libcuda.so.1) in this process")
    dev = _device(lib, device_index)
    state = _state(lib, dev)
    if state is None:
        raise RuntimeError(f"{ENV}=block: the CUDA driver did not report device {device_index}")
    rc = lib.cuDevicePrimaryCtxSetFlags(dev, (state[0] & ~CU_CTX_SCHED_MASK) | CU_CTX_SCHED_BLOCKING_SYNC)
    after = _state(lib, dev)
    if rc != 0 or after is None or after[0] & CU_CTX_SCHED_MASK != CU_CTX_SCHED_BLOCKING_SYNC:
        raise RuntimeError(f"{ENV}=block: cuDevicePrimaryCtxSetFlags returned {rc} (flags now {after})")
    return "CUDA wait: block (blocking sync)"
