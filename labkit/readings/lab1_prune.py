"""Lab 1b's readings (``pruning.json``): achieved sparsity, L1 against random per stage, where random pruning
sits at chance, what fine-tuning recovers of random pruning per sparsity (against fp32 and against L1), whether
fine-tuning lowers L1 anywhere, the equal-training control, and global against local scope."""
from __future__ import annotations

from .core import Reading, check
from .lab1_quantize import Seeds, sides

SOURCE = "pruning"
STAGES = (("pruned", "right after pruning"), ("finetuned", "after fine-tuning"))


def local_rows(p: dict, scope: str) -> dict:
    return {(r["method"], r["sparsity"]): r for r in p["rows"] if r.get("scope", scope) == scope}


def read(p: dict, settings: dict) -> list[Reading]:
    sd = Seeds(p)
    scope = settings.get("prune_scope", "local")
    get = local_rows(p, scope)
    sps = sorted({s for _, s in get})
    out = []
    err = max(abs(r["achieved_weight_sparsity"] - r["sparsity"]) for r in p["rows"])
    off = [r["sparsity"] for r in p["rows"] if abs(r["achieved_weight_sparsity"] - r["sparsity"]) > 0.01]
    out.append(check("achieved_sparsity", not off,
                     (f"Achieved weight sparsity matches the request at every point (largest gap {100 * err:.1g} "
                      "points: whole weights per layer)" if err < 5e-4 else
                      f"Achieved weight sparsity is within {100 * err:.2f} points of the request everywhere"),
                     f"Achieved weight sparsity is **more than 1 point** off the request at {off}", source=SOURCE,
                     rule="|achieved - requested weight sparsity| <= 0.01 at every row", quantities={"largest": err}))
    pairs = [(s, get[("l1-norm", s)], get[("random", s)]) for s in sps if ("l1-norm", s) in get and ("random", s) in get]
    for stage, label in (("pruned", "right after pruning"), ("finetuned", f"after {settings['prune_epochs']:g} epoch "
                                                                         "of fine-tuning")):
        chance = [s for s, l1, rnd in pairs if sd.at_chance(l1, stage) and sd.at_chance(rnd, stage)]
        out.append(sides(f"l1_vs_random.{stage}", f"{label}, L1 minus random",
                         {s: sd.diff(l1, stage, rnd, stage) for s, l1, rnd in pairs}, "sparsity", source=SOURCE,
                         positive=True, expect=True, suffix=f" (both at chance at {chance})" if chance else ""))
    for stage, label in (("pruned", "before fine-tuning"), ("finetuned", "after fine-tuning")):
        flat = [s for s in sps if ("random", s) in get and sd.at_chance(get[("random", s)], stage)]
        out.append(check(f"random_at_chance.{stage}", bool(flat),
                         f"Random pruning {label} is at chance at sparsities {flat}",
                         f"Random pruning {label} stays above chance at every sparsity", source=SOURCE,
                         rule="every seed within 2 test-set SE of 0.5", quantities={"sparsities": flat}, expect=False))
    out += recovery(p, sd, get, sps)
    worse = [s for s in sps if ("l1-norm", s) in get
             and (d := sd.diff(get[("l1-norm", s)], "finetuned", get[("l1-norm", s)], "pruned")).established
             and d.mean < 0]
    w = get[("l1-norm", worse[0])] if worse else None
    out.append(check("l1.finetuning_lowers", bool(worse),
                     f"L1 at {worse[0]:g} falls from {w['pruned']:.4f} to {w['finetuned']:.4f} with fine-tuning "
                     "(established over seeds)" if worse else "",
                     "fine-tuning lowers L1 at no sparsity beyond t SE", source=SOURCE,
                     rule="L1 fine-tuned minus pruned, same sign in every seed and beyond t SE",
                     quantities={"sparsities": worse}, expect=False))
    ctrl = p.get("control")
    if ctrl is not None:
        out.append(sd.compare("control_vs_fp32", ctrl, "accuracy", p, "fp32", SOURCE,
                              names=("fp32 + training", "fp32")))
        best = max((r for (m, _), r in get.items() if m == "l1-norm"), key=lambda r: r["finetuned"], default=None)
        if best is not None:
            out.append(sd.compare("best_l1_vs_control", best, "finetuned", ctrl, "accuracy", SOURCE,
                                  names=(f"L1 {best['sparsity']:g} fine-tuned", "control")))
    glob = {r["sparsity"]: r for r in p["rows"] if r.get("scope") == "global" and r["method"] == "l1-norm"}
    gp = [(s, get[("l1-norm", s)], g) for s, g in sorted(glob.items()) if ("l1-norm", s) in get]
    if gp:
        for stage, label in STAGES:
            out.append(sides(f"global_vs_local.{stage}", f"{label}, global minus local",
                             {s: sd.diff(g, stage, lo, stage) for s, lo, g in gp}, "sparsity", source=SOURCE,
                             positive=False))
    return out


def recovery(p: dict, sd: Seeds, get: dict, sps: list) -> list[Reading]:
    """Per sparsity, random pruning after fine-tuning: back above chance or not where pruning left it at chance,
    and against the fp32 model and against L1 at the same sparsity (each a seed-paired difference)."""
    out = []
    for s in sps:
        rnd = get.get(("random", s))
        if rnd is None:
            continue
        if sd.at_chance(rnd, "pruned"):
            up = not sd.at_chance(rnd, "finetuned")
            out.append(check(f"random_recovery.s{s:g}", up,
                             f"at {s:g} it comes back from chance ({rnd['pruned']:.4f}) to "
                             f"{rnd['finetuned']:.4f}",
                             f"at {s:g} it stays at chance ({rnd['pruned']:.4f} -> {rnd['finetuned']:.4f})",
                             source=SOURCE, rule="fine-tuned: some seed beyond 2 test-set SE of 0.5",
                             quantities={"pruned": rnd["pruned"], "finetuned": rnd["finetuned"]}, expect=False))
        out.append(sd.compare(f"random_finetuned.s{s:g}.vs_fp32", rnd, "finetuned", p, "fp32", SOURCE,
                              says=_below("fp32"), names=(f"random {s:g} fine-tuned", "fp32")))
        if ("l1-norm", s) in get:
            out.append(sd.compare(f"random_finetuned.s{s:g}.vs_l1", rnd, "finetuned", get[("l1-norm", s)],
                                  "finetuned", SOURCE, says=_below("L1"),
                                  names=(f"random {s:g} fine-tuned", f"L1 {s:g} fine-tuned")))
    return out


def _below(what: str) -> dict:
    return {"lower": f"{{text}}: below {what}", "higher": f"{{text}}: above {what}",
            "level": f"{{text}}: level with {what}"}


def readings(payloads: dict) -> list[Reading]:
    p = payloads.get(SOURCE)
    return [] if p is None else read(p["numbers"], p["settings"])

