"""labkit.training.varlen_attention: segments, registration, and the same model outputs and gradients as
transformers' masked SDPA, with a reference kernel on a CPU and flash attention on a GPU."""
from __future__ import annotations

import pytest
import torch

from labkit import models
from labkit.training import train, varlen_attention as va

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


def _reference(q, k, v, cu, max_len, dropout_p, scale):
    """Softmax attention within each segment [cu[j], cu[j + 1]) (no dropout), written out per segment."""
    assert dropout_p == 0.0
    out = torch.zeros_like(q)
    bounds = cu.tolist()
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b > a:
            s = torch.einsum("qhd,khd->hqk", q[a:b].float(), k[a:b].float()) * scale
            out[a:b] = torch.einsum("hqk,khd->qhd", s.softmax(-1), v[a:b].float()).to(q.dtype)
    return out, ()


def _reference_backward(grad, q, k, v, out, saved, cu, max_len, dropout_p, scale):
    with torch.enable_grad():
        qkv = [t.detach().requires_grad_() for t in (q, k, v)]
        o, _ = _reference(*qkv, cu, max_len, dropout_p, scale)
        return torch.autograd.grad(o, qkv, grad)


@pytest.fixture
def reference_kernel(monkeypatch):
    monkeypatch.setattr(va, "KERNEL", [_reference, _reference_backward])


def _model(dropout=0.0, layers=2):
    torch.manual_seed(0)
    return models.from_config(num_hidden_layers=layers, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                              hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


def _batch(device="cpu", lengths=(12, 5, 16, 9)):
    g = torch.Generator().manual_seed(1)
    n, L = len(lengths), max(lengths)
    ids = torch.randint(1000, 2000, (n, L), generator=g)
    mask = (torch.arange(L)[None, :] < torch.tensor(lengths)[:, None]).long()
    return {k: v.to(device) for k, v in {"input_ids": ids * mask, "attention_mask": mask,
                                         "token_type_ids": torch.zeros_like(ids),
                                         "labels": torch.tensor([0, 1, 1, 0][:n])}.items()}


def test_segments_split_each_row_into_its_tokens_and_its_padding():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    assert va.segments(mask, 3, 4, "cpu").tolist() == [0, 3, 4, 8, 8, 9, 12]
    assert va.segments(mask.bool(), 3, 4, "cpu").dtype == torch.int32
    assert va.segments(None, 2, 4, "cpu").tolist() == [0, 4, 4, 8, 8]
    with pytest.raises(RuntimeError, match="right-padded"):
        va.segments(torch.tensor([[0, 1, 1, 1]]), 1, 4, "cpu")


def test_the_choice_is_checked_and_defaults_to_sdpa():
    assert va.choice({}) == "sdpa" and va.choice({va.ENV: "varlen"}) == "varlen"
    with pytest.raises(ValueError, match="LABKIT_ATTENTION='flash'.*'sdpa', 'varlen'"):
        va.choice({va.ENV: "flash"})


def test_the_mask_interface_hands_the_padding_mask_over_unchanged():
    m = torch.tensor([[True, True], [True, False]])
    assert va.mask(2, 2, 2, attention_mask=m) is m and va.mask(2, 2, 2, attention_mask=None) is None
    with pytest.raises(ValueError, match="a mask of 2 tokens for 3 keys"):
        va.mask(2, 3, 3, attention_mask=m)


def test_use_switches_the_model_and_restores_it(monkeypatch):
    model = _model()
    before = model.config._attn_implementation
    monkeypatch.delenv(va.ENV, raising=False)
    with va.use(model) as on:
        assert not on and model.config._attn_implementation == before
    with va.use(model, on=True) as on:
        assert on and model.config._attn_implementation == va.NAME
        assert model.bert.encoder.layer[0].attention.self.config._attn_implementation == va.NAME
    assert model.config._attn_implementation == before
    monkeypatch.setenv(va.ENV, "varlen")
    with va.use(model) as on:
        assert on
    assert va.use(torch.nn.Linear(2, 2)).__enter__() is False  # no transformers config: runs as it is


def _loss_logits_grads(model, batch, varlen):
    model.zero_grad(set_to_none=True)
    with va.use(model, on=varlen):
        out = model(**batch)
    out.loss.backward()
    return out.loss.detach(), out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                                                     if p.grad is not None}


@pytest.mark.parametrize("lengths", [(12, 5, 16, 9), (16, 16, 16, 16)])
def test_varlen_gives_the_masked_models_loss_logits_and_gradients(reference_kernel, lengths):
    """The same model on a CPU, fp32, dropout off: the segments' attention (the reference kernel) against
    transformers' masked SDPA; every parameter's gradient too (padding reads nothing that reaches the loss)."""
    model, batch = _model().train(), _batch(lengths=lengths)
    sdpa = _loss_logits_grads(model, batch, False)
    varlen = _loss_logits_grads(model, batch, True)
    assert torch.allclose(sdpa[0], varlen[0], atol=1e-6) and torch.allclose(sdpa[1], varlen[1], atol=1e-5)
    assert sdpa[2].keys() == varlen[2].keys()
    for name, g in sdpa[2].items():
        assert torch.allclose(g, varlen[2][name], atol=1e-5, rtol=1e-4), name


def test_the_layers_of_one_forward_share_one_computation_of_the_segments(reference_kernel, monkeypatch):
    calls = []
    real = va.segments
    monkeypatch.setattr(va, "segments", lambda *a: calls.append(1) or real(*a))
    model, batch = _model(layers=3).train(), _batch()
    with va.use(model, on=True):
        model(**batch)
        model(**batch)  # a new forward builds a new mask object: computed again
    assert len(calls) == 2 and va._SEGMENTS is None


def test_attention_weights_and_cross_attention_are_refused():
    q = torch.zeros(1, 2, 4, 8)
    with pytest.raises(ValueError, match="no attention weights"):
        va.attention(None, q, q, q, None, output_attentions=True)
    with pytest.raises(ValueError, match="self-attention only"):
        va.attention(None, q, torch.zeros(1, 2, 5, 8), torch.zeros(1, 2, 5, 8), None)


def test_the_graphed_steps_cache_key_names_the_attention(monkeypatch, fake_cuda):
    monkeypatch.setattr(train.cuda_graphs, "wanted", lambda dev, graphs: True)
    monkeypatch.delenv(va.ENV, raising=False)
    plain = train.step_key()
    monkeypatch.setenv(va.ENV, "varlen")
    assert train.step_key() == f"{plain}+{va.CACHE_KEY}"


# --- on a GPU: flash attention's segments against the masked SDPA ----------------------------------------

@pytest.mark.cuda
@needs_cuda
def test_flash_segments_match_masked_sdpa_on_the_gpu():
    model, batch = _model().cuda().train(), _batch("cuda", lengths=(64, 17, 40, 64))
    with train.autocast(torch.device("cuda")):
        sdpa = _loss_logits_grads(model, batch, False)
        varlen = _loss_logits_grads(model, batch, True)
    # bf16 autocast: both attentions round differently
    assert abs(sdpa[0] - varlen[0]) < 2e-2 and (sdpa[1] - varlen[1]).abs().max() < 5e-2
    for name, g in sdpa[2].items():
        scale = g.abs().max().clamp_min(1e-6)
        assert ((g - varlen[2][name]).abs().max() / scale) < 5e-2, name


@pytest.mark.cuda
@needs_cuda
def test_graphed_varlen_training_is_captured_and_repeats_bit_for_bit(monkeypatch):
    from _padded_batches import padded_batches

    monkeypatch.setenv(va.ENV, "varlen")
    runs = []
    for _ in range(2):
        model = _model(dropout=0.1)
        fit = train.train(model, padded_batches(), epochs=4, lr=1e-3, device="cuda", progress=False)
        runs.append((fit, [p.detach().clone() for p in model.parameters()]))
    (a, wa), (b, wb) = runs
    assert a["graph_failure"] is None and a["graph_replays"] > 0
    assert a["losses"] == b["losses"] and all(torch.equal(x, y) for x, y in zip(wa, wb))
    assert all(torch.isfinite(torch.tensor(a["losses"])))


def test_the_flash_kernel_refuses_what_it_cannot_run_by_name():
    q = torch.zeros(8, 2, 16)
    cu = torch.tensor([0, 8], dtype=torch.int32)
    with pytest.raises(ValueError, match="LABKIT_ATTENTION=varlen runs flash attention.*float32 on cpu"):
        va._flash_forward(q, q, q, cu, 8, 0.0, 0.25)


def test_autocast_casts_the_segments_inputs_as_it_casts_sdpas(monkeypatch):
    seen = []

    def spy(q, k, v, cu, max_len, dropout_p, scale):
        seen.append((q.dtype, k.dtype, v.dtype))
        return _reference(q, k, v, cu, max_len, dropout_p, scale)

    monkeypatch.setattr(va, "KERNEL", [spy, _reference_backward])
    q = torch.randn(1, 2, 4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, weights = va.attention(None, q, q.bfloat16(), q, torch.ones(1, 4, dtype=torch.bool))
    assert seen == [(torch.bfloat16,) * 3] and out.shape == (1, 4, 2, 8) and weights is None




PROBE = ([40, 24, 64, 9], 2, 64, 0.1)  # segment lengths (<= the head size), heads, head size, dropout


def _probe_inputs(kind: str):
    """q, k, v (leaves) and the output gradient; v one-hot over each segment's key positions. varlen: [tokens, heads,
    dim] with segment bounds; sdpa: a padded batch [rows, heads, 64, dim] with BERT's boolean padding mask."""
    lengths, heads, dim, _ = PROBE
    g = torch.Generator(device="cuda").manual_seed(0)
    if kind == "varlen":
        shape = (sum(lengths), heads, dim)
    else:
        shape = (len(lengths), heads, 64, dim)
    q, k, grad = (torch.randn(shape, device="cuda", generator=g).bfloat16() for _ in range(3))
    v = torch.zeros(shape, device="cuda", dtype=torch.bfloat16)
    start = 0
    for r, n in enumerate(lengths):
        if kind == "varlen":
            v[torch.arange(start, start + n), :, torch.arange(n)] = 1
        else:
            v[r, :, torch.arange(n), torch.arange(n)] = 1
        start += n
    return [t.requires_grad_() for t in (q, k, v)], grad


def _probe_layout(kind: str) -> torch.Tensor:
    """varlen: the segments' int32 bounds; sdpa: BERT's boolean padding mask [rows, 1, 1, 64] (made before a capture)."""
    lengths = torch.tensor(PROBE[0])
    if kind == "varlen":
        return torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to("cuda", torch.int32)
    return (torch.arange(64)[None, :] < lengths[:, None])[:, None, None, :].cuda()


def _probe_step(kind: str, q, k, v, grad, layout):
    """Forward and backward: (out, dv). varlen: labkit's flash segments; sdpa: memory-efficient attention with the
    padding mask, as the graphed step trains under strict determinism."""
    lengths, _, dim, p = PROBE
    if kind == "varlen":
        out = va._Varlen.apply(q, k, v, layout, max(lengths), p, dim ** -0.5)
    else:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=layout, dropout_p=p)
    return out.detach(), torch.autograd.grad(out, v, grad)[0]


def _segments_of_probe(kind: str, out, dv, grad):
    """Per segment: A [heads, queries, keys] (the dropped, rescaled probabilities), the output gradient [heads,
    queries, dim] and dV [heads, keys, dim]."""
    lengths = PROBE[0]
    start = 0
    for r, n in enumerate(lengths):
        if n:
            if kind == "varlen":
                o, g, d = (t[start:start + n].transpose(0, 1).float() for t in (out, grad, dv))
            else:
                o, g, d = out[r].float(), grad[r].float(), dv[r, :, :n].float()  # every query, real keys
            yield o[:, :, :n], g, d
        start += n


def _dropout_probe(kind: str, replays: int):
    """``replays`` 0: one eager step; else the step captured in one CUDA graph and replayed that often (strict
    determinism, as labkit trains). Returns each run's (out, dv) and the output gradient."""
    from labkit.training import determinism

    (q, k, v), grad = _probe_inputs(kind)
    layout = _probe_layout(kind)
    with determinism.deterministic(torch.device("cuda"), "strict"):
        if replays == 0:
            return [_probe_step(kind, q, k, v, grad, layout)], grad
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            _probe_step(kind, q, k, v, grad, layout)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static = _probe_step(kind, q, k, v, grad, layout)
        runs = []
        for _ in range(replays):
            graph.replay()
            runs.append(tuple(t.clone() for t in static))
        return runs, grad


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("kind", ["varlen", "sdpa"])
@pytest.mark.parametrize("replays", [0, 3])
def test_attentions_backward_uses_its_forwards_dropout_mask(kind, replays):
    """One-hot values expose the dropped probabilities A in the output; the backward must then give dV = A^T G: a
    backward that drew another dropout mask than its forward fails. Both the flash segments and the masked SDPA."""
    runs, grad = _dropout_probe(kind, replays)
    for out, dv in runs:
        dropped = kept = 0
        for A, g, d in _segments_of_probe(kind, out, dv, grad):
            dropped, kept = dropped + int((A == 0).sum()), kept + int((A > 0).sum())
            ref = torch.einsum("hqk,hqd->hkd", A, g)
            # A is the bf16 rounding of what the kernel used: 2^-8 relative, summed over <= 64 queries
            assert (d - ref).abs().max() <= 2e-2 * ref.abs().max()
        share = dropped / (dropped + kept)
        assert 0.08 < share < 0.12, share  # dropout 0.1 over >= 12,706 probabilities: SE <= 0.003
    if len(runs) > 1:  # every replay draws a new mask
        assert not torch.equal(runs[0][0], runs[1][0])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("kind", ["varlen", "sdpa"])
def test_attention_dropout_masks_are_independent_across_heads_and_rows(kind):
    """Two heads of one row, and two rows at the same positions, drop the same probability together at 0.1 x 0.1 = 1%
    of the time if their masks are independent (10% if the kernel repeated one mask)."""
    (runs, grad) = _dropout_probe(kind, 0)
    out, dv = runs[0]
    segments = [A == 0 for A, _, _ in _segments_of_probe(kind, out, dv, grad)]  # [heads, queries, keys] each
    heads = torch.cat([(m[0] & m[1]).flatten() for m in segments]).float().mean()
    first, other = segments[0], segments[2]  # 40 and 64 tokens: the first 40 x 40 positions of each
    rows = (first[:, :40, :40] & other[:, :40, :40]).float().mean()
    assert heads < 0.03 and rows < 0.03, (float(heads), float(rows))
