"""Lab 0's graph tutorials: what each graph cell of the notebook measures, prints and shows (the metadata of
the captured graph, the dropout passes on a training-mode graph, FX's refusal to erase a node still read, the
three captures drawn side by side and how their topologies differ), and the numbers the lab stores."""
from __future__ import annotations

import base64
from pathlib import Path

import torch

from .. import graph
from ..graph.draw import graph_stem
from ..graph.passes import activation_shapes

# Tutorial 2's captures: name -> the inputs chosen (the first is also Tutorial 1's)
VARIANTS = {
    "ids+mask+labels": ["input_ids", "attention_mask", "labels"],
    "ids+mask": ["input_ids", "attention_mask"],
    "ids only": ["input_ids"],
}


def metadata(model: torch.nn.Module) -> dict:
    """``graph.MetadataPass``'s counts of ``model`` captured with ids, mask and labels, and the metadata table's
    rows (``first_shapes``)."""
    gm = graph.capture(model, VARIANTS["ids+mask+labels"])
    meta = graph.MetadataPass()(gm).info
    found = {k: meta[k] for k in ("nodes", "by_op", "parameters", "parameter_bytes")}
    # the activations of the pass's run on the dummy batch (parameters' shapes are the weights' own): inputs, the
    # first node of each kind of compute, and what the graph returns
    found["first_shapes"] = activation_shapes(gm, meta["shapes"])
    return found


def metadata_line(meta: dict) -> str:
    return (f"{meta['nodes']} nodes {meta['by_op']}; {meta['parameters']:,} parameters, "
            f"{meta['parameter_bytes']:,} bytes")


def dropout_passes(model: torch.nn.Module, counting, removing) -> tuple[dict, dict, str]:
    """Count the dropout of ``model``'s training-mode graph, remove it and check what is left: ``(counted,
    removed, printed)``; ``counted``: ``graph.CountDropout``'s info, ``removed``: what the pass changed, the
    dropout nodes after it and the largest logit gaps between two seeds and to the eval-mode model.
    ``counting``, ``removing``: the two exercises' checks (the student's count, and the student's pass once its
    check passed). Leaves ``model`` in eval mode."""
    gm_train = graph.capture(model, train=True)
    counted = graph.CountDropout()(gm_train).info
    lines = [f"count_dropout: {counting.fn(gm_train)} dropout nodes (labkit's CountDropout: {counted['dropout']}: "
             f"{counted['nodes']}); attention nodes with a fused dropout_p: {counted['fused_attention_dropout']}"]
    with removing.installed():
        result = graph.RemoveDropout()(gm_train)
    after = graph.CountDropout()(result.graph_module).info
    x = gm_train.meta["example_inputs"]
    torch.manual_seed(0)
    a = result.graph_module(**x).logits
    torch.manual_seed(1)
    b = result.graph_module(**x).logits
    model.eval()
    with torch.no_grad():
        ref = model(**x).logits
    removed = {"changes": list(result.changes), "after": after["dropout"],
               "seed_gap": (a - b).abs().max().item(), "eval_gap": (a - ref).abs().max().item()}
    lines.append(f"removed: {removed['changes']}; count_dropout after: {counting.fn(result.graph_module)}; "
                 f"largest logit gap between two seeds {removed['seed_gap']:.1e}, "
                 f"to the eval-mode model {removed['eval_gap']:.1e}")
    return counted, removed, "\n".join(lines)


def fx_error(model: torch.nn.Module) -> str | None:
    """The ``RuntimeError`` FX raises when the remove pass erases dropout without ``replace_all_uses_with``
    (None: it raised nothing)."""
    try:
        graph.RemoveDropout(rewire=False)(graph.capture(model, train=True))
    except RuntimeError as err:
        return str(err)
    return None


def capture_variants(model: torch.nn.Module, folder: Path) -> dict[str, torch.fx.GraphModule]:
    """``VARIANTS`` captured, each graph's graphviz source written to ``folder`` and, where graphviz is
    installed, its SVG drawn beside it."""
    graphs = {name: graph.capture(model, names) for name, names in VARIANTS.items()}
    for name, g in graphs.items():
        graph.write_dot(g, Path(folder) / f"{graph_stem(name)}.dot", name)
        if graph.can_render():
            graph.draw(g, Path(folder) / f"{graph_stem(name)}.svg", name)
    return graphs


def drawings(graphs: dict[str, torch.fx.GraphModule], folder: Path):
    """The drawn graphs side by side (an IPython ``HTML``), or None where graphviz did not draw them."""
    if not graph.can_render():
        return None
    from IPython.display import HTML

    cells = "".join(
        f"<div style='flex:1;min-width:0'><b>{name}</b> ({len(g.graph.nodes)} nodes)<br>"
        f"<img style='width:100%' src='data:image/svg+xml;base64,"
        f"{base64.b64encode((Path(folder) / f'{graph_stem(name)}.svg').read_bytes()).decode()}'/>"
        "</div>" for name, g in graphs.items())
    return HTML(f"<div style='display:flex;gap:8px;max-height:900px;overflow:auto'>{cells}</div>")


def node_counts(graphs: dict[str, torch.fx.GraphModule]) -> dict[str, int]:
    return {name: len(g.graph.nodes) for name, g in graphs.items()}


def graphs_lines(graphs: dict[str, torch.fx.GraphModule], folder: Path) -> str:
    """The node count of each capture and the graph files in ``folder``."""
    return (f"nodes per captured graph: {node_counts(graphs)}\n"
            f"graph files: {sorted(p.name for p in Path(folder).glob('graph_*'))}")


def topology(graphs: dict[str, torch.fx.GraphModule]) -> dict[str, dict]:
    """``graph.topology_diff`` of dropping labels (``drop_labels``) and then the mask (``drop_mask``)."""
    return {"drop_labels": graph.topology_diff(graphs["ids+mask+labels"], graphs["ids+mask"]),
            "drop_mask": graph.topology_diff(graphs["ids+mask"], graphs["ids only"])}


def topology_lines(topo: dict[str, dict]) -> str:
    return "\n".join(f"{what}: {d['nodes_a']} -> {d['nodes_b']} nodes\n  node kinds removed: {d['removed']}\n"
                     f"  node kinds added: {d['added']}"
                     for what, d in (("without labels", topo["drop_labels"]),
                                     ("without attention_mask (and labels)", topo["drop_mask"])))


def numbers(tuned: dict, sizes: dict, graph_meta: dict, dropout: dict, dropout_removed: dict,
            fx_error: str | None, topo: dict, graphs: dict[str, torch.fx.GraphModule]) -> dict:
    """What Lab 0 stores (``accuracy.json``'s numbers): the fine-tuning's (``lab0_finetune.all_seeds``), the data
    set's sizes and the graph tutorials' findings."""
    return {**tuned, "dataset_sizes": sizes, "graph_meta": graph_meta, "dropout": dropout,
            "dropout_removed": dropout_removed, "fx_error": fx_error, "topology": topo,
            "graph_nodes": node_counts(graphs),
            "graphs_drawn": graph.can_render()}  # whether this run drew the SVGs (graphviz installed)
