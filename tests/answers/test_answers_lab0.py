"""Lab 0's answers and the shared prose helpers render from the committed JSON and follow their numbers."""
import ast
import copy
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import settings
from _results import committed_figures, no_machine_path, stored  # noqa: F401
from labkit import redraw
from labkit.graph.draw import graph_stem
from labkit.answers import lab0_graphs_lora as lab0, lab3_formats, measured

ROOT = Path(__file__).resolve().parents[2]
FIG = ROOT / "figures"


pytestmark = pytest.mark.usefixtures("committed_figures")


# --- shared -------------------------------------------------------------------------------------------

def test_compare_uses_one_standard_error_and_two_for_a_tie():
    c = measured.compare(0.8678, 0.86404, 25000)
    assert c["se"] == pytest.approx(math.sqrt(0.86404 * (1 - 0.86404) / 25000))
    assert c["ses"] == pytest.approx(0.00376 / c["se"]) and c["tie"]
    assert not measured.compare(0.88, 0.86404, 25000)["tie"]


def test_shown_path_is_never_absolute(tmp_path, monkeypatch):
    assert measured.shown_path(settings.REPO_ROOT / "figures" / "lab0" / "x.svg") == "figures/lab0/x.svg"
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path / "figs"))
    assert measured.shown_path(tmp_path / "figs" / "lab0" / "x.svg") == "$LABKIT_FIGURES_DIR/lab0/x.svg"
    assert measured.shown_path(tmp_path / "elsewhere" / "x.svg") == "x.svg"


DATA = ROOT / "tests" / "data"  # frozen copies of earlier committed results (H200, commit not recorded)


def test_header_names_device_and_quotes_a_missing_commit():
    p = json.loads((DATA / "h200_lab0_accuracy.json").read_text())
    head = measured.header("T", {"figures/lab0/accuracy.json": p}, "how")
    assert "NVIDIA H200" in head and "commit not recorded (`git_commit` is null)" in head
    assert p["provenance"]["commit_note"] in head
    p2 = copy.deepcopy(p)
    p2["provenance"].update(git_commit="a" * 40, commit_note=None)
    head = measured.header("T", {"x.json": p2}, "how")
    assert "commit `aaaaaaaaaaaa`" in head and "not recorded" not in head


# --- Lab 0 --------------------------------------------------------------------------------------------

def test_lab0_renders_from_the_committed_json():
    path, text = redraw.render_answers("lab0_graphs_lora", "full")
    assert path == FIG / "lab0" / "answers.md"
    no_machine_path(text)
    prov, num = stored("lab0", "accuracy")["provenance"], stored("lab0", "accuracy")["numbers"]
    assert "re-rendered from the stored numbers" in text and prov["device"] in text
    assert (f"commit `{prov['git_commit'][:12]}`" if prov.get("git_commit") else prov["commit_note"]) in text
    # the committed SVGs exist: named from the project root, and never said to be drawn by the run that measured
    # the numbers when it recorded that it did not draw them (the published run had no graphviz)
    assert num.get("graphs_drawn") is False and "The graphs are rendered" not in text
    assert "was not installed on the machine that measured these numbers, so that run did not draw" in text
    for stem in ("graph_ids_mask_labels", "graph_ids_mask", "graph_ids_only"):
        assert f"`figures/lab0/{stem}.svg`" in text
    # LoRA's training stated, and the comparison carries its standard error
    assert "starts from the SFT model" in text and "20x SFT's learning rate" in text
    from labkit.readings import seeds

    k = seeds.count(num)
    from labkit.readings import stats
    d = stats.difference(seeds.values(num["lora"], "accuracy", k), seeds.values(num["sft"], "accuracy", k),
                         num["sft"]["n"])
    assert f"LoRA minus SFT on {num['sft']['n']:,} test reviews: {d.text()}" in text
    # what the JSON holds is stated, what it lacks is said, not invented
    if num.get("dropout_removed") is None:
        assert "the dropout-removal check" in text and "equal the eval-mode model" not in text
    else:
        assert "equal the eval-mode model" in text


def test_lab0_says_what_an_older_json_lacks(monkeypatch):
    old = json.loads((DATA / "h200_lab0_accuracy.json").read_text())
    text = lab0.render({"accuracy": old})
    assert "LoRA minus SFT on 25,000 test reviews: +0.0038" in text and "one training seed" in text
    assert "the dropout-removal check" in text and "equal the eval-mode model" not in text


def test_committed_lab0_answers_are_the_render():
    assert (FIG / "lab0" / "answers.md").read_text() == redraw.render_answers("lab0_graphs_lora", "full")[1]


def doctored_lab0(**numbers):
    from _results import one_seed

    p = copy.deepcopy(stored("lab0", "accuracy"))
    for key, value in numbers.items():
        p["numbers"][key] = value
    p["numbers"] = one_seed(p["numbers"])
    return p


def test_lab0_lora_verdict_follows_the_numbers():
    n = 25000
    assert "a measurable gain" in lab0.sft_vs_lora([0.864, 0.865, 0.863], [0.880, 0.882, 0.879], n)
    assert "a measurable loss" in lab0.sft_vs_lora([0.864, 0.865, 0.863], [0.850, 0.851, 0.849], n)
    assert "The seeds disagree on its sign" in lab0.sft_vs_lora([0.864, 0.865, 0.863], [0.880, 0.860, 0.882], n)
    assert re.search(r"Within \d+\.\d\d SE: no difference", lab0.sft_vs_lora([0.864, 0.865, 0.863], [0.865, 0.866, 0.864], n))
    one = lab0.sft_vs_lora([0.864], [0.880], n)  # one seed: beyond 2 test-set SE, still not a method verdict
    assert "beyond 2 test-set SE" not in one and "test-set SE, one seed" in one and "not called a difference" in one
    p = doctored_lab0(lora={**stored("lab0", "accuracy")["numbers"]["lora"], "accuracy": 0.8800})
    text = lab0.render({"accuracy": p})
    diff = 0.8800 - p["numbers"]["sft"]["accuracy"]
    assert f"LoRA minus SFT on 25,000 test reviews: {diff:+.4f}" in text


def test_lab0_compares_training_times_only_where_the_gpu_was_not_shared():
    p = copy.deepcopy(stored("lab0", "accuracy"))
    sft, lora = p["numbers"]["sft"], p["numbers"]["lora"]
    p["provenance"].pop("gpu_shared_with", None)  # the committed run may have shared its GPU: both cases here
    alone = lab0.render({"accuracy": p})
    assert f"SFT's epoch took {sft['train_seconds']:.0f} s" in alone and "shared with" not in alone
    p["provenance"]["gpu_shared_with"] = ["lab1_quantize", "lab3_formats"]
    shared = lab0.render({"accuracy": p})
    assert "the GPU was shared with lab1_quantize, lab3_formats at the time, so this time is not compared" in shared
    assert "SFT's epoch took" not in shared and f"({lora['train_seconds']:.0f} s of training" in shared


def test_lab0_lora_training_follows_the_settings():
    s = dict(stored("lab0", "accuracy")["settings"])
    assert "20x SFT's learning rate" in lab0.lora_training(s) and "2 times" in lab0.lora_training(s)
    s.update(lora_lr=s["lr"], epochs=2.0)
    text = lab0.lora_training(s)
    assert "at lr 5e-05, SFT's learning rate" in text and "20x" not in text
    assert "2 more epochs" in text and "4 times" in text
    s.update(lora_lr=s["lr"] / 3)
    assert "0.333x SFT's learning rate" in lab0.lora_training(s)


def test_lab0_graph_statement_follows_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    folder = tmp_path / "lab0"
    folder.mkdir()
    nodes = {"ids+mask+labels": 146, "ids only": 130}
    none = lab0.graphs_text(nodes, lab0.graph_files(nodes, folder))
    assert "No rendered SVG exists for ids+mask+labels, ids only" in none and "not stored either" in none
    for name in nodes:
        (folder / f"{graph_stem(name)}.dot").write_text("digraph {}")
    dots = lab0.graphs_text(nodes, lab0.graph_files(nodes, folder), rendered_now=False)
    assert "graphviz's `dot` was not installed on the machine that measured these numbers" in dots
    assert "`dot -Tsvg $LABKIT_FIGURES_DIR/lab0/graph_ids_mask_labels.dot -o " \
           "$LABKIT_FIGURES_DIR/lab0/graph_ids_mask_labels.svg`" in dots
    no_machine_path(dots.replace(str(tmp_path), "/tmp"))  # the check itself must see no tmp path
    assert str(tmp_path) not in dots
    (folder / "graph_ids_only.svg").write_text("<svg/>")
    some = lab0.graphs_text(nodes, lab0.graph_files(nodes, folder), rendered_now=True)
    assert "The graphs are rendered: `$LABKIT_FIGURES_DIR/lab0/graph_ids_only.svg` (ids only, 130 nodes)" in some
    unknown = lab0.graphs_text(nodes, lab0.graph_files(nodes, folder))  # re-rendered: who drew them is unknown
    assert "The graphs are rendered" not in unknown and "SVG drawings of the graphs exist" in unknown
    assert "No rendered SVG exists for ids+mask+labels." in some
    old = lab0.graphs_text(nodes, lab0.graph_files(nodes, folder), rendered_now=False)
    assert "that run did not draw the graphs" in old and "drawn earlier" in old


def test_lab0_topology_and_dropout_claims_follow_the_numbers():
    num = stored("lab0", "accuracy")["numbers"]
    t = copy.deepcopy(num["topology"])
    assert "no loss branch" in lab0.topology_text(t["drop_labels"], t["drop_mask"])
    t["drop_labels"]["removed"] = {"placeholder:labels": 1}
    assert "no loss branch" not in lab0.topology_text(t["drop_labels"], t["drop_mask"])
    t["drop_mask"]["removed"]["call_function:aten.arange.start"] = 1
    assert "padding term" not in lab0.topology_text(t["drop_labels"], t["drop_mask"])
    good = {"changes": ["dropout"], "after": 0, "seed_gap": 0.0, "eval_gap": 0.0}
    assert "computes the eval-mode model" in lab0.dropout_text(num["dropout"], good)
    bad = {**good, "eval_gap": 0.1}
    assert "does **not** yet behave" in lab0.dropout_text(num["dropout"], bad)
    p = doctored_lab0(dropout_removed=good, graph_meta={"nodes": 146, "by_op": {"output": 1}, "parameters": 10,
                                                        "parameter_bytes": 40, "first_shapes": [{"node": "x"}]},
                      linear_biases=True)
    text = lab0.render({"accuracy": p})
    assert "Not in this JSON" not in text and "equal the eval-mode model" in text
    assert "**146 nodes**" in text and "Every Linear kept its bias: True" in text
    assert "Parameter shapes" in text and "stored before the metadata table showed the activations" in text
    p["numbers"]["graph_meta"]["first_shapes"] = [{"node": "input_ids", "op": "input", "shape": "[2, 16]",
                                                   "dtype": "torch.int64"}]
    text = lab0.render({"accuracy": p})
    assert "Activation shapes and dtypes from the metadata pass's run on a dummy batch" in text
    assert "| input_ids | input | [2, 16] | torch.int64 |" in text


def test_lab0_metadata_table_shows_activations_not_parameters():
    from labkit import graph, models

    gm = graph.capture(models.load_model("minilm-l2", seed=0), ["input_ids", "attention_mask", "labels"])
    rows = graph.passes.activation_shapes(gm, graph.MetadataPass()(gm).info["shapes"])
    names = [r["node"] for r in rows]
    assert names[:3] == ["input_ids", "attention_mask", "labels"] and len(rows) <= 16
    assert not any(r["node"].endswith(("_weight", "_bias")) for r in rows)  # no parameter
    ops = [r["op"] for r in rows]
    assert any("embedding" in o for o in ops) and any("scaled_dot_product_attention" in o for o in ops)
    assert [r["shape"] for r in rows[:2]] == ["[2, 16]", "[2, 16]"]  # the dummy batch: 2 x 16 tokens
    assert [r["shape"] for r in rows if "embedding" in r["op"]][0] == "[2, 16, 384]"
    assert {r["shape"] for r in rows[-2:]} == {"[2, 2]", "[]"}  # what the graph returns: logits and the loss


# --- Lab 3 formats ------------------------------------------------------------------------------------

def frozen_formats():
    """Frozen copies of an earlier Lab 3 formats result (H200), so the wording tests below do not move
    whenever the figures are regenerated."""
    return {name: json.loads((DATA / f"h200_lab3_{name}.json").read_text()) for name in lab3_formats.NAMES}


@pytest.mark.parametrize("lab, start", [("lab0", "# Lab 0:"), ("lab3_formats", "# Lab 3 (part 1)")])
def test_render_tool_prints_without_measuring(lab, start):
    out = subprocess.run([sys.executable, "-m", "labkit.redraw", lab, "--answers", "--stdout"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(start) and "re-rendered" in out.stdout


@pytest.mark.parametrize("src", ["lab0_graphs_lora.py", "lab3_formats.py"])
def test_notebooks_only_call_the_prose(src):
    """Outside the exercise cells (the functions a student writes), a notebook defines no function and words
    no sentence of its own: its prose comes from the library."""
    from labkit.exercises import editions

    nb = editions.parse((ROOT / "notebooks" / "src" / src).read_text())
    tree = ast.parse("\n".join(c.source for c in nb.cells if c.cell_type == "code"
                               and editions.role(c) != "exercise"))
    assert not [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    says = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "say"]
    assert says and not [ast.unparse(n) for n in says
                         if any(isinstance(a, (ast.JoinedStr, ast.Constant, ast.BinOp)) for a in n.args)]


