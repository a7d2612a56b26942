"""Lab 1a: fixed-point quantization of every Linear, PTQ against QAT over widths."""
from . import Notebook, Settings, Step
from ._common import FRACTION, POSITIVE, SEEDS, WIDTH, ranges

# Lab 1's settings, shared by both notebooks (one SFT model per seed serves them): fixed-point widths (frac width
# = width // 2) and pruning sparsities; each point starts from the SFT model and fine-tunes for *_epochs at
# finetune_lr (as does an uncompressed fp32 control). prune_scope: the main sweep's weight scope;
# global_sparsities: where L1 also runs with global scope.
SETTINGS = Settings(
    "lab1",
    {
        "smoke": dict(widths=[4, 8, 16], sparsities=[0.3, 0.7], qat_epochs=0.5, prune_epochs=0.5,
                      finetune_lr=1e-4, prune_scope="local", global_sparsities=[0.7], seeds=SEEDS["smoke"]),
        "quick": dict(widths=[4, 6, 8, 12, 16, 32], sparsities=[0.1, 0.3, 0.5, 0.7, 0.9], test_size=500,
                      qat_epochs=0.25, prune_epochs=0.25, finetune_lr=1e-4, prune_scope="local",
                      global_sparsities=[0.5, 0.9], seeds=SEEDS["quick"]),
        # full: a quarter epoch of QAT / post-pruning training per point (the fp32 control gets the same); the
        # sheet trains 1 epoch (QAT) and 5 (pruning). 7 widths (denser where PTQ and QAT part), 5 sparsities per
        # curve and a quarter epoch keep three training seeds of both notebooks inside a from-scratch
        # regeneration of every lab on one H100 in 40 minutes (README); at half an epoch the QAT notebook took
        # 289 s on an H200 (notebooks/executed/full/regen_state.json's history)
        "full": dict(widths=[4, 6, 8, 12, 16, 24, 32], sparsities=[0.1, 0.3, 0.5, 0.7, 0.9], qat_epochs=0.25,
                     prune_epochs=0.25, finetune_lr=5e-5, prune_scope="local",
                     global_sparsities=[0.1, 0.3, 0.5, 0.7, 0.9], seeds=SEEDS["full"]),
    },
    ranges={**ranges(POSITIVE, "qat_epochs", "prune_epochs", "finetune_lr"), "widths": WIDTH,
            **ranges(FRACTION, "sparsities", "global_sparsities")},
    choices={"prune_scope": "labkit.prune:check_scope"})

RECORD = Notebook(
    "lab1_quantize", "1a", "lab1", SETTINGS, results=("quantization",), figures=("quantization",),
    answers="quantize_answers.md", steps=(Step("lab1_quantize", 240, order=1, per_seed=True, min_slot=120),),
    seeded=("quantization",), sft=("quantization", "", "fp32"))
