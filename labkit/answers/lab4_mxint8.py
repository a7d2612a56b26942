"""Lab 4 part 3 (MXINT8): answers 3a-3d as Markdown from the stored numbers.

Inputs are ``save_results`` payloads as the notebook writes them to figures/lab4/ (``mxint8_format``,
``mxint8_tiling``, ``mxint8_bandwidth_plot``, ``mxint8_memory``, ``mxint8_accuracy``), so the answers
re-render from committed JSON.
"""
from __future__ import annotations

from ..kernels import tiling
from ..kernels.memory import theoretical_saving
from ..narrate.lab4_mxint8 import parameter_table
from ..readings import by_key
from ..readings.tables import DECODE_COLUMNS, memory_rows
from ..readings import lab4_mxint8 as _readings
from ..report import table
from . import sources

TITLE = "Lab 4 (part 3): MXINT8, a CuTe dequantization kernel, packed Linear layers, and memory"
NAMES = ("mxint8_format", "mxint8_tiling", "mxint8_bandwidth_plot", "mxint8_memory", "mxint8_accuracy")
# The sheet (LABS.md, Lab 4): theory (32 - 8.25)/32 = 74.2%, i.e. group size 32, misprinted as 86.7%;
# the reference DeBERTa-xlarge classifier: fp32 peak 2906 MB vs MXINT8 976 MB; its kernel 22-30% of copy.
SHEET_GROUP, SHEET_FIGURE = 32, 0.867
COURSE_PEAK_MB = (2906, 976)
COURSE_COPY_PCT = (22, 30)
GRID_Y_MAX = 65535


def error_text(rows: list[dict]) -> str:
    first, last = rows[0], rows[-1]
    grows = all(a["relative L2 error"] < b["relative L2 error"] for a, b in zip(rows, rows[1:]))
    return (f"A 768 x 3072 Gaussian weight (std 0.02) quantized with {len(rows)} group sizes:\n\n{table(rows)}\n\n"
            + (f"Larger groups cost fewer exponent bits but share one scale among more values, so the small values "
               f"of a group keep fewer significant bits: the error grows from {first['relative L2 error']:.2%} "
               f"(g={first['group_size']}) to {last['relative L2 error']:.2%} (g={last['group_size']})." if grows else
               f"The error does not grow with the group size here ({first['relative L2 error']:.2%} at "
               f"g={first['group_size']}, {last['relative L2 error']:.2%} at g={last['group_size']})."))


def dot_answer(dot: dict) -> str:
    """3a, from ``checks.group_dot``."""
    g, bits = dot["group_size"], 8 + 8 / dot["group_size"]
    text = (f"Group dot products through integers: {dot['dot_int']!r}; through the dequantized floats: "
            f"{dot['dot_float']!r}; equal: **{dot['equal']}**. ")
    if not dot["equal"]:
        return text + "They differ, so this run does not show the integer path to be exact."
    return text + (
        f"Each group is {g} int8 x int8 products summed exactly in an integer accumulator (at most "
        f"{dot['accumulator_bound']:,} < 2^{dot['accumulator_bits']}), then one 8-bit exponent add and one scale per "
        f"{g} multiply-accumulates.\n\n**Answer 3a.** So custom hardware needs only integer multipliers and adders in "
        "the inner loop (no per-element exponent alignment, normalisation or rounding as in floating point: "
        f"smaller, lower-power MAC units, more of them per mm^2), and it moves {bits:g} bits per operand instead of "
        f"16 (bf16) or 32 (fp32): {32 / bits:.2f}x fewer bytes than fp32 and {16 / bits:.2f}x fewer than bf16 for "
        "weights *and* activations, so a memory-bound layer runs up to that much faster and on-chip buffers hold "
        "that many more values. A GPU without MXINT8 units gets only the storage saving, and pays a dequantization "
        "pass to bf16 (the kernel below).")


def decode_answer(d: dict) -> str:
    """3b, from ``checks.decode_check``."""
    row = {r["m"]: r for r in d["table"]}
    exact_domain = d["sheet_wrong_in_domain"] == 0
    text = (f"Over the format's domain (m in [-127, 127], E in [1, 254]: {d['domain_pairs']:,} pairs) the sheet's "
            f"decode {'equals' if exact_domain else 'does not equal'} `m * 2^(E-127) / 64` exactly: "
            f"{d['sheet_wrong_in_domain']} mismatches. Without `bias` (always `out`) {d['without_bias_wrong']:,} "
            f"pairs are wrong (every |m| < 64 gains a spurious leading 1, e.g. m = 1 decodes to "
            f"{row[1]['without bias']} instead of {row[1]['exact']}); without `dont_need_abs` (always subtract) "
            f"{d['always_subtract_wrong']:,} are wrong (every |m| >= 64 loses its real leading 1, e.g. m = 100 gives "
            f"{row[100]['always subtract']} instead of {row[100]['exact']}).\n\n")
    text += ("**Answer 3b.** bf16 (like every IEEE format) stores no leading 1: a normal number is 1.frac x "
             "2^(E-127). MXINT8 mantissas are plain integers with no implicit 1: |m|/64 is 1.xxxxxx when bit 6 of |m| "
             "is set and 0.xxxxxx when it is not. The assembly puts the low 6 bits of |m| in bf16's fraction, so "
             "`out` always reads 1.frac. `dont_need_abs` (bit 6 of |m|) says the leading 1 is real, and `out` is the "
             "answer; otherwise `bias` = bits(sign|exp) = +-2^(E-127) is exactly the spurious leading 1, and "
             "`out - bias` removes it (the subtraction also renormalises the result, which the bit assembly alone "
             "cannot).\n\n")
    text += (f"Outside the domain the assembly is not exact, and labkit defines and patches those pairs: E = 0 "
             f"({d['sheet_wrong_E0']} wrong: bf16's zero exponent field has no implicit 1 either, so `bias` is 0 and "
             f"`out` is a subnormal of twice the value; the exact value m * 2^-133 is the subnormal whose fraction is "
             f"|m|), E = 255 (bf16's inf/NaN exponent field: the assembly gives {d['sheet_inf_E255']} infinities and "
             f"{d['sheet_nan_E255']} NaNs of assorted payloads; labkit decodes the whole group as NaN, the OCP MX "
             f"rule, and the quantizer writes 255 only for groups holding inf/NaN) and the byte m = -128 that the "
             f"quantizer never writes ({d['sheet_wrong_m_minus128']} wrong: |m| = 128 overflows the 7 bits; labkit "
             f"decodes it as -2 * 2^(E-127)). With those patches: {d['patched_wrong']} mismatches in all "
             f"{d['pairs']:,} pairs; the CUDA kernel's `decode_bits` is the same code. ")
    k = d.get("kernel_wrong_all_pairs")
    return text + ("The CUDA kernel did not run on these pairs where these numbers were computed." if k is None else
                   f"The CUDA kernel on all {d['pairs']:,} pairs: {k} mismatches.")


def _pct_copy(summary: list[dict] | None, impl: str, group_size: int) -> tuple[int, float] | None:
    """(n, % of copy) of ``impl`` at the largest size measured for ``group_size``."""
    rows = [r for r in summary or [] if r["g"] == group_size and f"{impl} %copy" in r]
    if not rows:
        return None
    r = max(rows, key=lambda r: r["n"])
    return r["n"], r[f"{impl} %copy"]


def tiling_answer(t: dict, group_size: int, summary: list[dict] | None = None) -> str:
    """3c: the sheet's one-element-per-thread layout first, then labkit's kernels. ``t``: the
    ``mxint8_tiling`` numbers (kernel constants, drawn tile); ``summary``: the bandwidth summary rows."""
    c, d = t["constants"], t["drawn"]
    sheet = tiling.lab_tile_shape(group_size)
    blk_m, blk_k = sheet["BLK_M"], sheet["BLK_K"]
    threads = blk_m * blk_k  # one element per thread
    traffic = 1 + 1 / group_size + 2
    warp_bytes = 32 if blk_m >= 32 or blk_m == group_size else None
    vec, tile = _pct_copy(summary, "cute_vec", group_size), _pct_copy(summary, "cute_tile", group_size)
    text = (
        f"**Answer 3c.** *The sheet's layout.* The kernel views the flat tensor as a column-major matrix "
        f"(group_size, num_groups), so column k is group k (its {group_size} bytes contiguous) and uses exponent k. "
        f"`cta_tiler` = (BLK_M, BLK_K) = ({blk_m}, {blk_k}) at group size {group_size} ({blk_m * blk_k:,} elements; "
        f"BLK_M the largest power of two <= group_size, up to 128) cuts it into CTA tiles: `local_tile(mX, "
        f"cta_tiler, cta_coord)` returns the tile at `cta_coord`, rows [tm*BLK_M, ...), columns [tk*BLK_K, ...), "
        f"and `local_tile` of the exponent vector with BLK_K gives the matching exponents. The thread layout is "
        f"({blk_m}, {blk_k}) column-major too: {threads:,} threads per CTA, thread t at (t % {blk_m}, t / {blk_m}), "
        f"so `local_partition(tile, layout, t)` gives thread t exactly one element; `layout_sX`, the shared-memory "
        f"tile's layout, has the same shape, so thread t copies its mantissa byte into shared memory, waits at a "
        f"barrier, and decodes that same element (about a dozen integer operations with its group's exponent) into "
        f"one 2-byte bf16.\n\n"
        f"*Why it is memory-bound.* Per element the kernel reads {1 + 1 / group_size:g} bytes and writes 2 "
        f"({traffic:g} B), each exactly once: there is no reuse to exploit, and the arithmetic per byte is a few "
        f"integer operations, so the floor on its time is moving those bytes, and the yardstick is a plain copy of "
        f"the same bytes.\n\n")
    if warp_bytes:
        text += (f"*Coalescing.* Consecutive threads take consecutive bytes of a group, so a warp's load reads "
                 f"{warp_bytes} consecutive bytes (one 32-byte sector) and its store writes {2 * warp_bytes} "
                 "consecutive bytes: fully coalesced, but each memory instruction moves only that much, and with one "
                 "element per thread every thread has 1 byte in flight. Too few bytes are in flight per SM to cover "
                 "DRAM latency, so the kernel waits on latency well below the bandwidth that bounds it; the "
                 "shared-memory stage adds a round trip and a barrier and buys nothing (each byte is used once). ")
    text += (f"The sheet puts the n / {blk_m * blk_k:,} CTA tiles on grid y, which stops at {GRID_Y_MAX:,}, so from "
             f"{(GRID_Y_MAX + 1) * blk_m * blk_k:,} elements (2^{((GRID_Y_MAX + 1) * blk_m * blk_k).bit_length() - 1}) "
             f"the launch fails, silently without a check. The course measured this kernel at "
             f"{COURSE_COPY_PCT[0]}-{COURSE_COPY_PCT[1]}% of copy bandwidth on an H100.\n\n")
    text += (
        f"*labkit's kernels.* `dequant_tile_kernel` keeps the sheet's tiler but a ({d['THR_M']}, {d['THR_K']}) "
        f"column-major thread layout at group size {d['group_size']}: {c['kTileThreads']} threads per CTA, "
        f"{c['kTileElems'] // c['kTileThreads']} elements each, {d['THR_K']} columns apart; it drops the "
        "shared-memory stage, walks the CTA tiles with a 1-D grid-stride loop (no grid-y limit), predicates ragged "
        "tiles with an identity tensor (`elem_less`) and checks every launch. `dequant_vec_kernel` keeps "
        f"local_tile/local_partition on a ({c['kVecElems']}, n/{c['kVecElems']}) view: each thread owns "
        f"{c['kVecUnroll']} vectors of {c['kVecElems']} elements, {c['kVecThreads']} apart, so it has "
        f"{c['kVecUnroll'] * c['kVecElems']} B of loads in flight (the sheet's: 1 B), and a warp's load reads "
        f"{32 * c['kVecElems']} contiguous bytes and its store writes {32 * 2 * c['kVecElems']} (whole sectors).")
    if vec and tile:
        text += (f" Measured at n = {vec[0]:,} (group {group_size}): the vectorised kernel reaches {vec[1]:.0f}% of "
                 f"copy bandwidth, the sheet-structured tile kernel {tile[1]:.0f}%"
                 + (": the same decode at near-copy speed shows the arithmetic is not the limit; what differs is "
                    f"the bytes each thread keeps in flight ({c['kVecUnroll'] * c['kVecElems']} B vs "
                    f"{c['kTileElems'] // c['kTileThreads']} B)." if vec[1] > 2 * tile[1] else "."))
    return text


def bandwidth_text(summary: list[dict], source: str, group_size: int, read: dict | None = None) -> str:
    """The bandwidth table and its reading; ``read``: ``labkit.readings.lab4_mxint8``'s readings by key (which
    sizes time the launch, bit-exactness), when the rows they read are stored."""
    impls = [i for i in ("cute_vec", "cute_tile", "eager", "compile") if f"{i} GB/s" in summary[0]]
    g = group_size if any(r["g"] == group_size for r in summary) else summary[0]["g"]
    sel = sorted((r for r in summary if r["g"] == g), key=lambda r: r["n"])
    big = {i: sel[-1][f"{i} %copy"] for i in impls}
    own = source.startswith("measured in this run")
    text = (f"**Bandwidth numbers** (source as recorded with them): {source}. `mxint8_bandwidth_plot.png` draws "
            "exactly these rows (`mxint8_bandwidth_plot.json`); `mxint8_bandwidth.json` holds the rows of "
            "`python -m labkit.kernels.bandwidth` (every group size)"
            + (", a separate run of the same kernel: where the two files differ it is between runs, not between a "
               "figure and its numbers" if own else "") + ".\n\n"
            + table(summary, ["n", "g", "copy GB/s"] + [f"{i} {k}" for i in impls for k in ("GB/s", "%copy")],
                    floatfmt=".0f")
            + f"\n\nAt n = {sel[-1]['n']:,} (group {g}) the vectorised CuTe kernel reaches **{big['cute_vec']:.0f}%** "
            f"of copy bandwidth, the lab-structure tile kernel {big['cute_tile']:.0f}%, eager PyTorch "
            f"{big['eager']:.0f}%" + (f", torch.compile {big['compile']:.0f}%" if "compile" in big else "")
            + f". The course's kernel measured {COURSE_COPY_PCT[0]}-{COURSE_COPY_PCT[1]}% of copy on an H100.")
    if len(sel) > 1:
        first, second = sel[0], sel[1]
        # the copy of the fewest bytes is timed as one of n / GB/s; a larger size copied in less time means that
        # point timed something else than the transfer (the run's first size), not launch latency
        t0, t1 = first["n"] / first["copy GB/s"], second["n"] / second["copy GB/s"]
        if t0 > t1:
            text += (f" At n = {first['n']:,} the copy reaches only {first['copy GB/s']:.0f} GB/s, yet at n = "
                     f"{second['n']:,} it moves {second['n'] / first['n']:.0f}x the bytes in less time: that "
                     "point times something other than the transfer in this run (its first size), not launch "
                     "latency, so its ratios to the copy say nothing of the kernels.")
        else:
            text += (f" At n = {first['n']:,} even the copy reaches {first['copy GB/s']:.0f} GB/s, "
                     f"{first['copy GB/s'] / sel[-1]['copy GB/s']:.0%} of its {sel[-1]['copy GB/s']:.0f} GB/s at the "
                     "largest size: a few microseconds of launch and latency dominate so little traffic.")
    if read and "bandwidth.smallest_launch_bound" in read:
        text += f" {_cap(read['bandwidth.smallest_launch_bound'].says)}."
    if read and "bandwidth.bit_exact" in read:
        text += f" {_cap(read['bandwidth.bit_exact'].says)}."
    over = sorted({r["n"] for r in sel for i in impls if r[f"{i} %copy"] > 100})
    if over:
        text += (f" Ratios above 100% (n = {', '.join(f'{n:,}' for n in over)}) mean the kernel "
                 "timed faster than the copy of the same bytes; read them as copy speed, not more.")
    return text


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def memory_answer(measured: dict | None, parameters: list[dict], group_size: int, read: dict | None = None) -> str:
    """3d: theory, the sheet's 86.7% (MXINT4's formula), and labkit's measured savings."""
    mx8, mx4 = theoretical_saving(group_size), theoretical_saving(SHEET_GROUP, mantissa_bits=4)
    text = (f"**Answer 3d.** *Theory.* An MXINT8 tensor at group size {group_size} stores 8 + 8/{group_size} = "
            f"{8 + 8 / group_size:g} bits per value: (32 - {8 + 8 / group_size:g}) / 32 = **{mx8:.1%}** saved against "
            "fp32. ")
    if round(mx4, 3) == SHEET_FIGURE:
        text += (f"The sheet's {SHEET_FIGURE:.1%} is the same formula with 4-bit mantissas at its group size "
                 f"{SHEET_GROUP}, (32 - (4 + 8/{SHEET_GROUP})) / 32 = {mx4:.1%}: the saving of MXINT4, not of "
                 "the MXINT8 format the lab uses. ")
    else:
        text += (f"The sheet's {SHEET_FIGURE:.1%} matches neither MXINT8 ({mx8:.1%}) nor MXINT4 ({mx4:.1%}) at "
                 f"group size {SHEET_GROUP}. ")
    if not measured:
        return text + "No GPU memory measurement is stored, so the measured saving cannot be compared."
    names = list(measured)
    big, small = measured[names[-1]], measured[names[0]]
    emb = {r["model"]: r["embeddings MB"] for r in parameters}
    text += (f"*Measured by labkit* (every Linear but the classifier converted): for {names[-1]} the converted "
             f"weights are {big['quantized_share_of_fp32_bytes']:.1%} of the fp32 bytes, so the whole-model "
             f"prediction is {big['theory_whole_model']:.1%} and the parameter bytes fall by "
             f"{big['saving_parameter_bytes']:.1%}; embeddings"
             + (f" ({emb[names[-1]]:.0f} MB)" if names[-1] in emb else "")
             + f", LayerNorm, biases and the classifier stay fp32. For {names[0]} only "
             f"{small['quantized_share_of_fp32_bytes']:.1%} of the bytes can shrink, and the parameter saving is "
             f"{small['saving_parameter_bytes']:.1%}. The inference peak saving is lower again: "
             f"{big['saving_peak']:.1%} ({big['fp32']['peak'] / 1e6:.0f} -> {big['mxint8']['peak'] / 1e6:.0f} MB) "
             f"for {names[-1]}, {small['saving_peak']:.1%} for {names[0]}, because the peak also holds activations, "
             "attention scores and logits, the same in both formats")
    extra = {n: (c["mxint8"]["peak_minus_resident"] - c["fp32"]["peak_minus_resident"]) / 1e6 for n, c in measured.items()}
    temp_mb = big["mxint8"]["largest_linear"] * 6 / 1e6  # bf16 temporary + its fp32 cast
    if extra[names[-1]] > 0:
        text += (f"; with MXINT8, peak minus resident grows by {extra[names[-1]]:.0f} MB for {names[-1]}, "
                 + ("within" if extra[names[-1]] <= temp_mb else "more than")
                 + f" the {temp_mb:.0f} MB that the dequantized weight of its largest "
                 f"({big['mxint8']['largest_linear']:,}-element) Linear takes as a bf16 temporary and its fp32 cast")
    text += (f". Against the sheet: {mx8:.1%} in theory for the converted tensors, {big['saving_parameter_bytes']:.1%} "
             f"of the parameter bytes and {big['saving_peak']:.1%} of the peak measured here; the course's DeBERTa-"
             f"xlarge classifier measured {COURSE_PEAK_MB[0]} -> {COURSE_PEAK_MB[1]} MB "
             f"({1 - COURSE_PEAK_MB[1] / COURSE_PEAK_MB[0]:.1%}). {mx4:.1%} would need 4-bit mantissas.")
    for key in ("memory.parameters_match_theory", "memory.peak_saving"):
        if read and key in read:
            text += f" {_cap(read[key].says)}."
    return text


def accuracy_text(acc: dict, group_size: int) -> str:
    fp, mx, n = acc["fp32"]["accuracy"], acc["mxint8"]["accuracy"], acc["fp32"]["n"]
    k = len(acc.get("seeds") or [None])
    gaps = acc.get("max_logit_gap_seeds") or [acc["max_logit_gap"]]
    return (f"{len(acc['converted'])} Linear layers converted ({', '.join(acc['skipped'])} kept in fp32), their "
            f"weights {acc['weight_saving']:.1%} smaller. Accuracy on {n:,} test reviews"
            + (f", means of {k} SFT models (training seeds)" if k > 1 else "") + f": fp32 **{fp:.4f}**, MXINT8 "
            f"g{group_size} **{mx:.4f}**; {_readings.accuracy(acc).says}. Largest logit difference on a "
            f"test batch {max(gaps):.3g}. Dequantization ran through: {_no_machine_paths(acc['kernel_path'])}.")


def _no_machine_paths(text: str) -> str:
    """A kernel description with the machine's extension-cache folder replaced by what it is."""
    import re

    return re.sub(r"(/[\w.-]+)+/torch_extensions/", "<torch extensions cache>/", text)


def render(payloads: dict[str, dict | None], folder=None) -> str:
    """The whole answers file from the stored payloads named in ``NAMES`` (missing ones are said so)."""
    p = {n: payloads.get(n) for n in NAMES}
    g = next((q["settings"]["group_size"] for q in p.values() if q and "group_size" in q.get("settings", {})), 32)
    read = by_key(_readings.readings(p))
    parts = [sources.header(TITLE, p, "notebooks/lab4_mxint8.ipynb")
             + ("\n\n`mxint8_format` holds exact computations (no timings): they come out the same on any device."
                if p["mxint8_format"] else ""), "## The format: quantization rules and error"]
    fmt = (p["mxint8_format"] or {}).get("numbers")
    if fmt:
        parts += [table(fmt["rules"]), error_text(fmt["errors"]), "## 3a. Both operands MXINT8",
                  dot_answer(fmt["dot"]), "## 3b. `dont_need_abs` and `bias`",
                  f"E = {fmt['decode']['table_exponent']}:\n\n" + table(fmt["decode"]["table"], DECODE_COLUMNS, ".6g"),
                  decode_answer(fmt["decode"])]
    else:
        parts.append("No stored `mxint8_format` numbers: answers 3a and 3b are not rendered.")
    summary = ((p["mxint8_bandwidth_plot"] or {}).get("numbers") or {}).get("summary")
    if summary:
        parts += ["## The kernel's bandwidth", bandwidth_text(summary, p["mxint8_bandwidth_plot"]["numbers"]["source"], g,
                                                             read)]
    parts.append("## 3c. `cta_tiler` and `layout_sX`")
    parts.append(tiling_answer(p["mxint8_tiling"]["numbers"], g, summary) if p["mxint8_tiling"] else
                 "No stored `mxint8_tiling` numbers.")
    parts.append("## 3d. Memory: fp32 vs MXINT8, measured")
    mem = (p["mxint8_memory"] or {}).get("numbers")
    if mem:
        parts += [parameter_table(mem["parameters"], g), table(memory_rows(mem["measured"]), floatfmt=".1f")]
    parts.append(memory_answer(mem and mem["measured"], (mem or {}).get("parameters", []), g, read))
    if p["mxint8_accuracy"]:
        parts += ["## Accuracy of the converted classifier on IMDb", accuracy_text(p["mxint8_accuracy"]["numbers"], g)]
    return "\n\n".join(parts) + "\n"

