"""Number formats: a frozen config that validates itself, fake-quantizes with a straight-through
estimator (STE), and counts its stored bits per element.

A format subclass implements ``quantize_values`` (the forward rounding, no autograd) and, where it
saturates, ``pass_mask`` (True where the gradient passes: the clipped STE). Formats with learnable
state override ``quantizer()`` to return their own module.

Each registered format declares, beside its class, what the course's studies take of it (``spec``, a
``FormatSpec``): Lab 3's study parameters, search space, fixed fields and the one sentence the answers cite.
The tables of ``labkit.quant.study``, ``labkit.labs.lab3_precision`` and ``labkit.answers.lab3_search`` are views
of these declarations (``declared``); a format that lacks a part, or a table that lacks a format, is an error
naming both (``MissingDeclaration``), never a silent skip.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, ClassVar, Mapping

import torch

FORMATS: dict[str, type["NumberFormat"]] = {}
ROLES = ("data_in", "weight", "bias")
# the parts every format's FormatSpec must declare (the rest have defaults)
PARTS = ("study", "space", "fixed", "why")


class MissingDeclaration(LookupError):
    """A registered format does not declare a part of its ``FormatSpec``, or a table derived from the
    declarations has no entry for a registered format; the message names the format and what is missing."""


@dataclass(frozen=True)
class FormatSpec:
    """What a format declares for the course's studies, in one place beside its class (``spec = FormatSpec(...)``).

    ``study(width)``: Lab 3 part 1's parameters of the format at an element width (``labkit.quant.study
    .study_params``; a fixed-width format ignores ``width``). ``space``: Lab 3's searched parameters, each with its
    choices (``labkit.labs.lab3_precision.FORMAT_SPACE``; empty: nothing to choose). ``fixed``: parameters the
    search sets on every sampled layer without varying them (``FIXED``). ``why``: one sentence, what the value set
    cannot hold, which the answers cite beside a format that loses accuracy (``labkit.answers.lab3_search.WHY``).

    ``min_width``: the narrowest width the study takes (None: the width is fixed by definition). ``roles``: the
    roles the study quantizes (the binary family keeps biases in fp32). ``exponent_leaves``: bits of ``width`` a
    searched ``exponent_width`` must leave (sign and the mantissa bits the format needs); a wider sample is cut
    to the widest valid one. ``hook``: the module-level function of the class's module through which it
    computes its values, which an exercise may replace by a student's (``labkit.exercises`` ``installed()``;
    marked ``@hook`` where it is defined); while another function sits there the fast paths of
    ``labkit.quant.fast`` are off for the format (``NumberFormat.replaced``).
    """

    study: Callable[[int], dict] | None = None
    space: Mapping[str, tuple] | None = None
    fixed: Mapping[str, object] | None = None
    why: str | None = None
    min_width: int | None = 2
    roles: tuple[str, ...] = ROLES
    exponent_leaves: int | None = None
    hook: str | None = None

    def __post_init__(self):
        if self.study is not None and not callable(self.study):
            raise TypeError(f"FormatSpec.study must be a function of the width, got {self.study!r}")
        if self.space is not None:
            if not isinstance(self.space, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, (tuple, list)) and len(v) for k, v in self.space.items()):
                raise TypeError(f"FormatSpec.space must map parameter names to non-empty tuples of choices, got "
                                f"{self.space!r}")
            object.__setattr__(self, "space", MappingProxyType({k: tuple(v) for k, v in self.space.items()}))
        if self.fixed is not None:
            if not isinstance(self.fixed, Mapping) or not all(isinstance(k, str) for k in self.fixed):
                raise TypeError(f"FormatSpec.fixed must map parameter names to values, got {self.fixed!r}")
            object.__setattr__(self, "fixed", MappingProxyType(dict(self.fixed)))
        if self.why is not None and not (isinstance(self.why, str) and self.why.strip()):
            raise TypeError(f"FormatSpec.why must be a non-empty sentence, got {self.why!r}")
        if not self.roles or set(self.roles) - set(ROLES):
            raise ValueError(f"FormatSpec.roles {self.roles!r}: a non-empty subset of {ROLES}")


def _where(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def check_spec(cls) -> FormatSpec:
    """``cls``'s own ``FormatSpec`` (declared on the class itself, not inherited), every part of ``PARTS`` given;
    else ``MissingDeclaration`` naming the format and what it lacks."""
    spec = cls.__dict__.get("spec")
    if not isinstance(spec, FormatSpec):
        raise MissingDeclaration(
            f"format {cls.name!r} ({_where(cls)}) declares no FormatSpec beside its class: give it "
            f"spec = FormatSpec({', '.join(p + '=...' for p in PARTS)})")
    missing = [p for p in PARTS if getattr(spec, p) is None]
    if missing:
        raise MissingDeclaration(f"format {cls.name!r} ({_where(cls)}) declares no {' and no '.join(missing)} in "
                                 f"its FormatSpec (each registered format declares {', '.join(PARTS)})")
    return spec


def register(cls):
    """Class decorator: make a format constructible by its ``name``; it must declare its ``FormatSpec``."""
    if cls.name in FORMATS:
        raise ValueError(f"format {cls.name!r} registered twice")
    check_spec(cls)
    FORMATS[cls.name] = cls
    return cls


def _registered(name: str) -> type["NumberFormat"]:
    if name not in FORMATS:
        raise KeyError(f"unknown number format {name!r}; allowed: {', '.join(sorted(FORMATS))}")
    return FORMATS[name]


def spec_of(name: str) -> FormatSpec:
    """The ``FormatSpec`` format ``name`` declares (an unknown name: ``KeyError`` listing the allowed)."""
    return check_spec(_registered(name))


def declared(part: str, names=None) -> dict:
    """``{format: its FormatSpec's part}`` for every registered format (or for ``names``, in their order): the
    view a table of the studies is."""
    if part not in {f.name for f in dataclasses.fields(FormatSpec)}:
        raise KeyError(f"FormatSpec has no part {part!r}; allowed: {[f.name for f in dataclasses.fields(FormatSpec)]}")
    return {name: getattr(spec_of(name), part) for name in (FORMATS if names is None else names)}


def entry(table: Mapping, name: str, what: str):
    """``table[name]``: format ``name``'s entry in the table ``what`` (derived from the declarations); a missing
    one is ``MissingDeclaration`` naming the format and the table (an unknown name: ``KeyError``)."""
    if name in table:
        return table[name]
    cls = _registered(name)
    raise MissingDeclaration(f"{what} has no entry for format {name!r} ({_where(cls)}): the table is a view of "
                             "the formats' FormatSpec declarations; build it from all of them")


def check_covers(table: Mapping, what: str) -> Mapping:
    """``table`` when it has an entry for every registered format, else ``MissingDeclaration`` naming those it
    lacks and the table ``what``."""
    missing = [n for n in FORMATS if n not in table]
    if missing:
        raise MissingDeclaration(f"{what} has no entry for format(s) {', '.join(map(repr, missing))}: every "
                                 "registered format needs one (declared in its FormatSpec)")
    return table


# --- hooks: the module-level functions a format computes its values through, which an exercise may replace ---

_OWN: dict[str, Callable] = {}  # "module:name" -> labkit's own function there
_AT: dict[type, tuple | None] = {}  # format class -> (hook path, its module, attribute), see NumberFormat._hook_at


def hook(fn: Callable) -> Callable:
    """Mark ``fn``, a module-level function a format computes its values through (its ``FormatSpec.hook``), as
    labkit's own at ``"module:name"``: another function found there later is someone else's (a student's, put
    there by ``installed()``), and ``NumberFormat.replaced`` says so."""
    _OWN[f"{fn.__module__}:{fn.__name__}"] = fn
    return fn


def own_hooks() -> dict[str, Callable]:
    """Every marked hook: ``{"module:name": labkit's function}``."""
    return dict(_OWN)


def make_format(name: str, **params) -> "NumberFormat":
    """Build a registered format by name; unknown names and parameters are errors listing the allowed."""
    if name not in FORMATS:
        raise KeyError(f"unknown number format {name!r}; allowed: {', '.join(sorted(FORMATS))}")
    cls = FORMATS[name]
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise KeyError(f"format {name!r} has no parameter(s) {unknown}; allowed: {fields}")
    return cls(**params)


class _STE(torch.autograd.Function):
    """Forward: the format's rounding. Backward: identity where ``pass_mask`` is True, else zero."""

    @staticmethod
    def forward(ctx, x, fmt):
        mask = fmt.pass_mask(x)
        ctx.save_for_backward(mask if mask is not None else torch.empty(0))
        ctx.has_mask = mask is not None
        return fmt.quantize_values(x)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.has_mask:
            return grad, None
        (mask,) = ctx.saved_tensors
        return grad * mask, None


@dataclass(frozen=True)
class NumberFormat:
    name: ClassVar[str] = ""
    spec: ClassVar[FormatSpec]  # what the studies take of the format (``FormatSpec``), on each registered class

    @classmethod
    def hook_path(cls) -> str | None:
        """``"module:name"`` of the function the format computes its values through (``FormatSpec.hook``);
        None: it has none an exercise replaces."""
        spec = cls.__dict__.get("spec")
        return f"{cls.__module__}:{spec.hook}" if isinstance(spec, FormatSpec) and spec.hook else None

    @classmethod
    def _hook_at(cls) -> tuple | None:
        """(path, module, attribute) of the format's hook, looked up once per class; None: no hook."""
        if cls not in _AT:
            path = cls.hook_path()
            if path is not None and path not in _OWN:
                raise MissingDeclaration(f"format {cls.name!r} ({_where(cls)}) declares hook {path}, which is not "
                                         "marked @hook where it is defined (labkit.quant.formats.base.hook)")
            _AT[cls] = None if path is None else (path, sys.modules[cls.__module__], path.split(":")[1])
        return _AT[cls]

    @classmethod
    def hook_now(cls) -> Callable | None:
        """The function now at the format's hook (labkit's own, or one put in its place); None: no hook."""
        at = cls._hook_at()
        return None if at is None else getattr(at[1], at[2])

    @classmethod
    def replaced(cls) -> str | None:
        """``"module:name"`` of the format's hook where a function other than labkit's sits there now (a
        student's, installed by ``labkit.exercises``' ``installed()``): labkit's fast paths for the format are then
        off (``labkit.quant.fast.why_reference``), so that function computes every value on every device. None:
        labkit's own function runs (or the format has no hook)."""
        at = cls._hook_at()
        if at is None:
            return None
        return at[0] if getattr(at[1], at[2]) is not _OWN[at[0]] else None

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:  # subclasses check their fields
        pass

    def quantize_values(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def pass_mask(self, x: torch.Tensor) -> torch.Tensor | None:
        """Where the STE passes gradients (None: everywhere)."""
        return None

    def bits_per_element(self, shape: tuple[int, ...]) -> float:
        """Average stored bits per element of a tensor of ``shape`` (shared exponents included)."""
        raise NotImplementedError

    def why_not_bf16(self, normal_only: bool = False) -> str | None:
        """None when every value the format produces (NaN aside) is a bf16 value, so its fake-quantized
        tensors can feed a bf16 matmul unchanged (``labkit.quant.fast``); else why not. ``normal_only``:
        every value of magnitude >= 2^-126 (see ``_util.why_not_bf16``)."""
        return f"{self.name}: not analysed for bf16 exactness"

    def row_local(self) -> bool:
        """True where ``quantize_values`` rounds each row (the last dimension) on its own: elementwise, or in blocks
        and per-row scales along the last dimension, with no random draws. Such a format may quantize a tensor in
        chunks of rows (``rowwise_values``); a format that reads the whole tensor (a per-tensor scale) says False."""
        return False

    def fake_quantize(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            # integer tensors would come back in mixed dtypes, some formats rounding them, some not
            raise TypeError(f"{self.name}: fake_quantize needs a floating-point tensor, got "
                            + (f"a tensor of dtype {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__))
        if not (torch.is_grad_enabled() and x.requires_grad):
            return rowwise_values(self, x)  # no backward will run: skip computing the STE mask
        return self.differentiable(x)

    def differentiable(self, x: torch.Tensor) -> torch.Tensor:
        """x fake-quantized with autograd: the clipped STE of ``pass_mask``. A format computed by another
        module with its own STE (mxint8) returns that module's result instead, so there is one gradient."""
        return _STE.apply(x, self)

    def quantizer(self) -> torch.nn.Module:
        return Quantizer(self)

    def sign_terms(self, x: torch.Tensor) -> tuple | None:
        """``quantize_values(x)`` as (scales, planes): q = sum_i scales[i] * planes[i], with ``planes`` of shape
        (L, *x.shape), fp16 +-1 (NaN where x is NaN), and each scale one per row (shape (..., 1)) or per
        tensor; None: not of that form. The binary formats' Linear multiplies the planes exactly in fp16
        (``labkit.quant.sign_matmul``).
        """
        return None

    def describe(self) -> str:
        params = ", ".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self))
        return f"{self.name}({params})"


# Elements a CPU rounds at once: a format's 10-20 elementwise passes over 2^18 fp32 values (1 MiB) stay in cache
# instead of streaming a whole activation from memory each pass (64 x 128 x 1536 on 2 cores: minifloat_denorm
# 490 -> 120 ms, block_minifloat 944 -> 300 ms, integer 72 -> 32 ms; the same bits)
CPU_CHUNK = 1 << 18


def rowwise_values(fmt: NumberFormat, x: torch.Tensor) -> torch.Tensor:
    """``fmt.quantize_values(x)``, the same bits: on a CPU, a large tensor of a ``row_local`` format in chunks of
    whole rows of about ``CPU_CHUNK`` elements; elsewhere in one call."""
    if x.device.type != "cpu" or x.dim() < 2 or x.numel() <= 2 * CPU_CHUNK or not fmt.row_local():
        return fmt.quantize_values(x)
    rows = x.reshape(-1, x.shape[-1])
    return torch.cat([fmt.quantize_values(r) for r in rows.split(max(1, CPU_CHUNK // x.shape[-1]))]).reshape(x.shape)


class Quantizer(torch.nn.Module):
    """A module applying a stateless format (so formats with parameters can be modules too)."""

    def __init__(self, fmt: NumberFormat):
        super().__init__()
        self.fmt = fmt

    def forward(self, x):
        return self.fmt.fake_quantize(x)

    def plain(self) -> bool:
        """True when ``forward(x)`` is ``fmt.fake_quantize(x)`` (after ``observe``), so a caller may apply the
        format itself (the bf16 path); False for quantizers whose rule depends on their mode or state."""
        return True

    def has_sign_terms(self) -> bool:
        # a format whose hook holds another function (a student's) computes through it, not through sign planes
        return (self.plain() and type(self.fmt).sign_terms is not NumberFormat.sign_terms
                and not type(self.fmt).replaced())

    def sign_terms(self, x):
        return self.fmt.sign_terms(x)

    def observe(self, x) -> None:
        """Look at the tensor about to be quantized (a range check, say); the base quantizer does nothing."""

    def inference(self, x, values=None):
        """``forward(x)``'s values when no gradient is needed. ``values(fmt, x)`` computes
        ``fmt.quantize_values(x)`` (the same bits in fewer passes: the caller passes
        ``labkit.quant.fast.quantize_values``, which sits above the formats); None: the format's own formula."""
        return rowwise_values(self.fmt, x) if values is None else values(self.fmt, x)

    def extra_repr(self):
        return self.fmt.describe()
