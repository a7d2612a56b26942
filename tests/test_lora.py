import pytest
import torch

from labkit import lora


def _fresh(tiny_bert):
    import copy

    return copy.deepcopy(tiny_bert)


def test_lora_honours_rank_alpha_dropout_and_freezes_base(tiny_bert):
    model = lora.add_lora(_fresh(tiny_bert), rank=4, alpha=8.0, dropout=0.25)
    q = model.base_model.model.bert.encoder.layer[0].attention.self.query
    assert q.r["default"] == 4 and q.scaling["default"] == pytest.approx(8.0 / 4)
    assert q.lora_dropout["default"].p == 0.25
    assert not q.base_layer.weight.requires_grad and q.base_layer.bias is not None
    counts = lora.trainable_parameters(model)
    # A (r x in) + B (out x r) per targeted Linear, plus the classifier head
    linears = [m for n, m in model.named_modules() if hasattr(m, "lora_A")]
    expected = sum(4 * (m.in_features + m.out_features) for m in linears)
    head = tiny_bert.classifier.weight.numel() + tiny_bert.classifier.bias.numel()
    assert counts["trainable"] == expected + head


def test_merge_preserves_outputs_and_biases(tiny_bert):
    model = lora.add_lora(_fresh(tiny_bert), rank=4, alpha=2.0, dropout=0.0)
    with torch.no_grad():  # make the adapters non-zero so the merge has something to fold
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    model.eval()
    x = {"input_ids": torch.randint(1000, 30000, (3, 10)), "attention_mask": torch.ones(3, 10, dtype=torch.long)}
    with torch.no_grad():
        before = model(**x).logits
        merged = lora.merge_lora(model)
        after = merged(**x).logits
    assert not any("lora" in n for n, _ in merged.named_parameters())
    assert all(m.bias is not None for m in merged.modules() if isinstance(m, torch.nn.Linear))
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-5)
    base = _fresh(tiny_bert).eval()
    with torch.no_grad():
        assert not torch.allclose(base(**x).logits, after, atol=1e-4)  # the merge did change the weights


@pytest.mark.parametrize("kwargs,match", [({"rank": 0}, "rank"), ({"dropout": 1.0}, "dropout"),
                                          ({"alpha": 0}, "alpha")])
def test_bad_lora_settings(tiny_bert, kwargs, match):
    with pytest.raises(ValueError, match=match):
        lora.add_lora(_fresh(tiny_bert), **kwargs)
