"""Reproducible training: seeded initialisation, strict deterministic kernels, one digest per fresh process."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from labkit import lora, models, recipes
from labkit.training import determinism

ROOT = Path(__file__).resolve().parents[2]

# One SFT training in a fresh interpreter: prints its weights digest. Its cache folder is new, so it trains.
SFT_SCRIPT = """
import json, sys
from labkit import recipes
from labkit.run import profiles
s = profiles.lab_settings("lab0_graphs_lora", "smoke", train_size=32, test_size=16, max_length=32)
model, m = recipes.finetuned_model(s, seed=int(sys.argv[1]))
print(json.dumps({"digest": m["sft_digest"], "accuracy": m["accuracy"]}))
"""


def _fresh_sft(tmp_path: Path, seed: int, tag: str) -> dict:
    env = {**os.environ, "LABKIT_CACHE_DIR": str(tmp_path / tag), "HF_HUB_OFFLINE": "1", "LABKIT_DETERMINISM": "strict"}
    out = subprocess.run([sys.executable, "-c", SFT_SCRIPT, str(seed)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_two_fresh_processes_train_one_sft_model(tmp_path):
    # Before the head was drawn from the seed, two fresh processes started from different heads (the global
    # RNG was never seeded before loading) and trained two different models.
    a, b = _fresh_sft(tmp_path, 0, "a"), _fresh_sft(tmp_path, 0, "b")
    assert a["digest"] == b["digest"]
    other = _fresh_sft(tmp_path, 1, "c")
    assert other["digest"] != a["digest"]  # the seed is what decides the weights


def test_seeds_key_their_own_checkpoints():
    s = {"model": "minilm-l2", "train_size": 8, "max_length": 8, "batch_size": 4, "epochs": 1.0, "lr": 1e-3,
         "seed": 0}
    assert recipes.checkpoint_path(s) == recipes.checkpoint_path(s, 0) != recipes.checkpoint_path(s, 1)
    assert recipes.train_seeds(s) == [0] and recipes.train_seeds({**s, "seeds": [3, 4]}) == [3, 4]


def _head(model) -> torch.Tensor:
    return model.classifier.weight.detach().clone()


def test_the_new_head_comes_from_the_seed_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a, b, c = models.load_model(seed=0), models.load_model(seed=0), models.load_model(seed=1)
    assert torch.equal(torch.get_rng_state(), state)  # init_rng forked it
    assert torch.equal(_head(a), _head(b)) and not torch.equal(_head(a), _head(c))
    # pretrained weights do not depend on the seed
    assert torch.equal(a.bert.encoder.layer[0].output.dense.weight, c.bert.encoder.layer[0].output.dense.weight)


def test_models_from_config_and_lora_adapters_come_from_the_seed(tiny_bert):
    cfg = dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    x, y, z = models.from_config(seed=5, **cfg), models.from_config(seed=5, **cfg), models.from_config(seed=6, **cfg)
    assert all(torch.equal(p, q) for p, q in zip(x.parameters(), y.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(x.parameters(), z.parameters()))

    def adapters(seed):
        import copy

        torch.manual_seed(seed + 99)  # the global RNG must not matter
        peft = lora.add_lora(copy.deepcopy(tiny_bert), rank=2, seed=seed)
        return {n: p.detach().clone() for n, p in peft.named_parameters() if "lora_A" in n}

    a, b, c = adapters(0), adapters(0), adapters(1)
    assert a and all(torch.equal(a[k], b[k]) for k in a) and not all(torch.equal(a[k], c[k]) for k in a)


def test_strict_mode_on_cuda_sets_and_restores_the_flags():
    dev = torch.device("cuda")  # the context only sets flags: it runs without a GPU
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cuda.cudnn_sdp_enabled())
    with determinism.deterministic(dev, "strict"):
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        assert not torch.backends.cuda.cudnn_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cuda.cudnn_sdp_enabled()) == before
    with determinism.deterministic(dev, "warn"):
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    with determinism.deterministic(torch.device("cpu"), "strict"):  # CPU: nothing to switch
        assert torch.are_deterministic_algorithms_enabled() == before[0]


def test_strict_mode_refuses_cuda_started_before_the_cublas_setting(monkeypatch):
    monkeypatch.setattr(determinism, "_cuda_started_without_config", True)
    with pytest.raises(RuntimeError, match="CUBLAS_WORKSPACE_CONFIG"):
        with determinism.deterministic(torch.device("cuda"), "strict"):
            pass
    with determinism.deterministic(torch.device("cuda"), "warn"):  # warn mode trains anyway
        pass


def test_mode_names_its_allowed_values(monkeypatch):
    assert determinism.mode() == "strict" or os.environ.get("LABKIT_DETERMINISM")
    monkeypatch.setenv("LABKIT_DETERMINISM", "sometimes")
    with pytest.raises(ValueError, match="LABKIT_DETERMINISM='sometimes'.*'strict', 'warn', 'off'"):
        determinism.mode()
    with pytest.raises(ValueError, match="determinism='x'"):
        determinism.mode("x")
    with pytest.raises(TypeError, match="seed"):
        with determinism.init_rng(1.5):
            pass


def test_importing_labkit_sets_the_cublas_workspace_before_cuda_starts():
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    code = ("import os, labkit, labkit.training.determinism as d; "
            "print(os.environ['CUBLAS_WORKSPACE_CONFIG'], d._cuda_started_without_config, 'torch' in __import__('sys').modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [determinism.CUBLAS_WORKSPACE, "False", "False"]  # and torch is not imported


CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


@pytest.mark.cuda
@needs_cuda
def test_gpu_two_fresh_processes_train_one_sft_model(tmp_path):
    # smoke settings on the GPU: bf16 autocast, attention with a padding mask, AdamW fused, strict mode
    a, b = _fresh_sft(tmp_path, 0, "a"), _fresh_sft(tmp_path, 0, "b")
    assert a["digest"] == b["digest"], (a, b)


@pytest.mark.cuda
@needs_cuda
def test_gpu_strict_mode_fails_loudly_on_a_nondeterministic_op():
    x = torch.rand(1000, device="cuda")
    with determinism.deterministic(torch.device("cuda"), "strict"):
        with pytest.raises(RuntimeError, match="deterministic"):
            torch.histc(x, bins=10)
    torch.histc(x, bins=10)  # allowed again outside the context


def test_two_processes_asking_at_once_train_one_sft_model_between_them(tmp_path):
    """Notebooks side by side (labkit run --lanes) ask for the same SFT model: one trains it, the other waits on
    the checkpoint's lock and loads it, with the same weights."""
    script = SFT_SCRIPT.replace('"accuracy": m["accuracy"]', '"cached": "cached" in m')
    env = {**os.environ, "LABKIT_CACHE_DIR": str(tmp_path / "shared"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", script, "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    got = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert sorted(g["cached"] for g in got) == [False, True]
    assert got[0]["digest"] == got[1]["digest"]
