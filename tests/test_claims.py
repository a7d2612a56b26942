"""Results check: the committed full-profile JSON supports each lab's headline claims, and a doctored copy
whose numbers contradict a claim fails it (so the check can fail)."""
import copy
import json
import shutil
from pathlib import Path

import pytest

from labkit.maintain import claims

from _results import one_seed as _one_seed

FIGURES = Path(__file__).resolve().parent.parent / "figures"


def test_every_committed_claim_holds():
    found = claims.check_all(FIGURES)
    assert {c.lab for c in found} >= {"lab0", "lab1", "lab2", "lab3", "lab4"}  # each lab's results exist ("all": across labs)
    broken = [f"{c.lab}: {c.name} ({c.detail})" for c in found if not c.holds]
    assert not broken, broken


def _numbers(lab, name):
    return json.loads((FIGURES / lab / f"{name}.json").read_text())["numbers"]



def _failing(found):
    return {c.name for c in found if not c.holds}


def test_doctored_quantization_fails_its_claims():
    q = _one_seed(_numbers("lab1", "quantization"))
    for r in q["rows"]:
        if r["width"] == 8:
            r["ptq"], r["qat"] = q["fp32"] - 0.05, q["fp32"] - 0.08
    assert _failing(claims.lab1_quantization(q)) == {"int8 PTQ within 1 point of fp32 (means over seeds)",
                                                      "QAT is established below PTQ at no width"}


def _three_seeds(numbers, keys, shifts):
    """A one-seed result made into three seeds, each shifted by ``shifts[i]`` on ``keys`` of every row."""
    from labkit import seeds

    per = []
    for d in shifts:
        x = copy.deepcopy(numbers)
        for r in x["rows"]:
            for k in keys:
                r[k] = min(1.0, max(0.0, r[k] + d))
        per.append({k: v for k, v in x.items() if k != "dataset_sizes"})
    return {**seeds.combine(per, [0, 1, 2]), "dataset_sizes": numbers["dataset_sizes"]}


def test_a_qat_loss_that_changes_sign_between_seeds_is_not_established():
    q = _one_seed(_numbers("lab1", "quantization"))
    for r in q["rows"]:
        r["qat"] = r["ptq"] - 0.03  # QAT well below PTQ at every width
    assert "QAT is established below PTQ at no width" in _failing(claims.lab1_quantization(q))
    # three seeds where QAT - PTQ is -0.09, +0.03, +0.03: a mean of -0.01 whose sign changes between seeds
    per_seed = _three_seeds(q, ["qat"], [-0.06, 0.06, 0.06])
    assert "QAT is established below PTQ at no width" not in _failing(claims.lab1_quantization(per_seed))


def test_doctored_pruning_fails_when_random_beats_l1_above_chance():
    p = _one_seed(_numbers("lab1", "pruning"))
    for r in p["rows"]:
        if r["method"] == "random" and r["sparsity"] == 0.5:
            r["pruned"] = 0.9
    assert _failing(claims.lab1_pruning(p)) == {"L1 is established below random (pruned) at no sparsity"}


def test_a_verdict_the_numbers_do_not_support_fails(tmp_path):
    shutil.copytree(FIGURES / "lab2", tmp_path / "lab2", ignore=shutil.ignore_patterns("*.journal", "gpu_logs"))
    answers = (tmp_path / "lab2" / "answers.md").read_text()
    s = _numbers("lab2", "samplers")
    top = max(s["rows"], key=lambda r: r["mean best"])["sampler"]
    doctored = answers.replace("**No sampler can be called better at this budget**", f"**{top.upper()} wins**")
    assert doctored != answers
    assert _failing(claims.lab2_samplers(s, answers)) == set()
    assert _failing(claims.lab2_samplers(s, doctored)) == {"the sampler verdict follows its uncertainty"}


def test_a_lossy_8bit_format_with_a_mantissa_fails_but_log_is_exempt():
    f = copy.deepcopy(_numbers("lab3", "formats"))
    claim = "every >= 8-bit format with a mantissa: PTQ within 2 points of fp32"
    f["formats"]["log"]["ptq"]["accuracy"] = f["fp32"]["accuracy"] - 0.1  # powers of two only: not claimed
    assert claim not in _failing(claims.lab3_formats(f))
    f["formats"]["mxint8"]["ptq"]["accuracy"] = f["fp32"]["accuracy"] - 0.03
    assert claim in _failing(claims.lab3_formats(f))


@pytest.mark.parametrize("field,value,claim", [
    ("saving_peak", 0.4, "MXINT8 saves >= 60% of peak memory on the large model"),
    ("saving_parameter_bytes", 0.5, "measured parameter saving = theory (within 0.5 point)"),
])
def test_doctored_memory_fails(field, value, claim):
    m = copy.deepcopy(_numbers("lab4", "mxint8_memory"))
    for model in m["measured"].values():
        model[field] = value
    assert claim in _failing(claims.lab4(memory=m))


def test_a_slower_compiled_model_fails():
    c = copy.deepcopy(_numbers("lab4", "compile_cuda"))
    for comp in c["comparisons"]:
        if comp["variant"] == "inductor":
            comp["steady_speedup"] = 0.9
    assert _failing(claims.lab4(compile_cuda=c)) == {"Inductor-compiled faster than eager in steady state (CUDA)"}


def test_a_speedup_within_noise_is_not_read_as_faster():
    from labkit.perf.compile_study import run_at

    c = copy.deepcopy(_numbers("lab4", "compile_cuda"))
    for comp in c["comparisons"]:  # every compiled run as spread out as eager's and overlapping it
        eager = run_at(c, "eager", comp)["timing"]
        run_at(c, comp["variant"], comp)["timing"].update(
            steady_median_s=eager["steady_median_s"] * 0.99, steady_min_s=eager["steady_min_s"] * 0.5,
            steady_max_s=eager["steady_max_s"] * 1.5)
    assert _failing(claims.lab4(compile_cuda=c)) == {"Inductor-compiled faster than eager in steady state (CUDA)"}


def test_every_committed_result_names_its_commit_or_says_why_not():
    import re
    root = FIGURES.parent
    files = sorted(FIGURES.glob("**/*.json")) + sorted((root / "benchmarks").glob("**/*.json"))
    assert len(files) > 20
    bad = []
    for f in files:
        d = json.loads(f.read_text())
        # a file of appended rows (one run each) names a commit in every row
        provs = [r.get("provenance") or {} for r in d["rows"]] if "rows" in d and "provenance" not in d \
            else [d.get("provenance") or {}]
        for prov in provs or [{}]:
            commit = prov.get("git_commit", "missing")
            ok = (isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", commit)) or \
                 (commit is None and prov.get("commit_note"))
            if not ok:
                bad.append(f"{f.relative_to(root)}: {commit!r}")
    assert not bad, bad


def test_one_regeneration_reports_one_sft_accuracy():
    sha = "a" * 40
    same = {"lab0": (0.86404, {"git_commit": sha}), "lab1": (0.86536, {"git_commit": sha})}
    assert _failing(claims.same_sft(same)) == {"the SFT model scores the same in every lab of one regeneration"}
    assert claims.same_sft({**same, "lab1": (0.86404, {"git_commit": sha})})[0].holds
    # results of different (or unrecorded) commits are not one regeneration: nothing to compare
    assert claims.same_sft({**same, "lab1": (0.86536, {"git_commit": None})}) == []


def test_the_command_prints_verdicts_and_fails_on_a_broken_claim(tmp_path, capsys):
    assert claims.main([str(FIGURES)]) == 0 and "ok   lab1: QAT is established below PTQ at no width" in capsys.readouterr().out
    shutil.copytree(FIGURES / "lab1", tmp_path / "lab1")
    q = json.loads((tmp_path / "lab1" / "quantization.json").read_text())
    q["numbers"] = _one_seed(q["numbers"])
    for r in q["numbers"]["rows"]:
        r["qat"] = r["ptq"] - 0.05
    (tmp_path / "lab1" / "quantization.json").write_text(json.dumps(q))
    assert claims.main([str(tmp_path)]) == 1 and "FAIL lab1: QAT is established below PTQ at no width" in capsys.readouterr().out


def test_merged_lora_may_flip_a_few_boundary_reviews_not_more():
    acc = _one_seed(_numbers("lab0", "accuracy"))
    n = acc["sft"]["n"]
    # one test-set SE in reviews: sqrt(25,000 x 0.5 x 0.5) = 79; sqrt(25,000 x 0.867 x 0.133) = 53.7
    assert claims.merge_flips(25_000, 0.5) == 79 and claims.merge_flips(25_000, 0.867) == 53
    assert claims.merge_flips(64, 1.0) == 1
    claim = "merging LoRA keeps the model in every seed"
    limit = claims.merge_flips(n, acc["lora"]["accuracy"])
    acc["merged"]["accuracy"] = acc["lora"]["accuracy"] + limit / n
    assert claim not in _failing(claims.lab0(acc))
    acc["merged"]["accuracy"] = acc["lora"]["accuracy"] - (limit + 1) / n
    assert claim in _failing(claims.lab0(acc))
    acc["merged"]["accuracy"], acc["merge_max_logit_diff"] = acc["lora"]["accuracy"], 0.5
    assert claim in _failing(claims.lab0(acc))
    # three seeds: one seed's merge flipping more than the limit fails the claim although the mean flips a third
    acc["merge_max_logit_diff"] = 1e-6
    lora = acc["lora"]["accuracy"]
    acc["seeds"], acc["lora"]["accuracy_seeds"] = [0, 1, 2], [lora] * 3
    acc["merged"]["accuracy_seeds"] = [lora, lora, lora - (limit + 1) / n]
    acc["sft"]["accuracy_seeds"] = [acc["sft"]["accuracy"]] * 3
    assert claim in _failing(claims.lab0(acc))


def test_sft_accuracies_are_compared_within_each_commit():
    a, b = "a" * 40, "b" * 40
    found = claims.same_sft({"lab0": (0.86512, {"git_commit": a}), "lab1q": (0.86512, {"git_commit": a}),
                             "lab1p": (0.86496, {"git_commit": b}), "lab4": (0.86496, {"git_commit": b})})
    assert len(found) == 2 and all(c.holds for c in found)
    found = claims.same_sft({"lab0": (0.86512, {"git_commit": a}), "lab1p": (0.86496, {"git_commit": a}),
                             "lab4": (0.86512, {"git_commit": b})})
    assert [c.holds for c in found] == [False]  # commit b has one result: nothing to compare there


def test_a_one_seed_result_fails_the_seed_count(tmp_path):
    shutil.copytree(FIGURES / "lab1", tmp_path / "lab1")
    assert all(c.holds for c in claims.seeded(tmp_path))
    q = json.loads((tmp_path / "lab1" / "quantization.json").read_text())
    q["numbers"].pop("seeds")  # stored before seeds were kept: one seed
    (tmp_path / "lab1" / "quantization.json").write_text(json.dumps(q))
    assert _failing(claims.seeded(tmp_path)) == {"trained-model verdicts rest on >= 3 training seeds"}


def test_search_readings_fail_when_the_answers_misread_their_data():
    integer, pareto = _numbers("lab3", "search_integer"), _numbers("lab3", "search_pareto")
    answers = (FIGURES / "lab3" / "search_answers.md").read_text()
    assert not _failing(claims.lab3_search(integer, pareto, answers))
    # the opposite of what the committed answers say about Task 1 against its baseline
    if "did not reach its own baseline" in answers:
        misread = answers.replace("did not reach its own baseline", "found the best widths")
    else:
        misread = answers + " The search did not reach its own baseline."
    misread += " Each lambda picks one point."
    assert _failing(claims.lab3_search(integer, pareto, misread)) == {
        "Task 1 is read against its uniform baseline",
        "the lambdas are not read as a trade-off when one loses under its own objective"}
    s = _numbers("lab2", "samplers")
    lab2_answers = (FIGURES / "lab2" / "answers.md").read_text()
    assert not _failing(claims.lab2_collapse(s, lab2_answers))
    assert _failing(claims.lab2_collapse(s, lab2_answers.replace("ended at chance", "did fine"))) == {
        "the answers report the trials that ended at chance, per depth"}


def test_post_training_is_read_against_its_control():
    """The committed answers read post-training against its control (or say none was trained). With controls (a copy of the committed
    trials given control accuracies), the answers rendered from them pass, and doctored answers that call an
    unestablished gain established, or that drop the control, fail."""
    from labkit.answers import lab2 as lab2_answers

    c = _numbers("lab2", "compression_aware")
    answers = (FIGURES / "lab2" / "answers.md").read_text()
    assert not _failing(claims.lab2_post_training(c, answers))
    has_control = any("accuracy_control" in t for t in c["trials"]["compressed + post-training"])
    said = "Against its equal-training control" if has_control else "No equal-training control was trained"
    assert said in answers and _failing(claims.lab2_post_training(c, answers.replace(said, "")))
    for offset, established in ((0.0, False), (-0.1, True)):  # control at the post-trained accuracy, or far below
        ctl = copy.deepcopy(c)
        for i, t in enumerate(ctl["trials"]["compressed + post-training"]):
            t["accuracy_control"] = t["accuracy_post_trained"] + offset + (0.001 if i % 2 else -0.001)
        g = lab2_answers.post_vs_control(ctl["trials"]["compressed + post-training"])
        assert lab2_answers.beats_control(g) == established
        payload = json.loads((FIGURES / "lab2" / "compression_aware.json").read_text())
        rendered = lab2_answers.render({"compression_aware": {**payload, "numbers": ctl}})
        assert not _failing(claims.lab2_post_training(ctl, rendered))
        flipped = (rendered.replace("**The post-trained compressed models beat their equal-training control**", "")
                   if established else rendered + " **The post-trained compressed models beat their equal-training control**")
        assert _failing(claims.lab2_post_training(ctl, flipped)) == {
            "post-training's gain is read against its equal-training control"}
        assert _failing(claims.lab2_post_training(ctl, rendered.replace("Against its equal-training control", "")))
