"""Lab 0's graph tutorials: what each graph cell of the notebook measures and shows (the metadata of the
captured graph, the dropout passes on a training-mode graph, FX's refusal to erase a node still read, the three
captures drawn side by side and how their topologies differ), and the numbers the lab stores; what the cells
print is ``labkit.narrate.lab0_graphs_lora``'s."""
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


def dropout_passes(model: torch.nn.Module, counting, removing) -> tuple[dict, dict, dict]:
    """Count the dropout of ``model``'s training-mode graph, remove it and check what is left: ``(counted,
    removed, yours)``; ``counted``: ``graph.CountDropout``'s info, ``removed``: what the pass changed, the
    dropout nodes after it and the largest logit gaps between two seeds and to the eval-mode model, ``yours``: the
    exercise's dropout count ``before`` and ``after`` the pass (``narrate.lab0_graphs_lora.dropout_lines`` words
    them). ``counting``, ``removing``: the two exercises' checks (the student's count, and the student's pass once
    its check passed). Leaves ``model`` in eval mode."""
    gm_train = graph.capture(model, train=True)
    counted = graph.CountDropout()(gm_train).info
    yours = {"before": counting.fn(gm_train)}
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
    yours["after"] = counting.fn(result.graph_module)
    return counted, removed, yours


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


def graph_files(folder: Path) -> list[str]:
    """The names of the graph files in ``folder`` (graphviz sources, and SVGs where drawn)."""
    return sorted(p.name for p in Path(folder).glob("graph_*"))


def topology(graphs: dict[str, torch.fx.GraphModule]) -> dict[str, dict]:
    """``graph.topology_diff`` of dropping labels (``drop_labels``) and then the mask (``drop_mask``)."""
    return {"drop_labels": graph.topology_diff(graphs["ids+mask+labels"], graphs["ids+mask"]),
            "drop_mask": graph.topology_diff(graphs["ids+mask"], graphs["ids only"])}


def numbers(tuned: dict, sizes: dict, graph_meta: dict, dropout: dict, dropout_removed: dict,
            fx_error: str | None, topo: dict, graphs: dict[str, torch.fx.GraphModule]) -> dict:
    """What Lab 0 stores (``accuracy.json``'s numbers): the fine-tuning's (``lab0_finetune.all_seeds``), the data
    set's sizes and the graph tutorials' findings."""
    return {**tuned, "dataset_sizes": sizes, "graph_meta": graph_meta, "dropout": dropout,
            "dropout_removed": dropout_removed, "fx_error": fx_error, "topology": topo,
            "graph_nodes": node_counts(graphs),
            "graphs_drawn": graph.can_render()}  # whether this run drew the SVGs (graphviz installed)
