"""Lab 2: architecture search with Optuna (random, grid, TPE), then compression-aware search."""
from . import Notebook, Search, Settings, Step
from ._common import FRACTION, POSITIVE, SEARCH_PARSERS, SEEDS, WIDTH, ranges

# The architecture space over real BertConfig fields (the setting `space` narrows it: ``restrict``); the
# Linear-or-Identity choices and the models are built in labkit.labs.lab2_space.
SPACE = {
    "num_hidden_layers": [2, 4, 8],
    "num_attention_heads": [2, 4, 8, 16],
    "hidden_size": [128, 192, 256, 384, 512],
    "intermediate_size": [512, 768, 1024, 1536, 2048],
}


def restrict(space: dict | None) -> dict:
    """The lab's space, or a narrower one (each given field a non-empty subset of the lab's values)."""
    if space is None:
        return dict(SPACE)
    if not isinstance(space, dict):
        raise TypeError(f"search space must be a dict of field -> list of choices (fields {list(SPACE)}) or "
                        f"None, got {space!r}")
    unknown = sorted(set(space) - set(SPACE))
    if unknown:
        raise KeyError(f"search space field(s) {unknown} unknown; allowed: {list(SPACE)}")
    for key, values in space.items():
        # a scalar (or a string, which iterates) would fail later, deep in Optuna or a worker
        if not isinstance(values, (list, tuple)):
            hint = f"; for one value give [{values!r}]" if values in SPACE[key] else ""
            raise TypeError(f"space[{key!r}] must be a non-empty list of choices from {SPACE[key]}, got "
                            f"{values!r}{hint}")
        bad = [v for v in values if v not in SPACE[key]]
        if not values or bad:
            raise ValueError(f"space[{key!r}] must be a non-empty subset of {SPACE[key]}, got {values}")
    return {**SPACE, **space}


def grid_space(space: dict | None = None) -> dict:
    """The finite grid for GridSampler: the four sizes (3 x 4 x 5 x 5 = 300 points), all Linear kept.

    Per-layer Identity choices depend on the depth, which a fixed grid cannot express; sampled over a
    grid they would also multiply the grid by 2^(4 * layers).
    """
    return {k: list(v) for k, v in restrict(space).items()}


# Models from random init (so a higher lr than fine-tuning); `trials` per sampler and seed (`seeds`: one study
# per sampler per seed), `compression_trials` per compression mode (first seed); compression = fixed point
# (frac = width // 2) + L1 pruning inside each trial. `workers`: trial processes ("auto": 8 per GPU, 1 on a
# CPU); `mps`: run them under a private CUDA MPS daemon ("on", "off" or "auto": on a GPU where the daemon's
# binary is); `report_only`: draw the stored studies (e.g. a GPU machine's) without running a trial.
# `qat_matmul`: the compressed model's Linear products under bf16 autocast (a GPU, or a CPU where `cpu_autocast`
# asks: labkit.training.precision): "bf16" (its 8-bit operands are
# bf16 values, so the same products in bf16 with fp32 accumulation; labkit.quant.fast) or "fp32" (the reference;
# on an H100 a 4 x 256 model's compressed evaluation batch took 9.8 ms of kernels against 4.7, a post-training step
# 10.5 against 7.4, accuracies within 7 of 25,000 reviews: benchmarks/search/task2_trial_profile.json). No effect
# on a CPU in fp32.
SETTINGS = Settings(
    "lab2",
    {
        # warmup: the fraction of a trial's steps over which its learning rate rises from 0 (train.train); smoke
        # warms up so CI runs that path
        "smoke": dict(train_size=64, test_size=64, max_length=32, lr=5e-4, warmup=0.1, trials=2, seeds=[0, 1],
                      compression_trials=2, post_epochs=0.5, post_lr=1e-4, quant_width=8, prune_sparsity=0.5,
                      qat_matmul="bf16", storage=None, workers="auto", mps="auto", report_only=False,
                      space={"num_hidden_layers": [2], "hidden_size": [128, 192], "intermediate_size": [512]}),
        # quick: a CPU approximation that runs the whole lab in about 15 minutes on 2 cores: a model from
        # random init needs several passes over a small subset to leave chance (2 layers x 128 reach about
        # 0.6-0.7 after 2 epochs of 2,000 reviews at 64 tokens, ~20 s there), the space is narrowed to the
        # smaller models, and 4 trials x 2 seeds per sampler cannot tell samplers apart (the full profile can)
        # workers=2: two single-thread trial processes; a 2 x 128 model's matmuls are too small for two
        # threads (a step: 77 ms on 2 threads, 132 ms on 1), so on 2 cores the lab ran 357 -> 322 s
        # warmup 0: quick searches 2-layer models only, which left chance without it (none of the full
        # profile's 84 two-layer trials ended at chance), and its committed results stay comparable
        "quick": dict(train_size=2000, test_size=500, max_length=64, lr=2e-3, warmup=0.0, epochs=2.0, trials=4,
                      seeds=[0, 1],
                      compression_trials=3, post_epochs=0.5, post_lr=1e-4, quant_width=8, prune_sparsity=0.5,
                      qat_matmul="bf16", storage=None, workers=2, mps="auto", report_only=False,
                      space={"num_hidden_layers": [2], "num_attention_heads": [2, 4], "hidden_size": [128, 192],
                             "intermediate_size": [512, 768]}),
        # full: the lab's settings (25k/25k, one epoch per trial) at 256 tokens; 3 seeds x 15 trials per
        # sampler and 12 per compression mode (20 and 20 took ~850 s of a one-H100 regeneration's 40 minutes)
        # mps "auto": a private CUDA MPS daemon where nvidia-cuda-mps-control exists (+47% trials/min, H100)
        # warmup 0.1: a post-LN BERT from random init at lr 5e-4 without warm-up left 17 of 44 four-layer and
        # 44 of 52 eight-layer trials at chance (figures/lab2/samplers.json); a tenth of the steps is BERT's
        # own recipe and Hugging Face's usual choice; with it most eight-layer trials still end at chance (the
        # answers' collapse reading gives the count per depth), so depth is not compared at a setting every
        # depth trains in
        "full": dict(max_length=256, lr=5e-4, warmup=0.1, trials=15, seeds=SEEDS["full"], compression_trials=12,
                     post_epochs=0.5, post_lr=1e-4, quant_width=8, prune_sparsity=0.5, qat_matmul="bf16", storage=None,
                     workers="auto", mps="auto", report_only=False, space=None),
    },
    ranges={**ranges(POSITIVE, "trials", "compression_trials", "post_epochs", "post_lr"),
            **ranges(FRACTION, "prune_sparsity", "warmup"), "quant_width": WIDTH},
    choices={"space": "labkit.records.lab2_search:restrict", "qat_matmul": "labkit.quant.fast:check_mode"},
    parsers=SEARCH_PARSERS)

RECORD = Notebook(
    "lab2_search", "2", "lab2", SETTINGS, results=("samplers", "compression_aware", "remeasured"),
    figures=("samplers", "compression_aware"), answers="answers.md",
    # Lab 2 resumes a nearly finished search (no SFT model to train): a short slot is worth taking
    steps=(Step("lab2_search", 600, order=9, search="lab2", seed_journal="figures/lab2/studies.journal.xz",
                min_slot=150),),
    # a trial process's GPU memory at its peak: up to 4.6 GiB seen on an H100 in full-profile runs
    search=Search("lab2", objective="labkit.labs.lab2_objectives:lab2_objective", run="labkit.labs.lab2:run_all",
                  worker_gib=5.0))
