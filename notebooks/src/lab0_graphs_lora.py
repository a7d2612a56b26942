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
# Every sentence below that quotes a number prints it from this run's variables, through
# `labkit.answers.lab0`; the answers file beside the results (`answers.md`) is rendered by the same
# functions from the JSON this run saves, so `python -m labkit.redraw lab0 --answers` can render it again later.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"train_size": 1000, "model": "bert-tiny"}

# %%
import base64

import torch
from IPython.display import HTML, display

from labkit import graph, models, per_seed as per_seed_runs, recipes, seeds
from labkit.training import train
from labkit.finetune import lab0_seed
from labkit.profiles import lab_settings
from labkit.answers import lab0 as answers
from labkit.answers import measured
from labkit.plots.lab0_graphs_lora import plot_accuracy
from labkit.report import say
from labkit.results import load_results, provenance, result_dir, save_figure

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
graph_meta["first_shapes"] = [{"node": k, "shape": str(v["shape"]), "dtype": v["dtype"]}
                              for k, v in list(meta["shapes"].items()) if not k.startswith("p_")][:12]
say(answers.capture_text(graph_meta))
say(answers.shapes_text(graph_meta["first_shapes"]))

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
dropout_removed = {"changes": list(removed.changes), "after": after["dropout"],
                   "seed_gap": (a - b).abs().max().item(), "eval_gap": (a - ref).abs().max().item()}
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
for name, g in graphs.items():  # the graphviz source always; rendered SVG where graphviz is installed
    graph.write_dot(g, OUT / f"{answers.graph_stem(name)}.dot", name)
if graph.can_render():
    svgs = {name: graph.draw(g, OUT / f"{answers.graph_stem(name)}.svg", name) for name, g in graphs.items()}
    cells = "".join(
        f"<div style='flex:1;min-width:0'><b>{name}</b> ({len(graphs[name].graph.nodes)} nodes)<br>"
        f"<img style='width:100%' src='data:image/svg+xml;base64,{base64.b64encode(p.read_bytes()).decode()}'/>"
        "</div>" for name, p in svgs.items())
    display(HTML(f"<div style='display:flex;gap:8px;max-height:900px;overflow:auto'>{cells}</div>"))
say(answers.graphs_text(graph_nodes, answers.graph_files(graphs, OUT), rendered_now=graph.can_render()))

# %%
no_labels = graph.topology_diff(graphs["ids+mask+labels"], graphs["ids+mask"])
no_mask = graph.topology_diff(graphs["ids+mask"], graphs["ids only"])
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
say(answers.data_text(dl.sizes, S["max_length"], tuned["accuracy"]["untrained"], tuned["sft"],
                      tuned["sft_trainable"], len(SEEDS)))
say(answers.lora_text(S, tuned["lora"], tuned["merged"]["accuracy"], max(seeds.values(tuned, "merge_max_logit_diff",
                      len(SEEDS))), tuned["sft"], tuned["linear_biases"]))
say(answers.lora_training(S))

# %%
numbers = {**tuned, "dataset_sizes": dl.sizes, "graph_meta": graph_meta, "dropout": counted,
           "dropout_removed": dropout_removed, "fx_error": fx_error,
           "topology": {"drop_labels": no_labels, "drop_mask": no_mask}, "graph_nodes": graph_nodes}
paths = save_figure(plot_accuracy(numbers, S), "lab0", "accuracy", numbers, S)
print({k: measured.shown_path(p) for k, p in paths.items()})

# %% [markdown]
# ## Answers
#
# Rendered from the JSON just saved (read back), as `python -m labkit.redraw lab0 --answers` renders them later.

# %%
stored = load_results("lab0", "accuracy", S["profile"])
say(answers.answers_list(stored["numbers"], stored["settings"]))
how = measured.NOTEBOOK.format(notebook="lab0_graphs_lora.ipynb", module="labkit.answers.lab0", lab="lab0")
answers_path, text = answers.render_lab0(S["profile"], how=how, rendered_now=graph.can_render())
answers_path.write_text(text)
print("wrote", measured.shown_path(answers_path))
