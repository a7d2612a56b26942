"""Lab 5: a small LLM (SmolLM2-135M-Instruct) quantized group-wise: perplexity, PTQ sweep, AWQ, KV-cache decoding."""
from . import Notebook, Settings, Step
from ._common import NON_NEGATIVE, POSITIVE, ranges

# No IMDb training keys: the model is the shipped LLM (labkit.models.load_llm); IMDb test reviews are its text.
# blocks x block_len: evaluation token blocks (test reviews, one block per review); calib_blocks: AWQ's
# calibration blocks (train reviews). int_widths x group_sizes: the integer RTN sweep (symmetric, fp16 scale per
# group); group sizes must divide every quantized Linear's in_features (576 and 1536 in SmolLM2-135M: 32, 64, 96,
# 192; 128 does not divide 576). other_formats: other labkit formats at other_width, groups of other_group.
# awq_widths at awq_group: AWQ against RTN, alphas searched per layer on awq_samples calibration tokens.
# sens_kinds: the sensitivity sweep quantizes one kind of projection at a time (sens_width, groups of awq_group)
# and the most harmful kind is remeasured on sens_blocks fresh test blocks (seed + 1), then kept one bit wider.
# decode_tokens new tokens after a decode_prompt-token prompt, decode_repeats timed calls per loop. speed_*: on a
# CUDA device, labkit.llm.decode_speed's sweep (random-init models of SmolLM2's shapes; not run on a CPU).
# smoke: CI's 2 cores, well under 2 minutes. quick: 2 CPU cores, about 12 minutes. full: an H200.
KINDS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SHAPES = ["smollm2-135m", "smollm2-1.7b"]
# full: quick's settings on more and longer blocks, more calibration and more decode calls
QUICK = dict(blocks=16, block_len=256, batch_size=4, seed=0, int_widths=[8, 4, 3, 2], group_sizes=[32, 64, 192],
             other_formats=["minifloat_ieee", "block_fp"], other_width=4, other_group=32, awq_widths=[4, 3],
             awq_group=64, alphas=[0.0, 0.25, 0.5, 0.75, 1.0], calib_blocks=8, awq_samples=512, sens_width=3,
             sens_kinds=KINDS, sens_blocks=16, decode_tokens=32, decode_prompt=64, decode_repeats=3,
             speed_shapes=SHAPES, speed_batches=[1, 4, 16, 64], speed_tokens=32, speed_prompt=16, speed_repeats=2)
SETTINGS = Settings(
    "lab5",
    {
        "smoke": dict(blocks=4, block_len=64, batch_size=4, seed=0, int_widths=[4], group_sizes=[32],
                      other_formats=[], other_width=4, other_group=32, awq_widths=[4], awq_group=64,
                      alphas=[0.0, 0.5, 1.0], calib_blocks=2, awq_samples=64, sens_width=3,
                      sens_kinds=["k_proj", "down_proj"], sens_blocks=4, decode_tokens=8, decode_prompt=16,
                      decode_repeats=1,
                      speed_shapes=["smollm2-135m"], speed_batches=[1], speed_tokens=16, speed_prompt=16,
                      speed_repeats=1),
        "quick": QUICK,
        "full": {**QUICK, "blocks": 64, "block_len": 512, "batch_size": 8, "calib_blocks": 32, "sens_blocks": 64,
                 "decode_repeats": 5},
    },
    imdb=False,
    ranges={**ranges(POSITIVE, "blocks", "batch_size", "int_widths", "group_sizes", "other_width", "other_group",
                     "awq_widths", "awq_group", "calib_blocks", "awq_samples", "sens_width", "sens_blocks",
                     "decode_tokens", "decode_prompt", "decode_repeats", "speed_batches", "speed_tokens",
                     "speed_prompt", "speed_repeats"),
            "block_len": (1, False, None, False), "seed": NON_NEGATIVE, "alphas": (0, True, 1, True)})

RECORD = Notebook(
    "lab5_llm", "5", "lab5", SETTINGS, results=("perplexity", "awq", "sensitivity", "decode", "decode_speed"),
    figures=("perplexity", "decode_speed"), answers="answers.md",
    steps=(Step("lab5_llm", 300, order=10, timed=True),), from_full=("decode_speed",))
