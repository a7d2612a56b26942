"""Lab 3's mixed-precision space: for every Linear layer, a number format and that format's own parameters,
and the objective that quantizes the fine-tuned model accordingly and measures accuracy and bits.

Every role of a layer (input, weight, bias) gets the layer's format with the same parameters, except
that the binary family keeps biases in fp32 (as in Lab 3's format study). Parameter names are
``<layer>:format`` and ``<layer>:<format>.<param>``: each format's parameters have their own names, so
Optuna sees one fixed distribution per name whichever formats a study allows.
"""
from __future__ import annotations

import copy
import time
import warnings
import weakref
from pathlib import Path

import optuna
import torch

from .. import recipes
from ..training import cuda_graphs, precision, train
from ..quant import QuantLinear, average_bits, fast, make_format, quantize
from ..quant.config import LinearQuantConfig
from ..quant.formats import (BinaryFormat, BinaryScalingFormat, BlockFP, BlockLog, BlockMinifloat, IntegerFormat,
                             LogFormat, MinifloatDenorm, MinifloatIEEE, MXInt8Format, ResidualSignFormat)
from ..quant.formats.mxint import SHARED_BITS as MX_SHARED_BITS
from ..quant.formats.base import check_covers, declared, entry, spec_of
from ..quant.study import ROLES, STUDY_ORDER, flat_config
from ..search.cache import cached_or_run, config_key, device_settings

# The settings that determine one Lab 3 measurement: the SFT model, the test batches, QAT.
MEASURE_KEYS = tuple(dict.fromkeys(recipes.SFT_KEYS + recipes.DATA_KEYS + ("qat_epochs", "qat_lr", "cpu_autocast")))


def trial_settings(s: dict) -> dict:
    """What the cache key holds of the settings (trial counts, lambdas and the like are left out, so a
    longer or differently weighted search reuses every measurement)."""
    kept = {k: s[k] for k in MEASURE_KEYS if k in s}
    return {**{k: v for k, v in kept.items() if k not in ("device", "cpu_autocast")}, **device_settings(kept)}

# Views of the formats' declarations (FormatSpec, beside each class in labkit.quant.formats), in the study's order.
# Each format's searched parameters: natural ranges (integer: the sheet's width x frac). A choice a format rejects
# for a given width (more exponent bits than the width holds) is cut to the widest valid one: see ``_effective``.
FORMAT_SPACE: dict[str, dict[str, list]] = {n: {k: list(v) for k, v in space.items()}
                                            for n, space in declared("space", STUDY_ORDER).items()}
# Parameters that are not searched but fixed for the format (block shared fields: 8 bits, as in Lab 3); {}: none.
FIXED: dict[str, dict] = {n: dict(fixed) for n, fixed in declared("fixed", STUDY_ORDER).items()}
check_covers(FORMAT_SPACE, "lab3_precision.FORMAT_SPACE")
check_covers(FIXED, "lab3_precision.FIXED")
# The sheet's choice of leaving a layer in full precision: a pseudo-format with no parameters, the layer stays
# an unquantized nn.Linear (32 bits a weight in average_bits). Not in FORMAT_SPACE, so the studies that do not
# offer it keep their spaces; a study offers it by naming it in its formats.
FP32 = "fp32"
OBJECTIVES = ("accuracy", "cost", "pareto")
MODES = ("ptq", "qat")


def space_of(name: str) -> dict[str, list]:
    """A format's searched parameters (``fp32``: none)."""
    return {} if name == FP32 else entry(FORMAT_SPACE, name, "lab3_precision.FORMAT_SPACE")


def fixed_of(name: str) -> dict:
    """A format's fixed parameters, set on every layer of it (``fp32``: none)."""
    return {} if name == FP32 else entry(FIXED, name, "lab3_precision.FIXED")


def check_formats(formats) -> list[str]:
    formats = list(formats)
    allowed = (*FORMAT_SPACE, FP32)
    bad = [f for f in formats if f not in allowed]
    if not formats or bad or formats == [FP32]:
        raise ValueError(f"formats {bad or formats}: allowed values are {', '.join(allowed)} (at least one "
                         f"number format; {FP32!r} only beside one)")
    return formats


# Bits a format needs beside its exponent field (FormatSpec.exponent_leaves): sign + at least one mantissa bit
# (denorm), sign (IEEE-style); formats without a searched exponent field: none.
_NON_EXPONENT_BITS = {n: b for n, b in declared("exponent_leaves", STUDY_ORDER).items() if b is not None}


def _effective(name: str, params: dict) -> dict:
    """The format a sampled parameter set means: an exponent field wider than the width allows is cut to
    the widest valid one (so every sample is a real format and no trial is thrown away)."""
    if name in _NON_EXPONENT_BITS:
        params = {**params, "exponent_width": min(params["exponent_width"], params["width"] - _NON_EXPONENT_BITS[name])}
    return params


def sample_layer(trial: optuna.Trial, layer: str, formats: list[str]) -> tuple[str, dict]:
    name = formats[0] if len(formats) == 1 else trial.suggest_categorical(f"{layer}:format", formats)
    params = {k: trial.suggest_categorical(f"{layer}:{name}.{k}", v) for k, v in space_of(name).items()}
    return name, {**fixed_of(name), **_effective(name, params)}


def layer_config(name: str, params: dict) -> dict:
    """The course's flat dict for one layer: every role in the format (binary family: bias stays fp32)."""
    roles = [r for r in ROLES if r in spec_of(name).roles]  # the binary family's: data_in and weight
    return flat_config(name, {role: dict(params) for role in roles})


def sample_config(trial: optuna.Trial, layers: list[str], formats: list[str]) -> dict[str, tuple[str, dict]]:
    return {layer: sample_layer(trial, layer, formats) for layer in layers}


def selection(config: dict[str, tuple[str, dict]]) -> dict:
    """A by-name selection spec for ``quantize``: every layer of ``config`` and nothing else (``fp32`` layers
    named with a None config: left alone, and still checked to exist)."""
    return {"by": "name", **{layer: {"config": None if name == FP32 else layer_config(name, params)}
                             for layer, (name, params) in config.items()}}


def params_of(config: dict[str, tuple[str, dict]], formats: list[str]) -> dict:
    """Optuna parameters that make ``config`` (to queue it, e.g. a uniform-format point)."""
    out = {}
    for layer, (name, params) in config.items():
        if len(formats) > 1:
            out[f"{layer}:format"] = name
        out.update({f"{layer}:{name}.{k}": params[k] for k in space_of(name)})
    return out


def uniform(layers: list[str], name: str, **params) -> dict[str, tuple[str, dict]]:
    """Every layer in one format (``params`` fill the searched ones; defaults: each range's largest)."""
    chosen = _effective(name, {k: params.get(k, v[-1]) for k, v in space_of(name).items()})
    return {layer: (name, {**fixed_of(name), **chosen}) for layer in layers}


def linear_layers(model: torch.nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def format_counts(config: dict[str, tuple[str, dict]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, _ in config.values():
        counts[name] = counts.get(name, 0) + 1
    return counts


class PrecisionObjective:
    """Quantize the fine-tuned model per a sampled per-layer config; PTQ accuracy (``mode="qat"``: after
    ``qat_epochs`` of QAT) and average weight bits.

    ``objective``: ``accuracy`` (maximize accuracy), ``cost`` (maximize accuracy - ``lam`` x average weight
    bits) or ``pareto`` (two values: accuracy up, average weight bits down). The measurements are cached
    per configuration, so the same config costs nothing in another study whatever it optimises.
    """

    def __init__(self, dl, s: dict, base: torch.nn.Module, formats=("integer",), objective: str = "accuracy",
                 lam: float = 0.0, mode: str = "ptq", ptq_matmul: str = "bf16", compile: bool = False):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective={objective!r}: allowed values are {', '.join(map(repr, OBJECTIVES))}")
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: allowed values are {', '.join(map(repr, MODES))}")
        if not lam >= 0:
            raise ValueError(f"lam={lam!r}: must be a number >= 0 (accuracy per average weight bit)")
        self.dl, self.s, self.base = dl, s, base
        # the SFT weights' digest: measurements of another SFT model (retrained elsewhere) never count here
        self.sft_digest = _digest(base)
        self.formats, self.objective, self.lam, self.mode = check_formats(formats), objective, lam, mode
        # PTQ under bf16 autocast (CUDA, or a CPU in bf16: labkit.training.precision): layers whose formats are exact in bf16 multiply in bf16, as the
        # unquantized layers do (labkit.quant.fast); QAT keeps the fp32 reference path. compile=False: a
        # format's fake quantization eager (compiling took ~11 s per format on an H100, a trial ~1 s)
        self.matmul = fast.check_mode(ptq_matmul) if mode == "ptq" else "fp32"
        self.compile = compile
        self.layers = linear_layers(base)
        self.cache = None  # set by the worker

    def value(self, attrs: dict):
        acc, bits = attrs["accuracy"], attrs["weight_bits"]
        if self.objective == "pareto":
            return acc, bits
        return acc - self.lam * bits if self.objective == "cost" else acc

    def __call__(self, trial: optuna.Trial):
        config = sample_config(trial, self.layers, self.formats)
        key = config_key({"objective": "lab3", "config": {k: list(v) for k, v in config.items()},
                          "settings": trial_settings(self.s), "mode": self.mode,
                          "sft": self.sft_digest,
                          # bf16 rule 2: evaluation also multiplies in bf16 the formats exact above 2^-126;
                          # 3: binary formats' layers multiply their signs in fp16 (quant.sign_matmul)
                          **({"matmul": self.matmul, "bf16_rule": 3} if self.matmul != "fp32" else {})})
        return cached_or_run(trial, self.cache, key, lambda: self._measure(trial, config), from_attrs=self.value)

    def _measure(self, trial: optuna.Trial, config: dict):
        with warnings.catch_warnings():
            # A format warns when most values fall outside its range; a search samples such configurations
            # on purpose, and the measured accuracy records what they cost.
            warnings.filterwarnings("ignore", message=".*flush to zero or saturate.*", category=RuntimeWarning)
            return self._measure_quietly(trial, config)

    def _measure_quietly(self, trial: optuna.Trial, config: dict):
        start = time.perf_counter()
        with warnings.catch_warnings():  # which layers keep fp32 is recorded below, per trial
            warnings.filterwarnings("ignore", message="qat_matmul='bf16'", category=UserWarning)
            model = quantize(_copy(self.base, share=self.mode == "ptq"), selection(config), inplace=True,
                             qat_matmul=self.matmul, compile=self.compile).model
        for layer, (name, params) in config.items():  # what was built must be what was sampled
            module = model.get_submodule(layer)
            if name == FP32:
                if isinstance(module, QuantLinear):
                    raise RuntimeError(f"{layer}: sampled fp32 but the model holds {module.config.weight}")
                continue
            built = module.config.weight
            if built != make_format(name, **params):
                raise RuntimeError(f"{layer}: sampled {name} {params} but the model holds {built}")
        bits = average_bits(model)
        attrs = {"weight_bits": bits["weight_bits"], "data_in_bits": bits["data_in_bits"],
                 "formats": format_counts(config), "n_test": self.dl.sizes["test"], "sft_digest": self.sft_digest,
                 "bf16_layers": 0}
        dev, on = self.s["device"], precision.on(self.s)
        if train.pick_device(dev).type == "cuda" or on["mixed_precision"] == "bf16":  # the layers that multiply in bf16
            attrs["bf16_layers"] = sum(isinstance(m, QuantLinear) and m.qat_matmul == "bf16"
                                       and fast.why_not(m, inference=True) is None for m in model.modules())
        # evaluation batches of one shape (the test set is sorted by length: most are full) replay a CUDA graph:
        # a PTQ evaluation's kernels take less time than launching them (labkit.training.cuda_graphs; eager elsewhere)
        ev = train.evaluate(model, self.dl.test, **on, progress=False, graphs=None)
        attrs["accuracy_ptq"] = attrs["accuracy"] = ev["accuracy"]
        # what ran: CUDA graph replays or eager batches, and the evaluation's own seconds (the rest is building)
        attrs["eval"] = {k: ev[k] for k in ("eval_seconds", *cuda_graphs.RAN) if k in ev}
        if self.mode == "qat":
            recipes.freeze_embeddings(model)
            train.train(model, self.dl.train, epochs=self.s["qat_epochs"], lr=self.s["qat_lr"], **on,
                        seed=self.s["seed"], progress=False)
            attrs["accuracy"] = train.evaluate(model, self.dl.test, **on, progress=False, graphs=None)["accuracy"]
        attrs["trial_seconds"] = time.perf_counter() - start
        for k, v in attrs.items():
            trial.set_user_attr(k, v)
        return self.value(attrs)


def _copy(base: torch.nn.Module, share: bool) -> torch.nn.Module:
    """A copy of ``base`` to quantize. ``share``: its parameters and buffers are the base's own tensors
    (PTQ: ``quantize`` replaces the Linears by copies and nothing else is written; a deep copy of the
    embeddings alone is ~47 MB a trial); else a deep copy (QAT trains it)."""
    if not share:
        return copy.deepcopy(base)
    memo = {id(t): t for t in (*base.parameters(), *base.buffers())}
    return copy.deepcopy(base, memo)


_BASE: dict[str, torch.nn.Module] = {}
_DIGESTS: "weakref.WeakKeyDictionary[torch.nn.Module, str]" = weakref.WeakKeyDictionary()


def _digest(base: torch.nn.Module) -> str:
    """The base model's weights digest, hashed once per model (a worker builds an objective per study)."""
    if base not in _DIGESTS:
        _DIGESTS[base] = recipes.state_digest(base.state_dict())
    return _DIGESTS[base]


def lab3_objective(settings: dict, **options) -> PrecisionObjective:
    """The registered ``"lab3"`` objective factory: loaders and the cached SFT model, once per process.

    The SFT model must already be in the checkpoint cache (the notebook trains it before the search), so
    concurrent workers never train it at the same time.
    """
    path = recipes.checkpoint_path(settings)  # names the SFT settings: one base model per checkpoint
    if str(path) not in _BASE:
        if not Path(path).is_file():
            raise FileNotFoundError(f"the SFT model for these settings is not cached ({path}); run "
                                    "labkit.recipes.finetuned_model(settings) once before starting workers")
        _BASE[str(path)] = recipes.finetuned_model(settings, recipes.shared_loaders(settings))[0]
    return PrecisionObjective(recipes.shared_loaders(settings), settings, _BASE[str(path)], **options)


lab3_objective.prepare = recipes.prepare_data


# --- a configuration's stored tensors, as the bit-cost exercise (lab3.average_bits) takes them -------------------

def stored_tensor(shape, width, shared_bits=0, block_size=None) -> dict:
    """One stored tensor of a configuration: its shape, bits per element, shared field bits and block size."""
    return {"shape": tuple(shape), "width": width, "shared_bits": shared_bits, "block_size": block_size}


def tensor_entry(fmt, shape) -> dict:
    """A stored tensor as ``bit_cost`` takes it: labkit format ``fmt`` (None: unquantized fp32) on ``shape``."""
    shape = tuple(shape)
    if fmt is None:
        return stored_tensor(shape, 32)
    if isinstance(fmt, BlockFP):
        return stored_tensor(shape, fmt.width, fmt.exponent_width, fmt.block_size)
    if isinstance(fmt, (BlockMinifloat, BlockLog)):
        return stored_tensor(shape, fmt.width, fmt.exponent_bias_width, fmt.block_size)
    if isinstance(fmt, MXInt8Format):
        return stored_tensor(shape, 8, MX_SHARED_BITS, fmt.group_size)
    if isinstance(fmt, BinaryScalingFormat):  # 1 bit + an fp32 scale per row (or one per tensor)
        return stored_tensor(shape, 1, 32, shape[-1] if fmt.per_channel and shape else None)
    if isinstance(fmt, ResidualSignFormat):  # levels bits + levels fp32 scales per tensor
        return stored_tensor(shape, fmt.levels, 32 * fmt.levels)
    if isinstance(fmt, (IntegerFormat, MinifloatDenorm, MinifloatIEEE, LogFormat, BinaryFormat)):
        return stored_tensor(shape, fmt.bits_per_element(shape))
    raise TypeError(f"no bit_cost entry for format {fmt.describe()}")


def config_tensors(model: torch.nn.Module, config: dict) -> list[dict]:
    """Every Linear weight and bias of ``model`` as ``bit_cost`` entries, quantized per Lab 3's per-layer ``config``
    (``{layer: (format name, params)}``, ``lab3_precision.sample_config``; ``fp32`` or absent: unquantized), in
    the order ``average_bits`` counts them."""
    out = []
    for name, m in model.named_modules():
        if not isinstance(m, torch.nn.Linear):
            continue
        fmt_name, params = config.get(name, (FP32, {}))
        cfg = None if fmt_name == FP32 else LinearQuantConfig.from_dict(layer_config(fmt_name, params))
        out.append(tensor_entry(cfg.weight if cfg else None, m.weight.shape))
        if m.bias is not None:
            out.append(tensor_entry(cfg.bias if cfg else None, m.bias.shape))
    return out
