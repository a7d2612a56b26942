import pytest
import torch

from labkit import data, models, profiles, recipes
from labkit.training import train


def test_pick_device():
    assert train.pick_device("cpu").type == "cpu"
    assert train.pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            train.pick_device("cuda")
    with pytest.raises(ValueError, match="allowed"):
        train.pick_device("tpu")


@pytest.fixture(scope="module")
def tiny_loaders():
    tok = models.load_tokenizer()
    enc = data.tokenize(data.imdb_splits(96, 64, seed=0), tok, max_length=48)
    return tok, enc


def test_training_lowers_loss_and_is_seeded(tiny_loaders):
    tok, enc = tiny_loaders
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                   intermediate_size=64, hidden_dropout_prob=0.0)
        loader = data.dataloader(enc["train"], tok, batch_size=16, shuffle=True, seed=1)
        runs.append(train.train(model, loader, epochs=4, lr=3e-3, device="cpu", progress=False))
    assert runs[0]["losses"] == runs[1]["losses"]  # same seed, same data order: same run
    assert runs[0]["steps"] == 24
    assert runs[0]["train_loss_last"] < runs[0]["train_loss_first"]


def test_training_on_a_reused_loader_repeats_itself(tiny_loaders):
    # The loader's shuffling generator advances with every epoch; a second call with the same seed must
    # still see the same batches (Lab 2 trains every trial on one loader).
    tok, enc = tiny_loaders
    loader = data.dataloader(enc["train"], tok, batch_size=16, shuffle=True, seed=1)
    runs = []
    for seed in (5, 5, 6):
        torch.manual_seed(0)
        model = models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                   intermediate_size=64)
        runs.append(train.train(model, loader, epochs=1.5, lr=3e-3, seed=seed, device="cpu", progress=False))
    assert runs[0]["losses"] == runs[1]["losses"]
    assert runs[2]["losses"] != runs[1]["losses"]  # the seed does choose the order


def test_fractional_epochs_and_evaluate_counts(tiny_loaders):
    tok, enc = tiny_loaders
    model = models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    res = train.train(model, data.dataloader(enc["train"], tok, 16), epochs=0.5, device="cpu", progress=False)
    assert res["steps"] == 3
    ev = train.evaluate(model, data.dataloader(enc["test"], tok, 10), device="cpu", progress=False)
    assert ev["n"] == 64 and 0.0 <= ev["accuracy"] <= 1.0
    with pytest.raises(ValueError, match="epochs"):
        train.train(model, data.dataloader(enc["train"], tok, 16), epochs=0)


def test_profiles_resolve_and_reject_unknown_keys():
    s = profiles.lab_settings("lab0", "smoke", train_size=10)
    assert s["train_size"] == 10 and s["profile"] == "smoke" and s["lora_rank"] == 6
    full = profiles.lab_settings("lab0", "full")
    assert full["train_size"] is None and full["max_length"] == 512
    with pytest.raises(KeyError, match="allowed"):
        profiles.lab_settings("lab0", "smoke", trian_size=10)
    with pytest.raises(ValueError, match="allowed"):
        profiles.lab_settings("lab0", "medium")


def test_finetuned_model_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE_DIR", str(tmp_path))
    s = profiles.lab_settings("lab0", "smoke", train_size=32, test_size=32, max_length=32)
    model, m1 = recipes.finetuned_model(s)
    again, m2 = recipes.finetuned_model(s)
    assert "cached" in m2 and m2["accuracy"] == m1["accuracy"]
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a.cpu(), b), k


def test_lean_batches_match_the_loader_path(tiny_loaders):
    # The lean path (padded tensors, gathered per batch) must give the DataLoader's batches in the same
    # order for the same seed, and so the same training losses and evaluation metrics.
    from labkit.training import batches

    tok, enc = tiny_loaders
    loader = data.dataloader(enc["train"], tok, batch_size=16, shuffle=True, seed=3)
    lean = batches.TensorBatches(batches.pack(enc["train"], tok.pad_token_id), 16, shuffle=True, seed=3)
    assert len(lean) == len(loader)
    for _ in range(2):  # two whole epochs (an exhausted sampler draws once more): the shuffle advances alike
        for a, b in zip(list(lean), list(loader), strict=True):
            assert a.keys() == b.keys()
            for k in b:
                assert torch.equal(a[k], b[k]), k
    test_loader = data.dataloader(data.sort_by_length(enc["test"]), tok, 10)
    test_lean = batches.TensorBatches(batches.pack(data.sort_by_length(enc["test"]), tok.pad_token_id), 10)
    runs = []
    for train_batches, test_batches in ((loader, test_loader), (lean, test_lean)):
        torch.manual_seed(0)
        model = models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64)
        fit = train.train(model, train_batches, epochs=2, lr=3e-3, seed=4, device="cpu", progress=False)
        ev = train.evaluate(model, test_batches, device="cpu", progress=False)
        runs.append((fit["losses"], ev["accuracy"], ev["loss"]))
    assert runs[0] == runs[1]


def test_pack_pads_like_the_collator_and_rejects_untokenised_data(tiny_loaders):
    from labkit.training import batches

    tok, enc = tiny_loaders
    p = batches.pack(enc["test"], tok.pad_token_id)
    lengths = [len(x) for x in enc["test"]["input_ids"]]
    assert p.lengths.tolist() == lengths and p.columns["input_ids"].shape == (64, max(lengths))
    row = p.columns["input_ids"][0]
    assert row[: lengths[0]].tolist() == enc["test"][0]["input_ids"] and (row[lengths[0]:] == tok.pad_token_id).all()
    with pytest.raises(KeyError, match=r"pack: dataset lacks column\(s\) \['input_ids', 'labels'\]"):
        batches.pack(data.imdb_splits(8, 8, seed=0)["train"])


def test_a_shared_checkpoint_reports_the_accuracy_of_this_test_set(tmp_path, monkeypatch):
    # Lab 0 and Lab 1 share the SFT checkpoint but not the test set (quick: 1,000 vs 500 reviews); the
    # metrics stored with it were the first lab's, and Lab 1 reported them as its fp32 baseline.
    monkeypatch.setenv("LABKIT_CACHE_DIR", str(tmp_path))
    s = profiles.lab_settings("lab0", "smoke", train_size=32, test_size=48, max_length=32)
    _, first = recipes.finetuned_model(s)
    other = {**s, "test_size": 16}
    model, shared = recipes.finetuned_model(other)
    assert recipes.checkpoint_path(other) == recipes.checkpoint_path(s)  # one model
    assert first["n"] == 48 and shared["n"] == 16 and "cached" in shared
    assert shared["accuracy"] == train.evaluate(model, recipes.loaders(other).test, progress=False)["accuracy"]


def test_evaluation_attention_leaves_out_cudnn_on_cuda_only():
    """cuDNN's SDPA builds a plan per new batch shape (seconds per new Lab 2 model); evaluation on CUDA must not
    pick it, and the rule is scoped: cuDNN is allowed again after the evaluation."""
    from labkit.training import train

    before = torch.backends.cuda.cudnn_sdp_enabled()
    with train.eval_attention(torch.device("cuda")):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.mem_efficient_sdp_enabled() and torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before
    with train.eval_attention(torch.device("cpu")):
        assert torch.backends.cuda.cudnn_sdp_enabled() == before


def test_cuda_trials_key_the_evaluation_attention(monkeypatch):
    from labkit.training import train
    from labkit.labs.lab2_objectives import trial_settings

    s = {"device": "cuda", "seed": 0}
    monkeypatch.setattr(train, "pick_device", lambda d: torch.device(d))
    assert trial_settings(s)["eval_sdpa"] == train.EVAL_SDPA
    assert "eval_sdpa" not in trial_settings({**s, "device": "cpu"})  # CPU caches keep their keys
