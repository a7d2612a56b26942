"""Per-seed work kept on disk: a stopped run resumes after its last finished seed, only for the same settings
and clean commit."""
import pytest

from labkit.labs import per_seed
from labkit import results


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path))
    return tmp_path


def test_a_stopped_run_resumes_after_its_last_finished_seed(runs, monkeypatch):
    monkeypatch.setattr(results, "git_commit", lambda: "a" * 40)
    calls = []

    def one(seed):
        calls.append(seed)
        if seed == 2 and len(calls) == 3:
            raise KeyboardInterrupt  # the call's time limit, mid-seed
        return {"acc": 0.5 + seed / 10, "seed": seed}

    with pytest.raises(KeyboardInterrupt):
        per_seed.run("lab1", "x", {"a": 1, "seeds": [0, 1, 2]}, [0, 1, 2], one)
    assert calls == [0, 1, 2] and len(list((runs / "seeds" / "lab1" / "x").glob("*.json"))) == 2
    out = per_seed.run("lab1", "x", {"a": 1, "seeds": [0, 1, 2]}, [0, 1, 2], one)
    assert calls == [0, 1, 2, 2] and [r["acc"] for r in out] == [0.5, 0.6, 0.7]
    per_seed.run("lab1", "x", {"a": 2, "seeds": [0]}, [0], one)  # other settings: computed again
    assert calls[-1] == 0
    monkeypatch.setattr(results, "git_commit", lambda: "b" * 40)  # other code: computed again
    per_seed.run("lab1", "x", {"a": 1}, [1], one)
    assert calls[-1] == 1 and len(calls) == 6


def test_a_seed_trained_by_another_gpu_step_card_or_share_is_not_reused(runs, monkeypatch):
    """Same settings and commit, but another training step on a GPU (e.g. LABKIT_ATTENTION or LABKIT_CUDA_GRAPHS
    set otherwise in the next call), another card, or another MPS share of it: computed again, not mixed in."""
    monkeypatch.setattr(results, "git_commit", lambda: "a" * 40)
    calls = []
    for i, (step, gpu, sms) in enumerate((("kernels", "H100", 132), ("kernels", "H100", 132),
                                          ("kernels+varlen-attn", "H100", 132), ("kernels", "H200", 132),
                                          ("kernels", "H100", 32))):
        monkeypatch.setattr(per_seed.train, "step_key", lambda device="auto", step=step: step)
        monkeypatch.setattr(per_seed.train.determinism, "gpu_identity",
                            lambda device=None, gpu=gpu, sms=sms: {"gpu": gpu, "gpu_sm_count": sms})
        per_seed.run("lab1", "x", {"a": 1}, [0], lambda s, i=i: calls.append(i) or {"v": 1.0})
    assert calls == [0, 2, 3, 4]


def test_a_tree_with_uncommitted_changes_never_reuses_a_seed(runs, monkeypatch):
    monkeypatch.setattr(results, "git_commit", lambda: "a" * 40 + "+dirty")
    calls = []
    for _ in range(2):
        per_seed.run("lab1", "x", {}, [0], lambda s: calls.append(s) or {"v": 1.0})
    assert calls == [0, 0] and not (runs / "seeds").exists()


def test_seeds_of_a_named_earlier_commit_are_reused_and_say_so(runs, monkeypatch):
    monkeypatch.setattr(results, "git_commit", lambda: "a" * 40)
    calls = []
    first = per_seed.run("lab1", "x", {"a": 1}, [0], lambda s: calls.append(s) or {"v": 1.0})
    assert first[0]["measured_at"] == "a" * 40
    monkeypatch.setattr(results, "git_commit", lambda: "b" * 40)  # a later commit: not reused by default
    per_seed.run("lab1", "x", {"a": 1}, [0], lambda s: calls.append(s) or {"v": 2.0})
    assert calls == [0, 0]
    monkeypatch.setattr(results, "git_commit", lambda: "c" * 40)
    monkeypatch.setenv("LABKIT_SEEDS_FROM", "a" * 40)  # asked for: the seed measured at a is reused
    again = per_seed.run("lab1", "x", {"a": 1}, [0], lambda s: calls.append(s) or {"v": 3.0})
    assert calls == [0, 0] and again[0] == {"v": 1.0, "measured_at": "a" * 40}


def test_a_run_stops_between_seeds_where_the_next_would_end_after_the_deadline(runs, monkeypatch):
    """LABKIT_SEEDS_DEADLINE: after the run's first computed seed, a seed starts only where the longest seed computed
    so far would end before it; the seeds before it are kept, and the run resumes after them."""
    monkeypatch.setattr(results, "git_commit", lambda: "a" * 40)
    clock = [1000.0]
    monkeypatch.setattr(per_seed.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(per_seed.time, "time", lambda: clock[0])

    def one(seed):
        clock[0] += 100  # each seed takes 100 s
        return {"v": float(seed)}

    monkeypatch.setenv(per_seed.DEADLINE_ENV, str(1000 + 250))
    with pytest.raises(per_seed.SeedsStopped, match=r"lab1/x: stopped before seed 2 at LABKIT_SEEDS_DEADLINE: a seed "
                                                   r"took up to 100 s here and 50 s are left; the 2 seed\(s\)"):
        per_seed.run("lab1", "x", {"a": 1}, [0, 1, 2], one)
    assert len(list((runs / "seeds" / "lab1" / "x").glob("*.json"))) == 2
    monkeypatch.setenv(per_seed.DEADLINE_ENV, str(clock[0] + 10))  # the next call: its first seed always starts
    out = per_seed.run("lab1", "x", {"a": 1}, [0, 1, 2], one)
    assert [r["v"] for r in out] == [0.0, 1.0, 2.0]
    monkeypatch.setenv(per_seed.DEADLINE_ENV, "soon")
    with pytest.raises(ValueError, match="LABKIT_SEEDS_DEADLINE='soon': allowed values are Unix times"):
        per_seed.run("lab1", "x", {"a": 1}, [3, 4], one)
