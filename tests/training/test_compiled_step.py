"""labkit.training.compiled_step: the setting, the cache key, the compiled loss and gradients against the eager
model's (a CPU, Inductor's C++ backend), and the compiled graphed step on a GPU (captured, repeatable, and
training as the eager graphed step does)."""
from __future__ import annotations

import pytest
import torch

from labkit import models
from labkit.training import compiled_step as cs, train, varlen_attention as va

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


def _model(dropout=0.0, hidden=64):
    torch.manual_seed(0)
    return models.from_config(num_hidden_layers=2, hidden_size=hidden, num_attention_heads=4,
                              intermediate_size=2 * hidden, hidden_dropout_prob=dropout,
                              attention_probs_dropout_prob=dropout)


def _batch(device="cpu", n=4, length=16):
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(4, length + 1, (n,), generator=g)
    lengths[0] = length
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    ids = torch.randint(1000, 2000, (n, length), generator=g) * mask
    return {k: v.to(device) for k, v in {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
                                         "labels": torch.randint(0, 2, (n,), generator=g)}.items()}


def test_the_setting_is_checked_and_defaults_to_off(monkeypatch):
    monkeypatch.delenv(cs.ENV, raising=False)
    assert cs.enabled() is False
    assert cs.enabled({cs.ENV: "1"}) is True
    with pytest.raises(ValueError, match=r"LABKIT_STEP_COMPILE='yes'.*allowed values are 0 .*1"):
        cs.enabled({cs.ENV: "yes"})


def test_the_cache_key_names_the_compiled_step_and_refuses_varlen_with_it(monkeypatch, fake_cuda):
    monkeypatch.setattr(train.cuda_graphs, "wanted", lambda dev, graphs: True)
    monkeypatch.delenv(va.ENV, raising=False)
    monkeypatch.delenv(cs.ENV, raising=False)
    plain = train.step_key()
    monkeypatch.setenv(cs.ENV, "1")
    assert train.step_key() == cs.CACHE_KEY != plain
    monkeypatch.setenv(va.ENV, "varlen")
    with pytest.raises(ValueError, match="LABKIT_STEP_COMPILE=1 with LABKIT_ATTENTION=varlen"):
        train.step_key()


def _loss_and_grads(model, batch, compiled: bool):
    model.zero_grad(set_to_none=True)
    loss = cs.loss(model, batch, None, True) if compiled else model(**batch).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_the_compiled_loss_and_gradients_equal_the_models_and_a_second_model_reuses_the_code():
    import torch._dynamo

    model, batch = _model().train(), _batch()
    eager = _loss_and_grads(model, batch, False)
    compiled = _loss_and_grads(model, batch, True)
    # fp32 on a CPU: Inductor's fused kernels sum in other orders than torch's
    assert torch.allclose(eager[0], compiled[0], rtol=1e-5, atol=1e-6)
    assert eager[1].keys() == compiled[1].keys()
    for name, g in eager[1].items():
        # the key bias's gradient is zero in exact arithmetic (softmax ignores a shift per query): rounding only
        atol = 1e-5 * max(float(g.abs().max()), 1e-3)
        assert torch.allclose(g, compiled[1][name], rtol=1e-4, atol=atol), name
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    _loss_and_grads(_model().train(), batch, True)  # a new model of the same architecture: no new compile
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == before


# --- on a GPU: the compiled step inside the CUDA graph ----------------------------------------------------

def _fit(monkeypatch, compiled: bool, dropout: float):
    from _padded_batches import padded_batches

    monkeypatch.setenv(cs.ENV, "1" if compiled else "0")
    model = _model(dropout=dropout)
    fit = train.train(model, padded_batches(), epochs=4, lr=1e-3, device="cuda", progress=False)
    return fit, [p.detach().clone() for p in model.parameters()]


@pytest.mark.cuda
@needs_cuda
def test_the_compiled_graphed_step_is_captured_and_repeats_bit_for_bit(monkeypatch):
    (a, wa), (b, wb) = (_fit(monkeypatch, True, 0.1) for _ in range(2))
    assert a["graph_failure"] is None and a["graph_replays"] > 0
    assert a["losses"] == b["losses"] and all(torch.equal(x, y) for x, y in zip(wa, wb))


@pytest.mark.cuda
@needs_cuda
def test_the_compiled_graphed_step_trains_as_the_eager_graphed_step(monkeypatch):
    (c, _), (e, _) = _fit(monkeypatch, True, 0.0), _fit(monkeypatch, False, 0.0)
    assert c["graph_failure"] is None and c["graph_replays"] > 0
    # dropout off: the same function, rounded differently under bf16 autocast over 12 steps
    diff = max(abs(x - y) / max(abs(y), 1e-6) for x, y in zip(c["losses"], e["losses"]))
    assert diff < 2e-2, diff


def test_the_opaque_embedding_gives_torchs_values_and_gradients_and_is_restored():
    model = _model().train()
    emb = model.bert.embeddings.word_embeddings
    assert emb.padding_idx == 0
    ids = torch.tensor([[0, 5, 5, 7], [3, 0, 5, 1]])
    grad = torch.randn(2, 4, emb.embedding_dim, generator=torch.Generator().manual_seed(0))
    ref = emb(ids)
    (g_ref,) = torch.autograd.grad(ref, emb.weight, grad)
    with cs.opaque_embeddings(model):
        assert type(emb) is cs.OpaqueEmbedding
        out = emb(ids)
        (g,) = torch.autograd.grad(out, emb.weight, grad)
    assert type(emb) is torch.nn.Embedding
    assert torch.equal(out, ref) and torch.allclose(g, g_ref, rtol=0, atol=1e-6)
    assert g[0].abs().sum() == 0 and g[5].abs().sum() > 0  # the padding row gets no gradient; repeats sum
    torch.library.opcheck(cs.embedding, (emb.weight.detach().requires_grad_(), ids, 0))


def test_past_the_recompile_limit_the_compiled_step_raises_instead_of_running_eagerly(monkeypatch):
    import torch._dynamo

    monkeypatch.setattr(cs, "RECOMPILES", 1)
    batch = _batch()
    with pytest.raises(torch._dynamo.exc.FailOnRecompileLimitHit):
        for hidden in (48, 40):  # two new architectures: the second at the latest is past a limit of one
            _loss_and_grads(_model(hidden=hidden).train(), batch, True)
    assert torch._dynamo.config.fail_on_recompile_limit_hit is False  # the limits were these calls' only
