"""What a regeneration changed in the verdicts: readings recomputed from two trees of stored results."""
import json
import shutil
import subprocess

from labkit.maintain import verdict_changes

from test_claims import FIGURES, _flip_lab5


def _tree(root, lab="lab5"):
    shutil.copytree(FIGURES / lab, root / "figures" / lab)
    return root


def test_a_flipped_reading_is_reported_and_equal_trees_report_none(tmp_path):
    old, new = _tree(tmp_path / "old"), _tree(tmp_path / "new")
    assert verdict_changes.changes(old, new, ["lab5_llm"])["lab5_llm"]["changed"] == []
    awq = new / "figures" / "lab5" / "awq.json"
    payload = json.loads(awq.read_text())
    _flip_lab5(payload["numbers"])
    awq.write_text(json.dumps(payload))
    found = verdict_changes.changes(old, new, ["lab5_llm"])["lab5_llm"]
    assert ("awq.int3.g64", "lower", "higher") in found["changed"] and found["readings"] > 0
    (new / "figures" / "lab5" / "awq.json").unlink()  # a result gone: its readings are reported gone
    gone = verdict_changes.changes(old, new, ["lab5_llm"])["lab5_llm"]["changed"]
    assert ("awq.int3.g64", "lower", None) in gone


def test_the_command_reads_a_commits_committed_figures(capsys):
    head = subprocess.run(["git", "-C", str(verdict_changes.ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert verdict_changes.main([head, "--notebooks", "lab5_llm"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("lab5_llm: ") and " readings, " in out
