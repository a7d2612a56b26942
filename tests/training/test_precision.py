"""Where training and evaluation autocast to bf16 (labkit.training.precision): CUDA always, a CPU only where the
settings ask; the cache keys of every result stored before the setting keep their values."""
import pytest
import torch

from labkit import recipes
from labkit.labs import lab2_objectives, lab3_precision
from labkit.labs import per_seed
from labkit.run import profiles
from labkit.training import precision, train


@pytest.fixture
def native(monkeypatch):
    """Pretend this CPU has (True) or lacks (False) native bf16 GEMMs."""
    def set_native(value: bool):
        monkeypatch.setattr(precision, "cpu_bf16_native", lambda: value)
    return set_native


def test_a_bad_cpu_autocast_names_the_allowed_values():
    with pytest.raises(ValueError, match="cpu_autocast='fast': allowed values are 'off', 'auto', 'bf16'"):
        precision.check_cpu_autocast("fast")
    with pytest.raises(ValueError, match="allowed values are 'off', 'auto', 'bf16'"):
        profiles.lab_settings("lab1_prune", "smoke", cpu_autocast="fast")
    with pytest.raises(ValueError, match="mixed_precision='fp16': allowed values are True, False, 'bf16'"):
        train.autocast(torch.device("cpu"), "fp16")


def test_auto_follows_the_cpu_and_cuda_never_needs_the_setting(native):
    cpu = {"device": "cpu"}
    native(True)
    assert precision.on({**cpu, "cpu_autocast": "auto"}) == {"device": "cpu", "mixed_precision": "bf16"}
    assert precision.cache_key({**cpu, "cpu_autocast": "auto"}) == {"cpu_autocast": "bf16"}
    assert "bf16 autocast on the CPU (native bf16 GEMMs" in precision.describe({**cpu, "cpu_autocast": "auto"})
    native(False)
    assert precision.on({**cpu, "cpu_autocast": "auto"}) == {"device": "cpu", "mixed_precision": True}
    assert precision.describe({**cpu, "cpu_autocast": "auto"}) == "fp32 on the CPU (this CPU has no native bf16 GEMMs)"
    assert precision.on({**cpu, "cpu_autocast": "bf16"})["mixed_precision"] == "bf16"  # asked for: any CPU
    for s in (cpu, {**cpu, "cpu_autocast": "off"}):  # no key (settings stored before it) means off
        assert precision.on(s)["mixed_precision"] is True and precision.cache_key(s) == {}


def test_autocast_runs_a_linear_in_bf16_only_where_asked():
    lin, x = torch.nn.Linear(8, 4), torch.randn(2, 8)
    cpu = torch.device("cpu")
    with train.autocast(cpu, True):
        assert lin(x).dtype == torch.float32  # the default: fp32 on a CPU
    with train.autocast(cpu, "bf16"):
        assert lin(x).dtype == torch.bfloat16
    with train.autocast(cpu, False):
        assert lin(x).dtype == torch.float32


def test_the_profiles_ask_for_bf16_on_a_cpu_in_quick_only(native):
    native(True)
    assert profiles.lab_settings("lab1_prune", "quick")["cpu_autocast"] == "auto"
    assert profiles.lab_settings("lab1_prune", "smoke")["cpu_autocast"] == "off"
    assert "cpu_autocast" not in profiles.lab_settings("lab1_prune", "full")  # a GPU profile: bf16 on CUDA anyway


def test_cache_keys_name_the_cpu_precision_only_where_it_is_bf16(native):
    native(True)
    smoke = profiles.lab_settings("lab2_search", "smoke", device="cpu")
    quick = {**smoke, "cpu_autocast": "auto"}
    # off: the keys of results stored before the setting existed (the key itself is not part of them)
    assert lab2_objectives.trial_settings(smoke) == lab2_objectives.trial_settings(
        {k: v for k, v in smoke.items() if k != "cpu_autocast"})
    assert lab2_objectives.trial_settings(quick)["cpu_autocast"] == "bf16"
    assert "qat_matmul" in lab2_objectives.compressed_path(quick)  # a compressed model autocasts here too
    assert "qat_matmul" not in lab2_objectives.compressed_path(smoke)
    s3 = profiles.lab_settings("lab3_search", "smoke", device="cpu")
    assert "cpu_autocast" not in lab3_precision.trial_settings(s3)
    assert lab3_precision.trial_settings({**s3, "cpu_autocast": "auto"})["cpu_autocast"] == "bf16"
    assert recipes.checkpoint_path(s3) != recipes.checkpoint_path({**s3, "cpu_autocast": "auto"})
    assert recipes.checkpoint_path(s3) == recipes.checkpoint_path({**s3, "cpu_autocast": "off"})
    assert per_seed._key("lab3", "x", s3, 0, "c") != per_seed._key("lab3", "x", {**s3, "cpu_autocast": "auto"}, 0, "c")
    native(False)  # "auto" on a CPU without native bf16: fp32, the same keys as "off"
    assert lab2_objectives.trial_settings(quick) == lab2_objectives.trial_settings(smoke)


def test_on_cuda_the_setting_changes_nothing(fake_cuda):
    s = {"device": "cuda", "cpu_autocast": "bf16"}
    assert precision.cache_key(s) == {} and precision.on(s)["mixed_precision"] is True
    assert precision.describe(s) == "bf16 autocast on CUDA"


def test_a_cpu_bf16_training_run_is_finite_and_repeatable():
    def run():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Flatten(), torch.nn.Linear(16 * 6, 2))

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, input_ids, labels, **_):
                logits = self.m(input_ids)
                return type("Out", (), {"loss": torch.nn.functional.cross_entropy(logits.float(), labels),
                                        "logits": logits})()

        g = torch.Generator().manual_seed(0)
        batches = [{"input_ids": torch.randint(0, 50, (8, 6), generator=g),
                    "labels": torch.randint(0, 2, (8,), generator=g)} for _ in range(4)]
        fit = train.train(Wrap(), batches, epochs=2, lr=1e-2, device="cpu", mixed_precision="bf16", progress=False)
        ev = train.evaluate(Wrap(), batches, device="cpu", mixed_precision="bf16", progress=False)
        return fit["losses"], ev["accuracy"]

    a, b = run(), run()
    assert a == b and all(torch.isfinite(torch.tensor(a[0])))
    assert a[0][-1] < a[0][0]  # it trains
