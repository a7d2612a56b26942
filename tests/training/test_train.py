import pytest
import torch

from labkit import data, models, recipes
from labkit.run import profiles
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
    s = profiles.lab_settings("lab0_graphs_lora", "smoke", train_size=10)
    assert s["train_size"] == 10 and s["profile"] == "smoke" and s["lora_rank"] == 6
    full = profiles.lab_settings("lab0_graphs_lora", "full")
    assert full["train_size"] is None and full["max_length"] == 512
    with pytest.raises(KeyError, match="allowed"):
        profiles.lab_settings("lab0_graphs_lora", "smoke", trian_size=10)
    with pytest.raises(ValueError, match="allowed"):
        profiles.lab_settings("lab0_graphs_lora", "medium")


def test_finetuned_model_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE_DIR", str(tmp_path))
    s = profiles.lab_settings("lab0_graphs_lora", "smoke", train_size=32, test_size=32, max_length=32)
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


def test_batch_shapes_are_those_a_seeded_epoch_yields(tiny_loaders):
    from collections import Counter

    from labkit.training import batches

    tok, enc = tiny_loaders
    lean = batches.TensorBatches(batches.pack(enc["train"], tok.pad_token_id), 7, shuffle=True, seed=0)
    shapes = lean.shapes(seed=5)
    lean.generator.manual_seed(5)  # what train() does with seed 5
    assert shapes == Counter(tuple(b["input_ids"].shape) for b in lean)
    assert sum(n for n in shapes.values()) == len(lean) and lean.shapes(seed=6) != Counter()


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
    s = profiles.lab_settings("lab0_graphs_lora", "smoke", train_size=32, test_size=48, max_length=32)
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


def test_cuda_trials_key_the_evaluation_attention(fake_cuda):
    from labkit.labs.lab2_objectives import trial_settings

    s = {"device": "cuda", "seed": 0}
    assert trial_settings(s)["eval_sdpa"] == train.EVAL_SDPA
    assert "eval_sdpa" not in trial_settings({**s, "device": "cpu"})  # CPU caches keep their keys


def test_cuda_results_key_the_card_and_the_processs_share_of_it(monkeypatch, fake_cuda):
    """Under an MPS share a process sees fewer SMs and trains other bits (sm_share_bits.json): a trial keyed on one
    card or share is not found under another (per-seed results: test_per_seed). An SFT checkpoint is: the search's
    workers under MPS load the one the notebook trained with every SM."""
    import json

    from labkit.labs.lab2_objectives import trial_settings

    s = {**profiles.lab_settings("lab2_search", "smoke"), "device": "cuda"}
    seen = {}
    for gpu, sms in (("NVIDIA H100 80GB HBM3", 132), ("NVIDIA H100 80GB HBM3", 32), ("NVIDIA H200", 132)):
        monkeypatch.setattr(train.determinism, "gpu_identity", lambda device=None, g=gpu, n=sms:
                            {"gpu": g, "gpu_sm_count": n})
        seen[gpu, sms] = (json.dumps(trial_settings(s), sort_keys=True), recipes.checkpoint_path(s))
        assert trial_settings(s)["gpu_sm_count"] == sms and train.device_key("cuda")["gpu"] == gpu
    assert len({k for k, _ in seen.values()}) == 3 and len({p for _, p in seen.values()}) == 1
    assert train.device_key("cpu") == {}  # CPU keys carry none of it


def _eager_lrs(total, warmup, lr=1e-3):
    """The learning rates train()'s eager loop steps with (read from the scheduler, as the loop builds it)."""
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    warm = train.warmup_steps(warmup, total)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: train.lr_factor(step, total, warm))
    out = []
    for _ in range(total):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_warmup_schedule_matches_its_formula_and_leaves_no_warmup_unchanged():
    total, lr = 40, 1e-3
    # warmup 0: the schedule train() used before warm-up existed, bit for bit
    assert _eager_lrs(total, 0.0, lr) == [lr * max(0.0, 1 - i / total) for i in range(total)]
    # warmup 0.25: 10 steps rising linearly from 0, then linear decay to zero over the other 30
    w = 10
    assert train.warmup_steps(0.25, total) == w
    expected = [lr * (i / w if i < w else (total - i) / (total - w)) for i in range(total)]
    assert _eager_lrs(total, 0.25, lr) == pytest.approx(expected, rel=1e-12, abs=1e-18)
    got = _eager_lrs(total, 0.25, lr)
    assert got[0] == 0 and max(got) == pytest.approx(lr) and got.index(max(got)) == w
    assert train.warmup_steps(0.001, total) == 1  # asked for: at least one step
    assert train.warmup_steps(0.9, 2) == 1 and train.warmup_steps(0.5, 1) == 0


@pytest.mark.parametrize("warmup", [0.0, 0.1, 0.25])
def test_graphed_lr_formula_matches_the_eager_one(warmup):
    # the CUDA-graph step computes its learning rate on the device from a float32 step counter; the same
    # function runs on CPU tensors here
    total = 37
    warm = train.warmup_steps(warmup, total)
    counter = torch.zeros(())
    for i in range(total + 2):  # past the end too: clamped at zero
        got = train.lr_factor_tensor(counter, total, warm).item()
        assert got == pytest.approx(train.lr_factor(i, total, warm), abs=1e-6)
        counter.add_(1)
    if warm == 0:  # the original device expression, op for op
        c = torch.tensor(5.0)
        assert torch.equal(train.lr_factor_tensor(c, total, 0), torch.clamp(1 - c / total, min=0))


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, "0.1", True])
def test_warmup_out_of_range_is_rejected(bad, tiny_loaders):
    tok, enc = tiny_loaders
    model = models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    loader = data.dataloader(enc["train"], tok, batch_size=16, shuffle=True, seed=1)
    with pytest.raises(ValueError, match=r"warmup=.*0 <= warmup < 1"):
        train.train(model, loader, epochs=1, device="cpu", progress=False, warmup=bad)


def test_warmup_trains_and_zero_warmup_is_the_default(tiny_loaders):
    tok, enc = tiny_loaders
    runs = {}
    for name, kw in (("default", {}), ("zero", {"warmup": 0.0}), ("warm", {"warmup": 0.2})):
        torch.manual_seed(0)
        model = models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                   intermediate_size=64, hidden_dropout_prob=0.0)
        loader = data.dataloader(enc["train"], tok, batch_size=16, shuffle=True, seed=1)
        runs[name] = train.train(model, loader, epochs=2, lr=3e-3, device="cpu", progress=False, **kw)["losses"]
    assert runs["default"] == runs["zero"]
    assert runs["warm"][0] == runs["zero"][0]  # the first step's loss comes before any update
    assert runs["warm"] != runs["zero"]


def test_imdb_like_lengths_fill_the_window_about_as_often_as_imdb():
    from labkit.training.batches import imdb_like_lengths

    n = imdb_like_lengths(20_000, 256, torch.Generator().manual_seed(0))
    assert n.shape == (20_000,) and int(n.min()) >= 40 and int(n.max()) == 256
    assert abs(float((n == 256).float().mean()) - 0.44) < 0.02  # IMDb's share at 256 tokens: 44%
    assert torch.equal(n, imdb_like_lengths(20_000, 256, torch.Generator().manual_seed(0)))


def test_the_first_batch_of_a_seed_does_not_depend_on_the_loaders_past(tiny_loaders):
    """A calibration batch drawn after the loader served epochs (SFT trained in this process) equals the one a
    fresh loader gives (SFT loaded from the cache): Lab 1's seed-0 ranges once differed between the two."""
    from labkit.training import batches

    tok, enc = tiny_loaders
    make = (lambda: batches.TensorBatches(batches.pack(enc["train"], tok.pad_token_id), 8, shuffle=True, seed=0),
            lambda: data.dataloader(enc["train"], tok, batch_size=8, shuffle=True, seed=0))
    for new in make:
        fresh, used = new(), new()
        for _ in range(3):
            list(used)  # epochs served before
        plain = next(iter(used))
        a, b = batches.first_batch(fresh, 0), batches.first_batch(used, 0)
        assert all(torch.equal(a[k], b[k]) for k in a)
        differs = (lambda x, y: any(x[k].shape != y[k].shape or not torch.equal(x[k], y[k]) for k in x))
        assert differs(plain, a)  # what next(iter(...)) gave after those epochs: another batch
        assert differs(batches.first_batch(used, 1), a)  # another seed, another batch


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_key_names_the_card_and_the_sms_this_process_sees():
    from labkit.labs.lab2_objectives import trial_settings
    from labkit.training import determinism

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    assert determinism.gpu_identity() == {"gpu": props.name, "gpu_sm_count": props.multi_processor_count}
    s = {**profiles.lab_settings("lab2_search", "smoke"), "device": "cuda"}
    assert trial_settings(s)["gpu_sm_count"] == props.multi_processor_count > 0
    assert train.device_key("cuda")["train_step"] == train.step_key("cuda")
