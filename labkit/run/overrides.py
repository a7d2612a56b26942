"""Checks of settings overrides against a notebook's own profile values (``profiles.lab_settings`` runs them).

An override has the type of the key's values in the notebook's profiles: an int where they hold ints, a
number where they hold floats (an int is accepted and stored as a float), a non-empty list of the right
element type, a string, True/False only where they hold bools (never for a number). A key that is None in
some profile also accepts None; a key that is None in every profile takes its type from ``NONE_TYPES``. Where
the profiles hold per-device values (``{"cpu": ..., "cuda": ...}``), an override may be one too, each value
checked alone. The notebook's record (``labkit.records``) gives each key's range, its named choices (checked
by the module that owns them) and, for a key no profile value can type (``workers``: "auto" or a count), a
parser. Every error names the key.
"""
from __future__ import annotations

import math

from ..perf.timing import DEVICE_TYPES
from ..records import resolve

# Keys that are None in every profile: their type (same notation as ``kind``).
NONE_TYPES = {"storage": "str"}


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


def is_per_device(value) -> bool:
    """A ``{"cpu": ..., "cuda": ...}`` dict (a non-empty dict keyed by device types), as ``per_device`` reads it."""
    return isinstance(value, dict) and bool(value) and set(value) <= set(DEVICE_TYPES)


def check_override(key: str, value, defaults: list, per_device: bool = False, bounds: tuple | None = None,
                   choice: str | None = None, parser: str | None = None):
    """``value`` checked against ``defaults`` (the key's value in each profile of the notebook); returns it
    normalised (ints as floats where the profiles hold floats). ``per_device``: the notebook reads its values
    through ``per_device``, so a ``{"cpu": ..., "cuda": ...}`` override is checked value by value. ``bounds``:
    the key's range; ``choice``: "module:function" raising on a value that is not a named choice; ``parser``:
    "module:function" ``(value, label) -> value`` that checks a value whole, instead of the type taken from the
    profiles. Raises TypeError, ValueError or KeyError naming the key."""
    if parser is not None:
        return resolve(parser)(value, f"setting {key}")
    plain = [v for d in defaults for v in (d.values() if per_device and is_per_device(d) else [d])]
    k = merge([kind(v) for v in plain if v is not None]) or NONE_TYPES.get(key)
    if value is None:
        if not any(v is None for v in plain):
            raise TypeError(f"setting {key}=None: must be {describe(k)}")
        return None
    allow_empty = any(v in ([], {}) for v in plain)
    if per_device and is_per_device(value):
        return {dev: _check_one(f"{key}[{dev!r}]", v, k, allow_empty, bounds, choice) for dev, v in value.items()}
    return _check_one(key, value, k, allow_empty, bounds, choice)


def _check_one(path: str, value, k, allow_empty: bool, bounds, choice):
    checked = _check_type(path, value, k, allow_empty)
    if bounds is not None:
        _check_range(path, value, bounds)  # the value as given, so the message shows what was typed
    if choice is not None:
        try:
            resolve(choice)(checked)
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise type(err)(f"setting {path}: {err.args[0] if err.args else err}") from None
    return checked
