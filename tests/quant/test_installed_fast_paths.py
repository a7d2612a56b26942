"""A student's function installed at a format's hook (``CheckResult.installed``) is what computes that format on every
device: labkit's fast paths for the format (the Triton kernel, the compiled and fused formulas, the memoised kernel
result, the frozen weights of another function, CUDA graph replays) are off while it is there.

No GPU here: the fast-path selector (``fast.why_reference``) is asked directly, the Triton kernel runs in Triton's
CPU interpreter as the control (``TRITON_INTERPRET=1``, the path a CUDA tensor takes), and the compiler is replaced
by a trap that fails the test if a path still asks for it."""
import pytest
import torch

from labkit.exercises import evaluate, get
from labkit.quant import QuantLinear, fast, kernel_check, make_format
from labkit.quant import fake_quant_triton as fq
from labkit.quant.config import LinearQuantConfig
from labkit.quant.formats import FORMATS
from labkit.training import cuda_graphs

# every format with a hook, the exercise that installs a student's function there, and a format that calls it
HOOKED = [("lab1.fixed_point", make_format("integer", width=8, frac_width=4)),
          ("lab3.minifloat_denorm", make_format("minifloat_denorm", width=8, exponent_width=4)),
          ("lab3.log", make_format("log", width=6)),
          ("lab3.block_fp", make_format("block_fp", width=6, block_size=16))]


def _installed(exercise_id, calls):
    """The exercise's reference as the student's function (it passes its check), counting its calls."""
    reference = get(exercise_id).reference

    def student(*args, **kwargs):
        calls.append((tuple(args[0].shape), torch.is_grad_enabled()))
        return reference(*args, **kwargs)

    result = evaluate(exercise_id, student)
    assert result.ok
    calls.clear()
    return result.installed()


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def test_every_hooked_format_is_covered_here():
    hooked = {n for n, cls in FORMATS.items() if cls.hook_path()}
    assert {fmt.name for _, fmt in HOOKED} == hooked
    assert {get(i).install for i, _ in HOOKED} == {FORMATS[n].hook_path() for n in hooked}


@pytest.mark.parametrize("exercise_id, fmt", HOOKED, ids=[f.name for _, f in HOOKED])
def test_the_selector_turns_the_fast_paths_off_while_a_function_is_installed(exercise_id, fmt):
    other = make_format("minifloat_ieee", width=8, exponent_width=4)  # no hook: never affected
    assert fast.why_reference(fmt) is None and type(fmt).replaced() is None
    calls = []
    with _installed(exercise_id, calls):
        why = fast.why_reference(fmt)
        assert why and get(exercise_id).install in why
        assert type(fmt).replaced() == get(exercise_id).install
        assert fast.why_reference(other) is None
    assert fast.why_reference(fmt) is None  # restored with labkit's function


@pytest.mark.skipif(fq.triton is None, reason="triton is not installed")
@pytest.mark.parametrize("exercise_id, fmt", HOOKED, ids=[f.name for _, f in HOOKED])
def test_no_triton_kernel_for_an_installed_format(exercise_id, fmt, monkeypatch):
    """The kernel path a CUDA tensor takes, in Triton's interpreter: labkit's kernel outside the block, the
    student's function inside (the kernel never asked)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(kernel_check, "TRITON_FAKE_QUANT", True)
    x = _x(4, 32)
    want = fmt.quantize_values(x)
    got = fast.triton_values(fmt, x, torch.float32)
    assert got is not None and torch.equal(got, want)  # the control: outside the block the kernel runs
    asked = []
    real = fq.quantize
    monkeypatch.setattr(fq, "quantize", lambda *a, **k: asked.append(a) or real(*a, **k))
    calls = []
    with _installed(exercise_id, calls):
        assert fast.triton_values(fmt, x, torch.float32) is None  # not even the memo of the same input
        assert fast.triton_values(fmt, x, torch.bfloat16) is None
        q = fast.quantize_values(fmt, x)
        assert torch.equal(q, want) and calls and not asked
        calls.clear()
        assert torch.equal(fast.fake_quantize_bf16(fmt, x, compile=False), want.to(torch.bfloat16))
        assert calls and not asked


@pytest.mark.parametrize("exercise_id, fmt", HOOKED, ids=[f.name for _, f in HOOKED])
def test_no_compiled_or_fused_formula_for_an_installed_format(exercise_id, fmt, monkeypatch):
    def trap(*args, **kwargs):
        raise AssertionError("torch.compile asked for a format whose function is installed")

    monkeypatch.setattr(torch, "compile", trap)
    monkeypatch.setattr(fast, "_VALUES", {})
    monkeypatch.setattr(fast, "_COMPILED", {})
    x = _x(3, 48)
    want = fmt.quantize_values(x)
    calls = []
    with _installed(exercise_id, calls):
        assert torch.equal(fast.quantize_values(fmt, x, compile=True), want)  # inference: eager, the student's
        assert calls and not fast._VALUES
        calls.clear()
        xg = x.clone().requires_grad_(True)
        q = fast.fake_quantize_bf16(fmt, xg, compile=True)  # QAT's bf16 path: the fused formula, uncompiled
        assert torch.equal(q.detach(), want.to(torch.bfloat16)) and calls and calls[0][1] is False
        q.float().sum().backward()
        mask = fmt.pass_mask(x)
        assert torch.equal(xg.grad, torch.ones_like(x) if mask is None else mask.float())  # labkit's STE mask
        calls.clear()
        assert torch.equal(fast.fake_quantize_bf16(fmt, x, compile=True), want.to(torch.bfloat16)) and calls
        assert not fast._COMPILED


@pytest.mark.parametrize("exercise_id, fmt", HOOKED, ids=[f.name for _, f in HOOKED])
def test_a_quantized_linear_recomputes_its_weight_and_refuses_graphs_while_installed(exercise_id, fmt):
    torch.manual_seed(0)
    layer = QuantLinear.from_linear(torch.nn.Linear(32, 8), LinearQuantConfig(data_in=fmt, weight=fmt, bias=fmt))
    model = torch.nn.Sequential(layer).eval()
    x = _x(5, 32)
    with torch.no_grad():
        want = model(x)  # labkit's function; the weight and bias frozen (quantized once) in eval mode
    assert layer.why_not_graphed() is None and cuda_graphs.why_not(model) is None
    calls = []
    with _installed(exercise_id, calls), torch.no_grad():
        got = model(x)
        shapes = [s for s, _ in calls]
        assert (8, 32) in shapes and (8,) in shapes and (5, 32) in shapes  # weight, bias and input: the student's
        assert torch.equal(got, want)
        why = cuda_graphs.why_not(model)
        assert why and "a replay would not call it" in why and get(exercise_id).install in why
    assert layer.why_not_graphed() is None
    calls.clear()
    with torch.no_grad():
        assert torch.equal(model(x), want)  # labkit's again
    assert not calls
