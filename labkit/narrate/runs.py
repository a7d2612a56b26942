"""How a search's trials ran, in words (from ``search.trial_provenance``): worker processes, hosts, devices."""
from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, plural where ``n`` is not 1 (``many``, else ``word + "s"``)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def id_ranges(ids: list[int]) -> str:
    """Sorted ints as runs: [0, 1, 2, 3, 5, 8, 9] -> '0-3, 5, 8-9'."""
    runs = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def how_trials_ran(prov: dict) -> str:
    """How the completed trials ran, from their worker records (``search.trial_provenance``): worker
    processes, worker ids, hosts and devices. Never the worker count of the process that draws the
    figures, which in a report-only run ran no trial at all."""
    n = prov["trials"]
    if not n:
        return "No trial has completed yet."
    if not prov["processes"]:
        return f"{plural(n, 'completed trial')}, none of which recorded the worker that ran it."
    ids = prov["worker_ids"]
    text = (f"The {plural(n, 'completed trial')} ran in "
            f"{plural(prov['processes'], 'worker process', 'worker processes')}"
            + (f" (worker {'id' if len(ids) == 1 else 'ids'} {id_ranges(ids)})" if ids else ""))
    hosts = {h: c for h, c in prov["hosts"].items() if h != "unrecorded"}
    # fresh machines can share a host name ("vm"): their boots tell them apart
    boots = f", over {prov['boots']} boots" if prov.get("boots", 1) > len(hosts) else ""
    per_host = ", ".join(f"{h}: {plural(c, 'trial')}" for h, c in hosts.items())
    text += f" on {plural(len(hosts), 'host')} ({per_host}{boots})"
    devices = [f"{d} ({plural(c, 'trial')})" for d, c in prov["devices"].items() if d != "unrecorded"]
    if prov["devices"].get("unrecorded"):  # trials stored before workers recorded their device
        devices.append(f"device not recorded ({plural(prov['devices']['unrecorded'], 'trial')})")
    text += "; devices: " + ", ".join(devices)
    if prov["unclaimed"]:
        text += f"; {plural(prov['unclaimed'], 'trial')} recorded no worker"
    if prov.get("sm_counts"):  # an MPS share shows a process fewer SMs, and its kernels, so its bits, follow that
        seen = ", ".join(f"{k} ({plural(c, 'trial')})" for k, c in prov["sm_counts"].items())
        text += (f"; the GPU's multiprocessors each trial's process saw: {seen} (fewer under an MPS share, which "
                 "changes a trial's bits: the same search at another share trains other weights)")
    return text + "."
