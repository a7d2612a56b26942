"""How one case calls a function, the same in a notebook's check and in a graded process.

``outcome(runner, fn, args, kwargs)`` calls ``fn`` through one of ``RUNNERS`` (a plain call, a fixed Optuna
trial, an FX pass whose result is described, an objective with stand-in steps, a timer on a scripted device)
and returns plain data: ``{"value": ...}`` with the arguments ``fn`` changed in place, ``{"raised": ...}``, or
``{"not_attempted": True}`` for the stub's ``NotImplementedError``. Only the standard library, torch and optuna
are imported here: a graded process holds no labkit.
"""
from __future__ import annotations

import functools
import traceback
from typing import Callable

import torch

from . import codec


# --- runners: fn on one case's arguments, returning plain values ------------------------------------------------

def call(fn, args, kwargs):
    return fn(*args, **kwargs)


PRUNED = "raised optuna.TrialPruned"


def fixed_trial(fn, args, kwargs):
    """``fn(trial)`` for an Optuna ``FixedTrial`` of ``kwargs["params"]`` (``loose``: one that also hands back a
    value outside the choices); a pruned trial reads as ``PRUNED``."""
    import optuna

    params = kwargs["params"]
    trial = LooseTrial(params) if kwargs.get("loose") else optuna.trial.FixedTrial(params)
    try:
        return fn(trial)
    except optuna.TrialPruned:
        return PRUNED


@functools.lru_cache(maxsize=None)
def _loose_trial_class():
    import optuna

    class _LooseTrial(optuna.trial.FixedTrial):
        """A ``FixedTrial`` that hands back its fixed value even where it is not one of the choices (FixedTrial
        refuses it): how an edited or narrower space could give a combination the lab's grid never holds."""

        def suggest_categorical(self, name, choices):
            if name in self._params:
                self._suggested_params[name] = self._params[name]
                return self._params[name]
            return super().suggest_categorical(name, choices)

    return _LooseTrial


def LooseTrial(params):  # noqa: N802 (a class, built on first use so importing this module needs no optuna)
    return _loose_trial_class()(params)


def target_name(target) -> str:
    """An FX node's target by name, the same in every process (``str`` of a function holds its address)."""
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__
    return f"{module}.{name}" if module else name


def describe_node(node, gm) -> list:
    """``[op, target name, the module's classes (call_module only)]``."""
    classes = None
    if node.op == "call_module":
        try:
            classes = [f"{c.__module__}.{c.__qualname__}" for c in type(gm.get_submodule(node.target)).__mro__]
        except AttributeError:
            classes = []
    return [node.op, target_name(node.target), classes]


def fx_pass(fn, args, kwargs):
    """Run the pass on the case's graph module, then describe what it returned: its type, ``graph.lint()``, its
    nodes, and its output on ``kwargs["x"]`` in training mode with torch seeded 0 (a dropout still in the
    generated code changes it)."""
    out = fn(args[0])
    if not isinstance(out, torch.fx.GraphModule):
        return {"returned": codec._type_name(out)}
    try:
        out.graph.lint()
        lint = "ok"
    except Exception as err:  # noqa: BLE001 (what lint found is the difference shown)
        lint = f"{type(err).__name__}: {err}"
    out.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        y = out(kwargs["x"])
    return {"returned": "GraphModule", "graph.lint()": lint, "nodes": [describe_node(n, out) for n in out.graph.nodes],
            "output": y}


class StandIn:
    """A stand-in model: the steps applied to it so far (``copy.deepcopy`` gives an independent one)."""

    def __init__(self, steps):
        self.steps = list(steps)

    def cpu(self):  # labkit moves a model to the CPU before compressing it
        return self

    def __repr__(self):
        return "+".join(self.steps)


def trace_objective(fn: Callable, arch, mode: str, accuracies: dict) -> dict:
    """Run ``fn(arch, mode, build, train, compress, evaluate, post_train, record)`` with stand-in steps:
    ``build`` gives a ``StandIn``, ``train`` and ``post_train`` add a step to it in place, ``compress`` returns a
    new one (labkit's compresses a copy), ``evaluate`` returns ``accuracies[str(model)]`` (a model's steps
    joined by "+", e.g. ``"built+trained+compressed"``; 0.5 for a model not in it). Returns the value, every
    call (named by the model's steps) and what was recorded."""
    calls, recorded = [], {}

    def build(a):
        calls.append(f"build({'arch' if a is arch else repr(a)[:40]})")
        return StandIn(["built"])

    def step(name):
        def run(model):
            if not isinstance(model, StandIn):
                raise TypeError(f"{name} was given {type(model).__name__}, not the model")
            calls.append(f"{name}({model})")
            model.steps.append({"train": "trained", "post_train": "post-trained"}[name])
            return {"train_seconds": 0.0}
        return run

    def compress(model):
        if not isinstance(model, StandIn):
            raise TypeError(f"compress was given {type(model).__name__}, not the model")
        calls.append(f"compress({model})")
        return StandIn(model.steps + ["compressed"])

    def evaluate(model):
        if not isinstance(model, StandIn):
            raise TypeError(f"evaluate was given {type(model).__name__}, not the model")
        acc = accuracies.get(str(model), 0.5)
        calls.append(f"evaluate({model}) -> {acc:g}")
        return acc

    def record(key, value):
        recorded[key] = value

    value = fn(arch, mode, build, step("train"), compress, evaluate, step("post_train"), record)
    return {"value": value, "calls": calls, "recorded": recorded}


def objective(fn, args, kwargs):
    return trace_objective(fn, args[0], args[1], kwargs["accuracies"])


class FakeDevice:
    """A device that runs work asynchronously, on a clock that only moves when it is told to.

    ``work()`` is the function being timed: each call takes the next scripted duration, of which only
    ``launch`` seconds pass at once (the host enqueues it); the rest completes at the next ``sync()``, as CUDA
    kernels do. ``clock()`` reads the time (it starts at 1000 s, not 0). Durations are exact binary fractions,
    so a correct timer gets them back exactly.
    """

    def __init__(self, durations, launch: float = 0.0, start: float = 1000.0):
        self.durations, self.launch = list(durations), launch
        self.now, self.pending, self.calls = start, 0.0, 0

    def clock(self) -> float:
        return self.now

    def sync(self) -> None:
        self.now += self.pending
        self.pending = 0.0

    def work(self) -> None:
        if self.calls >= len(self.durations):
            raise RuntimeError(f"fn was called more than 1 + warmup + repeats = {len(self.durations)} times")
        d = self.durations[self.calls]
        self.calls += 1
        self.now += min(self.launch, d)
        self.pending += d - min(self.launch, d)


def fake_device(fn, args, kwargs):
    """``fn(work, repeats, warmup, clock, sync)`` on a ``FakeDevice`` scripted with ``args[0]``'s durations."""
    durations, repeats, warmup = args
    dev = FakeDevice(durations, **kwargs)
    out = fn(dev.work, repeats, warmup, dev.clock, dev.sync)
    if dev.calls != len(durations):
        raise RuntimeError(f"fn was called {dev.calls} times; 1 + warmup + repeats = {len(durations)} expected")
    return out


RUNNERS = {"call": call, "fixed_trial": fixed_trial, "fx_pass": fx_pass, "objective": objective,
           "fake_device": fake_device}


# --- one case ---------------------------------------------------------------------------------------------------

def _arguments(args, kwargs) -> list:
    return [(f"argument {i + 1}", a) for i, a in enumerate(args)] + [(f"argument {k!r}", v) for k, v in kwargs.items()]


def _snapshot(args, kwargs) -> dict:
    """What each argument holds, as the codec writes it (an argument it cannot carry is not watched)."""
    out = {}
    for name, value in _arguments(args, kwargs):
        data = codec.plain(value)
        if not (isinstance(data, dict) and data.get("$") == "opaque"):
            out[name] = data
    return out


# --- the lab's device: a case's tensors moved to the meta device (data-free, not the CPU) ---------------------

DATA_DEPENDENT = "reads tensor values: not checked on the meta device"
_NO_DATA = ("cannot be called on meta tensors", "Cannot copy out of meta tensor", "data-independent",
            "no data")


def to_meta(value):
    """Every tensor of ``value`` (in lists, tuples, dicts) on the meta device: shapes and dtypes, no data."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("meta")
    if type(value) in (list, tuple):
        return type(value)(to_meta(v) for v in value)
    if type(value) is dict:
        return {k: to_meta(v) for k, v in value.items()}
    return value


def devices(value):
    """What a result is, without its values: each tensor's device, shape and dtype."""
    if isinstance(value, torch.Tensor):
        return {"device": value.device.type, "shape": list(value.shape), "dtype": str(value.dtype)}
    if type(value) in (list, tuple):
        return [devices(v) for v in value]
    if type(value) is dict:
        return {k: devices(v) for k, v in value.items()}
    return value


def outcome(runner: str, fn: Callable, args: tuple, kwargs: dict, expect_raises: tuple = (),
            where: Callable[[BaseException], str] | None = None, on_meta: bool = False) -> dict:
    """``fn`` on one case through ``RUNNERS[runner]``. An exception whose class (or a base of it) is named in
    ``expect_raises`` is a result: the value ``"raises <name>"``. Any other exception, ``SystemExit`` and
    ``KeyboardInterrupt`` included, is ``{"raised": ...}`` with ``where(err)`` saying where.

    ``on_meta``: the tensors go in on the meta device, as a GPU's would (not the CPU), and the value is where each
    result tensor is (``devices``); a function whose code needs the tensors' values (``.item()``, an ``if`` on a
    tensor) cannot run there and is not judged on it (``DATA_DEPENDENT``)."""
    if on_meta:
        args, kwargs = to_meta(args), to_meta(kwargs)
    before = _snapshot(args, kwargs)
    try:
        value = RUNNERS[runner](fn, args, kwargs)
        if on_meta:
            value = devices(value)
    except NotImplementedError as err:
        if on_meta and any(m in message(err) for m in _NO_DATA):
            return {"value": DATA_DEPENDENT, "changed": []}
        return {"not_attempted": True}
    except BaseException as err:  # noqa: BLE001 (a student's sys.exit or Ctrl-C in one case fails that case)
        if on_meta and isinstance(err, Exception) and any(m in message(err) for m in _NO_DATA):
            return {"value": DATA_DEPENDENT, "changed": []}
        named = next((c.__name__ for c in type(err).__mro__ if c.__name__ in expect_raises), None)
        if named is None:
            return {"raised": type(err).__name__, "message": message(err),
                    "where": where(err) if where else ""}
        value = f"raises {named}"
    after = _snapshot(args, kwargs)
    return {"value": value, "changed": [name for name in before if after.get(name) != before[name]]}


def message(err: BaseException) -> str:
    try:
        text = str(err)
    except Exception:  # noqa: BLE001
        text = ""
    return text if len(text) <= 300 else text[:297] + "..."


def line_in(err: BaseException, filename: str) -> int | None:
    """The line of ``filename`` (a cell's) where ``err`` was last raised through, if any."""
    lines = [f.lineno for f in traceback.extract_tb(err.__traceback__) if f.filename == filename]
    return lines[-1] if lines else None


def last_line(err: BaseException, filename: str) -> str:
    """``line N of your code``: the last frame in ``filename``, the student's cell."""
    line = line_in(err, filename)
    return f"line {line} of your code" if line else ""
