"""Triton kernels in the mode TRITON_INTERPRET asks for: compiled on a GPU, or run by Triton's CPU interpreter.

``triton.jit`` reads TRITON_INTERPRET when it decorates, and triton.language's own reductions are @jit helpers
decorated when triton was imported; so each labkit kernel module keeps one copy of its kernels per mode
(``in_mode``), whose helpers were decorated in that mode: tests switch to the interpreter after import.
"""
from __future__ import annotations

import types


def interpreting() -> bool:
    """True when Triton's interpreter runs kernels (TRITON_INTERPRET=1); False without triton."""
    try:
        from triton import knobs
    except ImportError:
        return False
    return bool(knobs.runtime.interpret)


def in_mode(fn, helpers: dict):
    """A copy of ``fn`` whose globals name this mode's helpers (Triton compiles the source it finds there)."""
    g = dict(fn.__globals__)
    g.update(helpers)
    copy = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__module__, copy.__qualname__, copy.__doc__ = fn.__module__, fn.__qualname__, fn.__doc__
    copy.__annotations__ = dict(fn.__annotations__)  # Triton reads tl.constexpr parameters from these
    return copy
