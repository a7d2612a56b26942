"""Checks of settings overrides against a lab's own profile values (``profiles.lab_settings`` runs them).

An override has the type of the key's values in the lab's profiles: an int where they hold ints, a number
where they hold floats (an int is accepted and stored as a float), a non-empty list of the right element
type, a string, True/False only where they hold bools (never for a number). A key that is None in some
profile also accepts None; a key that is None in every profile takes its type from ``NONE_TYPES``. Where a
lab's profiles hold per-device values (``{"cpu": ..., "cuda": ...}``), an override may be one too, each
value checked alone. Numbers are range-checked where the meaning is clear (``RANGES``); named choices
(models, devices, compile variants, dtypes, the search space) are checked by the module that owns them.
Every error names the key.
"""
from __future__ import annotations

import math

from ..perf.timing import DEVICE_TYPES
from ..quant.formats.integer import MAX_WIDTH

# Keys that are None in every profile: their type (same notation as ``kind``).
NONE_TYPES = {"storage": "str"}

# (low, low included, high, high included); None: unbounded. Applied to a number, to each element of a
# list and to each value of a per-device dict.
_POSITIVE = (0, False, None, False)
_NON_NEGATIVE = (0, True, None, False)
_FRACTION = (0, True, 1, False)
RANGES = {
    **dict.fromkeys((
        "train_size", "test_size", "max_length", "batch_size", "epochs", "lr",                # every IMDb lab
        "lora_rank", "lora_alpha", "lora_lr",                                                 # lab0
        "qat_epochs", "prune_epochs", "finetune_lr",                                          # lab1
        "trials", "compression_trials", "post_epochs", "post_lr",                             # lab2
        "format_width", "qat_lr", "snr_widths", "search_trials", "format_trials", "cost_trials",  # lab3
        "pareto_trials", "front_qat",
        "threads", "compile_batch", "compile_image", "compile_repeats", "compile_timeout_s",  # lab4_perf
        "small_batch", "small_image", "small_timeout_s", "sdpa_batch", "sdpa_heads", "sdpa_head_dim",
        "sdpa_seqs", "sdpa_profile_seq", "sdpa_repeats",
        "group_size", "bench_sizes", "bench_groups", "bench_reps", "memory_batch", "memory_seq",  # lab4_mxint8
        "big_hidden", "big_layers", "big_heads", "big_intermediate"), _POSITIVE),
    **dict.fromkeys(("seed", "seeds", "search_seed", "lambdas", "compile_warmup", "sdpa_warmup"),
                    _NON_NEGATIVE),
    **dict.fromkeys(("lora_dropout", "sparsities", "global_sparsities", "prune_sparsity", "warmup"), _FRACTION),
    "table_exponent": (0, True, 255, True),  # a uint8 exponent field
    # fixed-point widths (Lab 1's sweep, Lab 2's compression): the integer format's own range
    **dict.fromkeys(("widths", "quant_width"), (1, True, MAX_WIDTH, True)),
}


def kind(value):
    """The type notation of a profile value: "bool", "int", "float", "str", ("list", element kind) or
    ("dict", value kind); an empty container's element kind is None (unknown)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float, str)):
        return type(value).__name__
    if isinstance(value, list):
        return ("list", merge([kind(v) for v in value]))
    if isinstance(value, dict):
        return ("dict", merge([kind(v) for v in value.values()]))
    raise TypeError(f"profile value {value!r} of type {type(value).__name__} is not JSON-like")


def merge(kinds: list):
    """One kind covering ``kinds`` (int and float make float; containers merge their elements)."""
    kinds = [k for k in kinds if k is not None]
    if not kinds:
        return None
    if set(kinds) == {"int", "float"}:
        return "float"
    if all(isinstance(k, tuple) for k in kinds) and len({k[0] for k in kinds}) == 1:
        return (kinds[0][0], merge([k[1] for k in kinds]))
    if len(set(kinds)) > 1:
        raise TypeError(f"profile values of mixed types {sorted(map(str, set(kinds)))}")
    return kinds[0]


def describe(k, plural: bool = False) -> str:
    """``k`` in words: "a number", or with ``plural`` "numbers" (for the elements of a container)."""
    if k is None:
        return "anything"
    if isinstance(k, tuple):
        container = "non-empty list" if k[0] == "list" else "dict"
        return f"{container}s of {describe(k[1], True)}" if plural else f"a {container} of {describe(k[1], True)}"
    names = {"bool": ("True or False", "True or False"), "int": ("an int", "ints"),
             "float": ("a number", "numbers"), "str": ("a string", "strings")}
    return names[k][plural]


def _check_type(path: str, value, k, allow_empty: bool = False):
    """``value`` checked against kind ``k``; returns it with ints made floats where floats are expected."""
    bad = TypeError(f"setting {path}={value!r}: must be {describe(k)}")
    if k is None:
        return value
    if k == "bool":
        if not isinstance(value, bool):
            raise bad
        return value
    if k in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, int if k == "int" else (int, float)):
            raise bad
        return float(value) if k == "float" else value
    if k == "str":
        if not isinstance(value, str):
            raise bad
        return value
    container, inner = k
    if container == "list":
        if not isinstance(value, list):
            raise bad
        if not value and not allow_empty:
            raise ValueError(f"setting {path}=[]: must be {describe(k)}")
        return [_check_type(f"{path}[{i}]", v, inner) for i, v in enumerate(value)]
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise bad
    return {key: _check_type(f"{path}[{key!r}]", v, inner) for key, v in value.items()}


def _check_range(path: str, value, bounds) -> None:
    if isinstance(value, list):
        for i, v in enumerate(value):
            _check_range(f"{path}[{i}]", v, bounds)
        return
    lo, lo_in, hi, hi_in = bounds
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    ok = (math.isfinite(value) and (lo is None or value > lo or (lo_in and value == lo))
          and (hi is None or value < hi or (hi_in and value == hi)))
    if not ok:
        if hi is None:
            allowed = f"{'>=' if lo_in else '>'} {lo}"
        else:
            allowed = f"{'[' if lo_in else '('}{lo}, {hi}{']' if hi_in else ')'}"
        raise ValueError(f"setting {path}={value!r} is out of range; allowed: {allowed}")


def _check_choice(key: str, value) -> None:
    """Named choices, checked by the module that owns them (imported only when the key is overridden)."""
    if key == "model":
        from ..models import _check_name
        _check_name(value)
    elif key == "device":
        from ..perf.timing import check_device
        check_device(value)
    elif key == "devices":
        from ..perf.timing import resolve_devices
        resolve_devices(value)
    elif key == "prune_scope":
        from ..prune import SCOPES
        if value not in SCOPES:
            raise ValueError(f"allowed values are {', '.join(map(repr, SCOPES))}, got {value!r}")
    elif key == "small_variant":
        from ..perf.compile_study import check_variant
        check_variant(value)
    elif key == "small_states":
        from ..perf.compile_study import check_state
        for state in value:
            check_state(state)
    elif key == "compile_variants":
        from ..perf.compile_study import check_state, check_variant
        for variant, states in value.items():
            check_variant(variant)
            for state in states:
                check_state(state)
    elif key == "sdpa_dtype":
        from ..perf.sdpa import check_dtype
        check_dtype(value)
    elif key == "space":
        from ..labs.lab2_space import restrict
        restrict(value)


def is_per_device(value) -> bool:
    """A ``{"cpu": ..., "cuda": ...}`` dict (a non-empty dict keyed by device types), as ``per_device`` reads it."""
    return isinstance(value, dict) and bool(value) and set(value) <= set(DEVICE_TYPES)


def check_override(key: str, value, defaults: list, per_device: bool = False):
    """``value`` checked against ``defaults`` (the key's value in each profile of the lab); returns it
    normalised (ints as floats where the profiles hold floats). ``per_device``: the lab reads its values
    through ``per_device``, so a ``{"cpu": ..., "cuda": ...}`` override is checked value by value.
    Raises TypeError, ValueError or KeyError naming the key."""
    if key == "workers":  # "auto" or a count; the older spellings of "auto" (0, None) are read as "auto"
        from ..search.run import normalise_workers  # the search engine (and optuna) load only when asked

        return normalise_workers(value, f"setting {key}")
    if key == "devices":  # "auto", one device type or a list of them: resolve_devices says which
        if not (isinstance(value, str) or isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise TypeError(f"setting devices={value!r}: must be 'auto', a device type or a list of them")
        return _checked_choice(key, key, value)
    plain = [v for d in defaults for v in (d.values() if per_device and is_per_device(d) else [d])]
    k = merge([kind(v) for v in plain if v is not None]) or NONE_TYPES.get(key)
    if value is None:
        if not any(v is None for v in plain):
            raise TypeError(f"setting {key}=None: must be {describe(k)}")
        return None
    allow_empty = any(v in ([], {}) for v in plain)
    if per_device and is_per_device(value):
        return {dev: _check_one(key, f"{key}[{dev!r}]", v, k, allow_empty) for dev, v in value.items()}
    return _check_one(key, key, value, k, allow_empty)


def _check_one(key: str, path: str, value, k, allow_empty: bool):
    checked = _check_type(path, value, k, allow_empty)
    if key in RANGES:
        _check_range(path, value, RANGES[key])  # the value as given, so the message shows what was typed
    return _checked_choice(key, path, checked)


def _checked_choice(key: str, path: str, value):
    try:
        _check_choice(key, value)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise type(err)(f"setting {path}: {err.args[0] if err.args else err}") from None
    return value
