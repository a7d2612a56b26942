"""Lab 0's prose as Markdown from its numbers (``figures/lab0/accuracy.json``'s ``numbers`` and ``settings``).

Each function takes what the notebook stores and returns Markdown; ``render`` builds the whole answers
file from the stored JSON alone, so it can be re-rendered without measuring anything
(``python -m labkit.redraw lab0_graphs_lora --answers``).
"""
from __future__ import annotations

from pathlib import Path

from ..graph.draw import graph_stem
from ..readings import by_key
from ..readings import seeds as _seeds
from ..readings import lab0_graphs_lora as _readings
from ..report import table
from . import measured

TITLE = "Lab 0: a BERT classifier as a graph, graph passes, and fine-tuning with SFT and LoRA"
NAMES = ("accuracy",)
# The course's results with prajjwal1/bert-tiny on the full test split (a different model: context only).
COURSE = {"SFT": 0.788, "LoRA": 0.823}
CHANCE = 0.5  # IMDb is balanced


def listing(d: dict) -> str:
    return ", ".join(f"{k} x{v}" for k, v in d.items()) or "nothing"


# --- Tutorial 1 ---------------------------------------------------------------------------------------

def capture_text(meta: dict) -> str:
    """``meta``: ``graph.MetadataPass`` info (``nodes``, ``by_op``, ``parameters``, ``parameter_bytes``)."""
    return (f"The captured graph has **{meta['nodes']} nodes** ({meta['by_op']}) and "
            f"**{meta['parameters']:,} parameters** ({meta['parameter_bytes'] / 2**20:.1f} MiB in fp32).")


def shapes_text(rows: list[dict]) -> str:
    """The metadata table: activation shapes (rows with an ``op``), or, for a JSON stored before the table
    showed them, the parameter shapes it holds, said so."""
    if rows and all("op" in r for r in rows):
        return ("Activation shapes and dtypes from the metadata pass's run on a dummy batch of 2 x 16 tokens: the "
                "inputs, the first node of each kind of compute, and what the graph returns (parameters and index "
                "plumbing left out):\n\n" + table(rows))
    return ("Parameter shapes and dtypes of the first tensor-valued nodes (this JSON was stored before the metadata "
            "table showed the activations of the pass's run on a dummy batch of 2 x 16 tokens):\n\n" + table(rows))


def dropout_text(dropout: dict, removed: dict | None = None) -> str:
    """``dropout``: ``graph.CountDropout`` info of the training-mode graph; ``removed``: what the remove pass
    did (``changes``, ``after``: dropout nodes left, ``seed_gap``: largest logit difference between two
    seeds, ``eval_gap``: against the eval-mode model), or None when not stored."""
    fused = dropout["fused_attention_dropout"]
    text = (f"Dropout nodes before: **{dropout['dropout']}** ({', '.join(dropout['nodes']) or 'none'}); attention "
            f"nodes with a fused dropout: **{len(fused)}**.")
    if removed is not None:
        text += (f" The remove pass changed {len(removed['changes'])} things ({', '.join(removed['changes'])}); "
                 f"dropout nodes after: **{removed['after']}**. Two runs with different seeds now differ by "
                 f"{removed['seed_gap']:.1e} and the graph matches the eval-mode model to {removed['eval_gap']:.1e}: "
                 f"{_readings.dropout_removed(removed).says}.")
    if fused:
        text += ("\n\nNote the fused case: in a training-mode capture the attention dropout is not a node of its own "
                 "but the `dropout_p` argument of `scaled_dot_product_attention`; a pass that only erases dropout "
                 "nodes would leave it active.")
    return text


def fx_error_text(fx_error: str | None) -> str:
    if fx_error is None:
        return ("FX erased the dropout nodes without rewiring and raised nothing: this torch lets the graph keep "
                "dangling users, so the pass must check them itself.")
    return (f"FX raised `RuntimeError`: *{fx_error}*\n\n`replace_all_uses_with(node.args[0])` first points every "
            "user of the dropout at the dropout's input; only then has the node no users and can be erased.")


# --- Tutorial 2 ---------------------------------------------------------------------------------------

def graph_files(names, folder: Path) -> dict[str, dict[str, str | None]]:
    """Which graph files exist for each captured variant in ``folder``: ``{name: {"dot": shown path or
    None, "svg": ...}}`` (paths relative to the project, see ``measured.shown_path``)."""
    out = {}
    for name in names:
        out[name] = {}
        for ext in ("dot", "svg"):
            p = Path(folder) / f"{graph_stem(name)}.{ext}"
            out[name][ext] = measured.shown_path(p) if p.is_file() else None
    return out


def graphs_text(graph_nodes: dict[str, int], files: dict[str, dict] | None, rendered_now: bool | None = None) -> str:
    """What exists of the drawn graphs. ``files``: ``graph_files``; ``rendered_now``: whether this run
    had graphviz's ``dot`` and drew them (None: not known, as when re-rendering from stored numbers)."""
    if files is None:
        return "Which graph files exist was not checked."
    svg = {n: f["svg"] for n, f in files.items() if f.get("svg")}
    dot = {n: f["dot"] for n, f in files.items() if f.get("dot")}
    missing = [n for n in graph_nodes if n not in svg]
    parts = []
    if svg:
        shown = ", ".join(f"`{svg[n]}` ({n}, {graph_nodes[n]} nodes)" for n in graph_nodes if n in svg)
        beside = (", each beside its graphviz source (`.dot`)" if all(n in dot for n in svg) else "")
        if rendered_now is False:
            parts.append(f"graphviz's `dot` was not installed on the machine that measured these numbers, so that run "
                         f"did not draw the graphs; SVGs drawn earlier (possibly from another run's graphs) exist: "
                         f"{shown}.")
        elif rendered_now:
            parts.append(f"The graphs are rendered: {shown}{beside}.")
        else:  # re-rendered from stored numbers: the files exist, who drew them is not recorded
            parts.append(f"SVG drawings of the graphs exist: {shown}{beside}. They are graphviz's drawings of the "
                         "stored sources; whether the run that measured these numbers drew them is not recorded "
                         "(a run without graphviz writes the `.dot` sources only).")
    if missing:
        have = [n for n in missing if n in dot]
        text = (f"No rendered SVG exists for {', '.join(missing)}"
                + (" (graphviz's `dot` was not installed on the machine that measured these numbers)"
                   if rendered_now is False and not svg else "") + ".")
        if have:
            src = dot[have[0]]
            text += (f" Their graphviz sources are {', '.join(f'`{dot[n]}`' for n in have)}; "
                     f"`dot -Tsvg {src} -o {src[:-4]}.svg` renders one (graphviz: `apt-get install graphviz`).")
        else:
            text += " Their graphviz sources are not stored either; the notebook writes them (`graph.write_dot`)."
        parts.append(text)
    return " ".join(parts)


def topology_text(drop_labels: dict, drop_mask: dict) -> str:
    """``graph.topology_diff`` of ids+mask+labels vs ids+mask, and of ids+mask vs ids only."""
    rl, rm = drop_labels["removed"], drop_mask["removed"]
    text = (f"**Dropping `labels`** ({drop_labels['nodes_a']} -> {drop_labels['nodes_b']} nodes) removes: "
            f"{listing(rl)}; adds: {listing(drop_labels['added'])}.")
    views = sum(v for k, v in rl.items() if k.endswith((".view.default", ".reshape.default")))
    if "placeholder:labels" in rl and any("cross_entropy" in k for k in rl):
        text += (" Without labels there is no loss branch: the `labels` placeholder and the cross-entropy that "
                 "consumed it" + (f" (with the {views} reshape{'s' if views > 1 else ''} feeding it)" if views else "")
                 + " disappear" + (", and the graph returns logits only." if not drop_labels["added"] else "."))
    text += (f"\n\n**Dropping `attention_mask`** ({drop_mask['nodes_a']} -> {drop_mask['nodes_b']} nodes) removes: "
             f"{listing(rm)}; adds: {listing(drop_mask['added'])}.")
    if "placeholder:attention_mask" in rm:
        padding = [k.split(".")[-2] for k in rm if k.endswith(("index.Tensor", "__and__.Tensor"))]
        shape_ops = [k for k in rm if any(op in k for op in ("arange", ".ge.", "expand"))]
        text += " The mask stops being a placeholder"
        if padding and not shape_ops:
            text += (": what disappears is the padding term, converting the user's mask and combining it into the "
                     f"mask attention builds ({', '.join(f'`{op}`' for op in padding)}), while the mask built from the "
                     "input's shape alone stays (no `arange`, `ge` or `expand` node was removed). Every token then "
                     "attends to every other, padding included: fine for a batch without padding, wrong for a "
                     "padded one.")
        else:
            text += "."
    return text


# --- Fine-tuning --------------------------------------------------------------------------------------

def data_text(sizes: dict, max_length: int, untrained: float, sft: dict, sft_trainable: dict, k: int = 1) -> str:
    c = measured.compare(untrained, CHANCE, sizes["test"])
    seeds = (f" Means over {k} training seeds (the head's initialisation, batch order and dropout); per seed SFT "
             f"{'/'.join(f'{v:.4f}' for v in _seeds.values(sft, 'accuracy', k))}." if k > 1 else
             " One training seed.")
    return (f"Data: {sizes['train']:,} training and {sizes['test']:,} test reviews, {max_length} tokens. Untrained "
            f"(random head) accuracy **{untrained:.3f}** ("
            + ("at chance, within two standard errors" if c["tie"] else f"{c['ses']:+.1f} standard errors from chance")
            + f", SE {c['se']:.4f}); after SFT **{sft['accuracy']:.3f}** with {sft_trainable['trainable']:,} trainable "
            f"parameters ({100 * sft_trainable['fraction']:.1f}% of {sft_trainable['total']:,})." + seeds)


def lora_training(settings: dict) -> str:
    """What LoRA's training was, next to SFT's (its start, length and learning rate), from the settings."""
    ep, lr, llr = settings["epochs"], settings["lr"], settings["lora_lr"]
    ratio = llr / lr
    return (f"LoRA here is not trained from the same start as SFT: it starts from the SFT model (after SFT's "
            f"{ep:g} epoch{'s' if ep != 1 else ''} at lr {lr:g}) and trains its adapters and the classifier head for "
            f"{ep:g} more epoch{'s' if ep != 1 else ''} at lr {llr:g}, "
            + (f"{ratio:.3g}x SFT's learning rate" if ratio != 1 else "SFT's learning rate")
            + f". The LoRA model has therefore seen the training set {2 * ep:g} times (SFT's epoch"
            f"{'s' if ep != 1 else ''} and its own), the SFT model {ep:g} time{'s' if ep != 1 else ''}: the comparison "
            "measures what an extra epoch of adapters adds to the SFT model, not LoRA against SFT's fine-tuning at "
            "equal training.")


def lora_text(settings: dict, lora: dict, merged: float, merge_gap: float, sft: dict,
              linear_biases: bool | None = None, shared: list[str] | None = None) -> str:
    """``shared``: the notebooks that ran on the same GPU at the time (provenance ``gpu_shared_with``): the two
    training times are then not compared, since each ran beside a varying load."""
    text = (f"LoRA (rank {settings['lora_rank']}, alpha {settings['lora_alpha']}, dropout {settings['lora_dropout']}) "
            f"trains **{lora['trainable']:,}** parameters ({100 * lora['fraction']:.2f}% of the model, the "
            f"classifier head included) and reaches **{lora['accuracy']:.3f}** ({lora['train_seconds']:.0f} s of "
            f"training")
    if shared:
        text += (f"; the GPU was shared with {', '.join(shared)} at the time, so this time is not compared with "
                 "SFT's")
    elif "train_seconds" in sft and sft["train_seconds"] > 0:
        t = lora["train_seconds"] / sft["train_seconds"]
        text += f"; SFT's epoch took {sft['train_seconds']:.0f} s"
        if 2 / 3 <= t <= 1.5:
            text += (": about the same, as every batch still passes forward and backward through the whole "
                     "model")
    diff = merged - lora["accuracy"]
    text += (f"). Merged into the weights: **{merged:.3f}** ({diff:+.4f}, a net {round(diff * lora['n']):+d} of "
             f"{lora['n']:,} reviews); the largest fp32 logit difference on a test batch is {merge_gap:.1e}"
             + (": the merge is exact up to rounding. The accuracies are measured in bf16 autocast, where W x + "
                "B(A x) and (W + BA) x round differently (8 significant bits), which moves the reviews whose two "
                "logits lie within that rounding of each other." if merge_gap < _readings.EXACT_GAP else
                ", more than rounding the merged sums explains: the merged model is not the adapted one."))
    if linear_biases is not None:
        text += f" Every Linear kept its bias: {linear_biases}."
    return text


def sft_vs_lora(sft: list[float], lora: list[float], n: int) -> str:
    """LoRA minus SFT over training seeds: the reading ``lora_vs_sft`` (seed spread and test-set error)."""
    return _readings.lora_vs_sft(sft, lora, n).says


def control_text(numbers: dict) -> str:
    """LoRA against the equal-training control (the SFT model fully fine-tuned for LoRA's extra epoch)."""
    if "control" not in numbers:
        return (" No equal-training control (the SFT model trained fully for the same extra epoch) was trained in "
                "this run (the quick profile leaves it out for time), so LoRA's difference from SFT mixes the adapters "
                "with the extra epoch.")
    r = by_key(_readings.read(numbers))
    return (f" The equal-training control, the SFT model fine-tuned fully for that extra epoch at SFT's learning rate, "
            f"reaches {numbers['accuracy']['SFT + 1 epoch']:.4f} (the extra epoch alone: {r['extra_epoch'].says}); "
            f"LoRA minus that control: {r['lora_vs_control'].says}")


def answers_list(numbers: dict, settings: dict) -> str:
    """The lab's three answers (topology, dropout, fine-tuning) as a bullet list."""
    t = numbers["topology"]
    lab, mask = t["drop_labels"], t["drop_mask"]
    d, removed = numbers["dropout"], numbers.get("dropout_removed")
    sft, lora, merged = numbers["sft"], numbers["lora"], numbers["merged"]
    loss_branch = "placeholder:labels" in lab["removed"] and any("cross_entropy" in k for k in lab["removed"])
    topo = (f"- **Topology.** With all three inputs the graph has {lab['nodes_a']} nodes; without labels "
            f"{lab['nodes_b']}" + (" (no loss branch)" if loss_branch else "") + f", without labels and mask "
            f"{mask['nodes_b']}" + (" (the mask is built inside from the input's shape; its padding term is gone)"
                                    if "placeholder:attention_mask" in mask["removed"] else "") + ".")
    drop = (f"- **Dropout.** {d['dropout']} dropout nodes plus {len(d['fused_attention_dropout'])} fused into attention"
            + ("; removing them makes the training-mode graph equal the eval-mode model "
               f"(largest logit difference {removed['eval_gap']:.1e})." if removed is not None
               and _readings.dropout_removed(removed).verdict == "holds" else
               "; the removed graph still differs from the eval-mode model." if removed is not None else
               "; the check of the removed graph against the eval-mode model is not stored in this JSON."))
    dm = merged["accuracy"] - lora["accuracy"]
    nseeds = _seeds.count(numbers)
    r = by_key(_readings.read(numbers))
    anchors = " and ".join(f"{v:.3f} ({k})" for k, v in COURSE.items())
    tune = (f"- **Fine-tuning.** SFT is {r['sft.above_chance'].says}. SFT {sft['accuracy']:.4f} vs LoRA "
            f"{lora['accuracy']:.4f} with {lora['trainable']:,} instead of "
            f"{numbers['sft_trainable']['trainable']:,} trainable parameters"
            + (f" (means of {nseeds} training seeds)" if nseeds > 1 else "") + ". "
            + r["lora_vs_sft"].says + " "
            + lora_training(settings) + control_text(numbers)
            + f" Merging changes accuracy by {dm:+.4f}: {r['merge.keeps_model'].says}. The course's anchors with "
            f"bert-tiny on the full test split are {anchors}: another model, context rather than a comparison; this "
            f"run is `{settings['model']}` at {settings['max_length']} tokens, profile `{settings['profile']}`, on "
            f"{numbers['dataset_sizes']['test']:,} test reviews.")
    return "\n".join((topo, drop, tune))


# --- the whole file -----------------------------------------------------------------------------------

def render(payloads: dict[str, dict | None], folder: Path | None = None, how: str | None = None,
           rendered_now: bool | None = None) -> str:
    """The answers file from the stored payloads (``NAMES``: ``accuracy``). ``folder``: where the JSON lies (the
    drawn graphs beside it are listed, its paths shown; default ``figures/lab0/``); ``how``: the line saying how
    this text was made (default: re-rendered from stored numbers); ``rendered_now``: whether the run writing
    this drew the graphs (None: as the JSON records)."""
    acc = payloads.get("accuracy")
    files = graph_files(acc["numbers"]["graph_nodes"], folder) if acc and folder is not None else None
    json_paths = {name: measured.shown_path(folder / f"{name}.json") for name in NAMES} if folder else None
    paths = {name: (json_paths or {}).get(name, f"figures/lab0/{name}.json") for name in NAMES}
    how = how or measured.STORED.format(module="labkit.answers.lab0_graphs_lora", lab="lab0_graphs_lora")
    head = measured.header(TITLE, {paths[n]: payloads.get(n) for n in NAMES}, how)
    payload = payloads.get("accuracy")
    if payload is None:
        return head + "\n\nNo stored numbers: nothing to render.\n"
    num, s = payload["numbers"], payload["settings"]
    absent = [what for key, what in (("graph_meta", "the metadata pass's counts and shapes"),
                                     ("dropout_removed", "the dropout-removal check"),
                                     ("linear_biases", "whether every Linear kept its bias after merging"))
              if key not in num]
    if absent:
        head += ("\n\nNot in this JSON (the notebook prints them and stores them from later runs on), so not "
                 "rendered: " + "; ".join(absent) + ".")
    parts = [head, "## Tutorial 1: capture, metadata, and the dropout passes"]
    if "graph_meta" in num:
        parts += [capture_text(num["graph_meta"]), shapes_text(num["graph_meta"]["first_shapes"])]
    parts += [dropout_text(num["dropout"], num.get("dropout_removed")), fx_error_text(num["fx_error"]),
              "## Tutorial 2: how the chosen inputs change the graph",
              graphs_text(num["graph_nodes"], files, num.get("graphs_drawn") if rendered_now is None else rendered_now),
              topology_text(num["topology"]["drop_labels"], num["topology"]["drop_mask"]),
              "## Fine-tuning on IMDb: SFT, LoRA, merged LoRA",
              data_text(num["dataset_sizes"], s["max_length"], num["accuracy"]["untrained"], num["sft"],
                        num["sft_trainable"], _seeds.count(num)),
              lora_text(s, num["lora"], num["merged"]["accuracy"],
                        max(_seeds.values(num, "merge_max_logit_diff", _seeds.count(num))), num["sft"],
                        num.get("linear_biases"), (payload.get("provenance") or {}).get("gpu_shared_with")),
              "## Answers", answers_list(num, s)]
    return "\n\n".join(parts) + "\n"
