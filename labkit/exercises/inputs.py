"""The inputs a lab really feeds a student's function, against the inputs its cases hold.

With ``$LABKIT_RECORD_INPUTS`` set (a file), every function a check hands back (``CheckResult.fn``, and so what
``installed()`` puts in the library) records a description of each distinct call: per argument, and per leaf of
its lists and dicts (named by the reference's parameters), the kind of value and, for numbers, the value; for tensors their dtype and dimensions.
``uncovered(ex, calls)`` lists what the lab fed that no case spans: a number outside the cases' range at that
place, a tensor dtype or rank no case has, or a kind the cases never give (``None`` where they always give a
number).
"""
from __future__ import annotations

import functools
import inspect
import json
import os
from typing import Callable

import torch

from .core import hidden_cases

RECORD_ENV = "LABKIT_RECORD_INPUTS"


def leaf(value) -> tuple:
    """(kind, detail) of a value that is not a list, tuple or dict."""
    if isinstance(value, torch.Tensor):
        return "tensor", f"{str(value.dtype).replace('torch.', '')}/{value.dim()}d"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return type(value).__name__, value
    if isinstance(value, (int, float)):
        return "number", float(value)
    return "object", type(value).__name__


def named(fn: Callable | None, args: tuple, kwargs: dict) -> dict:
    """The arguments by ``fn``'s parameter names (by position where they do not bind)."""
    if fn is not None:
        try:
            sig = inspect.signature(fn)
            bound = dict(sig.bind_partial(*args).arguments)
            return {**bound, **kwargs}
        except (TypeError, ValueError):
            pass
    return {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}


def describe(args: tuple, kwargs: dict, fn: Callable | None = None) -> dict[str, list]:
    """One call's leaves (``path -> [(kind, detail), ...]``): lists and tuples as ``[*]``, dict entries as ``.key``;
    an empty list is a leaf of its own."""
    out: dict[str, list] = {}

    def walk(value, path):
        if isinstance(value, (list, tuple)) and value:
            for v in value:
                walk(v, f"{path}[*]")
        elif isinstance(value, (list, tuple)):
            out.setdefault(path, []).append(("empty", 0))
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}.{k}")
        else:
            out.setdefault(path, []).append(leaf(value))

    for name, value in named(fn, args, kwargs).items():
        walk(value, name)
    return {k: sorted(set(v), key=repr) for k, v in out.items()}


def recording(exercise_id: str, fn: Callable, reference: Callable) -> Callable:
    """``fn``, recording each distinct call's description (its arguments named as ``reference``'s parameters)
    to ``$LABKIT_RECORD_INPUTS`` (``fn`` itself when the variable is unset)."""
    path = os.environ.get(RECORD_ENV)
    if not path:
        return fn
    seen: set[str] = set()

    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        try:
            text = json.dumps({"id": exercise_id, "call": describe(args, kwargs, reference)}, sort_keys=True,
                              default=str)
        except Exception:  # noqa: BLE001 (a description must never break the lab)
            text = None
        if text and text not in seen and len(seen) < 5000:
            seen.add(text)
            with open(path, "a") as f:
                f.write(text + "\n")
        return fn(*args, **kwargs)

    return recorded


def _spans(cases: list[dict[str, list]]) -> dict[str, dict]:
    spans: dict[str, dict] = {}
    for call in cases:
        for path, items in call.items():
            s = spans.setdefault(path, {"kinds": set(), "lo": float("inf"), "hi": float("-inf"), "tensors": set()})
            for kind, detail in items:
                s["kinds"].add(kind)
                if kind == "number":
                    s["lo"], s["hi"] = min(s["lo"], detail), max(s["hi"], detail)
                elif kind == "tensor":
                    s["tensors"].update(detail.split("/"))  # its dtype and its rank, each to be spanned
    return spans


def uncovered(ex, calls: list[dict[str, list]]) -> list[str]:
    """What the lab fed ``ex`` (``calls``: recorded descriptions) that its public and hidden cases do not span, at
    the parameters ``ex.spans`` names (all of them where it is None)."""
    cases = [describe(c.args, c.kwargs, ex.reference) for c in ex.public() + hidden_cases(ex, 0) if not c.on_meta]
    have = _spans(cases)
    missing = []
    for call in calls:
        for path, items in call.items():
            if ex.spans is not None and not path.startswith(tuple(ex.spans)):
                continue
            s = have.get(path)
            for kind, detail in (tuple(i) for i in items):
                if s is None or kind not in s["kinds"]:
                    given = sorted(s["kinds"]) if s else "nothing"
                    missing.append(f"{path}: a {kind} ({detail}) where the cases give {given}")
                elif kind == "number" and not s["lo"] <= detail <= s["hi"]:
                    missing.append(f"{path}: {detail:g} outside the cases' {s['lo']:g}..{s['hi']:g}")
                elif kind == "tensor" and not set(detail.split("/")) <= s["tensors"]:
                    missing.append(f"{path}: a {detail} tensor where the cases give {sorted(s['tensors'])}")
    return sorted(set(missing))
