"""Lab 1b: pruning, random against L1, weights and activations, local and global."""
from . import Notebook, Step
from .lab1_quantize import SETTINGS

RECORD = Notebook(
    "lab1_prune", "1b", "lab1", SETTINGS, results=("pruning",), figures=("pruning",), answers="prune_answers.md",
    steps=(Step("lab1_prune", 300, order=2, per_seed=True, min_slot=120),),
    seeded=("pruning",), sft=("pruning", "", "fp32"))
