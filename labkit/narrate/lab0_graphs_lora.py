"""What Lab 0's notebook prints while it runs: the captured graph's metadata, the dropout passes, the captures and
their topologies, each seed's fine-tuning and the merge exercise beside peft's (the numbers come from
``labkit.labs.lab0_graphs`` and ``labkit.labs.lab0_finetune``; the answers are ``labkit.answers.lab0_graphs_lora``)."""
from __future__ import annotations


def metadata_line(meta: dict) -> str:
    """``labs.lab0_graphs.metadata``'s counts in one line."""
    return (f"{meta['nodes']} nodes {meta['by_op']}; {meta['parameters']:,} parameters, "
            f"{meta['parameter_bytes']:,} bytes")


def dropout_lines(counted: dict, removed: dict, yours: dict) -> str:
    """``labs.lab0_graphs.dropout_passes``' three dicts: the exercise's counts beside labkit's, and what the
    remove pass left."""
    return "\n".join([
        f"count_dropout: {yours['before']} dropout nodes (labkit's CountDropout: {counted['dropout']}: "
        f"{counted['nodes']}); attention nodes with a fused dropout_p: {counted['fused_attention_dropout']}",
        f"removed: {removed['changes']}; count_dropout after: {yours['after']}; "
        f"largest logit gap between two seeds {removed['seed_gap']:.1e}, "
        f"to the eval-mode model {removed['eval_gap']:.1e}"])


def graphs_lines(nodes: dict[str, int], files: list[str]) -> str:
    """The node count of each capture (``node_counts``) and the graph files written (``graph_files``)."""
    return f"nodes per captured graph: {nodes}\ngraph files: {files}"


def topology_lines(topo: dict[str, dict]) -> str:
    """``labs.lab0_graphs.topology``: node counts and node kinds removed and added by each dropped input."""
    return "\n".join(f"{what}: {d['nodes_a']} -> {d['nodes_b']} nodes\n  node kinds removed: {d['removed']}\n"
                     f"  node kinds added: {d['added']}"
                     for what, d in (("without labels", topo["drop_labels"]),
                                     ("without attention_mask (and labels)", topo["drop_mask"])))


def seeds_lines(tuned: dict, per_seed: list[dict]) -> str:
    """``labs.lab0_finetune.all_seeds``: each seed's accuracies, the trainable parameters and the largest logit
    change from merging over the seeds."""
    lines = [f"seed {seed}: " + ", ".join(f"{k} {v:.4f}" for k, v in r["accuracy"].items())
             for seed, r in zip(tuned["seeds"], per_seed)]
    lines.append(f"trainable parameters: SFT {tuned['sft_trainable']['trainable']:,}, LoRA "
                 f"{tuned['lora']['trainable']:,}; largest logit change from merging: "
                 f"{max(r['merge_max_logit_diff'] for r in per_seed):.1e}")
    return "\n".join(lines)


def merge_line(gaps: dict) -> str:
    """``labs.lab0_finetune.merge_gaps``: how far the update moves the weight, and the exercise's merge from
    peft's."""
    return (f"layer 0 query {gaps['shape']}, rank {gaps['rank']}, alpha {gaps['alpha']}: the update moves W by "
            f"up to {gaps['update']:.2e}; max |merge_lora - peft's merge_and_unload| = {gaps['gap']:.1e}")
