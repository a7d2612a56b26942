"""What Lab 1a's notebook says while it runs: its base model, the int8 model's average bits (the exercise's beside
labkit's), and the width sweep's calibrated widths, control and table (the answers, which word the readings, are
``labkit.answers.lab1_quantize``)."""
from __future__ import annotations

from ..report import table

SWEEP_COLUMNS = ["width", "frac_width", "ptq", "qat", "qat_train_seconds"]


def base_text(metrics: dict, sizes: dict, seeds: list[int]) -> str:
    """The base model: the SFT model of Lab 0 at the first training seed, its accuracy and where it came from."""
    return (f"Base: the SFT model of Lab 0 (training seed {seeds[0]}), **{metrics['accuracy']:.4f}** accuracy on "
            f"{sizes['test']:,} test reviews ({'from the cache' if 'cached' in metrics else 'trained now'}); "
            f"training seeds {seeds}.")


def sweep_text(numbers: dict, settings: dict, widths: dict[str, list[int]], seed: int) -> str:
    """The calibrated int8 frac widths (``labs.lab1_quantize.calibrated_int8_widths`` of training seed ``seed``)
    beside the sheet's single rule, the equal-training control, and the sweep's table."""
    calibrated = (f"Calibrated int8 frac widths (seed {seed}) range over inputs {widths['inputs']}, weights "
                  f"{widths['weights']}. For comparison, the "
                  f"sheet's single int8 rule (frac 4 everywhere) gives PTQ "
                  f"**{numbers['sheet_rule_int8_frac4_ptq']:.4f}** (mean over seeds).")
    control = (f"Equal-training control: fp32 trained {settings['qat_epochs']:g} epoch more at lr "
               f"{settings['finetune_lr']:g}: **{numbers['control']['accuracy']:.4f}** (mean over seeds).")
    return "\n\n".join([calibrated, control, table(numbers["rows"], SWEEP_COLUMNS)])


def bits_line(bits: dict) -> str:
    """``labs.lab1_quantize.bits_check``: the exercise's average bits beside labkit's, as printed."""
    y, k = bits["yours"], bits["labkit"]
    return (f"average_bits: weights {y['weights']}, inputs {y['inputs']}, fp32 model {y['fp32']}; labkit's "
            f"quant.average_bits: weights {k['weights']}, inputs {k['inputs']}, fp32 model {k['fp32']}")


def bits_text(bits: dict) -> str:
    """``labs.lab1_quantize.bits_check``: what int8 quantized, and its average bits."""
    (name, change), y = bits["example"], bits["yours"]
    return (f"int8 quantizes **{bits['changed']}** Linear layers (e.g. `{name}`: {change}). Average bits: weights "
            f"{y['weights']:.1f}, inputs {y['inputs']:.1f} (fp32 model: {y['fp32']:.0f}).")
