"""Lab 2's answers as Markdown: they word the readings of its stored numbers (``labkit.readings.lab2_search``,
where every verdict is computed) and quote descriptive numbers; no verdict is decided here."""
from __future__ import annotations

import math

from ..readings import read
from ..readings.lab2_search import n_test
from ..readings.tables import sampler_rows, test_set_se
from ..narrate.lab2_search import shortfall
from ..narrate.runs import plural
from ..records.lab2_search import grid_space
from ..search import grid_points
from ..search.samplers import TPE_STARTUP

NAMES = ("samplers", "compression_aware", "remeasured")


# --- what the run did, as the notebook says it while running ---------------------------------------------

# --- the answers ------------------------------------------------------------------------------------------

def sampler_text(rows: list[dict], by: dict, grid_size: int) -> str:
    """The samplers' mean bests (descriptive), their readings, and how each sampler spends a short budget."""
    trials, seeds = rows[0]["trials"], rows[0]["seeds"]
    text = (f"With {trials} trials per search and {plural(seeds, 'seed')} per sampler, the mean best accuracy is "
            + ", ".join(f"{r['sampler']} {r['mean best']:.4f}" + (f" (SE {r['SE over seeds']:.4f})"
                                                                   if math.isfinite(r["SE over seeds"]) else "")
                        for r in rows) + ". ")
    text += by["samplers.verdict"].says + ". "
    text += "".join(by[k].says + ". " for k in by if k.startswith("samplers.") and k != "samplers.verdict")
    if trials <= TPE_STARTUP:
        text += (f"TPE's first {TPE_STARTUP} trials are random (its startup phase), so with {trials} trials it never "
                 "modelled anything: here it is Random with other seeds. ")
    else:
        text += (f"TPE samples randomly for its first {TPE_STARTUP} trials, then proposes architectures near the good "
                 f"ones, which is where its curve can pull away from Random's; with concurrent workers it counts "
                 "running trials as bad results (constant liar), so the workers spread out. ")
    return text + (f"Grid walks a seeded shuffle of its {grid_size} points (sizes only: a fixed grid cannot hold "
                   f"depth-dependent Identity choices), so {trials} trials cover {trials / grid_size:.0%} of it.")


def best_text(best: dict, by: dict, s: dict) -> str:
    """The best architecture, whether it is established as the best, and what the trials at chance mean for it."""
    params = {k: v for k, v in best["params"].items() if "." not in k}
    identity = sum(v == "identity" for k, v in best["params"].items() if "." in k)
    text = (f"{by['best.is_best_trial'].says}: `{params}`, {identity} Linear layers replaced by Identity. ")
    if "best.winner" in by:
        text += by["best.winner"].says + ". "
    collapse = by["collapse.by_depth"]
    text += collapse.says + ". "
    if collapse.verdict != "holds":
        return text
    lost = collapse.quantities["lost"]
    fine = [r["depth"] for r in collapse.quantities["by_depth"] if r["at_chance"] == 0]
    setting = f"lr {s['lr']:g}" + (f" with a linear warm-up over the first {s['warmup']:.0%} of the steps"
                                   if s.get("warmup") else "")
    text += (f"The {'/'.join(map(str, lost))}-layer models at chance did not train at {setting} from random "
             f"initialisation in {s.get('epochs', 1.0):g} epoch{'s' if s.get('epochs', 1.0) != 1 else ''}"
             + (f" (every {'/'.join(map(str, fine))}-layer one did)" if fine else "")
             + (", so the search compared those depths at a setting they do not train in"
                if len(collapse.quantities["by_depth"]) > 1 else ", so part of the search measured models that never "
                "trained"))
    winner = by.get("best.winner")
    if winner is not None and winner.verdict == "higher":
        return text + ": the best architecture is established against its runner-up, not against depths that did not train."
    if len(collapse.quantities["by_depth"]) == 1:
        return text + ": with the best not established either, this search says which architectures train here, not which is better."
    return text + (": with the best not established either, this search says which depths train here, not which "
                   "architecture or depth is better; a learning rate scaled with depth, or searched, is the next "
                   "setting to try.")


def compression_text(num: dict, c: dict, by: dict, n: int) -> str:
    """The three searches' best values (descriptive) and compression's within-trial cost (its reading)."""
    best, start = num["best"], num["start"]
    r = num["within_trial"]["post-training after compression"]
    text = (f"All three searches started from Task 1's best architecture ({start['study']}, accuracy "
            f"{start['value']:.4f}) and then let TPE explore. Best values: uncompressed {best['no compression']:.4f}, "
            f"after int{c['quant_width']} + {c['prune_sparsity']:.0%} L1 pruning {best['compressed']:.4f}, and with "
            f"{c['post_epochs']:g} epoch of post-training {best['compressed + post-training']:.4f} (one test-set "
            f"standard error: {test_set_se(best['no compression'], n):.4f}; each a best of its search's trials). The "
            "same model before and after is the cleaner measure. ")
    effect = by.get("compression.effect_remeasured") or by["compression.effect"]
    if "compression.effect_remeasured" in by:  # the fresh pairs first; the search's trials are context
        text += (effect.says + ". In the search itself (each trial trained once, on one seed): "
                 + by["compression.effect"].says + ". ")
    else:
        text += effect.says + ". "
    text += {"lower": "An objective measured after compression therefore scores architectures below the "
                      "uncompressed one by that much on average",
             "level": "Whether an objective measured after compression ranks architectures otherwise than the "
                      "uncompressed one is not shown here",
             "higher": "At this width and sparsity it acts on these briefly trained models more as a regulariser than "
                       "as a loss of information"}.get(effect.verdict, "")
    return text + f". Post-training then changed the compressed accuracy by {r['mean']:+.4f} on average (below)."


def start_text(by: dict, remeasured: bool) -> str:
    """Each search's best against its start (Task 1's best, run first), as its readings say."""
    # each search: its remeasure where there is one (the finding), after its one-seed search numbers (context)
    starts = [r for k, r in by.items() if k.startswith("start.") and k != "start.any"]
    if not starts:
        return ""
    text = "Each search's best against its start (Task 1's best, run first): " + "; ".join(r.says for r in starts) + ". "
    text += by["start.any"].says + "."
    if not remeasured:
        text += (" A search's best is the best of its trials, each trained once on one seed, so its lead over the "
                 "start is biased upwards (the best of several noisy draws): it is called better only once both are "
                 "retrained with fresh seeds, paired per seed.")
    return text


def post_text(by: dict, c: dict) -> str:
    """Post-training per trial, against the compressed model and its equal-training control, with the trials at
    chance read apart."""
    text = by["post.vs_compressed"].says + ". "
    control = by["post.vs_control"]
    text += (f"Against its equal-training control (the same trained model, uncompressed, trained {c['post_epochs']:g} "
             f"epoch" + (f" at lr {c['post_lr']:g}" if c.get("post_lr") else "") + " with the same seed and batches): "
             if control.verdict != "not established" or control.quantities else "")
    text += control.says + ". "
    if not control.quantities:
        return text + ("The extra training helps on its own (Lab 1 measures that control: extra training alone raised "
                       "its fp32 model too), so this search does not show that post-training recovers what compression "
                       "cost.")
    if "post.at_chance" in by:
        trained = by["post.vs_control_trained"]
        text = "Over every trial: " + text + by["post.at_chance"].says + ". "
        if control.verdict != trained.verdict or by["post.vs_compressed"].verdict != by["post.vs_compressed_trained"].verdict:
            text += "So the verdicts over every trial are made by those trials leaving chance, not by recovery from compression. "
        text += by["post.vs_compressed_trained"].says + ". " + trained.says + "."
    return text.rstrip()


def remeasured_text(r: dict) -> str:
    """What remeasured.json retrained (descriptive)."""
    num = r["numbers"]
    parts = []
    if num.get("task1"):
        t = num["task1"]
        parts.append(f"Task 1's best ({t['best']['study']} trial {t['best']['trial']}) and its runner-up "
                     f"({t['runner_up']['study']} trial {t['runner_up']['trial']})")
    parts += [f"the {label} search's best (trial {e['best']['trial']}) and its start (trial {e['start']['trial']})"
              for label, e in num.get("task2", {}).items()]
    return (f"Retrained with fresh training seeds {num['seeds']} (the searches used seed {num['search_seed']}), each "
            f"pair with the same seed: {'; '.join(parts) or 'nothing (no search beat its start)'}; "
            f"{num['seconds']:.0f} s on {r['provenance']['device']}.")


def render(payloads: dict[str, dict | None], folder=None) -> str:
    """``figures/lab2/answers.md`` from the stored ``samplers``, ``compression_aware`` and ``remeasured`` results."""
    from .sources import header

    payloads = {name: payloads.get(name) for name in NAMES}
    by = read("lab2_search", payloads)
    parts = [header("Lab 2: architecture search with Optuna, then compression-aware search", payloads,
                    "notebooks/lab2_search.ipynb")]
    s_p, c_p, r_p = payloads["samplers"], payloads["compression_aware"], payloads["remeasured"]
    if s_p is not None:
        s, num = s_p["settings"], s_p["numbers"]
        done = num.get("completed") or {k: len(v) for k, v in num["trials"].items()}
        grid = len(grid_points(grid_space(s["space"])))
        parts += ["## Task 1: Random vs Grid vs TPE", table_md(sampler_rows(num["bands"])),
                  *([drawn_from(num["trials_from"])] if num.get("report_only") and num.get("trials_from") else []),
                  "- **Samplers.** " + shortfall(done, s["trials"]) + sampler_text(sampler_rows(num["bands"]), by, grid),
                  "- **Best architecture.** " + best_text(num["best"], by, s)]
    if c_p is not None:
        c, num = c_p["settings"], c_p["numbers"]
        n = n_test(num["trials"], c)
        against = start_text(by, r_p is not None)
        parts += ["## Task 2: compression-aware search",
                  "- **Compression-aware search.** "
                  + shortfall(num.get("completed") or {k: len(v) for k, v in num["best_so_far"].items()},
                              c["compression_trials"])
                  + compression_text(num, c, by, n),
                  *(["- **Against the start.** " + against] if against else []),
                  "- **Post-training, read per trial and against its control.** " + post_text(by, c)]
    if r_p is not None:
        parts.append("- **Remeasured.** " + remeasured_text(r_p))
    if s_p is None and c_p is None:
        parts.append("No stored numbers: nothing to render.")
    return "\n\n".join(parts) + "\n"


def drawn_from(prov: dict) -> str:
    """Who ran the trials of a figure drawn without running any (``search.trial_provenance``)."""
    def tally(d, short=False):
        return ", ".join(f"{k[:7] + k[40:] if short and len(k) >= 40 else k} ({v})" for k, v in d.items())
    devices = {k: v for k, v in prov["devices"].items() if k != "unrecorded"}
    return (f"Drawn from the stored studies; no trial ran here. {prov['trials']} completed trials, at commits "
            f"{tally(prov['commits'], short=True)}, on " + (f"{tally(devices)}" if devices else "")
            + (f"{' and ' if devices else ''}hosts {tally(prov['hosts'])} (device not recorded by those trials)"
               if prov["devices"].get("unrecorded") else "") + ".")


def table_md(rows: list[dict]) -> str:
    from ..report import table

    return table(rows)
