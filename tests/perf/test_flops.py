"""FLOP counts on the meta device against a BERT's FLOPs written out by hand, and the roofline's arithmetic."""
from collections import Counter

import pytest

from labkit.labs.lab2_space import build_model
from labkit.perf import flops

ARCH = {"config": {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "intermediate_size": 96},
        "linears": {"layer1.attention.self.key": "identity"}}


def by_hand(length: int, arch=ARCH) -> int:
    """Forward FLOPs of one sequence (2 per multiply-add): per layer Q, K, V, output (H x H each, minus the
    Identity ones) and the two FFN matrices on every token, scores and weighted sum (L x L x H each); then the
    pooler (H x H) and the 2-class head on the [CLS] token."""
    c = arch["config"]
    h, i, n = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    squares = 4 * n - sum(v == "identity" for v in arch["linears"].values())
    return 2 * (length * (squares * h * h + n * 2 * h * i) + n * 2 * length * length * h + h * h + 2 * h)


@pytest.fixture(scope="module")
def model():
    return build_model(ARCH, seed=0)


@pytest.mark.parametrize("length", [1, 16, 100])
def test_a_forward_pass_counts_the_flops_written_out_by_hand(model, length):
    assert flops.count(model, 3, length, train=False) == 3 * by_hand(length)


def test_the_per_length_fit_is_exact_and_training_triples_the_dense_layers(model):
    fwd, step = flops.per_length(model, train=False), flops.per_length(model, train=True)
    for length in (5, 200):
        assert fwd(length) == pytest.approx(by_hand(length), rel=1e-12)
    # backward: a gradient for each operand of every matrix product, so x 3 in all; the first layer's input
    # (the embeddings) is trained, so no product skips its input gradient
    for got, want in ((step.c0, fwd.c0), (step.c1, fwd.c1), (step.c2, fwd.c2)):
        assert got == pytest.approx(3 * want, rel=1e-12)
    batches = Counter({(32, 100): 3, (8, 40): 1})
    assert step.batches(batches) == pytest.approx(3 * 32 * step(100) + 8 * step(40))


def test_roofline_reads_a_rate_against_the_cards_peak():
    r = flops.roofline(989.4e12 * 2, 4.0, "NVIDIA H100 80GB HBM3")
    assert r["achieved_tflops"] == pytest.approx(989.4 / 2) and r["share_of_peak"] == pytest.approx(0.5)
    assert r["seconds_at_peak"] == pytest.approx(2.0)
    assert flops.roofline(1e12, 1.0, "a card not in the table")["share_of_peak"] is None
