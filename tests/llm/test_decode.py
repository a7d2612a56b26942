import pytest
import torch

from _llm_tiny import tiny_llama
from labkit.llm import decode as D
from labkit.llm import group_quant as G


def test_greedy_decode_is_generate_on_the_real_model(smollm2):
    model, tok = smollm2
    ids = tok("The movie was", return_tensors="pt").input_ids
    ours = D.greedy_decode(model, ids, 12, eos_token_id=model.generation_config.eos_token_id)
    ref = D.generate_greedy(model, ids, 12)
    assert torch.equal(ours, ref), (tok.decode(ours[0]), tok.decode(ref[0]))
    assert ours.shape == (1, 12)


def test_static_and_dynamic_caches_and_batches_agree():
    model = tiny_llama()
    ids = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(2))
    dyn = D.greedy_decode(model, ids, 10)
    assert torch.equal(dyn, D.greedy_decode(model, ids, 10, cache="static"))
    assert torch.equal(dyn[1:], D.greedy_decode(model, ids[1:], 10))
    assert torch.equal(dyn, D.generate_greedy(model, ids, 10, min_new_tokens=10))


def test_eos_stops_a_sequence_as_generate_does():
    model = tiny_llama()
    ids = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(2))
    free = D.greedy_decode(model, ids, 10)
    eos = int(free[0, 3])  # row 0 emits it at step 3 (or earlier)
    ours = D.greedy_decode(model, ids, 10, eos_token_id=eos, pad_token_id=0)
    ref = D.generate_greedy(model, ids, 10, eos_token_id=eos, pad_token_id=0)
    assert torch.equal(ours, ref)
    first = int((free[0] == eos).nonzero()[0])
    assert (ours[0, first + 1:] == 0).all()


def test_time_decode_reports_ms_per_token_of_both_loops():
    model = tiny_llama()
    ids = torch.randint(0, 256, (1, 4), generator=torch.Generator().manual_seed(0))
    out = D.time_decode(model, ids, new_tokens=4, repeats=1, warmup=0)
    for key in ("decode", "generate"):
        assert out[f"{key}_ms_per_token"] > 0 and len(out[f"{key}_timing"]["per_call_s"]) == 2
    assert (out["new_tokens"], out["batch"], out["device"]) == (4, 1, "cpu")
    with pytest.raises(ValueError, match="new_tokens=0"):
        D.time_decode(model, ids, new_tokens=0)
    with pytest.raises(ValueError, match="allowed values are dynamic, static"):
        D.greedy_decode(model, ids, 2, cache="paged")
    with pytest.raises(TypeError, match="int64 tensor"):
        D.greedy_decode(model, ids[0], 2)


def test_weight_bytes_counts_each_weight_once_at_its_stored_bits():
    model = tiny_llama()
    n = sum(p.numel() for p in model.parameters())  # the tied head counted once
    assert D.weight_bytes(model) == 4 * n
    untied = tiny_llama(tie_word_embeddings=False)
    assert D.weight_bytes(untied) == 4 * n + 4 * untied.lm_head.weight.numel()
    report = G.quantize_llm_weights(model, "integer", 4, 32)
    q = sum(model.get_submodule(name).weight.numel() for name in report.layers)
    assert D.weight_bytes(model, report) == (4.5 * q + 32 * (n - q)) / 8
    assert D.weight_bytes(model.bfloat16()) == 2 * n


def test_roofline():
    assert D.roofline_tokens_per_s(1e9, 2e9) == 2.0
    assert D.roofline_tokens_per_s(1e9, 2e9, batch=4) == 8.0
    for bad in (dict(weight_bytes=0, bandwidth_bytes_per_s=1e9), dict(weight_bytes=1e9, bandwidth_bytes_per_s=-1),
                dict(weight_bytes=float("inf"), bandwidth_bytes_per_s=1e9)):
        with pytest.raises(ValueError, match="positive finite number"):
            D.roofline_tokens_per_s(**bad)
    with pytest.raises(ValueError, match="batch=0"):
        D.roofline_tokens_per_s(1e9, 1e9, batch=0)
