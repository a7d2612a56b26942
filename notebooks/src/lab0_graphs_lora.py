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
# Every sentence below that quotes a number prints it from this run's variables.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"train_size": 1000, "model": "bert-tiny"}

# %%
import base64

import matplotlib.pyplot as plt
import torch
from IPython.display import HTML, display

import labkit
from labkit import graph, lora, models, recipes, train
from labkit.profiles import lab_settings
from labkit.report import say, table
from labkit.results import provenance, result_dir, save_figure

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
model = models.load_model(S["model"])
gm = graph.capture(model, ["input_ids", "attention_mask", "labels"])
meta = graph.MetadataPass()(gm).info
say(f"The captured graph has **{meta['nodes']} nodes** ({meta['by_op']}) and "
    f"**{meta['parameters']:,} parameters** ({meta['parameter_bytes'] / 2**20:.1f} MiB in fp32).")
rows = [{"node": k, "shape": str(v["shape"]), "dtype": v["dtype"]}
        for k, v in list(meta["shapes"].items()) if not k.startswith("p_")][:12]
say("First tensor-valued nodes, shapes and dtypes from the metadata pass (a dummy batch of 2 x 16 tokens):\n\n"
    + table(rows))

# %% [markdown]
# Dropout only does something in training, so we capture a **training-mode** graph, count its dropout,
# remove it, and check the result: the graph becomes deterministic and computes what the model computes
# in eval mode.

# %%
gm_train = graph.capture(model, train=True)
counted = graph.CountDropout()(gm_train).info
removed = graph.RemoveDropout()(gm_train)
after = graph.CountDropout()(removed.graph_module).info
x = gm_train.meta["example_inputs"]
torch.manual_seed(0); a = removed.graph_module(**x).logits
torch.manual_seed(1); b = removed.graph_module(**x).logits
model.eval()
with torch.no_grad():
    ref = model(**x).logits
say(f"Dropout nodes before: **{counted['dropout']}** ({', '.join(counted['nodes'])}); attention nodes with a "
    f"fused dropout: **{len(counted['fused_attention_dropout'])}**. The remove pass changed "
    f"{len(removed.changes)} things ({', '.join(removed.changes)}); dropout nodes after: **{after['dropout']}**. "
    f"Two runs with different seeds now differ by {(a - b).abs().max().item():.1e} and the graph matches the "
    f"eval-mode model to {(a - ref).abs().max().item():.1e}.")
say("Note the fused case: in a training-mode capture the attention dropout is not a node of its own but the "
    "`dropout_p` argument of `scaled_dot_product_attention`; a pass that only erases dropout nodes would "
    "leave it active.")

# %% [markdown]
# **Task: skip `replace_all_uses_with`.** FX refuses to erase a node that other nodes still read, because
# the graph would be left with dangling edges:

# %%
try:
    graph.RemoveDropout(rewire=False)(graph.capture(model, train=True))
    fx_error = None
except RuntimeError as err:
    fx_error = str(err)
say(f"FX raised `RuntimeError`: *{fx_error}*\n\n`replace_all_uses_with(node.args[0])` first points every "
    "user of the dropout at the dropout's input; only then has the node no users and can be erased.")

# %% [markdown]
# ## Tutorial 2: how the chosen inputs change the graph

# %%
variants = {
    "ids+mask+labels": ["input_ids", "attention_mask", "labels"],
    "ids+mask": ["input_ids", "attention_mask"],
    "ids only": ["input_ids"],
}
graphs = {name: graph.capture(model, names) for name, names in variants.items()}
slug = {name: name.replace("+", "_").replace(" ", "_") for name in variants}
for name, g in graphs.items():  # the graphviz source always; rendered SVG where graphviz is installed
    graph.write_dot(g, OUT / f"graph_{slug[name]}.dot", name)
if graph.can_render():
    svgs = {name: graph.draw(g, OUT / f"graph_{slug[name]}.svg", name) for name, g in graphs.items()}
    cells = "".join(
        f"<div style='flex:1;min-width:0'><b>{name}</b> ({len(graphs[name].graph.nodes)} nodes)<br>"
        f"<img style='width:100%' src='data:image/svg+xml;base64,{base64.b64encode(p.read_bytes()).decode()}'/>"
        "</div>" for name, p in svgs.items())
    display(HTML(f"<div style='display:flex;gap:8px;max-height:900px;overflow:auto'>{cells}</div>"))
else:
    say("**graphviz's `dot` is not installed here, so the graphs were not rendered**; their sources are in "
        f"`{OUT}` (`dot -Tsvg graph_ids_only.dot -o graph_ids_only.svg` renders one).")

# %%
no_labels = graph.topology_diff(graphs["ids+mask+labels"], graphs["ids+mask"])
no_mask = graph.topology_diff(graphs["ids+mask"], graphs["ids only"])


def listing(d):
    return ", ".join(f"{k} x{v}" for k, v in d.items()) or "nothing"


say(f"**Dropping `labels`** ({no_labels['nodes_a']} -> {no_labels['nodes_b']} nodes) removes: "
    f"{listing(no_labels['removed'])}; adds: {listing(no_labels['added'])}. Without labels there is no loss "
    "branch: the `labels` placeholder and the cross-entropy that consumed it (with the reshapes feeding it) "
    "disappear, and the graph returns logits only.")
say(f"**Dropping `attention_mask`** ({no_mask['nodes_a']} -> {no_mask['nodes_b']} nodes) removes: "
    f"{listing(no_mask['removed'])}; adds: {listing(no_mask['added'])}. The mask stops being a placeholder "
    "but attention still gets one: the graph builds a 4-D boolean mask from the input's shape alone (`arange` "
    "over the positions, `ge`, `expand` to batch x 1 x query x key). What disappears is the padding term: "
    "converting the user's mask to bool (`to`), gathering it per key position (`index`) and AND-ing it into "
    "the shape mask. Every token then attends to every other, padding included: fine for a batch without "
    "padding, wrong for a padded one.")

# %% [markdown]
# ## Fine-tuning on IMDb: SFT, LoRA, merged LoRA
#
# SFT trains every weight but the embeddings (frozen, as in the course) for one epoch; LoRA then trains
# rank-`r` adapters on every Linear of the SFT model for one more epoch (the sheet's order), with the
# sheet's alpha and dropout, the base weights (biases included) frozen and the classifier head trainable;
# finally the adapters are merged into the weights.

# %%
dl = recipes.loaders(S)
untrained = train.evaluate(models.load_model(S["model"]), dl.test, device=S["device"], desc="untrained")
sft_model, sft = recipes.finetuned_model(S, dl)
recipes.freeze_embeddings(sft_model)  # the SFT setting, for the parameter count
sft_params = lora.trainable_parameters(sft_model)
say(f"Data: {dl.sizes['train']:,} training and {dl.sizes['test']:,} test reviews, {S['max_length']} tokens. "
    f"Untrained (random head) accuracy **{untrained['accuracy']:.3f}**; after SFT **{sft['accuracy']:.3f}** "
    f"with {sft_params['trainable']:,} trainable parameters ({100 * sft_params['fraction']:.1f}% of "
    f"{sft_params['total']:,}).")

# %%
peft_model = lora.add_lora(sft_model, rank=S["lora_rank"], alpha=S["lora_alpha"], dropout=S["lora_dropout"])
lora_params = lora.trainable_parameters(peft_model)
fit = train.train(peft_model, dl.train, epochs=S["epochs"], lr=S["lora_lr"], device=S["device"],
                  seed=S["seed"], desc="LoRA")
lora_eval = train.evaluate(peft_model, dl.test, device=S["device"], desc="LoRA eval")
batch = next(iter(dl.test))
dev = train.pick_device(S["device"])
with torch.no_grad():
    peft_model.eval()
    logits_lora = peft_model(**{k: v.to(dev) for k, v in batch.items()}).logits.float()
merged = lora.merge_lora(peft_model)
merged_eval = train.evaluate(merged, dl.test, device=S["device"], desc="merged eval")
with torch.no_grad():
    logits_merged = merged(**{k: v.to(dev) for k, v in batch.items()}).logits.float()
merge_gap = (logits_lora - logits_merged).abs().max().item()
linear_biases = all(m.bias is not None for n, m in merged.named_modules()
                    if isinstance(m, torch.nn.Linear))
say(f"LoRA (rank {S['lora_rank']}, alpha {S['lora_alpha']}, dropout {S['lora_dropout']}) trains "
    f"**{lora_params['trainable']:,}** parameters ({100 * lora_params['fraction']:.2f}% of the model, the "
    f"classifier head included) and reaches **{lora_eval['accuracy']:.3f}** "
    f"({fit['train_seconds']:.0f} s of training). Merged into the weights: **{merged_eval['accuracy']:.3f}**; "
    f"the largest logit difference on a test batch is {merge_gap:.1e} (bf16 autocast on CUDA accounts for "
    f"differences near 1e-2). Every Linear kept its bias: {linear_biases}.")

# %%
names = ["untrained", "SFT", "LoRA", "LoRA merged"]
accs = [untrained["accuracy"], sft["accuracy"], lora_eval["accuracy"], merged_eval["accuracy"]]
fig, ax = plt.subplots(figsize=(6, 3.5))
bars = ax.bar(names, accs, color=["#999", "#4c72b0", "#dd8452", "#c44e52"])
ax.bar_label(bars, fmt="%.3f")
for y, label in [(0.788, "course SFT (bert-tiny)"), (0.823, "course LoRA (bert-tiny)")]:
    ax.axhline(y, ls="--", lw=0.8, color="k")
    ax.text(-0.4, y + 0.005, label, fontsize=7)
ax.set_ylim(0.4, 1.0)
ax.set_ylabel("IMDb test accuracy")
ax.set_title(f"{S['model']}, {dl.sizes['test']:,} test reviews, profile {S['profile']}")
numbers = {"accuracy": dict(zip(names, accs)), "sft": sft, "lora": {**lora_eval, **lora_params,
           "train_seconds": fit["train_seconds"]}, "merged": merged_eval, "merge_max_logit_diff": merge_gap,
           "sft_trainable": sft_params, "dataset_sizes": dl.sizes, "dropout": counted, "fx_error": fx_error,
           "topology": {"drop_labels": no_labels, "drop_mask": no_mask},
           "graph_nodes": {k: len(g.graph.nodes) for k, g in graphs.items()}}
paths = save_figure(fig, "lab0", "accuracy", numbers, S)
print(paths)

# %% [markdown]
# ## Answers

# %%
say(f"- **Topology.** With all three inputs the graph has {no_labels['nodes_a']} nodes; without labels "
    f"{no_labels['nodes_b']} (no loss branch), without labels and mask {no_mask['nodes_b']} (the mask is "
    "built inside from the input's shape).\n"
    f"- **Dropout.** {counted['dropout']} dropout nodes plus {len(counted['fused_attention_dropout'])} fused "
    "into attention; removing them makes the training-mode graph equal the eval-mode model.\n"
    f"- **Fine-tuning.** SFT {sft['accuracy']:.3f} vs LoRA {lora_eval['accuracy']:.3f} with "
    f"{lora_params['trainable']:,} instead of {sft_params['trainable']:,} trainable parameters; "
    f"merging changes accuracy by {merged_eval['accuracy'] - lora_eval['accuracy']:+.4f}. "
    "The course's anchors with bert-tiny on the full test split are 0.788 (SFT) and 0.823 (LoRA); "
    f"this run is profile `{S['profile']}` on {dl.sizes['test']:,} test reviews.")
