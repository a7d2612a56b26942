"""Run profiles: ``smoke`` (CI, seconds), ``quick`` (CPU default, minutes), ``full`` (the labs' settings, GPU).

A notebook's ``parameters`` cell names a profile and optional overrides; ``lab_settings`` resolves them
into one flat, printed, JSON-able mapping so every figure records exactly what produced it.
"""
from __future__ import annotations

import copy
import os

import torch

from . import overrides as check

PROFILES = ("smoke", "quick", "full")

# Shared by the IMDb labs. full = the course's settings (full 25k/25k, 512 tokens, 1 epoch, lr 5e-5)
# except batch 32 instead of 8, which keeps a GPU busy; stated in each notebook.
_COMMON = {
    "smoke": dict(model="minilm-l2", train_size=64, test_size=64, max_length=64, batch_size=16,
                  epochs=1.0, lr=3e-4, seed=0, device="auto"),
    # quick: 125 steps on 2 CPU cores in about 2 minutes; lr 3e-4 because 5e-5 barely moves in 125 steps
    "quick": dict(model="minilm-l2", train_size=4000, test_size=1000, max_length=128, batch_size=32,
                  epochs=1.0, lr=3e-4, seed=0, device="auto"),
    "full": dict(model="minilm-l2", train_size=None, test_size=None, max_length=512, batch_size=32,
                 eval_batch_size=256,  # no gradients: 8x the training batch fills a GPU with fewer launches
                 epochs=1.0, lr=5e-5, seed=0, device="auto"),
}

# Training seeds of the labs whose verdicts compare trained models (Lab 0, Lab 1, Lab 3's formats, Lab 4's
# MXINT8 accuracy): one SFT model per seed, and every later training with that seed. `seed` stays the data
# seed (which reviews smoke and quick use), so every seed's models are measured on the same test reviews.
# quick keeps one seed: three would break its 30-minute `make figures` budget on 2 CPU cores (its answers
# say so); smoke runs two so CI exercises the per-seed path.
SEEDS = {"smoke": [0, 1], "quick": [0], "full": [0, 1, 2]}

# Per-lab additions; a lab may override a common key too.
_LABS: dict[str, dict[str, dict]] = {
    # control: also train the equal-training control (the SFT model fully fine-tuned for LoRA's extra epoch);
    # quick leaves it out: on 2 CPU cores it adds ~3 minutes, past `make figures`' 30-minute budget (its
    # answers say no control was trained)
    "lab0": {
        p: dict(lora_rank=6, lora_alpha=1.0, lora_dropout=0.5, lora_lr=1e-3, seeds=SEEDS[p], control=p != "quick")
        for p in ("smoke", "quick", "full")
    },
    # Lab 1: fixed-point widths (frac width = width // 2) and pruning sparsities; each point starts from
    # the SFT model and fine-tunes for *_epochs at finetune_lr (as does an uncompressed fp32 control).
    # prune_scope: the main sweep's weight scope; global_sparsities: where L1 also runs with global scope.
    "lab1": {
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
    # Lab 2: models from random init (so a higher lr than fine-tuning); `trials` per sampler and seed
    # (`seeds`: one study per sampler per seed), `compression_trials` per compression mode (first seed);
    # compression = fixed point (frac = width // 2) + L1 pruning inside each trial. `workers`: trial
    # processes ("auto": 8 per GPU, 1 on a CPU); `mps`: run them under a private CUDA MPS daemon ("on", "off" or
    # "auto": on a GPU where the daemon's binary is); `report_only`:
    # draw the stored studies (e.g. a GPU machine's) without running a trial.
    "lab2": {
        # warmup: the fraction of a trial's steps over which its learning rate rises from 0 (train.train); smoke
        # warms up so CI runs that path
        "smoke": dict(train_size=64, test_size=64, max_length=32, lr=5e-4, warmup=0.1, trials=2, seeds=[0, 1],
                      compression_trials=2, post_epochs=0.5, post_lr=1e-4, quant_width=8, prune_sparsity=0.5,
                      storage=None, workers="auto", mps="auto", report_only=False,
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
                      storage=None, workers=2, mps="auto", report_only=False,
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
        "full": dict(max_length=256, lr=5e-4, warmup=0.1, trials=15, seeds=[0, 1, 2], compression_trials=12, post_epochs=0.5,
                     post_lr=1e-4, quant_width=8, prune_sparsity=0.5, storage=None, workers="auto", mps="auto",
                     report_only=False, space=None),
    },
    # Lab 3 (formats): every registered Linear format at format_width bits (fixed-width formats at their
    # own), PTQ then qat_epochs of QAT at qat_lr from the SFT model; weight SNR swept over snr_widths.
    # full: 256 tokens and a quarter epoch of QAT per format keep 11 formats x (2 evals of 25k + QAT) at 181 s a
    # training seed on an H100 (SFT included; notebooks/executed/full/regen_state.json); the SFT model is trained at
    # 256 tokens too, so the fp32 baseline matches. quick: ~8 min measured on 2 busy CPU cores.
    # Lab 3 search (labkit.labs.lab3): trials of the per-layer integer search and of the all-formats search
    # (search_trials), of each per-format search (format_trials), each beyond its queued baselines (Task 1: 10,
    # the all-formats search: 11, a searched format: 1), of each cost search (one per lambda, in
    # accuracy per average weight bit), of the multi-objective search (pareto_trials); front_qat front
    # configurations get qat_epochs of QAT. Trials are PTQ evaluations (full: 25k reviews, seconds on a GPU).
    # quick: one worker (two single-thread workers were measured slower on 2 cores: 388 s against 370 s).
    # full: 15 trials a format and 60 multi-objective (25 and 100 took 352 s on an H100) keep every lab's
    # from-scratch regeneration on one H100 near 40 minutes.
    "lab3": {
        "smoke": dict(test_size=32, format_width=8, qat_epochs=0.5, qat_lr=3e-4, snr_widths=[8],
                      search_trials=3, format_trials=2, cost_trials=2, lambdas=[0.01], pareto_trials=4,
                      front_qat=1, search_seed=0, storage=None, workers="auto", mps=False, report_only=False,
                      seeds=SEEDS["smoke"]),
        "quick": dict(test_size=200, format_width=8, qat_epochs=0.1, qat_lr=1e-4, snr_widths=[2, 4, 6, 8],
                      search_trials=12, format_trials=6, cost_trials=10, lambdas=[0.002, 0.01], pareto_trials=24,
                      front_qat=2, search_seed=0, storage=None, workers="auto", mps=False, report_only=False,
                      seeds=SEEDS["quick"]),
        "full": dict(max_length=256, format_width=8, qat_epochs=0.25, qat_lr=5e-5,
                     snr_widths=[2, 3, 4, 5, 6, 7, 8], search_trials=40, format_trials=15, cost_trials=30,
                     lambdas=[0.001, 0.003, 0.01, 0.03], pareto_trials=60, front_qat=4, search_seed=0,
                     storage=None, workers="auto", mps=False, report_only=False, seeds=SEEDS["full"]),
    },
    # Labs that do not train on IMDb set "imdb": False and get none of the common keys.
    # Lab 4 parts 1-2 (labkit.perf). A value may be {"cpu": ..., "cuda": ...} (per measured device).
    # devices "auto": the GPU when there is one, else the CPU; the other device's stored full-profile
    # results are shown beside. compile_variants: variant -> states (module mode + grad mode) timed;
    # small_variant (max-autotune) gets its own smaller size and budget (small_*), with an eager baseline.
    # full on CUDA = the sheet: ResNet-18, batch 128 of 224x224; SDPA bf16, batch 8, 16 heads, head dim 64,
    # seq 512..8192. full on CPU keeps batch 128 (about 5 s a call on 2 cores) but fp32 SDPA to seq 2048.
    "lab4_perf": {
        "smoke": dict(
            imdb=False, devices="auto", seed=0, threads=1,  # 1 thread: robust to a busy CI machine
            # one worker: eager and aot_eager (capture without code generation: seconds, where Inductor
            # takes a minute on 2 cores), through the small_* job that carries its own eager baseline
            compile_variants={}, compile_batch=2, compile_image=32, compile_repeats=3, compile_warmup=1,
            compile_timeout_s=120, compile_cold_cache=True, small_variant="aot_eager",
            small_states=["train+grad", "eval+no_grad"], small_batch=2, small_image=32, small_timeout_s=120,
            sdpa_batch=1, sdpa_heads=2, sdpa_head_dim=16, sdpa_dtype={"cpu": "float32", "cuda": "bfloat16"},
            sdpa_seqs=[32, 64, 128], sdpa_profile_seq=64, sdpa_repeats=3, sdpa_warmup=1, sdpa_causal=False),
        "quick": dict(
            imdb=False, devices="auto", seed=0, threads=None,  # None: torch's default (all cores)
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
            imdb=False, devices="auto", seed=0, threads=None,  # None: torch's default (all cores)
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
    # MXINT8 (Lab 4 part 3). Keeps the IMDb keys: the accuracy check converts the cached SFT model.
    # bench_*: the notebook's own GPU sweep, every size of `python -m labkit.kernels.bandwidth` (which also sweeps
    # the group sizes) so that its figure shows them all;
    # memory_*: the inference batch of the memory measurement; big_*: a DeBERTa-v2-xlarge-sized BERT
    # (hidden 1536, 24 layers; random weights) for the memory table.
    "lab4_mxint8": {
        p: dict(group_size=32, table_exponent=127,
                bench_sizes=[1 << 20] if p == "smoke" else [1 << 20, 1 << 22, 1 << 24, 1 << 26, 8192 * 28672],
                bench_groups=[32], bench_compile=p != "smoke", bench_reps=5 if p == "smoke" else 30,
                memory_batch=8, memory_seq=128,
                big_hidden=1536, big_layers=24, big_heads=24, big_intermediate=6144, seeds=SEEDS[p])
        for p in PROFILES
    },
}


def resolve_profile(profile: str) -> str:
    """``auto`` means ``$LABKIT_PROFILE`` when set (``labkit lab --profile``), else ``full`` on a CUDA machine
    and ``quick`` elsewhere."""
    if profile == "auto":
        chosen = os.environ.get("LABKIT_PROFILE", "auto") or "auto"
        if chosen not in ("auto", *PROFILES):
            raise ValueError(f"LABKIT_PROFILE={chosen!r}: allowed values are 'auto', "
                             f"{', '.join(map(repr, PROFILES))}")
        if chosen != "auto":
            return chosen
        return "full" if torch.cuda.is_available() else "quick"
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r}: allowed values are 'auto', {', '.join(map(repr, PROFILES))}")
    return profile


def labs() -> list[str]:
    """The labs with settings (``lab_settings`` accepts these)."""
    return sorted(_LABS)


def _profile_settings(lab: str, profile: str) -> dict:
    own = copy.deepcopy(_LABS[lab][profile])
    settings = copy.deepcopy(_COMMON[profile]) if own.pop("imdb", True) else {}
    settings.update(own)
    return settings


def lab_settings(lab: str, profile: str = "auto", **overrides) -> dict:
    """The flat settings of ``lab`` under ``profile``, with ``overrides`` applied.

    Unknown labs and keys are errors; each override is checked against the key's values in the lab's
    profiles (type, range, named choices: see ``labkit.run.overrides``).
    """
    if lab not in _LABS:
        raise KeyError(f"unknown lab {lab!r}; allowed: {', '.join(labs())}")
    profile = resolve_profile(profile)
    settings = _profile_settings(lab, profile)
    unknown = sorted(set(overrides) - set(settings))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown} for {lab}; allowed: {sorted(settings)}")
    if overrides:
        every = [_profile_settings(lab, p) for p in PROFILES]
        per_device = any(check.is_per_device(v) for s in every for v in s.values())
        for key, value in overrides.items():
            settings[key] = check.check_override(key, value, [s[key] for s in every if key in s], per_device)
    settings["profile"] = profile
    settings["lab"] = lab
    return settings


def register_lab(lab: str, per_profile: dict[str, dict]) -> None:
    """Add a lab's own settings (used by lab modules that define theirs next to their code)."""
    missing = set(PROFILES) - set(per_profile)
    if missing:
        raise ValueError(f"{lab}: settings missing for profiles {sorted(missing)}")
    _LABS[lab] = per_profile
