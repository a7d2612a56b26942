import pytest
import torch

from labkit import graph


def test_capture_placeholders_follow_chosen_inputs(tiny_bert):
    for names in (["input_ids", "attention_mask", "labels"], ["input_ids", "attention_mask"], ["input_ids"]):
        gm = graph.capture(tiny_bert, names)
        assert [n.target for n in gm.graph.nodes if n.op == "placeholder"] == names


def test_captured_graph_computes_the_model(tiny_bert):
    gm = graph.capture(tiny_bert)
    x = graph.example_inputs(tiny_bert, seq_len=12, batch=3)  # other shapes than the capture's
    tiny_bert.eval()
    with torch.no_grad():
        ref = tiny_bert(**x)
        out = gm(**x)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.loss, ref.loss, rtol=1e-5, atol=1e-5)


def test_bad_input_name_is_a_clear_error(tiny_bert):
    with pytest.raises(ValueError, match="not accepted.*allowed"):
        graph.capture(tiny_bert, ["input_ids", "pixel_values"])


def test_topology_without_labels_drops_the_loss(tiny_bert):
    diff = graph.topology_diff(graph.capture(tiny_bert), graph.capture(tiny_bert, ["input_ids", "attention_mask"]))
    assert diff["removed"].get("placeholder:labels") == 1
    assert any("cross_entropy" in k for k in diff["removed"])
    assert diff["added"] == {}


def test_metadata_pass_records_shapes(tiny_bert):
    gm = graph.capture(tiny_bert, batch=2, seq_len=16)
    res = graph.MetadataPass()(gm)
    assert not res.modified
    assert res.info["parameters"] == sum(p.numel() for p in tiny_bert.parameters())
    linear_shapes = [v["shape"] for k, v in res.info["shapes"].items() if k.startswith("linear")]
    assert [2, 16, 64] in linear_shapes


def test_dropout_count_and_removal_make_training_graph_deterministic(tiny_bert):
    gm = graph.capture(tiny_bert, train=True)
    count = graph.CountDropout()(gm).info
    assert count["dropout"] == 6  # embeddings, 2 per layer x 2 layers, classifier
    assert len(count["fused_attention_dropout"]) == 2
    x = gm.meta["example_inputs"]
    torch.manual_seed(0)
    a = gm(**x).logits
    torch.manual_seed(1)
    assert not torch.allclose(a, gm(**x).logits)  # dropout is live before the pass
    res = graph.RemoveDropout()(gm)
    assert res.modified and len(res.changes) == 8
    assert graph.CountDropout()(res.graph_module).info == {"dropout": 0, "nodes": [],
                                                          "fused_attention_dropout": []}
    tiny_bert.eval()
    with torch.no_grad():
        ref = tiny_bert(**x).logits
    torch.testing.assert_close(res.graph_module(**x).logits, ref, rtol=1e-5, atol=1e-5)


def test_erasing_without_rewiring_raises_fx_error(tiny_bert):
    with pytest.raises(RuntimeError, match="Tried to erase Node dropout but it still had"):
        graph.RemoveDropout(rewire=False)(graph.capture(tiny_bert))


def test_run_passes_threads_results(tiny_bert):
    gm, results = graph.run_passes(graph.capture(tiny_bert, train=True),
                                   [graph.CountDropout(), graph.RemoveDropout(), graph.CountDropout()])
    assert [r.info.get("dropout") for r in results] == [6, None, 0]
    assert results[1].graph_module is gm


def test_draw_writes_svg(tiny_bert, tmp_path):
    pytest.importorskip("pydot")
    import shutil

    if shutil.which("dot") is None:
        pytest.fail("graphviz 'dot' must be installed (tools/install.sh installs it)")
    path = graph.draw(graph.capture(tiny_bert, ["input_ids"]), tmp_path / "g.svg")
    text = path.read_text()
    assert text.lstrip().startswith("<?xml") and "embedding" in text
