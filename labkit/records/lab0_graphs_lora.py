"""Lab 0: BERT as an FX graph, graph passes, full SFT against LoRA on IMDb."""
from . import PROFILES, Notebook, Settings, Step
from ._common import FRACTION, POSITIVE, SEEDS, ranges

# control: also train the equal-training control (the SFT model fully fine-tuned for LoRA's extra epoch);
# quick leaves it out: on 2 CPU cores it adds ~3 minutes, past `make figures`' 30-minute budget (its
# answers say no control was trained)
SETTINGS = Settings(
    "lab0",
    {p: dict(lora_rank=6, lora_alpha=1.0, lora_dropout=0.5, lora_lr=1e-3, seeds=SEEDS[p], control=p != "quick")
     for p in PROFILES},
    ranges={**ranges(POSITIVE, "lora_rank", "lora_alpha", "lora_lr"), "lora_dropout": FRACTION})

RECORD = Notebook(
    "lab0_graphs_lora", "0", "lab0", SETTINGS, results=("accuracy",), figures=("accuracy",), answers="answers.md",
    steps=(Step("lab0_graphs_lora", 150, order=0, per_seed=True, min_slot=120),),
    seeded=("accuracy",), sft=("accuracy", "sft", "accuracy"))
