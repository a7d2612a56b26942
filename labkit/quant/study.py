"""Number-format studies: PTQ then QAT of a model under one config, weight quantization error (SNR), and
the per-format settings Lab 3 compares at a given width.

``ptq_qat``, ``flat_config`` and ``weight_snr`` are generic (any model factory, config and loaders);
``study_params`` reads Lab 3's choice of parameters for each registered format from the format's own declaration
(``FormatSpec.study``, beside its class in ``labkit.quant.formats``).
"""
from __future__ import annotations

import math
import time
from typing import Callable

import torch

from ..training import precision, train
from .bits import average_bits
from .formats import FORMATS, NumberFormat, make_format
from .formats.base import ROLES, check_covers, declared, spec_of
from .formats.log import LogFormat
from .transform import quantize

# The order of Lab 3's tables and figures; formats whose width is fixed by definition last.
STUDY_ORDER = ("integer", "minifloat_denorm", "minifloat_ieee", "log", "block_fp", "block_minifloat",
               "block_log", "mxint8", "binary", "binary_scaling", "binary_residual_sign")
check_covers(dict.fromkeys(STUDY_ORDER), "labkit.quant.study.STUDY_ORDER")
# Views of the formats' declarations (FormatSpec.roles, .min_width), in the study's order
BINARY = tuple(n for n, roles in declared("roles", STUDY_ORDER).items() if "bias" not in roles)  # biases stay fp32
FIXED_WIDTH = tuple(n for n, w in declared("min_width", STUDY_ORDER).items() if w is None)
MIN_WIDTH = {n: w for n, w in declared("min_width", STUDY_ORDER).items() if w is not None}


def study_params(name: str, width: int) -> dict[str, dict]:
    """Lab 3's per-role parameters for format ``name`` at ``width`` bits (its ``FormatSpec.study``); roles absent
    (``FormatSpec.roles``) stay fp32.

    Width formats: the element width is ``width`` (shared exponents come on top, in bits_per_element).
    integer: frac = width // 2 (the course's int8 with 4 fractional bits, as in Lab 1). Minifloats:
    E4M3-style (4 exponent bits, fewer when width is small). log: its default bias 2^(width-2). Blocks
    of 16 along the reduction dimension with 8-bit shared exponents; block minifloat elements E3.
    Fixed-width formats ignore ``width``: mxint8 groups of 32 (8.25 bits); the binary family keeps
    biases in fp32 (binarizing a bias to +-1 destroys it; BNNs keep biases in full precision).
    """
    spec = spec_of(name)  # an unknown name, or a format that declares no study parameters: an error naming it
    if spec.min_width is not None and width < spec.min_width:
        raise ValueError(f"{name}: width={width} is below its minimum {spec.min_width}")
    params = spec.study(width)
    return {role: dict(params) for role in ROLES if role in spec.roles}


def flat_config(name: str, per_role: dict[str, dict]) -> dict:
    """The course's flat dict: ``{"name": name, "<role>_<param>": value, ...}``."""
    unknown = sorted(set(per_role) - set(ROLES))
    if unknown:
        raise KeyError(f"unknown role(s) {unknown}; allowed: {list(ROLES)}")
    return {"name": name, **{f"{role}_{k}": v for role, params in per_role.items() for k, v in params.items()}}


def ptq_qat(model_factory: Callable[[], torch.nn.Module], qconfig, loaders, settings: dict,
            filter_fn: Callable[[str, torch.nn.Module], bool] | None = None,
            freeze: Callable[[torch.nn.Module], object] | None = None, progress: bool = False) -> dict:
    """Quantize a fresh model per ``qconfig``, evaluate (PTQ), train with the quantizers in place (QAT),
    evaluate again.

    ``model_factory()`` must return a model the caller does not reuse (it is quantized in place).
    ``loaders`` has ``.train`` and ``.test``; ``settings`` gives ``qat_epochs`` (may be fractional),
    ``qat_lr`` (else ``lr``), ``device`` and ``seed``. ``freeze(model)`` runs before QAT (e.g. freeze
    the embeddings). A non-finite QAT loss is recorded (``qat`` accuracy NaN, ``qat_error``), not raised,
    so one diverging format does not stop a study.
    """
    for key in ("qat_epochs", "qat_lr" if "qat_lr" in settings else "lr"):
        if key not in settings:
            raise KeyError(f"ptq_qat needs settings[{key!r}] (QAT length in epochs; qat_lr or lr)")
    start = time.perf_counter()
    result = quantize(model_factory(), qconfig, filter_fn=filter_fn, inplace=True)
    model = result.model
    bits = {k: v for k, v in average_bits(model).items() if k != "per_layer"}
    on = precision.on(settings)
    ptq = train.evaluate(model, loaders.test, **on, desc="PTQ", progress=progress)
    if freeze is not None:
        freeze(model)
    out = {"ptq": ptq, "bits": bits, "layers": sorted(result.changed)}
    try:
        fit = train.train(model, loaders.train, epochs=settings["qat_epochs"],
                          lr=settings.get("qat_lr", settings.get("lr")), **on,
                          seed=settings.get("seed", 0), desc="QAT", progress=progress)
        out["qat_train"] = {k: fit[k] for k in ("steps", "train_seconds", "train_loss_first", "train_loss_last")}
        out["qat"] = train.evaluate(model, loaders.test, **on, desc="QAT eval", progress=progress)
        out["qat_error"] = None
    except FloatingPointError as err:  # the same keys as a finished QAT, so results of several seeds combine
        out["qat_error"] = str(err)
        out["qat_train"] = {k: None for k in ("steps", "train_seconds", "train_loss_first", "train_loss_last")}
        out["qat"] = {**{k: float("nan") for k in ptq}, "n": ptq["n"]}
    out["seconds"] = time.perf_counter() - start
    model.cpu()
    return out


def linear_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every Linear weight of ``model`` as a float32 CPU tensor, by layer name."""
    weights = {n: m.weight.detach().float().cpu() for n, m in model.named_modules()
               if isinstance(m, torch.nn.Linear)}
    if not weights:
        raise ValueError("the model has no Linear layers")
    return weights


def weight_snr(weights: dict[str, torch.Tensor], fmt_for: Callable[[str, torch.Tensor], NumberFormat]) -> dict:
    """Signal-to-quantization-noise ratio over all ``weights`` together: 10 log10(sum w^2 / sum (w - q)^2).

    ``fmt_for(layer_name, weight)`` picks the format (so it may fit a parameter to the tensor). Also
    returns the element-weighted bits per element and the share of non-zero weights quantized to 0.
    Sums accumulate in float64.
    """
    signal = noise = bits = count = zeroed = nonzero = 0.0
    with torch.no_grad():
        for name, w in weights.items():
            fmt = fmt_for(name, w)
            q = fmt.quantize_values(w)
            signal += float(w.double().pow(2).sum())
            noise += float((w - q).double().pow(2).sum())
            bits += fmt.bits_per_element(tuple(w.shape)) * w.numel()
            count += w.numel()
            zeroed += float(((q == 0) & (w != 0)).sum())
            nonzero += float((w != 0).sum())
    snr = math.inf if noise == 0 else 10 * math.log10(signal / noise)
    return {"snr_db": snr, "bits": bits / count, "zeroed": zeroed / max(nonzero, 1.0)}


def integer_frac_for(width: int, max_abs: float) -> int:
    """The largest frac width whose fixed-point range still holds ``max_abs`` (a per-tensor fit)."""
    return math.floor(math.log2((2 ** (width - 1) - 1) / max_abs))


def snr_sweep(model: torch.nn.Module, widths, names=STUDY_ORDER) -> list[dict]:
    """SNR of the model's Linear weights for every format at every width (fixed-width formats once),
    plus two per-tensor-fitted variants showing what a fixed range costs: integer with its frac width
    and log with its bias fitted to each tensor's max |w|."""
    weights = linear_weights(model)
    rows = []
    for name in names:
        for width in ([None] if name in FIXED_WIDTH else [w for w in widths if w >= MIN_WIDTH[name]]):
            fmt = make_format(name, **study_params(name, width or 8)["weight"])
            rows.append({"format": name, "width": width, **weight_snr(weights, lambda n, w, f=fmt: f)})
    fitted = {
        "integer (frac fit per tensor)": lambda width, w: make_format(
            "integer", width=width, frac_width=integer_frac_for(width, w.abs().max().item())),
        "log (bias fit per tensor)": lambda width, w: make_format(
            "log", width=width, exponent_bias=LogFormat.bias_for(width, w.abs().max().item())),
    }
    for label, build in fitted.items():
        for width in widths:
            if width >= 2:
                stats = weight_snr(weights, lambda n, w, b=build, k=width: b(k, w))
                rows.append({"format": label, "width": width, **stats})
    return rows
