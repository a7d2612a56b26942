"""Lab 4 (parts 1-2): torch.compile on ResNet-18, naive against fused attention under torch.profiler."""
from . import Notebook, Settings, Step
from ._common import NON_NEGATIVE, POSITIVE, ranges

_COMPILE = "labkit.perf.compile_study"
# No IMDb: none of the common keys. A value may be {"cpu": ..., "cuda": ...} (per measured device).
# devices "auto": the GPU when there is one, else the CPU; the other device's stored full-profile
# results are shown beside. compile_variants: variant -> states (module mode + grad mode) timed;
# small_variant (max-autotune) gets its own smaller size and budget (small_*), with an eager baseline.
# full on CUDA = the sheet: ResNet-18, batch 128 of 224x224; SDPA bf16, batch 8, 16 heads, head dim 64,
# seq 512..8192. full on CPU keeps batch 128 (about 5 s a call on 2 cores) but fp32 SDPA to seq 2048.
SETTINGS = Settings(
    "lab4_perf",
    {
        "smoke": dict(
            devices="auto", seed=0, threads=1,  # 1 thread: robust to a busy CI machine
            # one worker: eager and aot_eager (capture without code generation: seconds, where Inductor
            # takes a minute on 2 cores), through the small_* job that carries its own eager baseline
            compile_variants={}, compile_batch=2, compile_image=32, compile_repeats=3, compile_warmup=1,
            compile_timeout_s=120, compile_cold_cache=True, small_variant="aot_eager",
            small_states=["train+grad", "eval+no_grad"], small_batch=2, small_image=32, small_timeout_s=120,
            sdpa_batch=1, sdpa_heads=2, sdpa_head_dim=16, sdpa_dtype={"cpu": "float32", "cuda": "bfloat16"},
            sdpa_seqs=[32, 64, 128], sdpa_profile_seq=64, sdpa_repeats=3, sdpa_warmup=1, sdpa_causal=False),
        "quick": dict(
            devices="auto", seed=0, threads=None,  # None: torch's default (all cores)
            compile_variants={"eager": ["train+grad", "train+no_grad", "eval+grad", "eval+no_grad"],
                              "inductor": ["train+grad", "eval+no_grad"],
                              "reduce-overhead": ["eval+no_grad"], "cudagraphs": ["eval+no_grad"]},
            compile_batch=16, compile_image=224, compile_repeats=5, compile_warmup=2, compile_timeout_s=400,
            compile_cold_cache=True, small_variant="max-autotune", small_states=["eval+no_grad"], small_batch=4,
            small_image=224, small_timeout_s=240,
            sdpa_batch=4, sdpa_heads=8, sdpa_head_dim=64, sdpa_dtype={"cpu": "float32", "cuda": "bfloat16"},
            sdpa_seqs=[128, 256, 512, 1024], sdpa_profile_seq=512, sdpa_repeats=5, sdpa_warmup=2,
            sdpa_causal=False),
        "full": dict(
            devices="auto", seed=0, threads=None,  # None: torch's default (all cores)
            compile_variants={"eager": ["train+grad", "train+no_grad", "eval+grad", "eval+no_grad"],
                              "inductor": ["train+grad", "eval+no_grad"],
                              "reduce-overhead": ["eval+no_grad"], "cudagraphs": ["eval+no_grad"]},
            compile_batch=128, compile_image=224, compile_repeats={"cpu": 5, "cuda": 20},
            compile_warmup={"cpu": 1, "cuda": 3}, compile_timeout_s={"cpu": 900, "cuda": 180},
            compile_cold_cache=True, small_variant="max-autotune", small_states=["eval+no_grad"],
            small_batch={"cpu": 8, "cuda": 32}, small_image=224, small_timeout_s={"cpu": 240, "cuda": 50},
            sdpa_batch=8, sdpa_heads=16, sdpa_head_dim=64, sdpa_dtype={"cpu": "float32", "cuda": "bfloat16"},
            sdpa_seqs={"cpu": [256, 512, 1024, 2048], "cuda": [512, 1024, 2048, 4096, 8192]},
            sdpa_profile_seq={"cpu": 1024, "cuda": 4096}, sdpa_repeats={"cpu": 5, "cuda": 20},
            sdpa_warmup={"cpu": 2, "cuda": 3}, sdpa_causal=False),
    },
    imdb=False,
    ranges={**ranges(POSITIVE, "threads", "compile_batch", "compile_image", "compile_repeats", "compile_timeout_s",
                     "small_batch", "small_image", "small_timeout_s", "sdpa_batch", "sdpa_heads", "sdpa_head_dim",
                     "sdpa_seqs", "sdpa_profile_seq", "sdpa_repeats"),
            **ranges(NON_NEGATIVE, "seed", "compile_warmup", "sdpa_warmup")},
    choices={"small_variant": f"{_COMPILE}:check_variant", "small_states": f"{_COMPILE}:check_states",
             "compile_variants": f"{_COMPILE}:check_variants", "sdpa_dtype": "labkit.perf.sdpa:check_dtype"},
    parsers={"devices": "labkit.perf.timing:parse_devices"})

RECORD = Notebook(
    "lab4_perf", "4a", "lab4", SETTINGS, results=("compile_cpu", "compile_cuda", "sdpa_cpu", "sdpa_cuda"),
    figures=("compile_cpu", "compile_cuda", "sdpa_cpu", "sdpa_cuda"), answers="perf_answers.md",
    steps=(Step("lab4_perf", 230, order=6, timed=True),),
    from_full=("compile_cpu", "compile_cuda", "sdpa_cpu", "sdpa_cuda"))
