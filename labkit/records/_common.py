"""What the records share: the IMDb labs' common settings, the training seeds, and range notation."""
from __future__ import annotations

# (low, low included, high, high included); None: unbounded
POSITIVE = (0, False, None, False)
NON_NEGATIVE = (0, True, None, False)
FRACTION = (0, True, 1, False)
# fixed-point widths: the integer format's own range (quant.formats.integer.MAX_WIDTH; a test holds them equal)
WIDTH = (1, True, 64, True)


def ranges(bounds: tuple, *keys: str) -> dict:
    return dict.fromkeys(keys, bounds)


# Shared by the IMDb labs. full = the course's settings (full 25k/25k, 512 tokens, 1 epoch, lr 5e-5)
# except batch 32 instead of 8, which keeps a GPU busy; stated in each notebook.
IMDB = {
    # cpu_autocast (labkit.training.precision): smoke keeps fp32 on a CPU, the reference CI's tests compare with
    "smoke": dict(model="minilm-l2", train_size=64, test_size=64, max_length=64, batch_size=16,
                  epochs=1.0, lr=3e-4, seed=0, device="auto", cpu_autocast="off"),
    # quick: 125 steps on 2 CPU cores in about 2 minutes; lr 3e-4 because 5e-5 barely moves in 125 steps.
    # cpu_autocast "auto": bf16 autocast where the CPU multiplies bf16 natively, as the full profile does on a GPU
    # (a MiniLM-L2 step 0.29 s against 0.50 s in fp32 on 2 AVX512-BF16 cores)
    "quick": dict(model="minilm-l2", train_size=4000, test_size=1000, max_length=128, batch_size=32,
                  epochs=1.0, lr=3e-4, seed=0, device="auto", cpu_autocast="auto"),
    "full": dict(model="minilm-l2", train_size=None, test_size=None, max_length=512, batch_size=32,
                 eval_batch_size=256,  # no gradients: 8x the training batch fills a GPU with fewer launches
                 epochs=1.0, lr=5e-5, seed=0, device="auto"),
}
IMDB_RANGES = {**ranges(POSITIVE, "train_size", "test_size", "max_length", "batch_size", "eval_batch_size",
                        "epochs", "lr"),
               **ranges(NON_NEGATIVE, "seed", "seeds")}
IMDB_CHOICES = {"model": "labkit.models:check_name", "device": "labkit.perf.timing:check_device",
                "cpu_autocast": "labkit.training.precision:check_cpu_autocast"}

# Training seeds of the labs whose verdicts compare trained models (Lab 0, Lab 1, Lab 3's formats, Lab 4's
# MXINT8 accuracy): one SFT model per seed, and every later training with that seed. `seed` stays the data
# seed (which reviews smoke and quick use), so every seed's models are measured on the same test reviews.
# quick keeps one seed: three would break its 30-minute `make figures` budget on 2 CPU cores (its answers
# say so); smoke runs two so CI exercises the per-seed path.
SEEDS = {"smoke": [0, 1], "quick": [0], "full": [0, 1, 2]}

# the search labs' settings that say how trials run: workers "auto" or a count
SEARCH_PARSERS = {"workers": "labkit.search.run:normalise_workers"}
