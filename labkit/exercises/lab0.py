"""Lab 0's exercises: the two dropout passes over an FX graph (count, remove) and merging a LoRA adapter into
its Linear's weight.

The graph cases are small modules traced with ``torch.fx.symbolic_trace`` (dropout as an ``nn.Dropout``
module or a ``F.dropout`` call) plus one graph built node by node at the ATen level, the way ``torch.export``
captures BERT (``aten.dropout.default``): a pass must handle every form the lab meets.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..graph.passes import DROPOUT_TARGETS, CountDropout as _CountDropout, is_dropout as _is_dropout
from ..graph.passes import remove_dropout_nodes as _remove_dropout_nodes
from ..sandbox import harness
from .core import Case, differs, exercise

# --- toy graphs ----------------------------------------------------------------------------------------


def _seeded(seed: int, build):
    """``build()`` with torch's global RNG seeded (its Linear initialisations repeat), the caller's RNG state
    left as it was (a check cell must not move the lab's random numbers)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


class _NoDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class _ModuleDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.lin(self.drop(x))


class _FunctionalDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(F.dropout(x, 0.5, training=True))


class _Several(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(4, 4), nn.Linear(4, 4)
        self.drop1, self.drop2 = nn.Dropout(0.5), nn.Dropout(0.3)

    def forward(self, x):
        h = self.drop1(torch.relu(self.lin1(x)))
        h = F.dropout(self.lin2(h), 0.5, training=True)
        return self.drop2(h) + 1.0


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Dropout(0.5))

    def forward(self, x):
        return x + self.ff(x)


class _Nested(nn.Module):
    """Dropout two levels down (``blocks.0.ff.2``): a ``call_module`` node whose target is a dotted path."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([_Block(), _Block()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class _TwoUsers(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        d = self.drop(x)
        return self.lin(d) * d


class _Chained(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return F.dropout(self.drop(x * 2.0), 0.5, training=True)


class _MisleadingNames(nn.Module):
    """A dropout whose name says nothing (``reg``) beside Linears whose names say dropout."""

    def __init__(self):
        super().__init__()
        self.dropout_proj = nn.Linear(4, 4)
        self.reg = nn.Dropout(0.5)
        self.dropout_free = nn.Linear(4, 4)

    def forward(self, x):
        return self.dropout_free(self.reg(self.dropout_proj(x)))


def _trace(cls, seed: int = 0) -> torch.fx.GraphModule:
    return _seeded(seed, lambda: torch.fx.symbolic_trace(cls()))


def _aten_graph() -> torch.fx.GraphModule:
    """The form ``torch.export`` gives BERT: ATen calls, ``aten.dropout.default(x, p, train)``, one dropout
    read by two nodes, another feeding the output."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    h = g.call_function(torch.ops.aten.mul.Tensor, (x, 3.0))
    d = g.call_function(torch.ops.aten.dropout.default, (h, 0.5, True))
    a = g.call_function(torch.ops.aten.tanh.default, (d,))
    s = g.call_function(torch.ops.aten.add.Tensor, (d, a))
    d2 = g.call_function(torch.ops.aten.dropout.default, (s, 0.5, True))
    g.output(d2)
    return torch.fx.GraphModule(nn.Module(), g)


class _Random(nn.Module):
    """A chain from a spec: ``lin``, ``relu``, ``drop`` (an ``nn.Dropout``), ``fdrop`` (``F.dropout``),
    ``residual`` (the running value is added back after the next step: a node with two users)."""

    def __init__(self, spec, p):
        super().__init__()
        self.spec, self.p = list(spec), p
        self.mods = nn.ModuleList([nn.Linear(4, 4) if k == "lin" else nn.Dropout(p) for k in spec
                                   if k in ("lin", "drop")])

    def forward(self, x):
        mods, saved = iter(self.mods), None
        for i, kind in enumerate(self.spec):
            if kind in ("lin", "drop"):
                x = next(mods)(x)
            elif kind == "relu":
                x = torch.relu(x)
            elif kind == "fdrop":
                x = F.dropout(x, self.p, training=True)
            elif kind == "residual":
                saved = x
            if saved is not None and kind != "residual":
                x, saved = x + saved, None
        return x


def _random_graph(rng) -> tuple[torch.fx.GraphModule, str]:
    spec = [rng.choice(["lin", "relu", "drop", "fdrop", "residual"]) for _ in range(rng.randint(2, 9))]
    p = rng.choice([0.1, 0.3, 0.5])
    seed = rng.getrandbits(31)
    return _seeded(seed, lambda: torch.fx.symbolic_trace(_Random(spec, p))), " -> ".join(spec)


def _x(seed: int = 0) -> torch.Tensor:
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))


# --- lab0.count_dropout --------------------------------------------------------------------------------


def _count_cases() -> list[Case]:
    return [
        Case("no dropout at all", (_trace(_NoDropout),), show="Linear -> relu",
             hint="a graph without dropout has 0 dropout nodes"),
        Case("one nn.Dropout module", (_trace(_ModuleDropout),), show="Dropout -> Linear",
             hint="an nn.Dropout is a call_module node: look the module up with gm.get_submodule(node.target) and "
                  "test isinstance(..., torch.nn.Dropout)"),
        Case("functional F.dropout", (_trace(_FunctionalDropout),), show="F.dropout -> Linear",
             hint="F.dropout is a call_function node whose target is torch.nn.functional.dropout"),
        Case("several, modules and functional", (_trace(_Several),),
             show="Linear -> relu -> Dropout -> Linear -> F.dropout -> Dropout -> + 1",
             hint="count every dropout node, of either kind"),
        Case("nested submodules", (_trace(_Nested),), show="2 blocks, each x + Sequential(Linear, ReLU, Dropout)",
             hint="a call_module target is a dotted path (blocks.0.ff.2): gm.get_submodule resolves it"),
        Case("one dropout feeding two users", (_trace(_TwoUsers),), show="d = Dropout(x); Linear(d) * d",
             hint="one dropout node, however many nodes read it: count nodes, not edges"),
        Case("names that lie", (_trace(_MisleadingNames),),
             show="Linear 'dropout_proj' -> Dropout 'reg' -> Linear 'dropout_free'",
             hint="a node's name is not its kind: test what the node calls (node.op and node.target), not its name"),
        Case("ATen level, as torch.export captures BERT", (_aten_graph(),),
             show="aten.mul -> aten.dropout -> (aten.tanh, aten.add) -> aten.dropout",
             hint="torch.export's graphs call torch.ops.aten.dropout.default (see labkit.graph.passes.DROPOUT_TARGETS)"),
    ]


def _count_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        gm, shown = _random_graph(rng)
        cases.append(Case(f"random {i}", (gm,), show=shown))
    return cases


def _only_modules(gm):
    return sum(1 for n in gm.graph.nodes
               if n.op == "call_module" and isinstance(gm.get_submodule(n.target), nn.Dropout))


def _by_name(gm):
    return sum(1 for n in gm.graph.nodes if "dropout" in n.name)


def _no_aten(gm):
    return sum(1 for n in gm.graph.nodes if (n.op == "call_function" and n.target is F.dropout)
               or (n.op == "call_module" and isinstance(gm.get_submodule(n.target), nn.Dropout)))


@exercise(
    id="lab0.count_dropout", notebook="lab0_graphs_lora", points=2,
    title="an analysis pass: count the dropout nodes of an FX graph",
    task="Lab 0, tutorial 1: write an analysis pass that counts the dropout nodes of the captured graph",
    cases=_count_cases, hidden=_count_hidden,
    mutants={"counts only nn.Dropout modules": _only_modules, "counts by node name": _by_name,
             "misses ATen dropout": _no_aten},
    hint="a node is dropout if it is a call_module of an nn.Dropout or a call_function of F.dropout or "
         "torch.ops.aten.dropout.default",
)
def count_dropout(gm: torch.fx.GraphModule) -> int:
    return _CountDropout()(gm).info["dropout"]


# --- lab0.remove_dropout -------------------------------------------------------------------------------


DROPOUT_NAMES = {harness.target_name(t) for t in DROPOUT_TARGETS}


def _described_dropout(node) -> bool:
    op, target, classes = node
    return (op == "call_function" and target in DROPOUT_NAMES) or (
        op == "call_module" and "torch.nn.modules.dropout.Dropout" in (classes or []))


def _remove_finish(case: Case, raw: dict) -> dict:
    """What the pass left, from the harness's description of the graph module it returned (``fx_pass``): its
    dropout nodes, ``graph.lint()``, the other nodes, and its output on a fixed input in training mode."""
    if raw.get("returned") != "GraphModule":
        return {"returned": raw.get("returned")}
    nodes = [tuple(n) for n in raw["nodes"]]
    return {"returned": "GraphModule", "graph.lint()": raw["graph.lint()"],
            "dropout nodes left": sum(_described_dropout(n) for n in nodes),
            "other nodes": [f"{op} {target}" for op, target, classes in nodes
                            if not _described_dropout((op, target, classes))],
            "output": raw["output"]}


def _remove_compare(expected: dict, got: dict) -> str | None:
    if got["returned"] != "GraphModule":
        return f"your pass returned {got['returned']}; return the GraphModule (changed in place is fine)"
    if got["graph.lint()"] != "ok":
        return f"graph.lint() fails on the graph your pass returned: {got['graph.lint()']}"
    if got["dropout nodes left"]:
        return f"{got['dropout nodes left']} dropout node(s) left, expected 0"
    if got["other nodes"] != expected["other nodes"]:
        lost = [n for n in expected["other nodes"] if n not in got["other nodes"]]
        return (f"the other nodes changed: {len(got['other nodes'])} left, expected {len(expected['other nodes'])}"
                + (f" (missing {lost[:3]})" if lost else ""))
    why = differs(expected["output"], got["output"])
    if why:
        return ("the graph module's output in training mode is not the dropout-free output (" + why + "): "
                "does its forward still run dropout? gm.recompile() regenerates forward from the edited graph")
    return None


_remove_compare.tolerance = "no dropout node left, lint passes, other nodes kept, output bit for bit"


def _remove_case(name, gm, show, hint, seed=0):
    return Case(name, (gm,), {"x": _x(seed)}, show=show, hint=hint)


def _remove_cases() -> list[Case]:
    return [
        _remove_case("no dropout: nothing to do", _trace(_NoDropout), "Linear -> relu",
                     "with no dropout node the graph stays as it was (and is still returned)"),
        _remove_case("one nn.Dropout module", _trace(_ModuleDropout), "Dropout -> Linear",
                     "point the dropout's users at its input (replace_all_uses_with), then erase it"),
        _remove_case("functional F.dropout", _trace(_FunctionalDropout), "F.dropout -> Linear",
                     "F.dropout is a call_function node; its input is node.args[0]"),
        _remove_case("several dropouts", _trace(_Several),
                     "Linear -> relu -> Dropout -> Linear -> F.dropout -> Dropout -> + 1",
                     "remove every dropout node, not just the first; iterate over list(gm.graph.nodes)"),
        _remove_case("nested submodules", _trace(_Nested), "2 blocks, each x + Sequential(Linear, ReLU, Dropout)",
                     "call_module targets are dotted paths: gm.get_submodule(node.target)"),
        _remove_case("one dropout feeding two users", _trace(_TwoUsers), "d = Dropout(x); Linear(d) * d",
                     "FX erases a node only once no node reads it: replace_all_uses_with(node.args[0]) rewires "
                     "every user at once"),
        _remove_case("a dropout feeding a dropout", _trace(_Chained), "Dropout(x * 2) -> F.dropout -> output",
                     "after the first is rewired, the second reads x * 2; its users (the output) must follow"),
        _remove_case("ATen level, as torch.export captures BERT", _aten_graph(),
                     "aten.mul -> aten.dropout -> (aten.tanh, aten.add) -> aten.dropout -> output",
                     "torch.export's graphs call torch.ops.aten.dropout.default(x, p, train)"),
    ]


def _remove_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        gm, shown = _random_graph(rng)
        cases.append(_remove_case(f"random {i}", gm, shown, None, seed=rng.getrandbits(31)))
    return cases


def _no_rewire(gm):
    for node in list(gm.graph.nodes):
        if _is_dropout(node, gm):
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


def _first_only(gm):
    for node in list(gm.graph.nodes):
        if _is_dropout(node, gm):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            break
    gm.recompile()
    return gm


def _no_recompile(gm):
    for node in list(gm.graph.nodes):
        if _is_dropout(node, gm):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    return gm


@exercise(
    id="lab0.remove_dropout", spans=(), notebook="lab0_graphs_lora", points=3,
    title="a transform pass: remove every dropout node of an FX graph",
    task="Lab 0, tutorial 1: write a transform pass that removes dropout from the captured graph",
    cases=_remove_cases, hidden=_remove_hidden, runner="fx_pass", finish=_remove_finish, compare=_remove_compare,
    mutants={"skips replace_all_uses_with": _no_rewire, "removes only the first dropout": _first_only,
             "forgets recompile": _no_recompile},
    hint="for each dropout node (iterate over a list copy): node.replace_all_uses_with(node.args[0]), "
         "gm.graph.erase_node(node); then gm.recompile() and return gm",
    install="labkit.graph.passes:remove_dropout_nodes",
)
def remove_dropout(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    return _remove_dropout_nodes(gm)


# --- lab0.merge_lora -----------------------------------------------------------------------------------


ATOL, RTOL = 1e-6, 1e-5


def _lora_tensors(out_f, in_f, r, seed, dtype=torch.float32, zero_b=False):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(out_f, in_f, generator=g, dtype=dtype)
    A = torch.randn(r, in_f, generator=g, dtype=dtype) / in_f ** 0.5
    B = torch.zeros(out_f, r, dtype=dtype) if zero_b else torch.randn(out_f, r, generator=g, dtype=dtype)
    return W, A, B


def _merge_case(name, out_f, in_f, r, alpha, seed, hint, dtype=torch.float32, zero_b=False):
    W, A, B = _lora_tensors(out_f, in_f, r, seed, dtype, zero_b)
    dt = "" if dtype == torch.float32 else f", {str(dtype).replace('torch.', '')}"
    show = (f"W {out_f}x{in_f}, A {r}x{in_f}, B {out_f}x{r}" + (" (zeros)" if zero_b else "")
            + f", alpha={alpha:g}, rank={r}{dt}")
    return Case(name, (W, A, B, alpha, r), show=show, hint=hint)


def _merge_cases() -> list[Case]:
    return [
        _merge_case("alpha == rank (scaling 1)", 4, 4, 2, 2.0, 1,
                    "with alpha == rank the scaling is 1: W + B @ A (B is out x r, A is r x in)"),
        _merge_case("alpha != rank", 4, 4, 2, 8.0, 2,
                    "peft scales the update by lora_alpha / r, here 8 / 2 = 4"),
        _merge_case("rank 1", 5, 5, 1, 3.0, 3,
                    "rank 1: B @ A is an outer product (out x 1 times 1 x in), not a number"),
        _merge_case("non-square W", 3, 6, 2, 4.0, 4,
                    "the update must have W's shape (out x in): B @ A, not A @ B and not transposed"),
        _merge_case("the lab's setting: alpha 1, rank 6", 6, 8, 6, 1.0, 5,
                    "scaling = alpha / rank = 1/6: divide by the rank, do not multiply"),
        _merge_case("a fresh adapter (B = 0) leaves W as it is", 3, 4, 2, 16.0, 6,
                    "peft starts B at zero, so an untrained adapter merges to W exactly", zero_b=True),
        _merge_case("float64 stays float64", 4, 3, 2, 2.0, 7,
                    "return W's dtype: build the update from the tensors given, no float32 constants",
                    dtype=torch.float64),
    ]


def _merge_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        out_f, in_f, r = rng.randint(1, 12), rng.randint(1, 12), rng.randint(1, 8)
        alpha = rng.choice([1.0, 2.0, 8.0, 16.0, 32.0, 0.5])
        dtype = rng.choice([torch.float32, torch.float64])
        cases.append(_merge_case(f"random {i}", out_f, in_f, r, alpha, rng.getrandbits(31), None, dtype,
                                 zero_b=rng.random() < 0.15))
    return cases


def _no_scaling(W, A, B, alpha, rank):
    return W + B @ A


def _transposed(W, A, B, alpha, rank):
    return W + (A.T @ B.T) * (alpha / rank)


def _alpha_times_rank(W, A, B, alpha, rank):
    return W + (B @ A) * (alpha * rank)


@exercise(
    id="lab0.merge_lora", on_device=True, notebook="lab0_graphs_lora", points=2,
    title="merge a LoRA adapter into its Linear's weight",
    task="Lab 0, tutorial 2: merge the trained LoRA adapters into the model's weights",
    cases=_merge_cases, hidden=_merge_hidden, atol=ATOL, rtol=RTOL,
    mutants={"no scaling": _no_scaling, "transposed update (A^T B^T)": _transposed,
             "scales by alpha * rank": _alpha_times_rank},
    hint="W_merged = W + (alpha / rank) * (B @ A), with B (out x r) and A (r x in), as peft's merge does",
)
def merge_lora(W: torch.Tensor, A: torch.Tensor, B: torch.Tensor, alpha: float, rank: int) -> torch.Tensor:
    # peft's LoraLayer.get_delta_weight (fan_in_fan_out False) and merge: W + (B @ A) * (lora_alpha / r), in this
    # order of operations; tests/exercises/test_exercises_lab0.py checks it equals peft's merge_and_unload bit for bit
    return W + (B @ A) * (alpha / rank)
