# %% [markdown]
# # Lab 0: a BERT classifier as a graph, graph passes, and fine-tuning with SFT and LoRA
#
# **Tutorial 1** captures a Hugging Face BERT sequence classifier as a `torch.fx` graph, annotates it with
# shapes and dtypes, and writes two passes: one counting dropout, one removing it. **Tutorial 2** captures
# the same model with different inputs (`input_ids`, `attention_mask`, `labels`), draws the graphs and
# explains how the topology changes; then fine-tunes on IMDb with full SFT and with LoRA, and merges LoRA.
#
# The model is labkit's offline default `minilm-l2`: real pretrained MiniLM-L6-H384 weights (the
# bert-base-uncased vocabulary, as the course's `prajjwal1/bert-tiny`) cut to 2 layers. With network
# access, set `OVERRIDES = {"model": "bert-tiny"}` to use the course's model.
#
# Three exercises are yours: the two dropout passes (count, remove) and merging a LoRA adapter into its weight;
# each is checked on the spot against labkit's own, and once it passes the notebook uses yours. Two questions
# ask you to explain what the graphs show. Each cell prints the numbers it measured; in the teaching edition,
# answer-key cells turn them into sentences and write the answers file beside the results, from the JSON this
# run saves.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"train_size": 1000, "model": "bert-tiny"}

# %%
import base64
import copy

import torch
from IPython.display import HTML, display

from labkit import graph, lora, models, recipes
from labkit.labs import per_seed as per_seed_runs
from labkit.readings import seeds
from labkit.exercises import check
from labkit.training import train
from labkit.labs.lab0_finetune import lab0_seed
from labkit.run.profiles import lab_settings
from labkit.plots.lab0_graphs_lora import plot_accuracy
from labkit.report import say, table
from labkit.results import provenance, result_dir, save_figure
from labkit.graph.passes import activation_shapes

S = lab_settings("lab0", PROFILE, **OVERRIDES)
OUT = result_dir("lab0", S["profile"])
print(S)
print("device:", provenance()["device"])

# %% [markdown]
# ## Tutorial 1: capture, metadata, and the dropout passes
#
# transformers 5 removed its FX tracer and BERT's `forward` defeats `torch.fx.symbolic_trace`, so
# `labkit.graph.capture` uses `torch.export` (non-strict) and hands back its `GraphModule`: an ordinary
# FX graph at the ATen operator level whose placeholders are exactly the inputs we chose.

# %%
model = models.load_model(S["model"], seed=S["seed"])
gm = graph.capture(model, ["input_ids", "attention_mask", "labels"])
meta = graph.MetadataPass()(gm).info
graph_meta = {k: meta[k] for k in ("nodes", "by_op", "parameters", "parameter_bytes")}
# the activations of the pass's run on the dummy batch (parameters' shapes are the weights' own): inputs, the first
# node of each kind of compute, and what the graph returns
graph_meta["first_shapes"] = activation_shapes(gm, meta["shapes"])
print(f"{graph_meta['nodes']} nodes {graph_meta['by_op']}; {graph_meta['parameters']:,} parameters, "
      f"{graph_meta['parameter_bytes']:,} bytes")
say(table(graph_meta["first_shapes"]))

# %% tags=["answer-key"]
from labkit.answers import lab0 as answers

say(answers.capture_text(graph_meta))
say(answers.shapes_text(graph_meta["first_shapes"]))

# %% [markdown]
# ## Exercise: an analysis pass that counts dropout
#
# A pass walks `gm.graph.nodes`. Count the nodes that are dropout, in every form the lab meets: a
# `call_module` node whose module (`gm.get_submodule(node.target)`) is an `nn.Dropout`, and a `call_function`
# node calling `torch.nn.functional.dropout` (what `torch.fx.symbolic_trace` records) or
# `torch.ops.aten.dropout.default` (what `torch.export` records for BERT). The traps: module targets are
# dotted paths (`blocks.0.ff.2`), node names say nothing reliable about what a node does, and a dropout read
# by two nodes is still one node.
#
# *Hint:* test `node.op` and `node.target`, never `node.name`.

# %% tags=["exercise"]
def count_dropout(gm):
    """The number of dropout nodes in the FX GraphModule `gm` (nn.Dropout modules, F.dropout and ATen dropout)."""
    ### BEGIN SOLUTION
    dropout_functions = {torch.nn.functional.dropout, torch.ops.aten.dropout.default}
    count = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in dropout_functions:
            count += 1
        elif node.op == "call_module" and isinstance(gm.get_submodule(node.target), torch.nn.Dropout):
            count += 1
    return count
    ### END SOLUTION


# %% tags=["check"]
counting = check("lab0.count_dropout", count_dropout)

# %% [markdown]
# ## Exercise: a transform pass that removes dropout
#
# Remove every dropout node and return the graph module. FX erases only a node that no other node reads, so
# first point each of the dropout's users at the dropout's input: `replace_all_uses_with` that input
# (`node.args[0]`), then `gm.graph.erase_node` it. Walk over a *copy* of the node list (you are deleting from
# it), remove every dropout (not only the first), and finish with `GraphModule.recompile()`: a GraphModule
# runs Python code generated from its graph, and until you regenerate it the old code (dropout included) still
# runs. The check runs your pass on small traced modules and an ATen-level graph, and compares what is left:
# no dropout node, `graph.lint()` passing, every other node kept, and the output in training mode equal to the
# dropout-free one.
#
# Once it passes, your pass is the one `graph.RemoveDropout` runs on BERT's training-mode graph below
# (labkit's pass then also zeroes the `dropout_p` fused into attention, which is not a node of its own).

# %% tags=["exercise"]
def remove_dropout(gm):
    """`gm` with every dropout node removed (its users rewired to its input), recompiled; returns `gm`."""
    ### BEGIN SOLUTION
    dropout_functions = {torch.nn.functional.dropout, torch.ops.aten.dropout.default}
    for node in list(gm.graph.nodes):
        module = gm.get_submodule(node.target) if node.op == "call_module" else None
        if isinstance(module, torch.nn.Dropout) or (node.op == "call_function"
                                                    and node.target in dropout_functions):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()
    return gm
    ### END SOLUTION


# %% tags=["check"]
removing = check("lab0.remove_dropout", remove_dropout)

# %% [markdown]
# Dropout only does something in training, so we capture a **training-mode** graph, count its dropout,
# remove it, and check the result: the graph becomes deterministic and computes what the model computes
# in eval mode.

# %%
gm_train = graph.capture(model, train=True)
counted = graph.CountDropout()(gm_train).info
print(f"count_dropout: {counting.fn(gm_train)} dropout nodes (labkit's CountDropout: {counted['dropout']}: "
      f"{counted['nodes']}); attention nodes with a fused dropout_p: {counted['fused_attention_dropout']}")
with removing.installed():  # your pass (once its check passes) removes BERT's dropout nodes
    removed = graph.RemoveDropout()(gm_train)
after = graph.CountDropout()(removed.graph_module).info
x = gm_train.meta["example_inputs"]
torch.manual_seed(0); a = removed.graph_module(**x).logits
torch.manual_seed(1); b = removed.graph_module(**x).logits
model.eval()
with torch.no_grad():
    ref = model(**x).logits
dropout_removed = {"changes": list(removed.changes), "after": after["dropout"],
                   "seed_gap": (a - b).abs().max().item(), "eval_gap": (a - ref).abs().max().item()}
print(f"removed: {dropout_removed['changes']}; count_dropout after: {counting.fn(removed.graph_module)}; "
      f"largest logit gap between two seeds {dropout_removed['seed_gap']:.1e}, "
      f"to the eval-mode model {dropout_removed['eval_gap']:.1e}")

# %% tags=["answer-key"]
from labkit.answers import lab0 as answers

say(answers.dropout_text(counted, dropout_removed))

# %% [markdown]
# **Task: skip `replace_all_uses_with`.** FX refuses to erase a node that other nodes still read, because
# the graph would be left with dangling edges:

# %%
try:
    graph.RemoveDropout(rewire=False)(graph.capture(model, train=True))
    fx_error = None
except RuntimeError as err:
    fx_error = str(err)
print("RuntimeError:", fx_error)

# %% [markdown]
# **Question 0a.** Why does FX refuse to erase a dropout node when `replace_all_uses_with` is skipped (the
# `RuntimeError` just printed)? And after every dropout *node* is gone, why would BERT's training-mode graph still
# not compute the eval-mode model unless the pass also sets the attention's `dropout_p` to 0?

# %% [markdown] tags=["answer"] question=0a points=2
# Model answer: a node's users hold references to it as their arguments; erasing it would leave them reading a
# value nothing computes (a dangling edge), so `erase_node` refuses while the node has users. Rewiring first
# makes every user read the dropout's input, which is what dropout returns in eval mode, and leaves the node
# with no users. In a training-mode capture, BERT's attention dropout is not a node: it is the `dropout_p`
# argument of the fused `scaled_dot_product_attention` call, so a pass that only erases dropout nodes leaves it
# active, the graph stays random and differs between seeds. Zeroing `dropout_p` removes that last dropout, and
# only then is the graph deterministic and equal to the eval-mode model up to floating-point rounding.

# %% tags=["answer-key"]
from labkit.answers import lab0 as answers

say(answers.fx_error_text(fx_error))

# %% [markdown]
# ## Tutorial 2: how the chosen inputs change the graph

# %%
variants = {
    "ids+mask+labels": ["input_ids", "attention_mask", "labels"],
    "ids+mask": ["input_ids", "attention_mask"],
    "ids only": ["input_ids"],
}
graphs = {name: graph.capture(model, names) for name, names in variants.items()}
graph_nodes = {name: len(g.graph.nodes) for name, g in graphs.items()}
stems = {name: "graph_" + name.replace("+", "_").replace(" ", "_") for name in graphs}  # ids+mask -> graph_ids_mask
for name, g in graphs.items():  # the graphviz source always; rendered SVG where graphviz is installed
    graph.write_dot(g, OUT / f"{stems[name]}.dot", name)
if graph.can_render():
    svgs = {name: graph.draw(g, OUT / f"{stems[name]}.svg", name) for name, g in graphs.items()}
    cells = "".join(
        f"<div style='flex:1;min-width:0'><b>{name}</b> ({len(graphs[name].graph.nodes)} nodes)<br>"
        f"<img style='width:100%' src='data:image/svg+xml;base64,{base64.b64encode(p.read_bytes()).decode()}'/>"
        "</div>" for name, p in svgs.items())
    display(HTML(f"<div style='display:flex;gap:8px;max-height:900px;overflow:auto'>{cells}</div>"))
print("nodes per captured graph:", graph_nodes)
print("graph files:", sorted(p.name for p in OUT.glob("graph_*")))

# %% tags=["answer-key"]
from labkit.answers import lab0 as answers

say(answers.graphs_text(graph_nodes, answers.graph_files(graphs, OUT), rendered_now=graph.can_render()))

# %%
no_labels = graph.topology_diff(graphs["ids+mask+labels"], graphs["ids+mask"])
no_mask = graph.topology_diff(graphs["ids+mask"], graphs["ids only"])
for what, d in (("without labels", no_labels), ("without attention_mask (and labels)", no_mask)):
    print(f"{what}: {d['nodes_a']} -> {d['nodes_b']} nodes\n  node kinds removed: {d['removed']}\n"
          f"  node kinds added: {d['added']}")

# %% [markdown]
# **Question 0b.** From the three captures and the node kinds printed above: how does the graph's topology
# change when `labels` is not an input, and when `attention_mask` is not one either? Say what each removed
# branch computed, what the graph returns without labels, and what a model captured without `attention_mask`
# does on a padded batch.

# %% [markdown] tags=["answer"] question=0b points=2
# Model answer: without `labels` the loss branch disappears: the `labels` placeholder and the cross-entropy
# that consumed it (with the reshapes that flatten logits and labels for it) are gone, and the graph ends at
# the classifier's logits; the encoder is untouched, since the labels only enter after it. Without
# `attention_mask` the mask placeholder goes, and with it the nodes that convert the user's 0/1 mask and
# combine it into the additive mask attention uses; the part of the mask built from the input's shape alone
# stays. The captured graph then lets every token attend to every other, padding included: the same result on
# a batch without padding, but on a padded batch the real tokens also attend to the padding, which changes
# their outputs and the logits.
# The graph is specialised to the inputs chosen at capture: a branch the inputs do not reach is not in it.

# %% tags=["answer-key"]
from labkit.answers import lab0 as answers

say(answers.topology_text(no_labels, no_mask))

# %% [markdown]
# ## Fine-tuning on IMDb: SFT, LoRA, merged LoRA
#
# SFT trains every weight but the embeddings (frozen, as in the course) for one epoch; LoRA then trains
# rank-`r` adapters on every Linear of the SFT model for one more epoch (the sheet's order), with the
# sheet's alpha and dropout, the base weights (biases included) frozen and the classifier head trainable;
# finally the adapters are merged into the weights. The equal-training control trains the SFT model fully
# for the same extra epoch at SFT's learning rate, so LoRA is also read against a model that saw the data as
# often. Everything is trained once per training seed (`seeds`: the head's initialisation, the adapters,
# batch order and dropout); training is deterministic, so each seed's weights repeat in a fresh process.

# %%
dl = recipes.loaders(S)
SEEDS = recipes.train_seeds(S)
dev = train.pick_device(S["device"])
batch = {k: v.to(dev) for k, v in next(iter(dl.test)).items()}
# one seed at a time; a finished seed's numbers are kept (runs/seeds), so a stopped run resumes after it
per_seed = per_seed_runs.run("lab0", "accuracy", S, SEEDS, lambda seed: lab0_seed(S, dl, seed, batch))
for seed, r in zip(SEEDS, per_seed):
    print(f"seed {seed}: " + ", ".join(f"{k} {v:.4f}" for k, v in r["accuracy"].items()))
tuned = seeds.combine(per_seed, SEEDS)
print(f"trainable parameters: SFT {tuned['sft_trainable']['trainable']:,}, LoRA {tuned['lora']['trainable']:,}; "
      f"largest logit change from merging: {max(seeds.values(tuned, 'merge_max_logit_diff', len(SEEDS))):.1e}")

# %% tags=["answer-key"]
from labkit.answers import lab0 as answers

say(answers.data_text(dl.sizes, S["max_length"], tuned["accuracy"]["untrained"], tuned["sft"],
                      tuned["sft_trainable"], len(SEEDS)))
say(answers.lora_text(S, tuned["lora"], tuned["merged"]["accuracy"], max(seeds.values(tuned, "merge_max_logit_diff",
                      len(SEEDS))), tuned["sft"], tuned["linear_biases"]))
say(answers.lora_training(S))

# %% [markdown]
# ## Exercise: merge a LoRA adapter into its weight
#
# A LoRA adapter on a Linear with weight `W` (out x in) adds `B @ A` (`B`: out x r, `A`: r x in), scaled by
# `alpha / rank` as peft scales it (`lora_alpha / r`): `y = W x + (alpha / rank) * B (A x)`. Merging folds the
# update into the weight once, so inference runs a plain Linear. Write the merge. The traps: the scaling
# divides by the rank (the lab's alpha 1 and rank 6 give 1/6), the update must have `W`'s shape (`B @ A`, not
# `A @ B`), a fresh adapter (`B` = 0, peft's start) merges to `W` exactly, `W`'s dtype is kept, and `W` itself
# must not change (return a new tensor).
#
# *Hint:* `W + (alpha / rank) * (B @ A)`.

# %% tags=["exercise"]
def merge_lora(W, A, B, alpha, rank):
    """`W` (out x in) with the LoRA update of `A` (rank x in) and `B` (out x rank) folded in, scaled by alpha / rank."""
    ### BEGIN SOLUTION
    scaling = alpha / rank
    return W + (B @ A) * scaling
    ### END SOLUTION


# %% tags=["check"]
merging = check("lab0.merge_lora", merge_lora)

# %% [markdown]
# Your merge on one layer of a LoRA model, against peft's `merge_and_unload` (what the lab's merged model above
# used). Every adapter's `B` is drawn at random here, standing in for a trained one (a fresh adapter's `B` is 0,
# which any merge gets right).

# %%
demo = lora.add_lora(copy.deepcopy(model), rank=S["lora_rank"], alpha=S["lora_alpha"], dropout=S["lora_dropout"],
                     seed=S["seed"])
gen = torch.Generator().manual_seed(S["seed"])
with torch.no_grad():
    for m in demo.modules():
        if hasattr(m, "lora_B") and "default" in m.lora_B:
            m.lora_B["default"].weight.copy_(0.02 * torch.randn(m.lora_B["default"].weight.shape, generator=gen))
layer = demo.base_model.model.bert.encoder.layer[0].attention.self.query
W, A, B = (t.detach().clone() for t in (layer.base_layer.weight, layer.lora_A["default"].weight,
                                         layer.lora_B["default"].weight))
mine = merging.fn(W, A, B, S["lora_alpha"], S["lora_rank"])
peft_merged = lora.merge_lora(demo).bert.encoder.layer[0].attention.self.query.weight.detach()
print(f"layer 0 query {tuple(W.shape)}, rank {S['lora_rank']}, alpha {S['lora_alpha']}: the update moves W by up "
      f"to {(peft_merged - W).abs().max().item():.2e}; max |merge_lora - peft's merge_and_unload| = "
      f"{(mine - peft_merged).abs().max().item():.1e}")

# %%
numbers = {**tuned, "dataset_sizes": dl.sizes, "graph_meta": graph_meta, "dropout": counted,
           "dropout_removed": dropout_removed, "fx_error": fx_error,
           "topology": {"drop_labels": no_labels, "drop_mask": no_mask}, "graph_nodes": graph_nodes,
           "graphs_drawn": graph.can_render()}  # whether this run drew the SVGs (graphviz installed)
paths = save_figure(plot_accuracy(numbers, S), "lab0", "accuracy", numbers, S)
print("saved", {k: p.name for k, p in paths.items()}, "in the lab0 results folder")

# %% [markdown] tags=["answer-key"]
# ## Answers
#
# Rendered from the JSON just saved (read back), as `python -m labkit.redraw lab0 --answers` renders them later.

# %% tags=["answer-key"]
from labkit.answers import lab0 as answers
from labkit.answers import measured
from labkit.results import load_results

from labkit import redraw

redraw.store_readings("lab0_graphs_lora", S["profile"])  # the verdicts, computed from the JSON, stored beside it
stored = load_results("lab0", "accuracy", S["profile"])
say(answers.answers_list(stored["numbers"], stored["settings"]))
how = measured.NOTEBOOK.format(notebook="lab0_graphs_lora.ipynb", module="labkit.answers.lab0", lab="lab0")
answers_path, text = answers.render_lab0(S["profile"], how=how, rendered_now=graph.can_render())
answers_path.write_text(text)
print("wrote", measured.shown_path(answers_path))
