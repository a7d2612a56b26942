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
import torch
from IPython.display import display

from labkit import models, recipes, redraw
from labkit.exercises import check
from labkit.labs import lab0_finetune, lab0_graphs
from labkit.narrate import lab0_graphs_lora as words
from labkit.report import say, table
from labkit.results import provenance, result_dir
from labkit.run.profiles import lab_settings

S = lab_settings("lab0_graphs_lora", PROFILE, **OVERRIDES)
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
graph_meta = lab0_graphs.metadata(model)  # captured with input_ids, attention_mask and labels
print(words.metadata_line(graph_meta))
# the activations of the pass's run on a dummy batch: inputs, the first node of each kind of compute, the outputs
say(table(graph_meta["first_shapes"]))

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
# your count, and your pass once its check passes, on BERT's training-mode graph (the model is left in eval mode)
counted, dropout_removed, yours = lab0_graphs.dropout_passes(model, counting, removing)
print(words.dropout_lines(counted, dropout_removed, yours))

# %% [markdown]
# **Task: skip `replace_all_uses_with`.** FX refuses to erase a node that other nodes still read, because
# the graph would be left with dangling edges:

# %%
fx_error = lab0_graphs.fx_error(model)  # RemoveDropout(rewire=False) on a fresh training-mode capture
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

# %% [markdown]
# ## Tutorial 2: how the chosen inputs change the graph

# %%
# ids+mask+labels, ids+mask, ids only: the graphviz source of each always, its SVG where graphviz is installed
graphs = lab0_graphs.capture_variants(model, OUT)
if (drawn := lab0_graphs.drawings(graphs, OUT)) is not None:
    display(drawn)
print(words.graphs_lines(lab0_graphs.node_counts(graphs), lab0_graphs.graph_files(OUT)))

# %%
topology = lab0_graphs.topology(graphs)  # node kinds removed and added by dropping labels, then the mask
print(words.topology_lines(topology))

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
# one seed at a time; a finished seed's numbers are kept (runs/seeds), so a stopped run resumes after it
tuned, per_seed = lab0_finetune.all_seeds(S, dl)
print(words.seeds_lines(tuned, per_seed))

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
print(words.merge_line(lab0_finetune.merge_gaps(model, S, merging.fn)))

# %%
numbers = lab0_graphs.numbers(tuned, dl.sizes, graph_meta, counted, dropout_removed, fx_error, topology, graphs)
redraw.show("lab0_graphs_lora", "accuracy", numbers, S)  # saved as accuracy.json (and .png, .svg) in the results folder

# %% [markdown] tags=["answer-key"]
# ## Answers
#
# Rendered from the JSON just saved (read back), as `python -m labkit.redraw lab0_graphs_lora --answers` renders them later.

# %% tags=["answer-key"]
from labkit import redraw
redraw.close("lab0_graphs_lora", S)
