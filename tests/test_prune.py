import copy

import pytest
import torch

from labkit import prune
from labkit.quant.compress import compress
from labkit.quant import fixed_point


def _cfg(sp, method="l1-norm", scope="local", act=True):
    cfg = {"weight": {"sparsity": sp, "method": method, "scope": scope}}
    if act:
        cfg["activation"] = {"sparsity": sp, "method": method, "scope": "local"}
    return cfg


@pytest.mark.parametrize("method", ["random", "l1-norm"])
@pytest.mark.parametrize("scope", ["local", "global"])
@pytest.mark.parametrize("sparsity", [0.0, 0.1, 0.5, 0.9])
def test_achieved_weight_sparsity_matches_request(tiny_bert, method, scope, sparsity):
    res = prune.prune(tiny_bert, _cfg(sparsity, method, scope, act=False))
    assert res.report["achieved_weight_sparsity"] == pytest.approx(sparsity, abs=1e-3)
    assert prune.weight_sparsity(res.model) == pytest.approx(sparsity, abs=1e-3)
    if scope == "local":
        for name, info in res.changed.items():
            assert info["weight"] == pytest.approx(sparsity, abs=1.0 / res.model.get_submodule(name).weight.numel())


def test_l1_local_removes_the_smallest_weights(tiny_bert):
    res = prune.prune(tiny_bert, _cfg(0.3, act=False))
    for name, m in tiny_bert.named_modules():
        if isinstance(m, torch.nn.Linear):
            w = m.weight.detach().abs().flatten()
            kept = res.model.get_submodule(name).weight.detach().flatten() != 0
            assert w[~kept].max() <= w[kept].min()


def test_l1_global_uses_one_threshold_across_layers(tiny_bert):
    model = copy.deepcopy(tiny_bert)
    with torch.no_grad():  # one layer of much larger weights: global ranking should spare it
        model.bert.encoder.layer[0].intermediate.dense.weight.mul_(10)
    res = prune.prune(model, _cfg(0.5, scope="global", act=False))
    pruned_max, kept_min = 0.0, float("inf")
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            w = m.weight.detach().abs().flatten()
            kept = res.model.get_submodule(name).weight.detach().flatten() != 0
            pruned_max = max(pruned_max, w[~kept].max().item()) if (~kept).any() else pruned_max
            kept_min = min(kept_min, w[kept].min().item())
    assert pruned_max <= kept_min
    assert res.changed["bert.encoder.layer.0.intermediate.dense"]["weight"] < 0.1
    assert res.report["achieved_weight_sparsity"] == pytest.approx(0.5, abs=1e-3)


def test_masked_weights_stay_zero_after_optimizer_steps(tiny_bert):
    model = prune.prune(tiny_bert, _cfg(0.6, act=False)).model.train()
    masks = {n: m.weight.detach() == 0 for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = {"input_ids": torch.randint(1000, 30000, (4, 10)), "labels": torch.tensor([0, 1, 0, 1])}
    for _ in range(3):
        model(**x).loss.backward()
        opt.step()
        opt.zero_grad()
    for name, zero in masks.items():
        w = model.get_submodule(name).weight
        assert (w[zero] == 0).all(), name
        assert (w[~zero] != 0).float().mean() > 0.99  # the rest trained and stayed non-zero


@pytest.mark.parametrize("method", ["random", "l1-norm"])
def test_activation_pruning_is_deterministic_at_eval(tiny_bert, method):
    model = prune.prune(tiny_bert, _cfg(0.5, method)).model.eval()
    x = {"input_ids": torch.randint(1000, 30000, (3, 14))}
    with torch.no_grad():
        a, b = model(**x).logits, model(**x).logits
    assert torch.equal(a, b)
    again = prune.prune(tiny_bert, _cfg(0.5, method)).model.eval()  # same seed: same masks
    with torch.no_grad():
        assert torch.equal(again(**x).logits, a)
    assert prune.activation_sparsity(model, x) == pytest.approx(0.5, abs=0.02)


def test_l1_activation_zeroes_smallest_entries_per_token():
    mask = prune.ActivationMask(8, 0.25, "l1-norm", seed=0)
    x = torch.tensor([[[3.0, -0.125, 2.0, 0.25, -5.0, 1.0, 0.0625, 4.0]]])
    out = mask(x)
    assert out.tolist() == [[[3.0, 0.0, 2.0, 0.25, -5.0, 1.0, 0.0, 4.0]]]


@pytest.mark.parametrize("cfg,match", [
    ({"weight": {"sparsity": 1.0}}, r"\[0, 1\)"),
    ({"weight": {"sparsity": -0.1}}, r"\[0, 1\)"),
    ({"weight": {"sparsity": 0.5, "method": "l2"}}, "allowed values are 'random', 'l1-norm'"),
    ({"weight": {"sparsity": 0.5, "scope": "layer"}}, "allowed values are 'local', 'global'"),
    ({"weight": {"sparsity": 0.5, "granularity": "row"}}, "unknown; allowed"),
    ({"weights": {"sparsity": 0.5}}, "unknown; allowed"),
    ({"activation": {"sparsity": 0.5, "scope": "global"}}, "must be 'local'"),
])
def test_bad_prune_configs(tiny_bert, cfg, match):
    with pytest.raises((KeyError, ValueError), match=match):
        prune.prune(tiny_bert, cfg)


def test_compress_quantizes_then_prunes_and_mask_survives_training(tiny_bert):
    res = compress(tiny_bert, quant=fixed_point(8), prune=_cfg(0.5, act=False))
    from labkit.quant import QuantLinear

    q = [m for m in res.model.modules() if isinstance(m, QuantLinear)]
    assert len(q) == 14 and all(torch.nn.utils.parametrize.is_parametrized(m, "weight") for m in q)
    assert res.report["average_bits"]["weight_bits"] == 8.0
    assert prune.weight_sparsity(res.model) == pytest.approx(0.5, abs=1e-3)
    model = res.model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = {"input_ids": torch.randint(1000, 30000, (4, 10)), "labels": torch.tensor([0, 1, 0, 1])}
    model(**x).loss.backward()
    opt.step()
    assert prune.weight_sparsity(model) >= 0.5 - 1e-3


def test_l1_activation_mask_reused_only_for_the_same_unchanged_input():
    m1, m2 = prune.ActivationMask(16, 0.5, "l1-norm", 0), prune.ActivationMask(16, 0.5, "l1-norm", 1)
    m3 = prune.ActivationMask(16, 0.25, "l1-norm", 0)
    x = torch.randn(2, 16)
    a = m1(x)
    assert m2(x) is a                      # query, key and value: one ranking
    assert m3(x) is not a                  # another k
    assert torch.equal(m3(x), x.scatter(-1, x.abs().topk(4, dim=-1, largest=False).indices, 0.0))
    assert m1(x.clone()) is not a          # another tensor
    x.mul_(-1)                             # changed in place: ranked again
    b = m1(x)
    assert b is not a and torch.equal(b, -a)
    with torch.no_grad():
        assert m1(x) is not b              # a no-grad result is never handed to a grad-mode caller


def test_shared_activation_mask_gives_the_same_training_gradients(tiny_bert, monkeypatch):
    model = prune.prune(tiny_bert, _cfg(0.5)).model.train()
    x = {"input_ids": torch.randint(1000, 2000, (2, 12), generator=torch.Generator().manual_seed(0)),
         "labels": torch.tensor([0, 1])}

    ranked, remember = [0], prune._remember

    def counted(x, k, out):
        ranked[0] += 1
        return remember(x, k, out)

    monkeypatch.setattr(prune, "_remember", counted)

    def grads():
        torch.manual_seed(0)
        model.zero_grad()
        ranked[0] = 0
        model(**x).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    shared = grads()
    assert ranked[0] == 2 * 4 + 2  # per layer: query/key/value once, attention output, FFN in, FFN out; pooler, head
    monkeypatch.setattr(prune, "_same_input", lambda x, k: None)
    alone = grads()
    assert ranked[0] == 2 * 6 + 2
    assert shared.keys() == alone.keys()
    for n in shared:  # the same terms summed in another order: float32 rounding only
        torch.testing.assert_close(shared[n], alone[n], rtol=1e-5, atol=1e-6, msg=n)


@pytest.mark.parametrize("sparsity", [0.1, 0.5, 0.75, 0.9])
def test_l1_activation_mask_matches_a_sort_at_every_sparsity(sparsity):
    """Both ranking paths (the k smallest below 50%, the n - k largest above) against a full sort."""
    x = torch.randn(3, 5, 40, generator=torch.Generator().manual_seed(1), requires_grad=True)  # no ties
    k = round(sparsity * 40)
    out = prune.ActivationMask(40, sparsity, "l1-norm", seed=0)(x)
    drop = torch.zeros(3, 5, 40, dtype=torch.bool).scatter(-1, x.abs().argsort(dim=-1)[..., :k], True)
    assert torch.equal(out, x.masked_fill(drop, 0.0))
    out.sum().backward()  # the gradient reaches exactly the kept entries
    assert torch.equal(x.grad, (~drop).float())
