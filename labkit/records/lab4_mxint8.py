"""Lab 4 (part 3): the MXINT8 format, its dequantization kernel, a packed quantized Linear and its memory."""
from . import PROFILES, Notebook, Settings, Step
from ._common import POSITIVE, SEEDS, ranges

# Keeps the IMDb keys: the accuracy check converts the cached SFT model.
# bench_*: the notebook's own GPU sweep, every size of `python -m labkit.kernels.bandwidth` (which also sweeps
# the group sizes) so that its figure shows them all; memory_*: the inference batch of the memory measurement;
# big_*: a DeBERTa-v2-xlarge-sized BERT (hidden 1536, 24 layers; random weights) for the memory table.
SETTINGS = Settings(
    "lab4_mxint8",
    {p: dict(group_size=32, table_exponent=127,
             bench_sizes=[1 << 20] if p == "smoke" else [1 << 20, 1 << 22, 1 << 24, 1 << 26, 8192 * 28672],
             bench_groups=[32], bench_compile=p != "smoke", bench_reps=5 if p == "smoke" else 30,
             memory_batch=8, memory_seq=128,
             big_hidden=1536, big_layers=24, big_heads=24, big_intermediate=6144, seeds=SEEDS[p])
     for p in PROFILES},
    ranges={**ranges(POSITIVE, "group_size", "bench_sizes", "bench_groups", "bench_reps", "memory_batch",
                     "memory_seq", "big_hidden", "big_layers", "big_heads", "big_intermediate"),
            "table_exponent": (0, True, 255, True)})  # a uint8 exponent field

RECORD = Notebook(
    "lab4_mxint8", "4b", "lab4", SETTINGS,
    results=("mxint8_format", "mxint8_tiling", "mxint8_bandwidth_plot", "mxint8_memory", "mxint8_accuracy"),
    figures=("mxint8_tiling", "mxint8_memory", "mxint8_bandwidth_plot", "mxint8_accuracy"),
    answers="mxint8_answers.md",
    # the notebook, then (with Lab 4's other timings) the kernel benchmarks whose JSON it and its answers read
    steps=(Step("lab4_mxint8", 120, order=3, timed=True, per_seed=True, min_slot=100),
           Step("mxint8_bandwidth", 80, order=7, timed=True, script=("-m", "labkit.kernels.bandwidth")),
           Step("mxint8_variants", 90, order=8, timed=True,
                script=("-m", "labkit.kernels.variants", "--out", "figures/lab4/mxint8_variants.json"))),
    seeded=("mxint8_accuracy",), sft=("mxint8_accuracy", "fp32", "accuracy"),
    claims=("labkit.maintain.claims:bit_exact_benchmark",), from_full=("mxint8_memory",))
