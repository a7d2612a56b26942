"""Lab 4's figures (labkit.plots.lab4_mxint8, labkit.plots.lab4_perf): each drawn from its stored payload by
plot_<figure>(payload) and from small inputs, readable (no text overlaps another), the bandwidth plot in % of
copy with every stored size, and the re-draw script keeps the stored numbers and provenance."""
import json
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from labkit.kernels import tiling
from labkit.plots import lab4_mxint8 as figures
from labkit.plots import lab4_perf

ROOT = Path(__file__).resolve().parents[2]
LAB4 = ROOT / "figures" / "lab4"


def committed(name):
    path = LAB4 / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} not committed")
    return json.loads(path.read_text())


def tiling_numbers(group_size=32, num_groups=80):
    t = tiling.lab_tile_map(group_size, num_groups)
    return {"constants": tiling.kernel_constants(),
            "drawn": {"group_size": group_size, "num_groups": num_groups,
                      **{k: t[k] for k in ("BLK_M", "BLK_K", "THR_M", "THR_K")}}}


def synthetic_rows(sizes=(1 << 10, 1 << 12, 1 << 14), groups=(16, 32), impls=("cute_vec", "eager", "mine")):
    rows = []
    for i, n in enumerate(sizes):
        for g in groups:
            for j, impl in enumerate(impls):
                frac = (0.2 + 0.3 * j + 0.1 * i) * (1 + g / 1000)
                rows.append({"n": n, "group_size": g, "impl": impl, "GBps": 1000 * frac, "fraction_of_copy": frac})
    return rows


def synthetic_measured(models=("tiny", "a model with a rather long name, 12 layers x 768 hidden")):
    out = {}
    for s, name in enumerate(models, 1):
        def entry(fmt, res, extra):
            return {"format": fmt, "resident": int(res * 1e6), "peak": int((res + extra) * 1e6)}
        out[name] = {"fp32": entry("fp32", 40.0 * s ** 3, 10.0 * s), "mxint8": entry("mxint8 g32", 12.0 * s ** 3, 12.0 * s),
                     "batch_size": 2, "seq_len": 16, "saving_peak": 0.5}
    return out


def readable(fig):
    """No two texts overlap (grown by 1 px each, so touching counts) and no value label leaves its axes."""
    assert isinstance(fig, Figure)
    assert figures.overlapping_texts(fig, pad=1) == []
    assert figures.texts_outside_axes(fig) == []


# --- the overlap check itself must be able to fail -------------------------------------------------------

def test_overlap_check_finds_overlapping_text():
    fig = figures._figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.text(0.5, 0.5, "thread 123", fontsize=12)
    ax.text(0.52, 0.5, "thread 456", fontsize=12)
    assert ("thread 123", "thread 456") in figures.overlapping_texts(fig)


def test_overlap_check_finds_the_old_crowded_thread_ids():
    """The defect of the committed figure: thread ids at fontsize 5.5 in a narrow panel overrun."""
    t = tiling.lab_tile_map(32, 80)
    fig = figures._figure(figsize=(5, 4.8))
    ax = fig.subplots()
    ax.imshow(t["thread"][:, :32] // 32, aspect="auto")
    for kk in range(16):
        for m in (0, 1, 2, 30, 31):
            ax.text(kk, m, str(t["thread"][m, kk]), ha="center", va="center", fontsize=5.5)
    assert figures.overlapping_texts(fig)


def test_outside_check_finds_a_label_off_its_axes():
    fig = figures._figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.text(0.95, 0.5, "a long value label running off", transform=ax.transAxes)
    assert figures.texts_outside_axes(fig) == ["a long value label running off"]


# --- tiling ----------------------------------------------------------------------------------------------

def test_tiling_from_committed_json_is_readable():
    p = committed("mxint8_tiling")
    fig = figures.plot_mxint8_tiling(p)
    readable(fig)
    current = p["numbers"]["constants"] == tiling.kernel_constants()
    assert fig.labkit_drawn["constants_match_current_header"] == current
    # a colour bar for each colour-coded panel: CTA (a), warp (b), and the three strips of (c)
    images = [im for ax in fig.get_axes() for im in ax.get_images()]
    assert len(images) == 5
    assert all(im.colorbar is not None for im in images)


@pytest.mark.parametrize("group_size,num_groups", [(16, 100), (32, 64), (32, 95), (128, 20), (8, 5)])
def test_tiling_on_other_views(group_size, num_groups):
    numbers = tiling_numbers(group_size, num_groups)
    fig = figures.tiling_figure(numbers)
    readable(fig)
    # thread ids written in (b) are those of the kernel's layout (labkit.kernels.tiling)
    t = tiling.lab_tile_map(group_size, num_groups)
    ax_b = fig.get_axes()[1]
    ids = {(round(x.get_position()[1]), round(x.get_position()[0])): int(x.get_text())
           for x in ax_b.texts if x.get_text().isdigit()}
    assert ids and all(t["thread"][m, k] == v for (m, k), v in ids.items())


def test_tiling_rejects_numbers_that_disagree_with_the_constants():
    numbers = tiling_numbers()
    numbers["drawn"]["THR_K"] = 4
    with pytest.raises(ValueError):
        figures.tiling_figure(numbers)


# --- memory ----------------------------------------------------------------------------------------------

def test_memory_from_committed_json():
    p = committed("mxint8_memory")
    measured = p["numbers"]["measured"]
    fig = figures.plot_mxint8_memory(p)
    readable(fig)
    assert p["provenance"]["device"] in fig.get_suptitle()
    axes = fig.get_axes()
    assert len(axes) == len(measured)
    for ax, (name, m) in zip(axes, measured.items()):
        assert ax.get_title(loc="left").startswith(name)  # the whole model name, not truncated
        written = " ".join(t.get_text() for t in ax.texts)
        for fmt in ("fp32", "mxint8"):
            assert f"{m[fmt]['resident'] / 1e6:,.1f} MB" in written
            assert f"peak {m[fmt]['peak'] / 1e6:,.1f} MB" in written
        assert [lbl.get_text() for lbl in ax.get_yticklabels()] == ["fp32", "MXINT8 g32"]


def test_memory_on_synthetic_numbers():
    measured = synthetic_measured()
    fig = figures.memory_figure(measured)
    readable(fig)
    assert "batch 2 x 16 tokens" in fig.get_suptitle()
    assert fig.get_axes()[1].get_title(loc="left").startswith("a model with a rather long name")


# --- bandwidth -------------------------------------------------------------------------------------------

def check_bandwidth(fig, rows, group_size):
    sel = [r for r in rows if r["group_size"] == group_size]
    sizes, impls = sorted({r["n"] for r in sel}), list(dict.fromkeys(r["impl"] for r in sel))
    (ax,) = fig.get_axes()
    lines = {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}
    assert sorted(lines) == sorted(impls)  # one line per implementation
    for impl, ln in lines.items():
        want = sorted((r["n"], 100 * r["fraction_of_copy"]) for r in sel if r["impl"] == impl)
        assert len(ln.get_xdata()) == len(sizes)  # a point at every size in the rows
        np.testing.assert_allclose(np.c_[ln.get_xdata(), ln.get_ydata()], want)
    assert isinstance(ax.yaxis.get_major_formatter(), PercentFormatter)
    assert "% of copy" in ax.get_ylabel()
    assert ax.get_ylim()[0] <= 0 and ax.get_ylim()[1] >= max(100 * r["fraction_of_copy"] for r in sel)
    assert f"group size {group_size}" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()] == [figures._size_label(n) for n in sizes]
    readable(fig)


def test_bandwidth_from_committed_rows():
    bw = committed("mxint8_bandwidth")
    fig = figures.bandwidth_figure(bw["rows"], 32, device=bw["device"])
    check_bandwidth(fig, bw["rows"], 32)
    assert len({r["n"] for r in bw["rows"]}) == 5 and len(fig.get_axes()[0].get_xticklabels()) == 5
    assert bw["device"] in fig.get_axes()[0].get_title()


def test_bandwidth_on_synthetic_rows():
    rows = synthetic_rows()
    for g in (16, 32):
        check_bandwidth(figures.bandwidth_figure(rows, g), rows, g)
    with pytest.raises(ValueError, match="say which one"):
        figures.bandwidth_figure(rows)
    one = [r for r in rows if r["group_size"] == 16]
    check_bandwidth(figures.bandwidth_figure(one), one, 16)
    with pytest.raises(ValueError):
        figures.bandwidth_figure(rows, 64)


def test_bandwidth_legend_gives_gbps_at_the_largest_size():
    rows = synthetic_rows(groups=(32,))
    text = " ".join(figures.legend_entries(figures.bandwidth_figure(rows, 32)))
    big = max(r["n"] for r in rows)
    for r in rows:
        if r["n"] == big:
            assert f"{100 * r['fraction_of_copy']:.0f}% = {r['GBps']:,.0f} GB/s" in text


# --- the re-draw tool -------------------------------------------------------------------------------------

def test_redraw_keeps_numbers_and_provenance(tmp_path, monkeypatch):
    from labkit import redraw

    names = ("mxint8_tiling", "mxint8_memory", "mxint8_bandwidth_plot")
    for n in names:
        committed(n)
    (tmp_path / "lab4").mkdir()
    for n in names:
        shutil.copy(LAB4 / f"{n}.json", tmp_path / "lab4")
    before = {n: json.loads((LAB4 / f"{n}.json").read_text()) for n in names}
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    assert redraw.main(["lab4_mxint8", "--figures", *sum((["--only", n] for n in names), [])]) == 0
    for n in names:
        after = json.loads((tmp_path / "lab4" / f"{n}.json").read_text())
        assert (tmp_path / "lab4" / f"{n}.png").stat().st_size > 0
        assert (tmp_path / "lab4" / f"{n}.svg").stat().st_size > 0
        drawn = after.pop("drawn")
        before[n].pop("drawn", None)  # a committed figure may carry an earlier drawing's block
        assert after == before[n]  # numbers, settings and the measured provenance untouched
        assert drawn["by"] == "python -m labkit.redraw lab4_mxint8" and drawn["created"] and "git_commit" in drawn
    bw_drawn = json.loads((tmp_path / "lab4" / "mxint8_bandwidth_plot.json").read_text())["drawn"]
    assert bw_drawn["from"] == "numbers.rows of this file"


def test_redraw_draws_the_figures_own_rows(tmp_path, monkeypatch):
    """A payload as the notebook writes it (rows in the figure's JSON) is drawn from those rows."""
    rows = synthetic_rows(groups=(32,))
    payload = {"lab": "lab4", "name": "mxint8_bandwidth_plot", "figure": "mxint8_bandwidth_plot.png",
               "numbers": {"source": "synthetic", "group_size": 32, "rows": rows, "summary": []},
               "settings": {"group_size": 32, "profile": "full"}, "provenance": {"device": "a test GPU"}}
    (tmp_path / "lab4").mkdir()
    (tmp_path / "lab4" / "mxint8_bandwidth_plot.json").write_text(json.dumps(payload))
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    from labkit import redraw

    stored = redraw.payloads_of("lab4_mxint8")["mxint8_bandwidth_plot"]
    fig = redraw.plot("lab4_mxint8", "mxint8_bandwidth_plot", stored)
    assert fig.labkit_drawn["from"] == "numbers.rows of this file"
    check_bandwidth(fig, rows, 32)
    assert "a test GPU" in fig.get_axes()[0].get_title()


def bandwidth_payload(source, numbers_device=None):
    numbers = {"source": source, "group_size": 32, "rows": synthetic_rows(groups=(32,)), "summary": []}
    if numbers_device:
        numbers["device"] = numbers_device
    return {"numbers": numbers, "settings": {"group_size": 32},
            "provenance": {"device": "the machine that saved it", "created": "2026-01-02T03:04:05+00:00"}}


def test_stored_rows_are_labelled_with_their_own_device_and_no_date_of_this_run():
    """A CPU run shows the stored GPU sweep: the title names the GPU the rows name, not the CPU that saved them."""
    fig = figures.plot_mxint8_bandwidth_plot(bandwidth_payload("stored GPU results from `x`", "a stored GPU"))
    title = fig.get_axes()[0].get_title()
    assert "a stored GPU" in title and "the machine that saved it" not in title and "2026-01-02" not in title
    own = figures.plot_mxint8_bandwidth_plot(bandwidth_payload("measured in this run on a GPU", "a GPU"))
    assert "of 2026-01-02 03:04" in own.get_axes()[0].get_title()
    older = figures.plot_mxint8_bandwidth_plot(bandwidth_payload("measured in this run on a GPU"))
    assert "the machine that saved it" in older.get_axes()[0].get_title()  # a JSON without numbers.device


def test_bandwidth_payload_without_rows_is_refused():
    payload = bandwidth_payload("measured in this run")
    payload["numbers"]["rows"] = []
    with pytest.raises(ValueError, match="stores no rows"):
        figures.plot_mxint8_bandwidth_plot(payload)


def test_accuracy_from_committed_json():
    p = committed("mxint8_accuracy")
    fig = figures.plot_mxint8_accuracy(p)
    (ax,) = fig.get_axes()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fp32 (SFT)", f"MXINT8 g{p['settings']['group_size']}"]
    assert f"{p['numbers']['dataset_sizes']['test']:,} reviews" in ax.get_title()


def test_figures_are_pyplots_for_the_inline_backend():
    """A figure that redraw.show draws in a notebook shows when the cell ends only if pyplot holds it."""
    fig = figures.plot_mxint8_tiling({"numbers": tiling_numbers(), "settings": {}, "provenance": {}})
    assert fig.number in plt.get_fignums()


# --- lab4_perf -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["compile_cpu", "compile_cuda", "sdpa_cpu", "sdpa_cuda"])
def test_perf_figures_from_committed_json(name):
    p = committed(name)
    fig = getattr(lab4_perf, f"plot_{name}")(p)
    assert p["numbers"]["device_name"] in fig.get_suptitle()
    assert fig.labkit_drawn == {"from": "numbers of this file"}
    assert len(fig.get_axes()) == 3


def test_show_outside_a_notebook_does_nothing():
    from labkit.report import show

    show(figures.bandwidth_figure(synthetic_rows(groups=(32,)), 32))  # no IPython here: no error, no output
