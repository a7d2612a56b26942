"""Analysis and transform passes over an FX ``GraphModule``.

Each pass is a ``torch.fx`` ``PassBase``: calling it returns a ``GraphPassResult`` (the graph module, whether
it changed, the names of what changed, and what it measured), so passes compose with ``run_passes`` or
with torch's ``PassManager``.
"""
from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import torch
from torch.fx.passes.infra.pass_base import PassBase
from torch.fx.passes.shape_prop import ShapeProp

DROPOUT_TARGETS = {torch.ops.aten.dropout.default, torch.ops.aten.native_dropout.default,
                   torch.nn.functional.dropout}


class GraphPassResult(NamedTuple):
    """torch.fx's ``PassResult`` fields (``graph_module``, ``modified``) plus ``changes`` (names of nodes
    removed or edited) and ``info`` (what the pass measured)."""

    graph_module: torch.fx.GraphModule
    modified: bool
    changes: list  # no defaults: a NamedTuple default would be one list shared by every result
    info: dict

    def __repr__(self):
        shown = {k: v for k, v in self.info.items() if k != "shapes"}
        return f"GraphPassResult(modified={self.modified}, changes={self.changes}, info={shown})"


def is_dropout(node: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    if node.op == "call_function":
        return node.target in DROPOUT_TARGETS
    if node.op == "call_module":
        return isinstance(gm.get_submodule(node.target), torch.nn.Dropout)
    return False


SDPA = torch.ops.aten.scaled_dot_product_attention.default


def attention_dropout_p(node: torch.fx.Node) -> float:
    """Dropout probability fused into a scaled-dot-product-attention node (0 if none or not SDPA)."""
    if node.op != "call_function" or node.target != SDPA:
        return 0.0
    # aten signature: (query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None)
    p = node.kwargs.get("dropout_p", node.args[4] if len(node.args) > 4 else 0.0)
    return float(p)


def _set_attention_dropout_zero(node: torch.fx.Node) -> None:
    if "dropout_p" in node.kwargs:
        node.kwargs = {**node.kwargs, "dropout_p": 0.0}
    else:
        args = list(node.args)
        args[4] = 0.0
        node.args = tuple(args)


class MetadataPass(PassBase):
    """Run the graph on example inputs and record each node's shape and dtype in ``node.meta``.

    Reports node counts by op and target, and parameter count and bytes. Changes nothing.
    """

    def __init__(self, example_inputs: dict[str, torch.Tensor] | None = None):
        self.example_inputs = example_inputs

    def call(self, gm: torch.fx.GraphModule) -> GraphPassResult:
        inputs = self.example_inputs or gm.meta.get("example_inputs")
        if inputs is None:
            raise ValueError("MetadataPass needs example inputs (pass them or capture with labkit.graph.capture)")
        names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ValueError(f"example inputs lack placeholders {missing}")
        with torch.no_grad():
            ShapeProp(gm).propagate(*[inputs[n] for n in names])
        shapes = {}
        for node in gm.graph.nodes:
            meta = node.meta.get("tensor_meta")
            if meta is not None and hasattr(meta, "shape"):
                shapes[node.name] = {"shape": list(meta.shape), "dtype": str(meta.dtype)}
        params = list(gm.parameters())
        info = {
            "nodes": len(gm.graph.nodes),
            "by_op": dict(Counter(n.op for n in gm.graph.nodes)),
            "by_target": dict(Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function")),
            "parameters": sum(p.numel() for p in params),
            "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
            "shapes": shapes,
        }
        return GraphPassResult(gm, False, [], info)


class CountDropout(PassBase):
    """Count dropout nodes (ATen dropout calls or ``nn.Dropout`` modules), and attention nodes that carry
    a fused dropout (``scaled_dot_product_attention`` with ``dropout_p > 0``, as in training-mode graphs)."""

    def call(self, gm: torch.fx.GraphModule) -> GraphPassResult:
        nodes = [n.name for n in gm.graph.nodes if is_dropout(n, gm)]
        fused = [n.name for n in gm.graph.nodes if attention_dropout_p(n) > 0]
        return GraphPassResult(gm, False, [], {"dropout": len(nodes), "nodes": nodes,
                                               "fused_attention_dropout": fused})


def remove_dropout_nodes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The sheet's transform pass: erase every dropout node (``is_dropout``), first pointing each of its users at
    the dropout's input, then recompile; returns ``gm`` (changed in place). ``RemoveDropout`` calls it through
    this module's attribute, which Lab 0's exercise ``lab0.remove_dropout`` replaces with a student's pass."""
    for node in list(gm.graph.nodes):
        if is_dropout(node, gm):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


class RemoveDropout(PassBase):
    """Delete dropout nodes, rewiring each one's users to its input, and set the dropout probability of
    attention nodes to 0 (a dropout fused into SDPA is not a node of its own).

    ``rewire=False`` skips ``replace_all_uses_with`` to show why it is needed: FX then refuses to erase a
    node that still has users and raises ``RuntimeError``.
    """

    def __init__(self, rewire: bool = True):
        self.rewire = rewire

    def call(self, gm: torch.fx.GraphModule) -> GraphPassResult:
        removed = [node.name for node in gm.graph.nodes if is_dropout(node, gm)]
        if removed and self.rewire:
            gm = remove_dropout_nodes(gm)  # looked up at call time: Lab 0's exercise installs the student's pass
        elif removed:
            for node in list(gm.graph.nodes):
                if is_dropout(node, gm):
                    gm.graph.erase_node(node)  # still has users: FX raises RuntimeError
        for node in gm.graph.nodes:
            if attention_dropout_p(node) > 0:
                _set_attention_dropout_zero(node)
                removed.append(f"{node.name}.dropout_p")
        if removed:
            gm.graph.lint()
            gm.recompile()
        return GraphPassResult(gm, bool(removed), removed, {"removed": len(removed)})


def run_passes(gm: torch.fx.GraphModule, passes) -> tuple[torch.fx.GraphModule, list[GraphPassResult]]:
    """Apply ``passes`` in order; each sees the previous one's graph module."""
    results = []
    for p in passes:
        result = p(gm)
        gm = result.graph_module
        results.append(result)
    return gm, results


def activation_shapes(gm, shapes: dict, limit: int = 16) -> list[dict]:
    """The metadata table's rows: the activations the metadata pass's run on the dummy batch produced, not the
    parameters (``get_attr`` nodes, whose shapes the weights alone give). One row per input, then the first node
    of each kind of compute on the data path, then what the graph returns; index and mask plumbing is left out
    (``shapes``: ``graph.MetadataPass``'s ``shapes``)."""
    kinds = ("embedding", "layer_norm", "linear", "view", "transpose", "scaled_dot_product_attention", "gelu",
             "tanh", "cross_entropy")
    nodes = {n.name: n for n in gm.graph.nodes}
    out_args = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    returned = {a.name for a in (out_args if isinstance(out_args, (tuple, list)) else [out_args]) if hasattr(a, "name")}
    rows, seen = [], set()
    for name, v in shapes.items():
        node = nodes.get(name)
        if node is None or node.op == "get_attr":
            continue
        target = str(node.target)
        kind = next((k for k in kinds if f".{k}" in target), None)
        if node.op == "placeholder" or name in returned or (kind and kind not in seen):
            seen.add(kind)
            rows.append({"node": name, "op": "input" if node.op == "placeholder" else target,
                         "shape": str(v["shape"]), "dtype": v["dtype"]})
    front = [r for r in rows if r["node"] not in returned][:limit - len(returned)]
    return front + [r for r in rows if r["node"] in returned]
