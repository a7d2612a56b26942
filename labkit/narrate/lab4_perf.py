"""What Lab 4 parts 1-2's notebook says while it runs: what it measures on, and the tables of each study measured
in this run (the payloads of ``labs.lab4_perf.measure``; the answers are ``labkit.answers.lab4_perf``)."""
from __future__ import annotations

from ..perf import compile_study, sdpa
from ..report import table

NO_GPU = ("**No CUDA GPU in this run.** It measures the CPU only (the solution edition shows a full-profile GPU "
          "run's stored results beside it).")


def measuring_on(facts: dict) -> str:
    """``labs.lab4_perf.measuring``: the devices, torch and the CPU threads, in one line."""
    return f"measuring on: {facts['devices']} | torch {facts['torch']} | CPU threads {facts['threads']}"


def compile_tables(payload: dict, dev: str) -> str:
    """The tables of a compile study measured in this run."""
    st = payload["numbers"]
    return (f"### {dev.upper()}: measured in this run on {payload['provenance']['device']}\n\nEvery run:\n\n"
            + table(compile_study.summary_rows(st), floatfmt=".3f")
            + "\n\nCompiled vs eager in the same state and batch (overhead: extra start-up time over eager's; "
            "break-even: overhead / steady saving per call):\n\n"
            + table(compile_study.comparison_rows(st), floatfmt=".3f")
            + "\n\nWhere one steady call spends its time (profiler):\n\n"
            + table(compile_study.share_rows(st), floatfmt=".3f"))


def sdpa_tables(payload: dict, dev: str) -> str:
    """The tables of an attention study measured in this run."""
    st = payload["numbers"]
    return (f"### {dev.upper()}: measured in this run on {payload['provenance']['device']}\n\n{st['dtype']}, batch "
            f"{st['batch']}, {st['heads']} heads, head dim {st['head_dim']}, causal={st['is_causal']}. Memory: "
            f"{st['memory_method']}.\n\nAgreement with a float64 evaluation (batch 0, first heads):\n\n"
            + table(st["checks"], ["is_causal", "mask", "dtype", "naive_vs_float64", "fused_vs_float64",
                                   "naive_vs_fused", "reference_max_abs", "tolerance", "ok"], floatfmt=".2e")
            + f"\n\nEach fused backend forced alone at seq {st['profile_seq']}:\n\n"
            + table(sdpa.backend_rows(st), floatfmt=".3f")
            + "\n\nSequence sweep (steady median):\n\n" + table(sdpa.sweep_rows(st), floatfmt=".3f"))


def profile_tables(payload: dict, dev: str) -> str:
    """The profiler's own tables of an attention study, as torch prints them."""
    prof = payload["numbers"]["profiles"]
    return f"--- {dev}: naive ---\n{prof['naive']['table']}\n--- {dev}: fused ---\n{prof['fused']['table']}"
