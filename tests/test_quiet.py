"""What a student sees: progress in the right form for where labkit runs, no known-harmless warning
noise, and prose that never cuts a message mid-word."""
import subprocess
import sys
import warnings

import pytest

from labkit.training import progress
from labkit.report import clip


def test_progress_mode_follows_the_environment(monkeypatch):
    monkeypatch.delenv("LABKIT_PROGRESS", raising=False)
    assert progress.mode() == "bar" and progress.mode(False) == "off"
    monkeypatch.setenv("LABKIT_PROGRESS", "lines")
    assert progress.mode() == "lines" and progress.mode("off") == "off"
    monkeypatch.setenv("LABKIT_PROGRESS", "widgets")
    with pytest.raises(ValueError, match="LABKIT_PROGRESS='widgets'"):
        progress.mode()


def test_lines_mode_keeps_short_loops_silent(monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_PROGRESS", "lines")
    assert list(progress.bar(range(5), desc="eval")) == list(range(5))
    b = progress.bar(total=3, desc="train")
    for _ in range(3):
        b.update()
        b.set_postfix(loss="0.5")
    b.close()
    assert capsys.readouterr().out == ""


def test_lines_mode_reports_long_loops_as_labkit_lines(monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_PROGRESS", "lines")
    b = progress.bar(total=4, desc="train", unit="steps", every=0.0)  # every update counts as long
    b.update()
    b.set_postfix(loss="0.693")
    b.update(3)
    b.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[labkit] train: 1/4 steps, 0 s, about")
    assert lines[-1].startswith("[labkit] train: 4/4 steps") and lines[-1].endswith("loss 0.693")
    assert len(lines) == 2  # close adds nothing when the last line already said 4/4


def test_bar_and_off_modes(monkeypatch):
    from tqdm import tqdm

    monkeypatch.setenv("LABKIT_PROGRESS", "bar")
    assert isinstance(progress.bar(range(2)), tqdm)
    off = progress.bar(range(2), progress=False)
    assert off.disable and list(off) == [0, 1]


def test_train_under_papermill_lines_prints_no_bar(monkeypatch, capsys, tiny_bert):
    import torch

    from labkit.training import train

    monkeypatch.setenv("LABKIT_PROGRESS", "lines")
    batches = [{"input_ids": torch.randint(0, 100, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.long),
                "labels": torch.tensor([0, 1])}] * 2
    train.train(tiny_bert, batches, epochs=1, device="cpu")
    train.evaluate(tiny_bert, batches, device="cpu")
    out = capsys.readouterr()
    assert out.out == "" and "%|" not in out.err


@pytest.mark.parametrize("limit", [20, 40, 60, 80, 140])
def test_clip_never_cuts_mid_word(limit):
    text = ("no CPU kernel (PyTorch's CPU SDPA has flash and math only); torch: No viable backend for "
            "scaled_dot_product_attention was found. This is likely due to turning off both the math kernel "
            "and the fused kernels.")
    out = clip(text, limit)
    assert len(out) <= limit and out.endswith("…")
    words = set(text.split())
    assert all(w.rstrip(".;") in {x.rstrip(".;") for x in words} for w in out.rstrip("…").split())
    assert clip("short enough", 40) == "short enough"


def test_add_lora_hides_peft_deprecation_noise(tiny_bert):
    import copy

    from labkit import lora

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lora.add_lora(copy.deepcopy(tiny_bert))
    assert not [w for w in caught if issubclass(w.category, FutureWarning)], [str(w.message) for w in caught]


def test_quiet_profile_drops_kineto_markers_only():
    code = ("import os, torch\n"
            "from torch.profiler import ProfilerActivity\n"
            "from labkit.perf.timing import quiet_profile\n"
            "with quiet_profile(activities=[ProfilerActivity.CPU]) as prof:\n"
            "    torch.ones(4) @ torch.ones(4)\n"
            "    os.write(2, b'a line the student should read\\n')\n"
            "print(len(prof.key_averages()) > 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert "profiler_start" not in out.stderr and "USDT" not in out.stderr
    assert "a line the student should read" in out.stderr
