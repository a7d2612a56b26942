"""CUDA graphs in the training and evaluation loops (labkit.training.cuda_graphs).

On CPU: the switch, the hook refusal, and ShapeGraphs' bookkeeping with a stand-in graph that records the
captured function and runs it again on replay (what a CUDA graph does with the kernels). On a GPU: the
graphed loops against the eager reference loop, on a small BERT and real IMDb batches.
"""
import contextlib
import inspect
import warnings

import pytest
import torch

from labkit import data, models
from labkit.training import batches, cuda_graphs, train

CUDA = torch.cuda.is_available()


def test_wanted_follows_device_setting_and_env(monkeypatch):
    monkeypatch.delenv(cuda_graphs.ENV, raising=False)
    assert cuda_graphs.wanted(torch.device("cpu"), None) is False
    assert cuda_graphs.wanted(torch.device("cuda"), None) is True
    assert cuda_graphs.wanted(torch.device("cuda"), False) is False
    monkeypatch.setenv(cuda_graphs.ENV, "0")
    assert cuda_graphs.wanted(torch.device("cuda"), None) is False
    monkeypatch.setenv(cuda_graphs.ENV, "yes")
    with pytest.raises(ValueError, match="LABKIT_CUDA_GRAPHS.*allowed values"):
        cuda_graphs.wanted(torch.device("cuda"), None)
    with pytest.raises(ValueError, match="graphs=True needs a CUDA device"):
        cuda_graphs.wanted(torch.device("cpu"), True)


def test_models_with_hooks_are_not_captured():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    assert cuda_graphs.why_not(model) is None
    handle = model[1].register_forward_hook(lambda m, i, o: None)
    assert "module '1' has hooks" in cuda_graphs.why_not(model)
    with pytest.warns(RuntimeWarning, match="toy hooks runs eagerly, no CUDA graph: module '1' has hooks"):
        assert cuda_graphs.allowed(model, torch.device("cuda"), True, "toy hooks") is False
    assert cuda_graphs.allowed(model, torch.device("cpu"), None, "toy hooks") is False
    handle.remove()

    def safe(m, args):
        return args

    safe.graph_safe = True
    kept = model[0].register_forward_pre_hook(safe)
    assert cuda_graphs.why_not(model) is None  # marked graph-safe: a replay recomputes it
    other = model[0].register_forward_pre_hook(lambda m, args: args)
    assert "module '0' has hooks" in cuda_graphs.why_not(model)  # one unmarked hook beside it is enough
    other.remove(), kept.remove()
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, i: None)
    try:
        assert "global module hooks" in cuda_graphs.why_not(model)
    finally:
        handle.remove()


def test_activation_pruning_may_be_graphed_and_training_defaults_to_graphs(monkeypatch):
    from labkit.prune import prune

    model = _model(0.0)
    pruned = prune(model, {"weight": {"sparsity": 0.5, "method": "l1-norm"},
                           "activation": {"sparsity": 0.5, "method": "l1-norm"}}).model
    hooked = [m for m in pruned.modules() if m._forward_pre_hooks]
    assert hooked and cuda_graphs.why_not(pruned) is None
    monkeypatch.delenv(cuda_graphs.ENV, raising=False)
    default = inspect.signature(train.train).parameters["graphs"].default
    assert default is None and cuda_graphs.wanted(torch.device("cuda"), default)
    assert train.step_key("cpu") is None  # CPU cache keys (SFT checkpoints, trials) carry no step key


class FakeGraph:
    """A CUDA graph's contract on CPU: capture records the call on the static inputs, replay repeats it and
    writes the results into the tensors the capture returned."""
    current = None

    def __init__(self):
        self.fn = None

    def replay(self):
        for static, fresh in zip(self.out, self.fn()):
            static.copy_(fresh)


@pytest.fixture
def fake_cuda(monkeypatch):
    @contextlib.contextmanager
    def graph(g):
        FakeGraph.current = g
        try:
            yield
        finally:
            FakeGraph.current = None

    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    stream = type("Stream", (), {"wait_stream": lambda self, other: None})
    monkeypatch.setattr(torch.cuda, "Stream", stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", stream)


def recording(fn):
    """``fn`` that, under a FakeGraph capture, hands the graph a closure over the static inputs."""
    calls = []

    def wrapped(batch):
        calls.append({k: v.clone() for k, v in batch.items()})
        if FakeGraph.current is not None:
            g = FakeGraph.current
            g.fn = lambda: fn(batch)
            g.out = fn(batch)
            return g.out
        return fn(batch)

    return wrapped, calls


def test_shape_graphs_warm_up_capture_replay_and_cap(fake_cuda, monkeypatch):
    def double(b):
        return (b["x"] * 2,)

    fn, calls = recording(double)
    before = []
    run = cuda_graphs.ShapeGraphs(fn, desc="toy", warmup=2, before=lambda: before.append(1))
    outs = [run({"x": torch.full((2, 3), float(i))})[0].clone() for i in range(5)]
    # each call's result belongs to its own batch, also from replays (static inputs refreshed)
    assert [float(o[0, 0]) for o in outs] == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert run.summary() == {"graph_replays": 3, "eager_calls": 2, "graphs": 1, "graph_failure": None}
    assert len(before) == 3  # two eager calls and the capture
    assert len(calls) == 3  # replays do not run Python: two eager calls, one capture
    # another shape warms up and gets its own graph; past MAX_SHAPES shapes run eagerly
    monkeypatch.setattr(cuda_graphs, "MAX_SHAPES", 2)
    for _ in range(3):
        run({"x": torch.ones(4, 3)})
    for _ in range(3):
        assert float(run({"x": torch.ones(5, 3)})[0][0, 0]) == 2.0
    assert run.summary()["graphs"] == 2 and run.summary()["eager_calls"] == 2 + 2 + 3


def test_a_failed_capture_warns_once_and_stays_eager(fake_cuda):
    def syncs(b):
        if FakeGraph.current is not None:
            raise RuntimeError("operation not permitted when stream is capturing\ndetails")
        return (b["x"] + 1,)

    run = cuda_graphs.ShapeGraphs(syncs, desc="toy sync", warmup=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [float(run({"x": torch.zeros(1)})[0]) for _ in range(4)]
    assert results == [1.0] * 4
    assert run.summary()["graph_failure"] == "RuntimeError: operation not permitted when stream is capturing"
    assert run.summary()["eager_calls"] == 4 and run.summary()["graph_replays"] == 0
    assert sum("CUDA graph capture of toy sync failed" in str(w.message) for w in caught) == 1


# --- on a GPU: graphed loops against the eager reference ------------------------------------------------

needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def imdb_batches():
    tok = models.load_tokenizer()
    enc = data.tokenize(data.imdb_splits(320, 200, seed=0), tok, max_length=64)
    dev = torch.device("cuda")
    return (lambda shuffle: batches.TensorBatches(batches.pack(enc["train"]).to(dev), 32, shuffle=shuffle, seed=1),
            batches.TensorBatches(batches.pack(enc["test"]).to(dev), 32))


def _model(dropout=0.1):
    torch.manual_seed(0)
    return models.from_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                              hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dropout,warmup", [(0.0, 0.0), (0.1, 0.0), (0.0, 0.3)])
def test_graphed_training_matches_eager(imdb_batches, dropout, warmup):
    """warmup: the graphed step sets its learning rate on the device (``lr_factor_tensor``), the eager loop
    through LambdaLR (``lr_factor``): the same schedule, warm-up included."""
    make_train, test = imdb_batches
    runs = {}
    for graphs in (False, True):
        model = _model(dropout)
        fit = train.train(model, make_train(True), epochs=3, lr=1e-3, device="cuda", progress=False, graphs=graphs,
                          warmup=warmup)
        ev = train.evaluate(model, test, device="cuda", progress=False, graphs=graphs)
        runs[graphs] = (fit, ev, model)
    (fe, ee, me), (fg, eg, mg) = runs[False], runs[True]
    assert fg["graph_failure"] is None and fg["graph_replays"] > fg["eager_calls"] > 0
    assert eg["graph_failure"] is None and eg["graph_replays"] > 0
    assert fg["steps"] == fe["steps"] == 30
    # the same math in bf16 autocast, other attention kernels (a capture always builds the padding mask)
    # and fp32 learning rates: losses within 2e-2 over 30 steps, weights within 2e-2
    assert max(abs(a - b) for a, b in zip(fe["losses"], fg["losses"])) < 2e-2
    for (name, pe), pg in zip(me.named_parameters(), mg.parameters()):
        assert torch.allclose(pe, pg, atol=2e-2, rtol=0), name
    assert abs(ee["accuracy"] - eg["accuracy"]) <= 2 / ee["n"] and abs(ee["loss"] - eg["loss"]) < 1e-2
    assert mg.training is False and all(p.grad is None for p in mg.parameters())


def _compressed(kind):
    from labkit.quant import fixed_point
    from labkit.prune import prune
    from labkit.quant import quantize

    model = _model(0.0)
    if kind == "pruned":  # weights masked by parametrization, activations by a graph-safe pre-hook
        return prune(model, {"weight": {"sparsity": 0.5, "method": "l1-norm"},
                             "activation": {"sparsity": 0.5, "method": "l1-norm"}}).model
    if kind == "qat_log":  # Lab 3's log format: its bounds must not be copied to the GPU inside a step
        from labkit.quant.study import flat_config, study_params

        return quantize(model, flat_config("log", study_params("log", 8)), inplace=True).model
    return quantize(model, fixed_point(8), inplace=True).model


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("kind", ["pruned", "qat_int8", "qat_log"])
def test_graphed_training_of_compressed_models_matches_eager(imdb_batches, kind):
    """The labs' fine-tuning of pruned and fixed-point models, graphed against eager (no dropout)."""
    make_train, test = imdb_batches
    runs = {}
    for graphs in (False, True):
        model = _compressed(kind)
        fit = train.train(model, make_train(True), epochs=3, lr=1e-3, device="cuda", progress=False, graphs=graphs)
        runs[graphs] = (fit, train.evaluate(model, test, device="cuda", progress=False), model)
    (fe, ee, _), (fg, eg, _) = runs[False], runs[True]
    assert fg["graph_failure"] is None and fg["graph_replays"] > fg["eager_calls"] > 0
    # as the plain model's test above: losses within 2e-2 over 30 steps, accuracy within 2 reviews
    assert max(abs(a - b) for a, b in zip(fe["losses"], fg["losses"])) < 2e-2
    assert abs(ee["accuracy"] - eg["accuracy"]) <= 2 / ee["n"]


@pytest.mark.cuda
@needs_cuda
def test_graphed_evaluation_is_the_eager_evaluation(imdb_batches):
    _, test = imdb_batches
    model = _model(0.0).cuda()
    ee = train.evaluate(model, test, device="cuda", progress=False, graphs=False)
    eg = train.evaluate(model, test, device="cuda", progress=False, graphs=True)
    assert eg["graph_replays"] >= 3 and eg["eager_calls"] >= 2
    assert abs(ee["accuracy"] - eg["accuracy"]) <= 1 / ee["n"] and abs(ee["loss"] - eg["loss"]) < 2e-3


class SyncingLinear(torch.nn.Linear):
    """A layer that reads a value on the host each call: no graph can hold it."""

    def forward(self, x):
        self.last_max = float(x.abs().max())
        return super().forward(x)


@pytest.mark.cuda
@needs_cuda
def test_a_host_sync_in_the_model_falls_back_to_eager(imdb_batches):
    make_train, test = imdb_batches
    model = _model(0.0)
    model.classifier = SyncingLinear(model.classifier.in_features, model.classifier.out_features)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = train.train(model, make_train(False), epochs=1, lr=1e-3, device="cuda", progress=False, graphs=True)
    assert fit["graph_failure"] and fit["graph_replays"] == 0 and fit["eager_calls"] == fit["steps"]
    assert any("runs eagerly" in str(w.message) for w in caught)
    assert all(torch.isfinite(torch.tensor(fit["losses"])))
    # and the loop still works after the failed capture: a graphed evaluation of a plain model
    ev = train.evaluate(_model(0.0).cuda(), test, device="cuda", progress=False, graphs=True)
    assert ev["graph_failure"] is None and ev["graph_replays"] > 0
