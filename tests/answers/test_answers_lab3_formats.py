"""Lab 3 formats' answers render from the committed JSON and follow their numbers."""
import ast
import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import settings
from _results import committed_figures, no_machine_path, stored  # noqa: F401
from labkit import redraw
from labkit.answers import lab0_graphs_lora as lab0, lab3_formats, measured

ROOT = Path(__file__).resolve().parents[2]
FIG = ROOT / "figures"


pytestmark = pytest.mark.usefixtures("committed_figures")


# --- shared -------------------------------------------------------------------------------------------

DATA = ROOT / "tests" / "data"  # frozen copies of earlier committed results (H200, commit not recorded)


def test_lab3_formats_render_from_the_committed_json():
    path, text = redraw.render_answers("lab3_formats", "full")
    assert path == FIG / "lab3" / "formats_answers.md"
    no_machine_path(text)
    assert "re-rendered from the stored numbers" in text
    f, w = stored("lab3", "formats"), stored("lab3", "weight_snr")
    for p in (f, w):
        prov = p["provenance"]
        assert prov["device"] in text
        assert (f"commit `{prov['git_commit'][:12]}`" if prov.get("git_commit") else prov["commit_note"]) in text
    num = f["numbers"]
    assert f"fp32 accuracy **{num['fp32']['accuracy']:.4f}**" in text
    # every format's PTQ and QAT accuracies appear in the table as stored
    for name, r in num["formats"].items():
        cells = f"| {r['ptq']['accuracy']:.4f} | {r['qat']['accuracy']:.4f} |"
        assert any(l.startswith(f"| {name} | ") and cells in l for l in text.splitlines()), name
    # the best-format verdict follows the stored numbers: a single best only beyond two standard errors
    ptq = sorted(((r["ptq"]["accuracy"], n) for n, r in num["formats"].items()), reverse=True)
    (a1, n1), (a2, _) = ptq[0], ptq[1]
    se = math.sqrt(a1 * (1 - a1) / num["dataset_sizes"]["test"])
    single = a1 - a2 > 2 * se
    assert ("no single best format" in text) is (not single)
    assert (f"The highest PTQ, **{n1}** {a1:.4f}, is ahead of every other format" in text) is single


def frozen_formats():
    """Frozen copies of an earlier Lab 3 formats result (H200), so the wording tests below do not move
    whenever the figures are regenerated."""
    return {name: json.loads((DATA / f"h200_lab3_{name}.json").read_text()) for name in lab3_formats.NAMES}


def test_lab3_formats_verdicts_on_a_frozen_result():
    frozen = frozen_formats()
    text = lab3_formats.render(frozen)
    no_machine_path(text)
    # no single best where the top PTQ accuracies are within two standard errors
    assert "Best mxint8" not in text and "no single best format" in text
    assert "the tied group is mxint8, block_minifloat, minifloat_ieee, minifloat_denorm, block_fp" in text
    assert "One training seed" in text and "no single best after QAT" in text
    assert "The largest gains, binary_scaling +0.2004, binary_residual_sign +0.1916, are not told apart" in text
    # kept statements, as far as the numbers support them
    assert "**log and block_log are the same at 8 bits**" in text and "0.0014 apart" in text
    assert "at 4 bits log flushes 74% of the weights" in text
    assert text.count(frozen["formats"]["provenance"]["commit_note"]) == 1  # both JSONs share it


def test_committed_lab3_formats_answers_are_the_render():
    assert (FIG / "lab3" / "formats_answers.md").read_text() == redraw.render_answers("lab3_formats", "full")[1]


def doctored_formats(**accs):
    """The frozen payloads with ``format=(ptq, qat)`` accuracies replaced (None keeps one)."""
    p = frozen_formats()
    for name, (ptq, qat) in accs.items():
        f = p["formats"]["numbers"]["formats"][name]
        if ptq is not None:
            f["ptq"]["accuracy"] = ptq
        if qat is not None:
            f["qat"]["accuracy"] = qat
    return p


def test_lab3_a_single_best_only_beyond_two_standard_errors():
    text = lab3_formats.render(doctored_formats(mxint8=(0.8600, None)))
    assert "The highest PTQ, **mxint8** 0.8600, is established ahead of every other format" in text
    assert "no single best format" not in text
    text = lab3_formats.render(doctored_formats(minifloat_ieee=(None, 0.8700)))
    assert "Highest mean after QAT: minifloat_ieee 0.8700, established ahead of the rest" in text
    assert "Established above fp32: minifloat_ieee" in text


def test_lab3_qat_gain_verdict_follows_the_numbers():
    text = lab3_formats.render(doctored_formats(binary_scaling=(None, 0.8000)))
    assert "QAT helps most for **binary_scaling** (+0.2926)" in text and "The largest gains" not in text
    text = lab3_formats.render(doctored_formats(integer=(None, 0.8500)))
    assert "integer 0.8393 → 0.8500 (+0.0107 ± 0.0032 test-set SE, one seed)" in text


def test_lab3_log_block_log_statement_needs_its_numbers():
    p = doctored_formats(block_log=(0.8000, None))
    text = lab3_formats.render(p)
    assert "are the same at 8 bits" not in text and "log and block_log differ at 8 bits" in text
    p = doctored_formats()
    for r in p["weight_snr"]["numbers"]["rows"]:
        if r["format"] == "log" and r["width"] == 8:
            r["zeroed"] = 0.2
    assert "are the same at 8 bits" not in lab3_formats.render(p)


def test_lab3_chance_uses_a_standard_error():
    from labkit.readings.lab3_formats import chance

    text = chance({"binary": [0.5], "binary_scaling": [0.5074], "x": [0.503]}, 25000).says
    assert "one SE 0.0032): binary, x." in text and "binary_scaling 0.5074 (seeds 0.5074)" in text
    # over seeds: at chance only where every seed is
    text = chance({"a": [0.5, 0.501, 0.499], "b": [0.5, 0.51, 0.5]}, 25000).says
    assert "one SE 0.0032): a." in text and "b 0.5033 (seeds 0.5000/0.5100/0.5000)" in text


# --- the tool and the notebooks -----------------------------------------------------------------------

def test_integer_snr_pairs_are_explained_only_when_they_are_flat():
    rows = [{"format": "integer", "width": w, "snr_db": s} for w, s in ((4, 1.4), (5, 1.4), (6, 5.3), (7, 5.3), (8, 10.9))]
    text = lab3_formats.integer_steps(rows)
    assert "4 and 5 bits: 1.4 dB, 6 and 7 bits: 5.3 dB" in text and "frac = width // 2" in text
    rows[1]["snr_db"] = 3.0  # an odd width that does refine: nothing to explain
    rows[3]["snr_db"] = 7.0
    assert lab3_formats.integer_steps(rows) == ""
