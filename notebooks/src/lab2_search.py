# %% [markdown]
# # Lab 2: architecture search with Optuna, then compression-aware search
#
# **Task 1** searches BERT architectures trained from random initialisation on IMDb (one epoch per trial)
# with three samplers given the same budget and seed: Random, Grid and TPE, and compares their best-so-far
# accuracy. **Task 2** makes the search compression-aware: inside each trial the trained model is quantized
# to fixed point and pruned (the labkit transforms of Lab 1), optionally trained again; three searches, one
# per objective, give three curves.
#
# The space uses real `BertConfig` fields: `num_hidden_layers` [2, 4, 8], `num_attention_heads`
# [2, 4, 8, 16], `hidden_size` [128..512], `intermediate_size` [512..2048], and for Random/TPE a
# Linear-or-Identity choice for every square Linear (Q, K, V, attention output) of every layer. Grid
# searches the four sizes only (a fixed grid cannot have depth-dependent dimensions).
#
# Studies live in SQLite (`runs/optuna/lab2.db`; any Optuna RDB URL via the `storage` setting), so an
# interrupted search resumes: re-running this notebook continues each study from its finished trials.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"trials": 10, "storage": "postgresql://..."}

# %%
import hashlib
import json

import matplotlib.pyplot as plt
import optuna

from labkit import recipes, search, settings
from labkit.compress import fixed_point
from labkit.profiles import lab_settings
from labkit.report import say, table
from labkit.results import provenance, save_figure

optuna.logging.set_verbosity(optuna.logging.WARNING)
S = lab_settings("lab2", PROFILE, **OVERRIDES)
print(S)
print("device:", provenance()["device"])
# the study names carry a digest of the settings: changed settings start new studies, same ones resume
tag = hashlib.sha256(json.dumps({k: v for k, v in S.items() if k != "storage"}, sort_keys=True)
                     .encode()).hexdigest()[:8]
storage = search.make_storage(S["storage"])
dl = recipes.loaders(S)
say(f"{dl.sizes['train']:,} training and {dl.sizes['test']:,} test reviews at {S['max_length']} tokens; "
    f"{S['trials']} trials per sampler; storage `{S['storage'] or search.default_url()}`; study tag `{tag}`. "
    + ("Search space: the lab's full space." if S["space"] is None else
       f"Search space narrowed by this profile to {search.space.restrict(S['space'])} (CPU budget)."))

# %% [markdown]
# ## Task 1: Random vs Grid vs TPE

# %%
studies = {}
for sampler in ["random", "grid", "tpe"]:
    grid = sampler == "grid"
    objective = search.NASObjective(dl, S, identity_choices=not grid, space=S["space"],
                                    best_dir=settings.runs_dir() / "lab2" / f"{S['profile']}-{sampler}-{tag}")
    studies[sampler] = search.run_study(f"lab2-{S['profile']}-{sampler}-{tag}", objective, S["trials"],
                                        sampler=sampler, seed=S["seed"], storage=storage,
                                        search_space=search.grid_space(S["space"]) if grid else None)
curves = {name: search.best_so_far(st) for name, st in studies.items()}
rows = []
for name, st in studies.items():
    best = st.best_trial
    rows.append({"sampler": name, "trials": len(curves[name]), "best": best.value,
                 "best_trial": best.number, "parameters": best.user_attrs["parameters"],
                 "architecture": json.dumps({k: v for k, v in best.params.items() if "." not in k}),
                 "identity_layers": sum(v == "identity" for k, v in best.params.items() if "." in k)})
say(table(rows))

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
styles = {"random": dict(ls="--", marker="s", ms=6), "grid": dict(marker="o", ms=3), "tpe": dict(marker="^", ms=4)}
for name, ys in curves.items():  # distinct styles: identical curves (TPE's startup = Random) stay visible
    ax.plot(range(1, len(ys) + 1), ys, label=name, **styles[name])
ax.set_xlabel("trial")
ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
ax.set_ylabel("best accuracy so far")
ax.set_title(f"NAS on IMDb, {S['trials']} trials per sampler (profile {S['profile']})")
ax.legend()
trials_table = {name: [{"number": t.number, "value": t.value, "params": t.params, **t.user_attrs}
                       for t in st.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
                for name, st in studies.items()}
save_figure(fig, "lab2", "samplers", {"best_so_far": curves, "best": rows, "trials": trials_table,
                                      "dataset_sizes": dl.sizes}, S)

# %% [markdown]
# ## Task 2: compression-aware search
#
# Three TPE searches with the same budget, differing only in what the trial returns: the trained model's
# accuracy (no compression); its accuracy after fixed-point quantization and L1 pruning of every Linear
# (weights and activations); and that accuracy after a further short training with compression in place.

# %%
qcfg = fixed_point(S["quant_width"])
pcfg = {"weight": {"sparsity": S["prune_sparsity"], "method": "l1-norm", "scope": "local"},
        "activation": {"sparsity": S["prune_sparsity"], "method": "l1-norm", "scope": "local"}}
modes = {"no compression": "none", "compressed": "compress", "compressed + post-training": "compress+train"}
comp = {}
for label, mode in modes.items():
    objective = search.NASObjective(dl, S, mode=mode, quant=qcfg, prune=pcfg, space=S["space"],
                                    best_dir=settings.runs_dir() / "lab2" / f"{S['profile']}-{mode}-{tag}")
    comp[label] = search.run_study(f"lab2-{S['profile']}-cas-{mode}-{tag}", objective, S["compression_trials"],
                                   sampler="tpe", seed=S["seed"], storage=storage)
comp_curves = {label: search.best_so_far(st) for label, st in comp.items()}
comp_rows = [{"objective": label, "best": st.best_value, "parameters": st.best_trial.user_attrs["parameters"],
              "accuracy before compression": st.best_trial.user_attrs["accuracy_trained"]}
             for label, st in comp.items()]
say(table(comp_rows))


def paired(study, after, before="accuracy_trained"):
    # Within-trial change (same model before and after), so architecture and training noise cancel out.
    d = [t.user_attrs[after] - t.user_attrs[before] for t in study.get_trials(deepcopy=False)
         if t.state.name == "COMPLETE"]
    return {"mean": sum(d) / len(d), "min": min(d), "max": max(d), "trials": len(d)}


effects = {"compression, no post-training": paired(comp["compressed"], "accuracy_compressed"),
           "compression (post-training search)": paired(comp["compressed + post-training"], "accuracy_compressed"),
           "post-training after compression": paired(comp["compressed + post-training"], "accuracy_post_trained",
                                                     "accuracy_compressed")}
say(table([{"within-trial change": k, **v} for k, v in effects.items()]))

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
for label, ys in comp_curves.items():
    ax.plot(range(1, len(ys) + 1), ys, marker="o", ms=3, label=label)
ax.set_xlabel("trial")
ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
ax.set_ylabel("best accuracy so far")
ax.set_title(f"Compression-aware search: int{S['quant_width']} + {S['prune_sparsity']:.0%} L1 pruning")
ax.legend()
save_figure(fig, "lab2", "compression_aware", {"best_so_far": comp_curves, "best": comp_rows,
                                               "within_trial": effects, "quant": qcfg, "prune": pcfg}, S)

# %% [markdown]
# ## Answers from the numbers

# %%
# One standard error of an accuracy p measured on n test reviews: sqrt(p (1 - p) / n). Differences
# between two searches' best values below about two of these are not evidence of anything.
n_test = dl.sizes["test"]
STARTUP = 5  # TPE's random startup trials (labkit.search.make_sampler)


def same_params(*studies_):
    seqs = [[t.params for t in st.get_trials(deepcopy=False) if t.state.name == "COMPLETE"] for st in studies_]
    return all(seq == seqs[0] for seq in seqs[1:])


best_all = max(r["best"] for r in rows)
se = (best_all * (1 - best_all) / n_test) ** 0.5
order = sorted(rows, key=lambda r: -r["best"])
top = [r["sampler"] for r in order if r["best"] == order[0]["best"]]
spread = order[0]["best"] - order[-1]["best"]
grid_size = len(list(search.storage._grid_points(search.grid_space(S["space"]))))
say(f"- **Samplers.** With {S['trials']} trials each, the best accuracies are "
    + ", ".join(f"{r['sampler']} {r['best']:.4f} (trial {r['best_trial']})" for r in order)
    + (". All reach the same best value. " if len(top) == len(order) else
       (f". {top[0].upper()} found the best model" if len(top) == 1 else f". {' and '.join(top)} tie for best")
       + (f", but the spread ({spread:.4f}) is within two standard errors (2 x {se:.4f}) of {n_test:,} test "
          "reviews: at this budget the samplers cannot be told apart. " if spread < 2 * se else
          f"; the spread ({spread:.4f}) exceeds two standard errors (2 x {se:.4f}) of {n_test:,} test "
          "reviews. "))
    + "TPE's first 5 trials are random (its startup phase); after that it proposes architectures near the "
    "good ones, so its curve can climb where Random's only climbs by luck"
    + ((" (with this budget TPE never left its startup phase" + (
        ", and its startup draws use the same seed as Random: it tried exactly Random's architectures). "
        if same_params(studies["tpe"], studies["random"]) else ", so it is Random with another seed). "))
       if S["trials"] <= STARTUP else ". ")
    + f"Grid walks a shuffled fixed grid of {grid_size} points, so with a budget of {S['trials']} it covers "
    f"{S['trials'] / grid_size:.0%} of the grid and cannot use the Identity choices.")
post, plain, none_ = (comp["compressed + post-training"].best_value, comp["compressed"].best_value,
                      comp["no compression"].best_value)
c, r = effects["compression, no post-training"], effects["post-training after compression"]
say(f"- **Compression-aware search.** Best values of the three searches: uncompressed {none_:.4f}, after "
    f"int{S['quant_width']} + {S['prune_sparsity']:.0%} L1 pruning {plain:.4f}, and with {S['post_epochs']:g} "
    f"epoch of post-training {post:.4f} (one standard error: {se:.4f}). Comparing best values of separate "
    "searches mixes compression with which architectures each search happened to try; the same model "
    f"before and after is the cleaner measure: compression changed accuracy by {c['mean']:+.4f} on average "
    f"over {c['trials']} trials (from {c['min']:+.4f} to {c['max']:+.4f}), and post-training then changed it "
    f"by {r['mean']:+.4f} (from {r['min']:+.4f} to {r['max']:+.4f}). "
    + ("All three searches stayed inside TPE's startup phase with the same seed, so they trained the same "
       "architectures: the objective could not steer them yet, and this budget measures only what compression "
       "does to the same models. " if S["compression_trials"] <= STARTUP and same_params(*comp.values()) else "")
    + ("On average that is within one standard error: compression costs these models little, so objectives "
       "measured before and after it should rank architectures similarly (the per-trial range says how far "
       "that holds). " if abs(c["mean"]) < se else
       "Compression costs accuracy here, so an objective measured after compression rewards architectures "
       "that tolerate it, which the uncompressed search does not look for. " if c["mean"] < 0 else
       "Compression raised accuracy on average, beyond one standard error: at this width and sparsity it "
       "acts as a regulariser on these undertrained models more than it removes information. "))
