"""labkit.training.step_kernels: the graphed training step's Linear (bias gradient as a GEMV) and LayerNorm (Triton
backward) against torch's modules and a float64 oracle; Triton's interpreter here, CUDA on the device."""
import pytest
import torch
import torch.nn.functional as F

from labkit.training import step_kernels as sk

CUDA = torch.cuda.is_available()


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert type(sk._kernel(sk.interpreting())).__name__ == "InterpretedFunction"


def _ln_case(rows, n, dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(rows, n, generator=g) * 3 + 1).to(device, dtype)
    w = (torch.rand(n, generator=g) + 0.5).to(device, dtype)
    b = torch.randn(n, generator=g).to(device, dtype)
    dy = torch.randn(rows, n, generator=g).to(device, dtype)
    return x, w, b, dy


def _ln_grads(fn, x, w, b, dy):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = fn(x, (x.shape[-1],), w, b, 1e-12)
    y.backward(dy)
    return y.detach(), x.grad, w.grad, b.grad


def _ln_oracle(x, w, b, dy):
    return _ln_grads(F.layer_norm, x.double(), w.double(), b.double(), dy.double())


@pytest.mark.parametrize("rows,n", [(70, 128), (33, 384), (5, 100), (1, 512), (9, 1300)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_interpreted_layer_norm_backward_matches_float64(interpreter, rows, n, dtype):
    x, w, b, dy = _ln_case(rows, n, dtype)
    y, gx, gw, gb = _ln_grads(sk.layer_norm, x, w, b, dy)
    ry, rgx, rgw, rgb = _ln_oracle(x, w, b, dy)
    assert torch.equal(y, F.layer_norm(x, (n,), w, b, 1e-12))  # torch's forward, unchanged
    # fp32 math on rounded inputs: dx within a few fp32 ulps of its scale (or the dtype's rounding for bf16);
    # dw, db are sums over rows: error grows with sqrt(rows)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert gx.dtype == dtype and (gx.double() - rgx).abs().max() <= tol * rgx.abs().max()
    assert (gw.double() - rgw).abs().max() <= tol * rgw.abs().max() + 1e-6
    assert (gb.double() - rgb).abs().max() <= tol * rgb.abs().max() + 1e-6


def test_interpreted_layer_norm_backward_is_torchs_within_fp32_rounding(interpreter):
    x, w, b, dy = _ln_case(64, 256, torch.float32, seed=1)
    got = _ln_grads(sk.layer_norm, x, w, b, dy)
    ref = _ln_grads(F.layer_norm, x, w, b, dy)
    for a, r in zip(got[1:], ref[1:]):
        assert torch.allclose(a, r, rtol=1e-5, atol=1e-5 * float(r.abs().max()))


def test_layer_norm_backward_runs_the_same_bits_every_time(interpreter):
    x, w, b, dy = _ln_case(40, 128, torch.float32, seed=2)
    first = _ln_grads(sk.layer_norm, x, w, b, dy)
    second = _ln_grads(sk.layer_norm, x, w, b, dy)
    assert all(torch.equal(a, c) for a, c in zip(first, second))


def test_layer_norm_kernel_is_used_and_a_cpu_without_the_interpreter_runs_torchs_backward(monkeypatch):
    calls = []
    real = sk.ln_backward
    monkeypatch.setattr(sk, "ln_backward", lambda *a: calls.append(1) or real(*a))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x, w, b, dy = _ln_case(16, 64, torch.float32, seed=3)
    got = _ln_grads(sk.layer_norm, x, w, b, dy)
    ref = _ln_grads(F.layer_norm, x, w, b, dy)
    assert not calls and all(torch.equal(a, r) for a, r in zip(got, ref))  # torch's own backward: same bits
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    _ln_grads(sk.layer_norm, x, w, b, dy)
    assert calls


@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradients_are_torchs(bias):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 9, 24, generator=g, requires_grad=True)
    w = torch.randn(16, 24, generator=g, requires_grad=True)
    b = torch.randn(16, generator=g, requires_grad=True) if bias else None
    dy = torch.randn(4, 9, 16, generator=g)
    y = sk.linear(x, w, b)
    y.backward(dy)
    got = [t.grad.clone() for t in (x, w, b) if t is not None]
    for t in (x, w, b):
        if t is not None:
            t.grad = None
    ref = F.linear(x, w, b)
    ref.backward(dy)
    assert torch.equal(y, ref)
    want = [t.grad for t in (x, w, b) if t is not None]
    for a, r in zip(got, want):
        assert torch.allclose(a, r, rtol=1e-5, atol=1e-5)
    if bias:  # the GEMV sum against float64
        assert (got[-1].double() - dy.double().sum((0, 1))).abs().max() < 1e-4


def test_ones_row_is_kept_per_shape_and_dtype():
    sk._ONES.clear()
    a = sk._ones(7, torch.zeros(1))
    assert sk._ones(7, torch.zeros(1)) is a and sk._ones(7, torch.zeros(1, dtype=torch.bfloat16)) is not a
    assert a.shape == (1, 7) and bool((a == 1).all())


class _MyLinear(torch.nn.Linear):
    pass


def test_fast_layers_swaps_exact_modules_only_and_restores_them():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), _MyLinear(4, 4),
                                torch.nn.LayerNorm(4, elementwise_affine=False))
    with sk.fast_layers(model, on=True) as n:
        assert n == 2
        assert "forward" in vars(model[0]) and "forward" in vars(model[1])
        assert "forward" not in vars(model[2]) and "forward" not in vars(model[3])
    assert all("forward" not in vars(m) for m in model)
    with sk.fast_layers(model, on=False) as n:
        assert n == 0


def test_switch_names_the_key_and_values(monkeypatch):
    assert sk.enabled({}) and not sk.enabled({sk.ENV: "0"})
    with pytest.raises(ValueError, match=r"LABKIT_STEP_KERNELS='yes': allowed values are 0 .*, 1 "):
        sk.enabled({sk.ENV: "yes"})
    monkeypatch.setenv(sk.ENV, "0")
    with sk.fast_layers(torch.nn.Linear(2, 2)) as n:
        assert n == 0


def _tiny_bert(seed=0):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, num_labels=2,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(cfg)


def _bert_grads(model, batch, fast, device, autocast_dtype=None):
    model.zero_grad(set_to_none=True)
    ctx = torch.autocast(device, dtype=autocast_dtype) if autocast_dtype else torch.autocast(device, enabled=False)
    with ctx, sk.fast_layers(model, on=fast):
        loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _batch(device, rows=4, seq=12):
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 100, (rows, seq), generator=g)
    mask = torch.ones(rows, seq, dtype=torch.long)
    mask[1, 7:] = 0
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device),
            "labels": torch.tensor([0, 1, 1, 0][:rows]).to(device)}


def test_bert_step_with_fast_layers_is_the_reference_step(interpreter):
    model = _tiny_bert()
    batch = _batch("cpu")
    loss, grads = _bert_grads(model, batch, True, "cpu")
    ref_loss, ref = _bert_grads(model, batch, False, "cpu")
    assert grads.keys() == ref.keys()
    assert torch.allclose(loss, ref_loss, rtol=1e-6)
    floor = 1e-7 * max(float(g.abs().max()) for g in ref.values())  # key biases: gradient 0 up to rounding
    for name in ref:
        scale = float(ref[name].abs().max())
        assert float((grads[name] - ref[name]).abs().max()) <= 1e-4 * scale + floor, name


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("rows,n", [(8192, 128), (8192, 512), (1000, 384), (33, 1300)])
def test_cuda_layer_norm_backward_matches_float64(rows, n):
    x, w, b, dy = _ln_case(rows, n, torch.float32, device="cuda")
    _, gx, gw, gb = _ln_grads(sk.layer_norm, x, w, b, dy)
    _, rgx, rgw, rgb = _ln_oracle(x, w, b, dy)
    _, tgx, tgw, tgb = _ln_grads(F.layer_norm, x, w, b, dy)  # torch's fp32 backward: the error to match
    for got, torch_fp32, want in ((gx, tgx, rgx), (gw, tgw, rgw), (gb, tgb, rgb)):
        err, torch_err = (got.double() - want).abs().max(), (torch_fp32.double() - want).abs().max()
        assert err <= 4 * torch_err + 1e-6 * want.abs().max()


def _autocast_step_errors(device):
    """Each path's gradient error against the float64 model (same weights, same batch, no autocast)."""
    model = _tiny_bert().to(device)
    batch = _batch(device)
    _, fast = _bert_grads(model, batch, True, device, torch.bfloat16)
    _, ref = _bert_grads(model, batch, False, device, torch.bfloat16)
    _, exact = _bert_grads(model.double(), batch, False, device)
    assert fast.keys() == ref.keys() == exact.keys()
    assert all(fast[n].dtype == ref[n].dtype == torch.float32 for n in ref)
    err_fast = {n: (fast[n].double() - exact[n]).norm() for n in exact}
    err_ref = {n: (ref[n].double() - exact[n]).norm() for n in exact}
    return err_fast, err_ref, {n: exact[n].norm() for n in exact}


def _check_no_less_accurate(err_fast, err_ref, size):
    total_fast = sum(e ** 2 for e in err_fast.values()) ** 0.5
    total_ref = sum(e ** 2 for e in err_ref.values()) ** 0.5
    assert total_fast <= 1.25 * total_ref, (total_fast, total_ref)  # bf16 steps: as accurate as autocast's
    floor = 1e-3 * max(size.values())
    for n in err_ref:  # and no tensor much worse (both paths round the same activations to bf16)
        assert err_fast[n] <= 3 * err_ref[n] + floor, n


def test_bert_step_under_cpu_autocast_is_as_accurate_as_torchs(interpreter):
    _check_no_less_accurate(*_autocast_step_errors("cpu"))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_bert_step_under_autocast_is_as_accurate_as_torchs():
    _check_no_less_accurate(*_autocast_step_errors("cuda"))


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_autocast_dtypes_are_autocasts():
    lin, ln = torch.nn.Linear(8, 8).cuda(), torch.nn.LayerNorm(8).cuda()
    x = torch.randn(3, 8, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        ref = (lin(x).dtype, ln(x.bfloat16()).dtype)
        with sk.fast_layers(torch.nn.Sequential(lin, ln), on=True):
            got = (lin(x).dtype, ln(x.bfloat16()).dtype)
    assert got == ref == (torch.bfloat16, torch.float32)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_ones_row_is_not_kept_from_a_graph_capture():
    sk._ONES.clear()
    x = torch.randn(5, 3, device="cuda")
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        sk._ones(5, x)
    assert not sk._ONES
    assert sk._ones(5, x) is sk._ones(5, x)


def test_linear_under_autocast_gives_fp32_parameter_gradients_from_the_product():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 5, 32, generator=g, requires_grad=True)
    w = torch.randn(24, 32, generator=g, requires_grad=True)
    b = torch.randn(24, generator=g, requires_grad=True)
    dy = torch.randn(6, 5, 24, generator=g).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = sk.linear(x, w, b)
        ref = F.linear(x, w, b)
    assert y.dtype == ref.dtype == torch.bfloat16 and torch.equal(y, ref)  # autocast's casts, the same product
    y.backward(dy)
    got = [t.grad.clone() for t in (x, w, b)]
    # the oracle: float64 products of the bf16 operands autocast hands the GEMMs
    xb, wb, d = x.detach().bfloat16().double(), w.detach().bfloat16().double(), dy.double()
    want_w, want_b = d.reshape(-1, 24).t() @ xb.reshape(-1, 32), d.sum((0, 1))
    assert got[1].dtype == got[2].dtype == torch.float32 and got[0].dtype == torch.float32
    assert (got[1].double() - want_w).abs().max() <= 1e-5 * want_w.abs().max()  # no bf16 rounding of dW
    assert (got[2].double() - want_b).abs().max() <= 1e-5 * want_b.abs().max()
    assert (got[0].double() - d @ wb).abs().max() <= 1e-5 * (d @ wb).abs().max()  # dx: fp32 from the product


def test_an_input_several_layers_read_is_cast_once_per_forward():
    layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(3))
    x = torch.randn(4, 16, requires_grad=True)
    real = sk._cast
    with torch.autocast("cpu", dtype=torch.bfloat16), sk.fast_layers(layers, on=True):
        outs = [layer(x) for layer in layers]
        made = {id(v[1]) for v in sk._CASTS.values()}
        x2 = x.detach().clone()
        x2.add_(1)  # another tensor, then an in-place change: never a stale cast
        y2 = layers[0](x2)
        x2.add_(1)
        y3 = layers[0](x2)
        assert not torch.equal(y2, y3)
    assert sk._CASTS is None and len(made) == 1 and real is sk._cast
    sum(o.float().sum() for o in outs).backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # torch's modules: the same values
        ref = [F.linear(x, layer.weight, layer.bias) for layer in layers]
    assert all(torch.equal(o, r) for o, r in zip(outs, ref))
    assert x.grad.dtype == torch.float32
