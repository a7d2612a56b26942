# %% [markdown]
# # Lab 3 (part 2): mixed-precision search over formats and widths
#
# Lab 3's task is a search: for every Linear layer of the fine-tuned classifier, choose a number format and
# its widths, and find how accuracy trades against bits. Each trial quantizes the model per its per-layer
# configuration (input, weight and bias of a layer in the layer's format; the binary family keeps biases in
# fp32) and evaluates it without training (PTQ); the best trade-offs then get a short QAT.
#
# - **Task 1**: the sheet's per-layer integer search: width in {8, 16, 32} and frac width in {2, 4, 8} per
#   layer, or the layer left in fp32; TPE, best-so-far accuracy. Its baselines (every layer at one width and
#   frac width, and every layer in fp32) are queued as its first trials, and `search_trials` more are searched.
# - **Task 2**: one search per format (every Linear in that format, its own parameters per layer: minifloat
#   exponent widths, block sizes, ...; fixed-width formats have one configuration) and one over all formats,
#   with the format counts of its best trial. Each starts from its uniform points (every layer in one format).
# - **Cost**: accuracy - lambda x average weight bits (labkit's bit accounting: what is stored, shared
#   exponents and fp32 scales included), for a few lambdas; and a multi-objective search (accuracy up,
#   average weight bits down) whose Pareto front is drawn beside the uniform-format points.
#
# The studies run on the same engine as Lab 2 (`runs/optuna/lab3.journal`, concurrent workers, resumable;
# a configuration measured once is reused by every study, whatever it optimises). Part 1
# (`lab3_formats`) checks each format alone; run it first on a new machine, it trains the SFT model.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"pareto_trials": 200, "workers": 4}

# %%
import time

import optuna

from labkit import recipes, redraw, search
from labkit.answers import lab3 as answers
from labkit.answers.lab2 import how_trials_ran
from labkit.labs import lab3, lab3_precision
from labkit.plots.lab3_search import plot_formats, plot_integer, plot_pareto
from labkit.profiles import lab_settings
from labkit.report import say, table
from labkit.results import provenance, save_figure
from labkit.training import train

optuna.logging.set_verbosity(optuna.logging.WARNING)
S = lab_settings("lab3", PROFILE, **OVERRIDES)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
base, sft = recipes.finetuned_model(S, dl)  # cached after part 1; workers load it from the cache
fp32 = train.evaluate(base, dl.test, device=S["device"], progress=False)["accuracy"]
layers = lab3_precision.linear_layers(base)
storage = S["storage"] or lab3.default_storage(S)
workers = S["workers"]  # "auto": sized by run_studies to the GPUs' free memory (1 on a CPU)
n_test = dl.sizes["test"]
say(f"Base: the SFT model (weights sha256 `{sft['sft_digest'][:12]}`), fp32 accuracy **{fp32:.4f}** on {n_test:,} test "
    f"reviews; {len(layers)} Linear layers searched. Studies in `{search.storage.shown_url(storage)}` (tag "
    f"`{lab3.study_tag(S)}`).")

# %% [markdown]
# ## The searches
#
# All of them are handed to the workers at once (each worker takes the study with the fewest running trials),
# then the QAT of the front follows.

# %%
start = time.time()
plans = lab3.phase1_plans(S, layers)
if not S["report_only"]:  # stored trials of another SFT model (retrained on another machine) never mix in
    lab3.check_same_sft(list(plans.values()), storage, sft["sft_digest"])
done = search.run_studies(list(plans.values()), storage=storage, workers=workers, desc="Lab 3 search", mps=S["mps"],
                           report_only=S["report_only"])
studies = {role: done[p.name] for role, p in plans.items()}
search_seconds = time.time() - start


def completed(study):
    return [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]


# %% [markdown]
# ## Task 1: per-layer integer widths

# %%
int_study = studies["integer"]
uniform_trials = {next(iter(t.user_attrs["formats"])): t for t in completed(studies["uniform"])}  # one format each
# the baselines (every layer at one width and frac, every layer in fp32) are the study's first trials
integer = lab3.task1_numbers(int_study, layers, plans["integer"].n_trials)
say(table([{"layer": answers.short(layer), "choice": "fp32" if answers.short(layer) in integer["fp32_layers"] else
            f"int{integer['widths'][answers.short(layer)]} frac {integer['fracs'][answers.short(layer)]}"}
           for layer in layers]))
say(table([{"baseline": b["label"], "accuracy": b["accuracy"], "weight bits": b["bits"]} for b in integer["baselines"]]))
integer.update(fp32=fp32, uniform_int8=uniform_trials["integer"].values[0] if "integer" in uniform_trials else None)
save_figure(plot_integer(integer, S), "lab3", "search_integer", integer, S)

# %% [markdown]
# ## Task 2: one search per format, and all formats together

# %%
per_format, curves = {}, {}
for name in lab3_precision.FORMAT_SPACE:
    st = studies["integer" if name == "integer" else f"format:{name}"]  # Task 1 is the integer search
    # each search's own count: its baselines and the trials beyond them
    n = plans["integer" if name == "integer" else f"format:{name}"].n_trials
    # Task 1 also offers fp32 layers: the integer row keeps its trials with every layer in integer
    own = [t for t in sorted(completed(st), key=lambda t: t.number)[:n] if set(t.user_attrs["formats"]) == {name}]
    curves[name] = [max(t.user_attrs["accuracy"] for t in own[: i + 1]) for i in range(len(own))]
    best = max(own, key=lambda t: t.user_attrs["accuracy"])
    per_format[name] = {"best": best.user_attrs["accuracy"], "bits": best.user_attrs["weight_bits"],
                        "trials": len(curves[name])}
all_best = studies["all"].best_trial
all_formats = {"best": all_best.user_attrs["accuracy"], "bits": all_best.user_attrs["weight_bits"],
               "counts": all_best.user_attrs["formats"]}
curves["all formats"] = search.best_so_far(studies["all"], key="accuracy", limit=plans["all"].n_trials)
rows = answers.format_rows(per_format, fp32)
say(table(rows))
formats = {"best_so_far": curves, "rows": rows, "all_formats": all_formats, "fp32": fp32}
save_figure(plot_formats(formats, S), "lab3", "search_formats", formats, S)

# %% [markdown]
# ## Cost: accuracy - lambda x bits, and the Pareto front

# %%
per_lambda = {}
for lam in S["lambdas"]:
    t = studies[f"cost:{lam:g}"].best_trial
    per_lambda[lam] = {"accuracy": t.user_attrs["accuracy"], "bits": t.user_attrs["weight_bits"],
                       "counts": t.user_attrs["formats"]}
crows = answers.cost_rows(per_lambda)
say(table(crows))

candidates = lab3.qat_candidates(studies["pareto"], S["front_qat"])
qplan = lab3.qat_plan(S, candidates)
start = time.time()
qat_study = search.run_studies([qplan], storage=storage, workers=workers, desc="Lab 3 QAT of the front",
                               mps=S["mps"], report_only=S["report_only"])[qplan.name]
qat_seconds = time.time() - start


def point(t):
    return {"accuracy": t.user_attrs["accuracy"], "bits": t.user_attrs["weight_bits"],
            "formats": t.user_attrs["formats"], "ptq": t.user_attrs["accuracy_ptq"]}


front = [point(t) for t in lab3.front(studies["pareto"])]
uniform = [{"format": name, **point(t)} for name, t in uniform_trials.items()]
qat = [point(t) for t in completed(qat_study)]
# every configuration any phase-1 study measured (PTQ), and the front over all of them
cloud = [{"accuracy": t.user_attrs["accuracy"], "bits": t.user_attrs["weight_bits"]}
         for st in studies.values() for t in completed(st)]
pareto = {"front": front, "front_all": answers.front_of(cloud), "cloud": cloud, "uniform": uniform, "qat": qat,
          "cost": crows, "fp32": fp32, "search_seconds": search_seconds, "qat_seconds": qat_seconds,
          "front_configs": [t.params for t in lab3.front(studies["pareto"])]}
save_figure(plot_pareto(pareto, S), "lab3", "search_pareto", pareto, S)
say(table([{"bits": p["bits"], "accuracy": p["accuracy"],
            "formats": ", ".join(f"{k} x{v}" for k, v in p["formats"].items())} for p in front]))

# %% [markdown]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab3` from the JSON just saved (read back), as `python -m labkit.redraw
# lab3_search --answers` renders them later: each search read against the baselines inside its own space,
# each lambda's best under every lambda's objective, and the front over every configuration measured.

# %%
answers_path, text = redraw.render_answers("lab3_search", S["profile"])
answers_path.write_text(text)
say(text.split("\n\n", 3)[-1])
trials = sum(len(st.trials) for st in list(studies.values()) + [qat_study])
cached = sum(bool(t.user_attrs.get("cached")) for st in list(studies.values()) + [qat_study] for t in st.trials)
say(f"- **Cost of the search.** {search_seconds / 60:.1f} min for the searches and {qat_seconds / 60:.1f} min for "
    f"the QAT here (a resumed run counts only what was left); {cached} of {trials} trials reused a measured "
    "configuration. " + how_trials_ran(search.trial_provenance(list(studies.values()) + [qat_study])))
