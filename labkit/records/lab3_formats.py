"""Lab 3 (part 1): every Linear number format (integer, minifloat, log, block, binary) at one width."""
from . import Notebook, Settings, Step
from ._common import NON_NEGATIVE, POSITIVE, SEARCH_PARSERS, SEEDS, ranges

# Lab 3's settings, shared by both notebooks (one SFT model per seed serves them).
# Formats: every registered Linear format at format_width bits (fixed-width formats at their own), PTQ then
# qat_epochs of QAT at qat_lr from the SFT model; weight SNR swept over snr_widths.
# full: 256 tokens and a quarter epoch of QAT per format keep 11 formats x (2 evals of 25k + QAT) at 181 s a
# training seed on an H100 (SFT included; notebooks/executed/full/regen_state.json); the SFT model is trained at
# 256 tokens too, so the fp32 baseline matches. quick: ~8 min measured on 2 busy CPU cores.
# Search (labkit.labs.lab3): trials of the per-layer integer search and of the all-formats search
# (search_trials), of each per-format search (format_trials), each beyond its queued baselines (Task 1: 10,
# the all-formats search: 11, a searched format: 1), of each cost search (one per lambda, in
# accuracy per average weight bit), of the multi-objective search (pareto_trials); front_qat front
# configurations get qat_epochs of QAT. Trials are PTQ evaluations (full: 25k reviews, seconds on a GPU).
# quick: one worker (two single-thread workers were measured slower on 2 cores: 388 s against 370 s); its trial
# counts keep `make figures` on a fresh clone within 35 minutes on 2 cores (docs/usage.md).
# full: 15 trials a format and 60 multi-objective (25 and 100 took 352 s on an H100) keep every lab's
# from-scratch regeneration on one H100 near 40 minutes.
SETTINGS = Settings(
    "lab3",
    {
        "smoke": dict(test_size=32, format_width=8, qat_epochs=0.5, qat_lr=3e-4, snr_widths=[8],
                      search_trials=3, format_trials=2, cost_trials=2, lambdas=[0.01], pareto_trials=4,
                      front_qat=1, search_seed=0, storage=None, workers="auto", mps=False, report_only=False,
                      seeds=SEEDS["smoke"]),
        "quick": dict(test_size=200, format_width=8, qat_epochs=0.1, qat_lr=1e-4, snr_widths=[2, 4, 6, 8],
                      search_trials=12, format_trials=4, cost_trials=8, lambdas=[0.002, 0.01], pareto_trials=16,
                      front_qat=2, search_seed=0, storage=None, workers="auto", mps=False, report_only=False,
                      seeds=SEEDS["quick"]),
        "full": dict(max_length=256, format_width=8, qat_epochs=0.25, qat_lr=5e-5,
                     snr_widths=[2, 3, 4, 5, 6, 7, 8], search_trials=40, format_trials=15, cost_trials=30,
                     lambdas=[0.001, 0.003, 0.01, 0.03], pareto_trials=60, front_qat=4, search_seed=0,
                     storage=None, workers="auto", mps=False, report_only=False, seeds=SEEDS["full"]),
    },
    ranges={**ranges(POSITIVE, "format_width", "qat_epochs", "qat_lr", "snr_widths", "search_trials",
                     "format_trials", "cost_trials", "pareto_trials", "front_qat"),
            **ranges(NON_NEGATIVE, "search_seed", "lambdas")},
    parsers=SEARCH_PARSERS)

def snr_widths(settings: dict) -> list[int]:
    """The widths the weight-SNR study sweeps: ``snr_widths`` and the study's own ``format_width``."""
    return sorted(set(settings["snr_widths"]) | {settings["format_width"]})


RECORD = Notebook(
    "lab3_formats", "3a", "lab3", SETTINGS, results=("formats", "weight_snr"), figures=("formats", "weight_snr"),
    answers="formats_answers.md", steps=(Step("lab3_formats", 450, order=4, per_seed=True, min_slot=180),),
    seeded=("formats",))
