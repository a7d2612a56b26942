"""Lab 5's exercises beyond the generic self-test: the notebook's own solutions pass their checks and, written in
float32 as a student would, every hidden case of many seeds (AWQ's alpha is an argmin: a near tie could flip on
rounding, which the hidden cases' draw avoids); the public cases each catch the mistake they are named for."""
import math
from pathlib import Path

import pytest
import torch

from labkit.exercises import check, editions, get
from labkit.exercises.core import hidden_cases

SRC = Path(__file__).resolve().parents[2] / "notebooks" / "src"


def solutions() -> dict:
    """The functions the solution edition's exercise cells define, each cell on its own (as grading runs it)."""
    out = {}
    for cell in editions.parse((SRC / "lab5_llm.py").read_text()).cells:
        if "exercise" in cell.metadata.get("tags", []):
            ns = {"math": math, "torch": torch}
            exec(cell.source, ns)
            out.update({k: v for k, v in ns.items() if k not in ("math", "torch", "__builtins__")})
    return out


IDS = {"lab5.group_rtn": "group_rtn", "lab5.token_nll": "token_nll", "lab5.awq_scales": "awq_scales"}


def test_the_notebooks_solutions_pass_their_checks():
    found = solutions()
    for exercise_id, name in IDS.items():
        result = check(exercise_id, found[name], quiet=True)
        assert result.ok and result.fn is found[name], result.summary()


@pytest.mark.parametrize("exercise_id", ["lab5.token_nll", "lab5.awq_scales"])
def test_the_float32_solutions_pass_the_hidden_cases_of_many_seeds(exercise_id):
    ex, fn = get(exercise_id), solutions()[IDS[exercise_id]]
    for seed in range(12):
        for case in hidden_cases(ex, seed):
            why = ex.judge(case, ex.outcome(ex.reference, case), ex.outcome(fn, case))
            assert why is None, (seed, case.name, why)


def _caught_by(exercise_id) -> dict:
    """mutant -> the public cases it fails."""
    ex = get(exercise_id)
    cases = ex.public()
    expected = [ex.outcome(ex.reference, c) for c in cases]
    return {name: {c.name for c, e in zip(cases, expected) if ex.judge(c, e, ex.outcome(m, c))}
            for name, m in ex.mutants.items()}


def test_each_token_nll_trap_has_its_case():
    caught = _caught_by("lab5.token_nll")
    assert caught["log of softmax (underflows to -inf)"] == {"logit gaps over 100: log-softmax, not log(softmax)"}
    assert "bf16 logits (a bf16 model's): log-softmax in float32" in caught["log-softmax in the logits' dtype"]
    assert "the shift: the logits at t predict token t+1" in caught["no shift (position t scored on token t)"]


def test_each_awq_trap_has_its_case():
    caught = _caught_by("lab5.awq_scales")
    tie = "every channel alike: s = 1 at every alpha, and a tie goes to the smaller alpha"
    assert caught["a tie goes to the larger alpha"] == {tie}
    dead = "a dead input channel (x = 0) keeps a finite scale"
    assert dead in caught["s not clamped at 1e-4 (a dead channel's s is 0)"]
    assert "large negative activations: the scale is from mean |x|" in caught["scale from mean x, not mean |x|"]
    assert all(tie not in cases for name, cases in caught.items() if name != "a tie goes to the larger alpha")


def test_the_awq_cases_choose_a_scale_and_the_tie_case_alpha_zero():
    ex = get("lab5.awq_scales")
    alphas = {c.name: ex.call(ex.reference, c)[0] for c in ex.public()}
    assert alphas.pop("every channel alike: s = 1 at every alpha, and a tie goes to the smaller alpha") == 0.0
    assert all(a > 0 for a in alphas.values()), alphas  # else alpha-0 mistakes would pass them
