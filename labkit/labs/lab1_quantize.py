"""What Lab 1a's notebook shows beside its figure: the base model, the stored bits of the int8 model (the
``lab1.average_bits`` exercise's inputs) and the width sweep's summary and table."""
from __future__ import annotations

import torch

from ..quant import average_bits as labkit_average_bits
from ..quant.calibrate import calibrated_fixed_point
from ..report import table

SWEEP_COLUMNS = ["width", "frac_width", "ptq", "qat", "qat_train_seconds"]


def base_text(metrics: dict, sizes: dict, seeds: list[int]) -> str:
    """The base model: the SFT model of Lab 0 at the first training seed, its accuracy and where it came from."""
    return (f"Base: the SFT model of Lab 0 (training seed {seeds[0]}), **{metrics['accuracy']:.4f}** accuracy on "
            f"{sizes['test']:,} test reviews ({'from the cache' if 'cached' in metrics else 'trained now'}); "
            f"training seeds {seeds}.")


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


def average_bits_text(quantized, base, average_bits) -> tuple[str, str]:
    """``(line, text)``: ``average_bits`` (the exercise's, or labkit's) over the stored tensors of
    ``quantized`` (a ``quant.quantize`` result) and of the fp32 ``base``, beside labkit's
    ``quant.average_bits`` (a line to print), and the sentence that says what was quantized."""
    q_weights, q_inputs = stored_tensors(quantized.model)
    w_bits, in_bits, fp32_bits = average_bits(q_weights), average_bits(q_inputs), average_bits(stored_tensors(base)[0])
    bits = labkit_average_bits(quantized.model)
    line = (f"average_bits: weights {w_bits}, inputs {in_bits}, fp32 model {fp32_bits}; labkit's quant.average_bits: "
            f"weights {bits['weight_bits']}, inputs {bits['data_in_bits']}, fp32 model "
            f"{labkit_average_bits(base)['weight_bits']}")
    text = (f"int8 quantizes **{len(quantized.changed)}** Linear layers (e.g. `{next(iter(quantized.changed))}`: "
            f"{next(iter(quantized.changed.values()))}). Average bits: weights {w_bits:.1f}, "
            f"inputs {in_bits:.1f} (fp32 model: {fp32_bits:.0f}).")
    return line, text


def sweep_text(numbers: dict, settings: dict, base, ranges: dict, seed: int) -> str:
    """The calibrated int8 frac widths of ``base`` (training seed ``seed``, input ``ranges`` measured on it)
    beside the sheet's single rule, the equal-training control, and the sweep's table."""
    cal8 = calibrated_fixed_point(base, 8, ranges)
    calibrated = (f"Calibrated int8 frac widths (seed {seed}) range over inputs "
                  f"{sorted({c['data_in_frac_width'] for k, c in cal8.items() if k != 'by'})}, weights "
                  f"{sorted({c['weight_frac_width'] for k, c in cal8.items() if k != 'by'})}. For comparison, the "
                  f"sheet's single int8 rule (frac 4 everywhere) gives PTQ "
                  f"**{numbers['sheet_rule_int8_frac4_ptq']:.4f}** (mean over seeds).")
    control = (f"Equal-training control: fp32 trained {settings['qat_epochs']:g} epoch more at lr "
               f"{settings['finetune_lr']:g}: **{numbers['control']['accuracy']:.4f}** (mean over seeds).")
    return "\n\n".join([calibrated, control, table(numbers["rows"], SWEEP_COLUMNS)])
