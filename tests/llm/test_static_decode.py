"""labkit's static-shape decode step: the tokens of ``generate`` (greedy) on CPU (eager) and, on CUDA, the same
tokens replayed from its CUDA graph; the bytes a step reads; clear errors for what it cannot decode."""
import pytest
import torch

from _bits import assert_rounded_as_eager
from _llm_tiny import tiny_llama
from labkit.kernels.packed_linear import convert_to_mxint8
from labkit.llm.decode import generate_greedy, time_loops
from labkit.llm.fuse import concat_linears
from labkit.llm.static_decode import PIECES, RECOMPILE_LIMIT, StaticDecoder, compiled_pieces, step_bytes


def _ids(batch, prompt, vocab=256, seed=0):
    return torch.randint(0, vocab, (batch, prompt), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("fields", [{}, {"num_key_value_heads": 4}, {"num_key_value_heads": 1}],
                         ids=["gqa-4:2", "mha", "mqa"])
def test_tokens_are_generates(fields):
    # a wide init so greedy tokens vary from step to step (a default tiny model repeats one token)
    model = tiny_llama(initializer_range=0.3, **fields)
    ids = _ids(3, 7)
    ours = StaticDecoder(model).generate(ids, 20)
    ref = generate_greedy(model, ids, 20, min_new_tokens=20)
    assert torch.equal(ours, ref)
    assert len(set(ours.flatten().tolist())) > 10


def test_compiled_pieces_make_the_same_tokens_over_the_sweeps_shapes():
    # the norms, rotary and gate through torch.compile (Inductor's C++ on a CPU): the same arithmetic, fused. Two
    # model widths, batches of 1 and more, prompts of 1 and more, as the GPU sweep runs them: fullgraph=True
    # raises if the pieces recompile past dynamo's limit
    # (the second width with its projections stacked: the gate's pieces then see views of one GEMM's output)
    for fuse, fields in ((False, {}), (True, {"hidden_size": 96, "num_attention_heads": 6, "num_key_value_heads": 3})):
        model = tiny_llama(initializer_range=0.3, **fields)
        dec = StaticDecoder(model, compile=True, fuse=fuse)
        for batch, prompt in ((1, 1), (1, 6), (3, 6), (4, 1)):
            ids = _ids(batch, prompt, seed=batch + prompt)
            assert torch.equal(dec.generate(ids, 4), generate_greedy(model, ids, 4, min_new_tokens=4))


def test_compiled_pieces_round_bf16_as_eager_does():
    # bf16, where Inductor would keep the pieces' intermediates in float32: the compiled pieces are eager's bits
    g = torch.Generator().manual_seed(0)
    r = lambda *shape: torch.randn(*shape, generator=g).to(torch.bfloat16)  # noqa: E731
    x, d, w = r(4, 1, 96), r(4, 1, 96), r(96)
    args = {"rms": (x, w, 1e-5), "add_rms": (x, d, w, 1e-5), "rotate_qk": (r(4, 6, 1, 16), r(4, 3, 1, 16),
                                                                            r(1, 1, 1, 16), r(1, 1, 1, 16)),
            "gated": (r(4, 1, 256), r(4, 1, 256))}
    for name, fn in compiled_pieces().items():  # the pieces are shared: other tests' shapes compiled them before
        with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
            want, got = PIECES[name](*args[name]), fn(*args[name])
        assert_rounded_as_eager(want, got, name)


@pytest.mark.parametrize("mxint8", [False, True], ids=["fp32", "mxint8"])
@pytest.mark.parametrize("fields", [{}, {"num_key_value_heads": 1}], ids=["gqa-4:2", "mqa"])
def test_stacked_projections_make_generates_tokens(fields, mxint8):
    model = tiny_llama(initializer_range=0.3, **fields)
    if mxint8:
        convert_to_mxint8(model, 32)
    ids = _ids(3, 7, seed=8)
    dec = StaticDecoder(model, fuse=True)
    assert len(dec._proj) == len(model.model.layers)
    assert torch.equal(dec.generate(ids, 16), generate_greedy(model, ids, 16, min_new_tokens=16))


@pytest.mark.parametrize("mxint8", [False, True], ids=["linear", "mxint8"])
def test_concat_linears_is_the_outputs_side_by_side(mxint8):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, n, bias=True) for n in (32, 16, 48)]
    if mxint8:
        from labkit.kernels.packed_linear import MXINT8Linear
        layers = [MXINT8Linear.from_linear(m, 32) for m in layers]
    fused = concat_linears(layers)
    x = torch.randn(5, 64)
    assert type(fused) is type(layers[0]) and fused.out_features == 96
    # the same weights and bits stacked: each output column is its layer's (float32, the same reduction length)
    torch.testing.assert_close(fused(x), torch.cat([m(x) for m in layers], -1), rtol=1e-6, atol=1e-6)
    if mxint8:
        assert torch.equal(fused.dequantized_weight(), torch.cat([m.dequantized_weight() for m in layers]))


def test_concat_linears_refuses_what_it_cannot_stack():
    a, b = torch.nn.Linear(8, 4), torch.nn.Linear(6, 4)
    with pytest.raises(ValueError, match="inputs of different widths"):
        concat_linears([a, b])
    with pytest.raises(ValueError, match="some layers have a bias"):
        concat_linears([a, torch.nn.Linear(8, 4, bias=False)])
    with pytest.raises(TypeError, match="nn.Linear or MXINT8Linear; got Linear, Conv1d"):
        concat_linears([a, torch.nn.Conv1d(8, 4, 1)])
    with pytest.raises(ValueError, match="at least one layer"):
        concat_linears([])


def test_one_token_another_shape_and_a_rerun():
    model = tiny_llama(initializer_range=0.3)
    dec = StaticDecoder(model)
    ids = _ids(2, 5, seed=3)
    assert torch.equal(dec.generate(ids, 1), generate_greedy(model, ids, 1))
    long = dec.generate(_ids(1, 9, seed=4), 12)
    assert torch.equal(long, generate_greedy(model, _ids(1, 9, seed=4), 12, min_new_tokens=12))
    assert torch.equal(dec.generate(ids, 1), generate_greedy(model, ids, 1))  # buffers of the first shape reused


def test_real_model_makes_generates_tokens(smollm2, imdb_blocks):
    model, tok = smollm2
    ids = imdb_blocks[:2, :32]
    ours = StaticDecoder(model).generate(ids, 16)
    ref = generate_greedy(model, ids, 16, min_new_tokens=16)
    assert torch.equal(ours, ref), (tok.decode(ours[0]), tok.decode(ref[0]))


def test_mxint8_model_decodes_through_its_linears():
    model = tiny_llama(initializer_range=0.3)
    report = convert_to_mxint8(model, 32)
    assert "lm_head" in report["converted"] and len(report["converted"]) == 1 + 2 * 7
    ids = _ids(2, 6, seed=5)
    assert torch.equal(StaticDecoder(model).generate(ids, 10), generate_greedy(model, ids, 10, min_new_tokens=10))
    # the step reads the packed bytes: int8 mantissas and one exponent byte per 32 weights, norms in fp32
    packed = sum(b.numel() for n, b in model.named_buffers() if n.endswith(("mantissa", "exponent")))
    norms = sum(p.numel() * 4 for n, p in model.named_parameters() if "norm" in n)
    assert step_bytes(model) == packed + norms


def test_step_bytes_counts_the_tied_head_once():
    model = tiny_llama()
    assert step_bytes(model) == 4 * sum(p.numel() for p in model.parameters())
    untied = tiny_llama(tie_word_embeddings=False)
    embed = untied.model.embed_tokens.weight.numel()
    assert step_bytes(untied) == 4 * (sum(p.numel() for p in untied.parameters()) - embed)


def test_time_loops_times_every_loop():
    model = tiny_llama()
    ids = _ids(1, 4)
    dec = StaticDecoder(model)
    out = time_loops({"a": lambda: dec.generate(ids, 3), "b": lambda: generate_greedy(model, ids, 3)}, 3, "cpu",
                     repeats=2, warmup=0)
    assert out["a_ms_per_token"] > 0 and len(out["b_timing"]["per_call_s"]) == 3


def test_errors_name_what_is_wrong():
    model = tiny_llama()
    with pytest.raises(ValueError, match="graph=True needs the model on a CUDA device"):
        StaticDecoder(model, graph=True)
    with pytest.raises(ValueError, match="max_new_tokens=0"):
        StaticDecoder(model).generate(_ids(1, 3), 0)
    with pytest.raises(TypeError, match="int64 tensor"):
        StaticDecoder(model).generate(_ids(1, 3).float(), 2)
    with pytest.raises(TypeError, match="Llama-family causal LM.*has no model.embed_tokens"):
        StaticDecoder(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="step_ms times graph replays"):
        StaticDecoder(model).step_ms(_ids(1, 3), 4)
    with pytest.raises(ValueError, match="hidden_act is 'gelu'"):
        StaticDecoder(tiny_llama(hidden_act="gelu"))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
@pytest.mark.parametrize("mxint8", [False, True], ids=["bf16", "mxint8"])
@pytest.mark.parametrize("compiled,fuse", [(False, False), (True, False), (True, True)],
                         ids=["graph", "graph+compiled", "graph+compiled+fused"])
def test_graph_replays_make_the_eager_steps_tokens(mxint8, compiled, fuse):
    model = tiny_llama(initializer_range=0.3).to("cuda", torch.bfloat16)
    if mxint8:
        convert_to_mxint8(model, 32)
    ids = _ids(4, 8, seed=6).cuda()
    graphed = StaticDecoder(model, compile=compiled, fuse=fuse)
    eager = StaticDecoder(model, graph=False, compile=compiled, fuse=fuse)
    assert graphed.graph and not eager.graph
    assert torch.equal(graphed.generate(ids, 24), eager.generate(ids, 24))
    assert torch.equal(graphed.generate(ids[:, :5], 3), eager.generate(ids[:, :5], 3))
    assert 0 < graphed.step_ms(ids, 24) < 100
