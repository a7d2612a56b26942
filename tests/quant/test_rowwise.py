"""A CPU quantizes a large tensor of a row-local format in chunks of rows (``formats.base.rowwise_values``): the
same bits as one call, for every format that says it is row-local, at shapes whose chunks split unevenly and
whose last dimension does not divide the formats' blocks; a format that reads the whole tensor is never split."""
import pytest
import torch

from labkit.quant import make_format
from labkit.quant.formats import base
from tests.quant.test_formats import PROPERTY_CONFIGS


def awkward(shape, seed=0):
    """Values over many binades, with zeros, signed zeros, infinities and NaN among them."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-20, 12, shape, generator=g).float())
    flat = x.view(-1)
    flat[::97] = 0.0
    flat[1::101] = -0.0
    flat[2::1009] = float("inf")
    flat[3::1013] = float("-inf")
    flat[4::1019] = float("nan")
    return x


def same(a, b):
    """Equal bit for bit: the same NaN positions, values and signs (-0.0 apart from 0.0)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    nan = torch.isnan(a)
    return (torch.equal(nan, torch.isnan(b)) and torch.equal(a[~nan], b[~nan])
            and torch.equal(torch.signbit(a[~nan]), torch.signbit(b[~nan])))


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(base, "CPU_CHUNK", 1000)  # many chunks on small tensors


@pytest.mark.parametrize("name,params", PROPERTY_CONFIGS)
@pytest.mark.parametrize("shape", [(7, 37, 113), (2500, 3), (3, 4000)])
def test_rows_in_chunks_give_the_same_bits(small_chunks, name, params, shape):
    fmt = make_format(name, **params)
    x = awkward(shape)
    if name == "mxint8" and shape[-1] % fmt.group_size:
        x = x[..., : shape[-1] - shape[-1] % fmt.group_size].contiguous()  # the reference needs whole groups
    torch.manual_seed(1)
    want = fmt.quantize_values(x)
    torch.manual_seed(1)
    got = base.rowwise_values(fmt, x)
    assert same(got, want)


def test_which_formats_are_split():
    local = {n: make_format(n, **p).row_local() for n, p in PROPERTY_CONFIGS if not p}
    assert not local["binary_residual_sign"]  # per-tensor scales
    assert all(v for n, v in local.items() if n != "binary_residual_sign")
    assert not make_format("binary", stochastic=True).row_local()  # random draws in tensor order
    assert not make_format("binary_scaling", per_channel=False).row_local()  # one mean for the whole tensor


def test_a_whole_tensor_format_is_quantized_in_one_call(small_chunks, monkeypatch):
    fmt = make_format("binary_residual_sign")
    calls = []
    monkeypatch.setattr(type(fmt), "quantize_values", lambda self, x: calls.append(x.shape) or x)
    base.rowwise_values(fmt, torch.randn(50, 100))
    assert calls == [torch.Size([50, 100])]
    fmt = make_format("integer")
    monkeypatch.setattr(type(fmt), "quantize_values", lambda self, x: calls.append(x.shape) or x)
    calls.clear()
    base.rowwise_values(fmt, torch.randn(50, 100))
    assert calls == [torch.Size([10, 100])] * 5  # 1000 elements a chunk: 10 rows of 100
