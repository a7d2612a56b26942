"""Lab 3's search studies are named by the settings they depend on: the formats notebook's training seeds are
not among them, so the studies whose space did not change keep their committed names, and those whose space
or queued baselines changed get names no committed study holds (Optuna refuses other categorical choices for
a stored parameter)."""
import lzma
import re
from pathlib import Path

from labkit.profiles import lab_settings
from labkit.labs import lab3

JOURNAL = Path(__file__).resolve().parent.parent / "figures" / "lab3" / "studies.journal.xz"
LAYERS = ["bert.pooler.dense", "classifier"]


def test_the_search_tag_ignores_the_training_seeds_and_names_the_committed_studies():
    s = lab_settings("lab3", "full")
    assert lab3.study_tag(s) == lab3.study_tag({**s, "seeds": [7]})
    assert "seeds" not in lab3.study_settings(s)
    names = set(re.findall(r'"study_name":"(lab3-full-[^"]+)"', lzma.decompress(JOURNAL.read_bytes()).decode()))
    plans = lab3.phase1_plans(s, LAYERS)
    assert f"lab3-full-int-{lab3.study_tag(s)}" in names  # the committed Task 1 study: the old space
    for role in ("pareto", "uniform", "cost:0.01", "format:mxint8"):  # unchanged: resumed by name
        assert plans[role].name in names, role
    for role in ("integer", "all", "format:block_fp"):  # integer gains fp32; each queues its baselines
        assert plans[role].name not in names, role
