"""Lab 3's search studies are named by the settings they depend on: the formats notebook's training seeds are
not among them, so the committed studies keep their names."""
import lzma
import re
from pathlib import Path

from labkit.profiles import lab_settings
from labkit.labs import lab3

JOURNAL = Path(__file__).resolve().parent.parent / "figures" / "lab3" / "studies.journal.xz"


def test_the_search_tag_ignores_the_training_seeds_and_names_the_committed_studies():
    s = lab_settings("lab3", "full")
    assert lab3.study_tag(s) == lab3.study_tag({**s, "seeds": [7]})
    names = set(re.findall(r'"study_name":"(lab3-full-[^"]+)"', lzma.decompress(JOURNAL.read_bytes()).decode()))
    assert f"lab3-full-int-{lab3.study_tag(s)}" in names
    assert "seeds" not in lab3.study_settings(s)
