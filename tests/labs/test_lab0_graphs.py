"""Lab 0's notebook glue (labkit.labs.lab0_graphs, lab0_finetune.merge_gaps) on the tiny BERT: the numbers each graph
cell measures and stores, and what it prints of them (labkit.narrate.lab0_graphs_lora)."""
import contextlib
import copy
from types import SimpleNamespace

import pytest

from labkit import graph
from labkit.labs import lab0_finetune, lab0_graphs
from labkit.narrate import lab0_graphs_lora as words


@pytest.fixture
def model(tiny_bert):
    return copy.deepcopy(tiny_bert)  # the dropout demo leaves its model in eval mode


def labkit_checks():
    """Stand-ins for the two dropout exercises' checks: labkit's count, labkit's pass left in place."""
    counting = SimpleNamespace(fn=lambda gm: graph.CountDropout()(gm).info["dropout"])
    return counting, SimpleNamespace(installed=contextlib.nullcontext)


def test_metadata_keeps_counts_and_activation_rows(model):
    meta = lab0_graphs.metadata(model)
    assert set(meta) == {"nodes", "by_op", "parameters", "parameter_bytes", "first_shapes"}
    assert meta["parameters"] == sum(p.numel() for p in model.parameters())
    assert [r["op"] for r in meta["first_shapes"][:3]] == ["input"] * 3
    assert words.metadata_line(meta).startswith(f"{meta['nodes']} nodes {meta['by_op']}; ")


def test_dropout_passes_count_remove_and_say_so(model):
    counted, removed, yours = lab0_graphs.dropout_passes(model, *labkit_checks())
    assert counted["dropout"] == 6 and len(counted["fused_attention_dropout"]) == 2
    assert removed["after"] == 0 and len(removed["changes"]) == 8
    assert removed["seed_gap"] == 0 and removed["eval_gap"] < 1e-5 and not model.training
    assert yours == {"before": 6, "after": 0}
    first, second = words.dropout_lines(counted, removed, yours).split("\n")
    assert first.startswith("count_dropout: 6 dropout nodes (labkit's CountDropout: 6: [")
    assert second.startswith("removed: [") and "count_dropout after: 0;" in second


def test_fx_error_is_what_erasing_without_rewiring_raises(model):
    assert "still had" in lab0_graphs.fx_error(model)


def test_variants_topology_and_numbers(model, tmp_path):
    graphs = lab0_graphs.capture_variants(model, tmp_path)
    assert list(graphs) == list(lab0_graphs.VARIANTS)
    assert {p.name for p in tmp_path.glob("*.dot")} == {"graph_ids_mask_labels.dot", "graph_ids_mask.dot",
                                                        "graph_ids_only.dot"}
    nodes, files = words.graphs_lines(lab0_graphs.node_counts(graphs), lab0_graphs.graph_files(tmp_path)).split("\n")
    assert nodes == f"nodes per captured graph: {lab0_graphs.node_counts(graphs)}"
    assert files.startswith("graph files: ['graph_ids_mask.dot', ")
    assert (lab0_graphs.drawings(graphs, tmp_path) is None) == (not graph.can_render())
    topo = lab0_graphs.topology(graphs)
    assert topo["drop_labels"]["removed"].get("placeholder:labels") == 1
    assert words.topology_lines(topo).split("\n")[::3] == [
        f"without labels: {topo['drop_labels']['nodes_a']} -> {topo['drop_labels']['nodes_b']} nodes",
        f"without attention_mask (and labels): {topo['drop_mask']['nodes_a']} -> {topo['drop_mask']['nodes_b']} nodes"]
    numbers = lab0_graphs.numbers({"accuracy": {"SFT": 0.8}}, {"train": 8, "test": 4}, {"nodes": 1}, {"dropout": 6},
                                  {"after": 0}, "err", topo, graphs)
    assert list(numbers) == ["accuracy", "dataset_sizes", "graph_meta", "dropout", "dropout_removed", "fx_error",
                             "topology", "graph_nodes", "graphs_drawn"]
    assert numbers["graph_nodes"] == lab0_graphs.node_counts(graphs) and numbers["topology"] is topo


def test_merge_gaps_compare_with_peft(model):
    s = {"lora_rank": 4, "lora_alpha": 1.0, "lora_dropout": 0.0, "seed": 0}
    right = lab0_finetune.merge_gaps(model, s, lambda W, A, B, alpha, rank: W + (alpha / rank) * (B @ A))
    wrong = lab0_finetune.merge_gaps(model, s, lambda W, A, B, alpha, rank: W + alpha * (B @ A))
    assert right["shape"] == (64, 64) and right["update"] > 0
    assert right["gap"] < 1e-6 < wrong["gap"]
    line = words.merge_line(right)
    assert line.startswith("layer 0 query (64, 64), rank 4, alpha 1.0: the update moves W by up to ")
    assert float(line.rsplit("= ", 1)[1]) == float(f"{right['gap']:.1e}")


def test_seeds_lines_say_each_seed_and_the_largest_merge_change():
    per_seed = [{"accuracy": {"SFT": 0.81, "LoRA": 0.8}, "merge_max_logit_diff": 2e-6},
                {"accuracy": {"SFT": 0.82, "LoRA": 0.79}, "merge_max_logit_diff": 3e-6}]
    tuned = {"seeds": [0, 1], "sft_trainable": {"trainable": 1234}, "lora": {"trainable": 56}}
    assert words.seeds_lines(tuned, per_seed).split("\n") == [
        "seed 0: SFT 0.8100, LoRA 0.8000", "seed 1: SFT 0.8200, LoRA 0.7900",
        "trainable parameters: SFT 1,234, LoRA 56; largest logit change from merging: 3.0e-06"]
