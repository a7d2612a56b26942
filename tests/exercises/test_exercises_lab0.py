"""Lab 0's exercises beyond the generic self-test: the merge reference is peft's own merge bit for bit, and a
passing remove-dropout pass really is the one ``graph.RemoveDropout`` runs (``CheckResult.installed``)."""
import torch
from torch import nn

from labkit import graph
from labkit.exercises import evaluate, get
from labkit.graph import passes


def test_merge_reference_is_peft_merge_and_unload_bit_for_bit():
    from peft import LoraConfig, get_peft_model

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 6)

        def forward(self, x):
            return self.lin(x)

    torch.manual_seed(0)
    rank, alpha = 3, 5.0
    model = get_peft_model(Tiny(), LoraConfig(r=rank, lora_alpha=alpha, target_modules=["lin"]))
    layer = model.base_model.model.lin
    with torch.no_grad():  # a trained adapter: B away from its zero start
        layer.lora_B["default"].weight.normal_()
    W = layer.base_layer.weight.detach().clone()
    A, B = layer.lora_A["default"].weight.detach().clone(), layer.lora_B["default"].weight.detach().clone()
    merged = model.merge_and_unload().lin.weight.detach()
    mine = get("lab0.merge_lora").reference(W, A, B, alpha, rank)
    assert torch.equal(mine, merged) and not torch.equal(mine, W)


def _toy_train_graph():
    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.drop = nn.Linear(4, 4), nn.Dropout(0.5)

        def forward(self, x):
            return self.lin(self.drop(x)) + nn.functional.dropout(x, 0.5, training=True)

    return torch.fx.symbolic_trace(Toy())


def test_installed_routes_remove_dropout_through_a_passing_pass_and_restores_it():
    calls = []

    def mine(gm):
        calls.append(gm)
        for node in list(gm.graph.nodes):
            if passes.is_dropout(node, gm):
                node.replace_all_uses_with(node.args[0])
                gm.graph.erase_node(node)
        gm.recompile()
        return gm

    result = evaluate("lab0.remove_dropout", mine)
    assert result.ok
    before = passes.remove_dropout_nodes
    calls.clear()
    with result.installed():
        res = graph.RemoveDropout()(_toy_train_graph())
    assert passes.remove_dropout_nodes is before and len(calls) == 1
    assert res.changes == ["drop", "dropout"] and graph.CountDropout()(res.graph_module).info["dropout"] == 0
    with evaluate("lab0.remove_dropout", lambda gm: gm).installed():  # failing: labkit's stays
        assert passes.remove_dropout_nodes is before


def test_remove_dropout_without_rewiring_still_raises_fx_error():
    try:
        graph.RemoveDropout(rewire=False)(_toy_train_graph())
    except RuntimeError as err:
        assert "still had 1 users" in str(err)
    else:
        raise AssertionError("erasing a dropout that has users must raise")
