"""Lab 3's search studies are named by the settings they depend on: the formats notebook's training seeds are
not among them, so every study of the committed full run is found again by name (a resumed or report-only run
reads it); Task 1's study, whose space gained the fp32 choice, has a name of its own."""
import lzma
import re
from pathlib import Path

from labkit.run.profiles import lab_settings
from labkit.labs import lab3

JOURNAL = Path(__file__).resolve().parents[2] / "figures" / "lab3" / "studies.journal.xz"
LAYERS = ["bert.pooler.dense", "classifier"]


def test_the_search_tag_ignores_the_training_seeds_and_names_the_committed_studies():
    s = lab_settings("lab3_search", "full")
    assert lab3.study_tag(s) == lab3.study_tag({**s, "seeds": [7]})
    assert "seeds" not in lab3.study_settings(s)
    names = set(re.findall(r'"study_name":"(lab3-full-[^"]+)"', lzma.decompress(JOURNAL.read_bytes()).decode()))
    plans = lab3.phase1_plans(s, LAYERS)
    for role, plan in plans.items():  # the committed full run made every phase-1 study under today's names
        assert plan.name in names, role
    # Task 1 gained the fp32 choice: its study is not the old space's (Optuna refuses other choices for a name)
    assert plans["integer"].name != f"lab3-full-int-{lab3.study_tag(s)}"
