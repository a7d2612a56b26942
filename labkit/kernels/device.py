"""Facts about a CUDA device that the kernels ask on every call, looked up once per device.

Below both ``fused_linear`` (which path a call takes) and ``fused_triton`` (which launch it gets), so
neither imports the other for them.
"""
from __future__ import annotations

import functools

import torch


def capability(device) -> tuple[int, int]:
    """(major, minor) compute capability of the CUDA ``device`` (without an index: the current device)."""
    device = torch.device(device)
    return _capability(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    # asked on every call of the fused linear (its path and its launch): looked up once per device
    return torch.cuda.get_device_capability(index)
