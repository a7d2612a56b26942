"""Draw FX graphs (graphviz via pydot) and list how two graphs' topologies differ."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import torch


def graph_stem(name: str) -> str:
    """File stem of a captured variant's graph: ``ids+mask+labels`` -> ``graph_ids_mask_labels``."""
    return "graph_" + name.replace("+", "_").replace(" ", "_")


def draw(gm: torch.fx.GraphModule, path: str | Path, name: str = "graph") -> Path:
    """Render ``gm`` to ``path`` (.svg or .png) with torch's ``FxGraphDrawer``; needs graphviz's ``dot``."""
    if shutil.which("dot") is None:
        raise RuntimeError("graphviz's 'dot' program is not installed (Debian: apt-get install graphviz; "
                           "macOS: brew install graphviz); it is needed to draw graphs")
    from torch.fx.passes.graph_drawer import FxGraphDrawer

    path = Path(path)
    fmt = path.suffix.lstrip(".")
    if fmt not in ("svg", "png", "pdf"):
        raise ValueError(f"{path}: allowed suffixes are .svg, .png, .pdf")
    path.parent.mkdir(parents=True, exist_ok=True)
    dot = FxGraphDrawer(gm, name, ignore_getattr=True).get_dot_graph()
    dot.write(str(path), format=fmt)
    return path


def write_dot(gm: torch.fx.GraphModule, path: str | Path, name: str = "graph") -> Path:
    """Write the graphviz source (no ``dot`` binary needed); render later with ``dot -Tsvg``."""
    from torch.fx.passes.graph_drawer import FxGraphDrawer

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FxGraphDrawer(gm, name, ignore_getattr=True).get_dot_graph().to_string())
    return path


def can_render() -> bool:
    return shutil.which("dot") is not None


def _signature(node: torch.fx.Node) -> str:
    """What a node does, independent of its generated name: placeholder name, op target or output."""
    if node.op == "placeholder":
        return f"placeholder:{node.target}"
    if node.op in ("call_function", "call_method", "call_module"):
        return f"{node.op}:{node.target}"
    return node.op if node.op == "output" else f"{node.op}"


def topology_diff(a: torch.fx.GraphModule, b: torch.fx.GraphModule) -> dict:
    """Node kinds present more often in ``a`` than ``b`` (removed) and in ``b`` than ``a`` (added)."""
    ca = Counter(_signature(n) for n in a.graph.nodes)
    cb = Counter(_signature(n) for n in b.graph.nodes)
    return {"nodes_a": len(a.graph.nodes), "nodes_b": len(b.graph.nodes),
            "removed": dict(sorted((ca - cb).items())), "added": dict(sorted((cb - ca).items()))}
