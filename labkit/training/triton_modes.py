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


def interpreter_scalar_compat() -> None:
    """Triton 3.6's interpreter turns a scalar into a Python int with ``int(array of shape (1,))``, which
    NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"), so ``range()``
    over a program-id-derived bound fails (the GPU image's Triton 3.6 with NumPy 2.5). Triton 3.9 squeezes
    the array first; give older interpreters the same ``__index__``. A no-op where the private hook is gone,
    and outside the interpreter (kernel modules call it where they build their interpreted kernels)."""
    if not interpreting():
        return
    from triton.runtime import interpreter as interp

    patch = getattr(interp, "_patch_lang_tensor", None)
    if patch is None or getattr(patch, "labkit_compat", False):
        return

    def patched(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patched.labkit_compat = True
    interp._patch_lang_tensor = patched
