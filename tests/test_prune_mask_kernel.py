"""labkit.prune.mask_kernel: L1 activation pruning in one Triton pass and by NumPy's selection on a CPU, against a
full sort (the oracle) and against ``ActivationMask``'s topk path; Triton's interpreter here, CUDA on the device."""
import pytest
import torch

from labkit import prune
from labkit.prune import mask_kernel as mk

CUDA = torch.cuda.is_available()
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert type(mk._kernel(mk.interpreting())).__name__ == "InterpretedFunction"


def _numpy(x, k):
    return mk.prune_smallest_cpu(x, k), mk.cpu_keep(x, k)


@pytest.fixture(params=["triton", "numpy"])
def impl(request, monkeypatch):
    """``(x, k) -> (out, keep)`` of each path: the Triton kernel (interpreted) and the CPU's NumPy selection."""
    if request.param == "triton":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        return mk.mask_smallest
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return _numpy


def _distinct(shape, dtype, seed=0, device="cpu"):
    """Values whose magnitudes all differ within each row, in any dtype here: consecutive bit patterns from 1.0 up
    (bf16, fp16, fp32 alike), shuffled per row, with random signs. No ties at any cut."""
    g = torch.Generator().manual_seed(seed)
    n, rows = shape[-1], int(torch.tensor(shape[:-1]).prod())
    one, view = {torch.float32: (0x3F800000, torch.int32), torch.bfloat16: (0x3F80, torch.int16),
                 torch.float16: (0x3C00, torch.int16)}[dtype]
    bits = torch.stack([torch.randperm(n, generator=g) for _ in range(rows)]) + one
    signs = torch.randint(0, 2, bits.shape, generator=g) * 2 - 1
    return (bits.to(view).view(dtype) * signs.to(dtype)).reshape(shape).to(device)


def _sorted_drop(x, k):
    """The oracle: True at each row's k smallest magnitudes by a stable full sort (ties: lowest index first)."""
    order = x.abs().float().argsort(dim=-1, stable=True)[..., :k]
    return torch.zeros(x.shape, dtype=torch.bool, device=x.device).scatter(-1, order, True)


def _topk_path(x, k):
    """ActivationMask's reference path (torch.topk), as it runs with the kernel off."""
    n = x.shape[-1]
    if k <= n - k:
        return x.scatter(-1, x.abs().topk(k, dim=-1, largest=False).indices, 0.0)
    keep = x.abs().topk(n - k, dim=-1).indices
    return torch.zeros_like(x).scatter(-1, keep, x.gather(-1, keep))


@pytest.mark.parametrize("shape,k", [((7, 16), 8), ((5, 100), 37), ((3, 128), 120), ((9, 40), 1), ((2, 3, 300), 299),
                                     ((70, 24), 12), ((4, 1300), 650)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_both_paths_zero_exactly_the_k_smallest(impl, shape, k, dtype):
    x = _distinct(shape, dtype, seed=k)
    out, keep = impl(x, k)
    drop = _sorted_drop(x, k)
    assert out.dtype == dtype and torch.equal(keep, ~drop)
    assert torch.equal(out, x.masked_fill(drop, 0.0))
    assert torch.equal(out, _topk_path(x, k))  # the reference's bits where no magnitudes tie


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ties_at_the_cut_zero_the_lowest_indices_and_exactly_k(impl, dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.randint(-4, 5, (50, 33), generator=g) / 4).to(dtype)  # 9 values over 33 entries: many ties
    for k in (1, 10, 16, 17, 32):
        out, keep = impl(x, k)
        drop = _sorted_drop(x, k)
        assert torch.equal(keep, ~drop), k  # the stable sort zeroes equal magnitudes lowest index first
        assert ((~keep).sum(-1) == k).all()
        assert torch.equal(out, x.masked_fill(drop, 0.0))
        # topk may pick other entries among the ties, never other magnitudes
        picked = x.abs().float().topk(k, dim=-1, largest=False).values.sort(-1).values
        assert torch.equal(x.abs().float().masked_select(~keep).reshape(50, k).sort(-1).values, picked)


def test_special_values_order_as_topk_orders_them(impl):
    x = torch.tensor([[float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -2.0, 3.0]])
    out, keep = impl(x, 4)
    # +0, -0 (equal magnitudes: lowest index first), 1, -2 zeroed; inf, -inf, 3 and NaN (above inf) kept
    assert keep.tolist() == [[True, True, True, False, False, False, False, True]]
    assert out[0, 0].isnan() and out[0, 1:3].isinf().all() and out[0, 7] == 3.0
    assert torch.equal(out[0, 3:7], torch.zeros(4)) and not out[0, 3:7].signbit().any()  # +0, as scatter writes


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("path", ["triton", "numpy"])
def test_gradient_passes_where_kept_as_the_references_does(monkeypatch, dtype, path):
    if path == "triton":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    fn = mk.prune_smallest if path == "triton" else mk.prune_smallest_cpu
    x = _distinct((4, 6, 48), dtype, seed=5).requires_grad_()
    g = torch.randn(4, 6, 48, generator=torch.Generator().manual_seed(6)).to(dtype)
    (gx,) = torch.autograd.grad(fn(x, 20), x, g)
    (rx,) = torch.autograd.grad(_topk_path(x, 20), x, g)
    assert gx.dtype == dtype and torch.equal(gx, rx)


def test_the_same_bits_every_run_and_on_both_paths(interpreter):
    x = (torch.randint(-3, 4, (64, 40), generator=torch.Generator().manual_seed(7)) / 2).float()
    first = mk.mask_smallest(x, 13)
    second = mk.mask_smallest(x, 13)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert all(torch.equal(a, b) for a, b in zip(first, _numpy(x, 13)))  # ties settled alike on GPU and CPU


def test_activation_mask_takes_the_kernel_where_supported_and_the_reference_when_off(interpreter, monkeypatch):
    calls = []
    real = mk.prune_smallest
    monkeypatch.setattr(mk, "prune_smallest", lambda x, k: calls.append(k) or real(x, k))
    x = _distinct((2, 5, 40), torch.float32, seed=8)
    out = prune.ActivationMask(40, 0.75, "l1-norm", seed=0)(x)
    assert calls == [30] and torch.equal(out, _topk_path(x, 30))
    monkeypatch.setenv(mk.ENV, "0")
    again = prune.ActivationMask(40, 0.75, "l1-norm", seed=0)(x.clone())
    assert calls == [30] and torch.equal(again, out)
    monkeypatch.delenv("TRITON_INTERPRET")  # a CPU tensor without the interpreter: NumPy's selection
    monkeypatch.delenv(mk.ENV)
    assert not mk.supported(x) and mk.cpu_supported(x)
    cpu = []
    monkeypatch.setattr(mk, "prune_smallest_cpu", lambda x, k: cpu.append(k) or mk.cpu_keep(x, k) * x)
    assert torch.equal(prune.ActivationMask(40, 0.75, "l1-norm", seed=0)(x.clone()), out) and cpu == [30]
    monkeypatch.setenv(mk.ENV, "0")
    assert not mk.cpu_supported(x)


def test_bad_setting_and_k_name_the_allowed_values(interpreter, monkeypatch):
    monkeypatch.setenv(mk.ENV, "yes")
    with pytest.raises(ValueError, match=r"LABKIT_PRUNE_KERNEL='yes': allowed values are 0 .*, 1 "):
        mk.supported(torch.zeros(2, 4))
    monkeypatch.delenv(mk.ENV)
    for k in (0, 4):
        for fn in (mk.mask_smallest, mk.cpu_keep):
            with pytest.raises(ValueError, match=r"allowed values are 0 < k < 4"):
                fn(torch.zeros(2, 4), k)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("rows,n,k", [(8192, 128, 64), (8192, 512, 256), (51200, 384, 192), (1000, 2048, 1843),
                                      (33, 1300, 650)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_kernel_matches_the_sort_and_topk(rows, n, k, dtype):
    x = _distinct((rows, n), dtype, seed=n, device="cuda")
    out, keep = mk.mask_smallest(x, k)
    drop = _sorted_drop(x, k)
    assert torch.equal(keep, ~drop) and torch.equal(out, _topk_path(x, k))
    y = torch.randn(rows, n, device="cuda").to(dtype)  # real ties in bf16: exactly k, the sort's choice
    out, keep = mk.mask_smallest(y, k)
    assert torch.equal(keep, ~_sorted_drop(y, k)) and ((~keep).sum(-1) == k).all()
    assert torch.equal(keep.cpu(), mk.cpu_keep(y.cpu(), k))  # the CPU path settles the ties alike
    yg = y.clone().requires_grad_()
    (grad,) = torch.autograd.grad(mk.prune_smallest(yg, k), yg, torch.ones_like(y))
    assert torch.equal(grad, keep.to(dtype))
