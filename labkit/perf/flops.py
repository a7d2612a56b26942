"""FLOPs of a sequence classifier's training step and forward pass, counted by ``torch.utils.flop_counter`` on a
CPU run of one sequence (the meta device cannot run it: the model reads a value from its mask), and the roofline
reading of a measured rate against a card's peak.

A BERT's FLOPs on a batch of ``b`` sequences of length ``L`` are ``b * (c0 + c1 * L + c2 * L**2)``: the dense
layers are linear in the tokens, attention's scores and weighted sum quadratic in the length. ``per_length``
counts three lengths and solves for the three coefficients, checked on a fourth, so a whole epoch of trimmed
batches is counted from its lengths alone.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

# Dense bf16 tensor-core peaks (no sparsity), from NVIDIA's datasheets: the roofline's ceiling by device name.
PEAK_BF16_TFLOPS = {"H100 80GB HBM3": 989.4, "H100 SXM": 989.4, "H200": 989.4, "H100 PCIe": 756.0,
                    "H100 NVL": 835.0}


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a device named like ``torch.cuda.get_device_name()`` (None: not in the table)."""
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in device_name), None)


def count(model: torch.nn.Module, batch: int, length: int, train: bool) -> int:
    """FLOPs of one step (``train``: forward and backward) or one forward pass of ``model`` (a CPU model, left in
    that mode, its gradients cleared) on ``batch`` sequences of ``length`` tokens with labels (keep ``batch *
    length`` small: it runs)."""
    model.train(train)
    inputs = {"input_ids": torch.zeros(batch, length, dtype=torch.long),
              "attention_mask": torch.ones(batch, length, dtype=torch.long),
              "labels": torch.zeros(batch, dtype=torch.long)}
    # attention as the math backend's matrix products: counted (the CPU's fused kernel is not) and the model's
    # FLOPs, not those of a kernel that recomputes in its backward
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        with torch.set_grad_enabled(train):
            loss = model(**inputs).loss
            if train:
                loss.backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


@dataclass(frozen=True)
class PerLength:
    """FLOPs of one sequence of length L: ``c0 + c1 * L + c2 * L**2``."""
    c0: float
    c1: float
    c2: float

    def __call__(self, length: int) -> float:
        return self.c0 + self.c1 * length + self.c2 * length ** 2

    def batches(self, lengths: Counter) -> float:
        """FLOPs of batches counted as ``{(batch, length): how many}``."""
        return sum(n * b * self(length) for (b, length), n in lengths.items())


def per_length(model: torch.nn.Module, train: bool, lengths=(32, 128, 256), check: int = 77) -> PerLength:
    """The three coefficients from counts of ``model`` (see ``count``) at three ``lengths`` (batch 1), checked
    exactly at ``check``."""
    (a, b, c) = lengths
    fa, fb, fc = (count(model, 1, n, train) for n in (a, b, c))
    # Newton's divided differences: exact for a quadratic
    d1, d2 = (fb - fa) / (b - a), (fc - fb) / (c - b)
    c2 = (d2 - d1) / (c - a)
    c1 = d1 - c2 * (a + b)
    c0 = fa - c1 * a - c2 * a * a
    fit = PerLength(c0, c1, c2)
    got = count(model, 1, check, train)
    if abs(fit(check) - got) > 1e-6 * got:
        raise ValueError(f"FLOPs are not quadratic in the length: {got} counted at {check}, {fit(check):.0f} fitted")
    return fit


def roofline(flops: float, seconds: float, device_name: str) -> dict:
    """Achieved TFLOP/s of ``flops`` done in ``seconds`` and its share of the device's dense bf16 peak."""
    achieved = flops / seconds / 1e12
    peak = peak_tflops(device_name)
    return {"flops": flops, "seconds": seconds, "achieved_tflops": achieved, "peak_bf16_tflops": peak,
            "share_of_peak": achieved / peak if peak else None,
            "seconds_at_peak": flops / (peak * 1e12) if peak else None}
