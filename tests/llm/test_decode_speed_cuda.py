"""On a CUDA device: the decode-speed sweep end to end at its smallest, and the compiled pieces' bf16 bits against
eager's (Inductor's Triton kernels with emulate_precision_casts)."""
import pytest
import torch

from _bits import assert_rounded_as_eager
from labkit.llm import decode_speed
from labkit.llm.static_decode import PIECES, RECOMPILE_LIMIT, compiled_pieces

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_the_sweep_times_each_loop_beside_its_roofline_and_records_how():
    saved = []
    out = decode_speed.sweep(shapes=("smollm2-135m",), batches=(1,), new_tokens=4, prompt_len=4, repeats=1,
                             loops=("generate", "labkit_graph", "labkit_graph_mxint8"), progress=lambda *_: None,
                             on_rows=lambda o: saved.append(len(o["rows"])))
    assert [r["loop"] for r in out["rows"]] == ["generate", "labkit_graph", "labkit_graph_mxint8"]
    assert saved == [2, 3]  # saved after each weights' rows
    rates = out["copy_rates_bytes_per_s"]
    assert set(rates) == {"memcpy", "kernel"} and out["copy_bandwidth_bytes_per_s"] == max(rates.values())
    assert out["compile_options"] == {"emulate_precision_casts": True}
    for r in out["rows"]:
        assert 0 < r["fraction_of_roofline"] < 1.05 and r["tokens_per_s"] > 0
    assert out["rows"][2]["weights"].endswith("every Linear MXINT8 g32") and out["rows"][0]["weights"].endswith("bf16")
    assert out["conversions"]["smollm2-135m"]["weight_bytes_after"] < out["conversions"]["smollm2-135m"][
        "weight_bytes_before"]


def test_compiled_pieces_round_bf16_as_eager_does_on_cuda():
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *shape: torch.randn(*shape, generator=g, device="cuda").to(torch.bfloat16)  # noqa: E731
    x, d, w = r(16, 1, 2048), r(16, 1, 2048), r(2048)
    args = {"rms": (x, w, 1e-5), "add_rms": (x, d, w, 1e-5),
            "rotate_qk": (r(16, 32, 1, 64), r(16, 32, 1, 64), r(1, 1, 1, 64), r(1, 1, 1, 64)),
            "gated": (r(16, 1, 8192), r(16, 1, 8192))}
    with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
        for name, fn in compiled_pieces().items():
            want, got = PIECES[name](*args[name]), fn(*args[name])
            # products and sums round as eager's: exact; a norm's mean (summed in another order) and SiLU's exp
            # (Triton's, not ATen's) may tip a value across a bf16 rounding boundary
            assert_rounded_as_eager(want, got, name, exact=name == "rotate_qk")
