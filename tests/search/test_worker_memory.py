"""Search workers sized to the GPUs' free memory (a fake GPU budget: no GPU needed)."""
import pytest

from labkit.search import run as search_run
from labkit.search.plan import StudyPlan

GIB = 2**30


def fake_gpus(monkeypatch, free_gib):
    monkeypatch.setattr(search_run, "visible_gpus", lambda: [str(i) for i in range(len(free_gib))])
    monkeypatch.setattr(search_run, "free_gpu_memory", lambda: [int(f * GIB) for f in free_gib])


def plan(objective):
    return StudyPlan(name=f"t-{objective}", objective=objective, settings={}, sampler="random", seed=0, n_trials=1)


def test_auto_takes_as_many_as_fit(monkeypatch, capsys):
    fake_gpus(monkeypatch, [78.0])
    monkeypatch.delenv("LABKIT_WORKER_GIB", raising=False)
    assert search_run.resolve_workers("auto", plans=[plan("lab2")]) == 8  # 70.2 GiB usable / 5 GiB: 14, capped at 8
    assert search_run.resolve_workers("auto", plans=[plan("lab3")]) == 7  # 70.2 / 9 = 7.8
    assert "7 search workers, not 8" in capsys.readouterr().err
    fake_gpus(monkeypatch, [78.0 - 13.7])  # a launcher still holding 13.7 GiB leaves room for 6
    assert search_run.resolve_workers("auto", plans=[plan("lab3")]) == 6


def test_per_gpu_and_override(monkeypatch):
    fake_gpus(monkeypatch, [139.0, 20.0])
    monkeypatch.setenv("LABKIT_WORKER_GIB", "4")
    assert search_run.resolve_workers("auto", plans=[plan("lab3")]) == 8 + 4  # each GPU on its own memory


def test_too_little_memory_is_an_error_naming_the_numbers(monkeypatch):
    fake_gpus(monkeypatch, [5.0])
    monkeypatch.delenv("LABKIT_WORKER_GIB", raising=False)
    with pytest.raises(RuntimeError, match=r"not enough free GPU memory for one search worker: each needs about "
                                           r"9 GiB \(LABKIT_WORKER_GIB\), free: 5.0 GiB"):
        search_run.resolve_workers("auto", plans=[plan("lab3")])


def test_an_explicit_count_is_kept_with_a_warning(monkeypatch, capsys):
    fake_gpus(monkeypatch, [40.0])
    monkeypatch.delenv("LABKIT_WORKER_GIB", raising=False)
    assert search_run.resolve_workers(12, plans=[plan("lab2")]) == 12
    assert "12 search workers at about 5 GiB each may not fit" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_bad_worker_gib(monkeypatch, value):
    fake_gpus(monkeypatch, [40.0])
    monkeypatch.setenv("LABKIT_WORKER_GIB", value)
    with pytest.raises(ValueError, match=rf"LABKIT_WORKER_GIB='{value}': allowed values are numbers > 0"):
        search_run.resolve_workers("auto", plans=[plan("lab2")])


def test_cpu_only_is_one_worker(monkeypatch):
    monkeypatch.setattr(search_run, "visible_gpus", lambda: [])
    assert search_run.resolve_workers("auto") == 1
    assert search_run.resolve_workers(3) == 3


def test_mps_starts_more_workers_per_gpu(monkeypatch):
    """Under MPS (workers limited to a share of the SMs) "auto" starts WORKERS_PER_GPU_MPS, memory permitting."""
    fake_gpus(monkeypatch, [78.0])
    monkeypatch.delenv("LABKIT_WORKER_GIB", raising=False)
    assert search_run.WORKERS_PER_GPU_MPS > search_run.WORKERS_PER_GPU
    # 78 GiB free: 14 Lab 2 workers fit (5 GiB each, 90% of the memory), fewer than WORKERS_PER_GPU_MPS (16)
    assert search_run.resolve_workers("auto", per_gpu=search_run.WORKERS_PER_GPU_MPS, plans=[plan("lab2")]) == 14
    assert search_run.resolve_workers("auto", per_gpu=search_run.WORKERS_PER_GPU_MPS, plans=[plan("lab3")]) == 7


def test_run_studies_sizes_auto_workers_by_mps(monkeypatch, tmp_path):
    """run_studies decides MPS once and starts WORKERS_PER_GPU_MPS workers under it, WORKERS_PER_GPU without."""
    fake_gpus(monkeypatch, [78.0])
    monkeypatch.setenv("LABKIT_WORKER_GIB", "4")  # room for 17: the per-GPU count decides
    monkeypatch.setattr(search_run, "release_gpu_memory", lambda: None)
    monkeypatch.setattr(search_run, "prepare", lambda plans: None)
    seen = []

    class Started(Exception):
        pass

    def fake_processes(plans, url, n, bar, poll, mps, log_dir, first_worker):
        seen.append((n, mps))
        raise Started

    monkeypatch.setattr(search_run, "_run_processes", fake_processes)
    toy = StudyPlan(name="toy-mps", objective="_search_toy:factory", settings={}, sampler="random", seed=0, n_trials=2)
    for wanted, expect in ((True, search_run.WORKERS_PER_GPU_MPS), (False, search_run.WORKERS_PER_GPU)):
        monkeypatch.setattr(search_run._mps, "wanted", lambda mode, w=wanted: w)
        with pytest.raises(Started):
            search_run.run_studies([toy], storage=f"journal:{tmp_path / 'j.journal'}", workers="auto",
                                   progress=False, mps="auto")
        assert seen[-1] == (expect, wanted)


def test_workers_get_expandable_segments_unless_the_user_chose(monkeypatch, tmp_path):
    """Fixed segments let one Lab 2 trial reserve 18x the memory it uses (benchmarks/search/trial_memory.json),
    which the other workers on its GPU then cannot have: workers start with expandable segments, and a user's
    own PYTORCH_CUDA_ALLOC_CONF is kept."""
    started = []

    class FakePopen:
        def __init__(self, cmd, env, **kw):
            started.append(env)

    monkeypatch.setattr(search_run.subprocess, "Popen", FakePopen)
    monkeypatch.setattr(search_run, "visible_gpus", lambda: ["0"])
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    search_run.launch([plan("lab2")], "sqlite:///x.db", 2, tmp_path / "a")
    assert [e["PYTORCH_CUDA_ALLOC_CONF"] for e in started] == ["expandable_segments:True"] * 2
    started.clear()
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
    search_run.launch([plan("lab2")], "sqlite:///x.db", 1, tmp_path / "b")
    assert started[0]["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:128"
