"""What Lab 1a's notebook shows beside its figure: the stored bits of the int8 model (the ``lab1.average_bits``
exercise's inputs and results) and the calibrated int8 widths (``narrate.lab1_quantize`` words them)."""
from __future__ import annotations

import torch

from ..quant import average_bits as labkit_average_bits
from ..quant.calibrate import calibrated_fixed_point


def stored_tensors(model) -> tuple[list[dict], list[dict]]:
    """{"numel", "width", "frac_width"} of every Linear's weight and bias, and of its input (per token)."""
    weights, inputs = [], []
    for m in model.modules():
        if not isinstance(m, torch.nn.Linear):
            continue
        cfg = getattr(m, "config", None)  # a QuantLinear's formats; None: an unquantized Linear
        for role, t in (("weight", m.weight), ("bias", m.bias)):
            fmt = getattr(cfg, role, None)
            if t is not None:
                weights.append({"numel": t.numel(), "width": fmt.width if fmt else torch.finfo(t.dtype).bits,
                                "frac_width": fmt.frac_width if fmt else None})
        fmt = getattr(cfg, "data_in", None)
        inputs.append({"numel": m.in_features, "width": fmt.width if fmt else torch.finfo(m.weight.dtype).bits,
                       "frac_width": fmt.frac_width if fmt else None})
    return weights, inputs


def bits_check(quantized, base, average_bits) -> dict:
    """``average_bits`` (the exercise's, or labkit's) over the stored tensors of ``quantized`` (a
    ``quant.quantize`` result) and of the fp32 ``base`` (``yours``), beside labkit's ``quant.average_bits``
    (``labkit``), with the number of layers ``changed`` and one of them (``example``: its name and change)."""
    q_weights, q_inputs = stored_tensors(quantized.model)
    yours = {"weights": average_bits(q_weights), "inputs": average_bits(q_inputs),
             "fp32": average_bits(stored_tensors(base)[0])}
    bits = labkit_average_bits(quantized.model)
    labkit = {"weights": bits["weight_bits"], "inputs": bits["data_in_bits"],
              "fp32": labkit_average_bits(base)["weight_bits"]}
    return {"yours": yours, "labkit": labkit, "changed": len(quantized.changed),
            "example": next(iter(quantized.changed.items()))}


def calibrated_int8_widths(base, ranges: dict) -> dict[str, list[int]]:
    """The distinct frac widths calibration gives int8 inputs and weights of ``base`` (input ``ranges`` measured on
    it): ``{"inputs": [...], "weights": [...]}``."""
    cal8 = calibrated_fixed_point(base, 8, ranges)
    return {"inputs": sorted({c["data_in_frac_width"] for k, c in cal8.items() if k != "by"}),
            "weights": sorted({c["weight_frac_width"] for k, c in cal8.items() if k != "by"})}
