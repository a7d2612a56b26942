"""What an exercise is: the function a student writes, labkit's own function as the oracle, public cases that
cover the traps, plausible wrong answers (mutants) that the cases must catch, and fresh random cases for the
teaching staff (``hidden``).

Each lab's exercises live in ``labkit/exercises/lab<N>.py`` and register themselves with ``@exercise``.
"""
from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .. import records
from ..sandbox import codec, harness

REGISTRY: dict[str, "Exercise"] = {}
DEVICE_HINT = ("make every new tensor on the input's device (device=x.device, torch.zeros_like(x)); NumPy, .cpu() "
               "and a tensor made without device= are on the CPU, and the lab's tensors on a GPU are not")


@dataclass
class Case:
    """One input. ``args``/``kwargs`` are deep-copied before each call (a student's function may change its
    input in place); ``show`` is how the input is printed (default: a short repr of the arguments); ``hint``
    is printed when this case fails (the exercise's hint otherwise)."""

    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    show: str | None = None
    hint: str | None = None
    on_meta: bool = False             # its tensors go in on the meta device, as a GPU's would (harness.outcome)

    def shown(self) -> str:
        if self.show is not None:
            return self.show
        parts = [short(a) for a in self.args] + [f"{k}={short(v)}" for k, v in self.kwargs.items()]
        return ", ".join(parts)


@dataclass(frozen=True)
class Exercise:
    """A sheet task the student implements.

    ``reference``: labkit's function with the student's signature (the oracle). ``cases()``: the public cases.
    ``hidden(rng)``: random cases for the staff's grading (``rng``: a ``random.Random``). ``mutants``: name -> a
    plausible wrong implementation; each must fail at least one public case (``labkit check --self-test``).
    ``runner``: how one case calls a function (``labkit.sandbox.harness.RUNNERS``: the same in a notebook and in a
    graded process, returning plain values); ``expect_raises``: exception class names that are results (the value
    ``"raises ValueError"``); ``finish(case, value)``: what the staff side makes of the plain value before
    comparing (default: the value); ``compare(expected, got)`` returns ``None`` when they agree, else what
    differs (default: exact, or within ``atol``/``rtol``). A function that changes a tensor, list or dict it was
    given fails the case unless ``may_change_inputs``. ``install``: ``"module:attribute"`` the rest of the lab
    calls, replaced by the student's function once its check passes (``CheckResult.installed``). ``on_device``:
    the public cases end with the first case again, its tensors on the meta device (the lab passes CUDA
    tensors on a GPU): every tensor the function returns must be on its inputs' device. ``spans``: the parameters
    whose values the cases must span, against what the lab feeds (``labkit.exercises.inputs``; None: all)."""

    id: str
    notebook: str
    title: str
    task: str
    points: int
    reference: Callable
    cases: Callable[[], list[Case]]
    mutants: dict[str, Callable]
    hint: str
    hidden: Callable[[Any], list[Case]] | None = None
    runner: str = "call"
    expect_raises: tuple[str, ...] = ()
    finish: Callable[[Case, Any], Any] | None = None
    compare: Callable[[Any, Any], str | None] | None = None
    atol: float = 0.0
    rtol: float = 0.0
    may_change_inputs: bool = False
    on_device: bool = False
    spans: tuple[str, ...] | None = None
    install: str | None = None

    @property
    def lab(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def tolerance(self) -> str:
        if self.compare is not None and self.atol == 0 and self.rtol == 0:
            return getattr(self.compare, "tolerance", "exact")
        if self.atol == 0 and self.rtol == 0:
            return "exact (bit for bit)"
        return f"|got - expected| <= {self.atol:g} + {self.rtol:g} * |expected|"

    def public(self) -> list[Case]:
        """The public cases: ``cases()``, then the device case where ``on_device``."""
        cases = self.cases()
        if self.on_device and cases:
            first = cases[0]
            cases.append(Case(f"on the lab's device (a GPU's tensors are not on the CPU): {first.name}", first.args,
                              first.kwargs, first.show, DEVICE_HINT, on_meta=True))
        return cases

    def outcome(self, fn: Callable, case: Case, where: Callable[[BaseException], str] | None = None) -> dict:
        """``fn`` on a copy of ``case`` as the harness runs it, its value as the staff side receives it."""
        case = copy.deepcopy(case)
        out = harness.outcome(self.runner, fn, case.args, case.kwargs, self.expect_raises, where, case.on_meta)
        if "value" in out:
            out["value"] = codec.roundtrip(out["value"])
        return out

    def call(self, fn: Callable, case: Case):
        """What ``fn`` gives for ``case``, finished for comparison; an unexpected exception propagates."""
        out = self.outcome(fn, case)
        if "value" not in out:
            raise RuntimeError(f"{self.id}, case {case.name!r}: {out}")
        return self.finished(case, out["value"])

    def finished(self, case: Case, value):
        return self.finish(case, value) if self.finish is not None else value

    def differs(self, expected, got) -> str | None:
        if self.compare is not None:
            return self.compare(expected, got)
        return differs(expected, got, self.atol, self.rtol)

    def judge(self, case: Case, expected: dict, got: dict) -> str | None:
        """``None`` when ``got`` (an outcome) agrees with ``expected`` (the reference's), else why not: an
        exception, an input changed in place, or what differs. A value the staff side cannot read fails."""
        if "raised" in got:
            where = f" ({got['where']})" if got.get("where") else ""
            return f"raised {got['raised']}: {got.get('message', '')}{where}"
        if "value" not in got:
            return "no result came back for this case"
        if got.get("changed") and not self.may_change_inputs:
            return (f"your function changed its input in place ({', '.join(map(str, got['changed']))}); leave "
                    "what it is given as it was and return a new value")
        if case.on_meta:  # where each result tensor is, not its values
            if got["value"] == harness.DATA_DEPENDENT:
                return None
            why = differs(expected["value"], got["value"])
            return why and f"with the inputs off the CPU (the meta device), what came back differs: {why}"
        try:
            return self.differs(self.finished(case, expected["value"]), self.finished(case, got["value"]))
        except Exception as err:  # noqa: BLE001 (a value of the wrong shape for this exercise's comparison)
            return f"what your function returned cannot be compared: {type(err).__name__}: {err}"

    def mistake(self, case: Case, got: dict) -> str | None:
        """The registered mutant whose result ``got`` equals on this case, if one does: which mistake it is."""
        if "value" not in got:
            return None
        for name, mutant in self.mutants.items():
            out = self.outcome(mutant, case)
            if "value" in out and self.judge(case, out, got) is None:
                return name
        return None


def hidden_cases(ex: Exercise, seed: int) -> list[Case]:
    """The staff's fresh cases for ``ex`` from ``seed`` (the same seed, the same cases)."""
    if ex.hidden is None:
        return []
    return ex.hidden(random.Random(f"{seed}:{ex.id}"))


def exercise(**fields) -> Callable[[Callable], Exercise]:
    """Register an exercise whose reference is the decorated function:

        @exercise(id="lab1.fixed_point", notebook="lab1_quantize", title=..., task=..., points=3,
                  cases=..., mutants=..., hint=...)
        def fixed_point(x, width, frac_width): ...
    """
    def wrap(reference: Callable) -> Exercise:
        ex = Exercise(reference=reference, **fields)
        validate(ex)
        REGISTRY[ex.id] = ex
        return ex
    return wrap


def validate(ex: Exercise) -> None:
    notebooks = records.records()
    labs = sorted({r.lab for r in notebooks.values()})
    lab = ex.id.split(".", 1)[0]
    if lab not in labs or "." not in ex.id:
        raise ValueError(f"exercise id {ex.id!r}: must be '<lab>.<name>' with lab one of {', '.join(labs)}")
    if ex.notebook not in notebooks or notebooks[ex.notebook].lab != lab:
        mine = [k for k, r in notebooks.items() if r.lab == lab]
        raise ValueError(f"exercise {ex.id}: notebook {ex.notebook!r} is not one of {lab}'s notebooks; allowed: "
                         f"{', '.join(mine)}")
    if ex.points <= 0:
        raise ValueError(f"exercise {ex.id}: points must be > 0, got {ex.points}")
    if len(ex.mutants) < 2:
        raise ValueError(f"exercise {ex.id}: register at least 2 mutants (plausible mistakes), got {len(ex.mutants)}")


def short(value, limit: int = 60) -> str:
    """A one-line view of a value for a case line: tensors by their values when short, else their shape."""
    if isinstance(value, torch.Tensor):
        if value.numel() <= 8:
            vals = [round(v, 6) if isinstance(v, float) else v for v in value.flatten().tolist()]
            text = f"tensor({vals}" + (f", shape={tuple(value.shape)}" if value.dim() != 1 else "") + ")"
        else:
            text = f"tensor(shape={tuple(value.shape)}, dtype={str(value.dtype).replace('torch.', '')})"
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, torch.nn.Module):
        text = type(value).__name__
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def differs(expected, got, atol: float = 0.0, rtol: float = 0.0, where: str = "") -> str | None:
    """``None`` when ``got`` matches ``expected`` (tensors: same shape and dtype, equal or within the
    tolerance, NaN matching NaN; numbers likewise; containers element by element), else a short reason."""
    at = f" at {where}" if where else ""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor{at}, got {type(got).__name__}"
        if got.shape != expected.shape:
            return f"shape {tuple(got.shape)}{at}, expected {tuple(expected.shape)}"
        if got.dtype != expected.dtype:
            return f"dtype {got.dtype}{at}, expected {expected.dtype}"
        if expected.dtype == torch.bool or not expected.is_floating_point():
            bad = got != expected
        else:
            e, g = expected.double(), got.double()
            both_nan = torch.isnan(e) & torch.isnan(g)
            bad = ~((g - e).abs() <= atol + rtol * e.abs()) & ~both_nan & ~(e == g)
        if bool(bad.any()):
            i = int(bad.flatten().nonzero()[0])
            idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), expected.shape)) if expected.dim() else ()
            return (f"{int(bad.sum())} of {expected.numel()} elements differ{at}; first at index {list(idx)}: "
                    f"expected {expected.flatten()[i].item():.8g}, got {got.flatten()[i].item():.8g}")
        return None
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        return None if got == expected and type(got) is type(expected) else f"expected {expected!r}{at}, got {short(got)}"
    if isinstance(expected, (int, float)):
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return f"expected a number{at}, got {short(got)}"
        if math.isnan(expected) and math.isnan(got):
            return None
        ok = got == expected or abs(got - expected) <= atol + rtol * abs(expected)
        return None if ok else f"expected {expected:.8g}{at}, got {got:.8g}"
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"expected a dict{at}, got {type(got).__name__}"
        if set(got) != set(expected):
            return f"keys {sorted(map(str, got))}{at}, expected {sorted(map(str, expected))}"
        for k in expected:
            why = differs(expected[k], got[k], atol, rtol, f"{where}[{k!r}]")
            if why:
                return why
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            n = len(got) if isinstance(got, (list, tuple)) else type(got).__name__
            return f"expected a sequence of {len(expected)}{at}, got {n}"
        for i, (e, g) in enumerate(zip(expected, got)):
            why = differs(e, g, atol, rtol, f"{where}[{i}]")
            if why:
                return why
        return None
    return None if got == expected else f"expected {short(expected)}{at}, got {short(got)}"
