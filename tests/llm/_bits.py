"""Compiled pieces against eager in bf16: the same bits but where float32's last bits (a reduction's order, an exp)
tip a value across a bf16 rounding boundary. Unrounded pieces (Inductor's default) match about 70% of values."""
import torch


def assert_rounded_as_eager(want, got, name: str, exact: bool = False) -> None:
    """``exact``: every bit equal; else each value within one bf16 step and at least 99% of them equal."""
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for a, b in zip(want, got):
        if exact:
            assert torch.equal(a, b), name
            continue
        step = torch.finfo(torch.bfloat16).eps * a.float().abs().clamp_min(1e-30)
        assert ((a.float() - b.float()).abs() <= step).all(), name
        assert (a == b).float().mean() >= 0.99, f"{name}: {float((a == b).float().mean()):.3f} of values equal"
