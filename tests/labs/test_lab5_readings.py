"""Lab 5's readings, answers and figure on synthetic payloads: each verdict flips with the numbers it reads."""
import math

import pytest

from labkit.answers import lab5_llm as answers
from labkit.plots import lab5_llm as plots
from labkit.readings import by_key, compute
from labkit.readings import lab5_llm as lab5
from labkit.records import get


def nll(center, k=16, spread=0.3):
    """Block NLLs with a spread in difficulty shared by every model (what pairing removes)."""
    return [center + spread * math.sin(i) for i in range(k)]


def row(fmt, width, group, per_block, bits=None):
    mean = sum(per_block) / len(per_block)
    return {"format": fmt, "width": width, "group_size": group, "per_block": per_block, "ppl": math.exp(mean),
            "ppl_se": 0.1, "nll": mean, "spec": f"{fmt} {width} g{group}", "weight_bits": bits or width + 16 / group,
            "blocks": len(per_block), "tokens": 255 * len(per_block)}


def jitter(values, size):
    return [v + size * (-1) ** i for i, v in enumerate(values)]


def payloads(g192_shift=0.2, awq_shift=-0.1, equal=True, profile="quick"):
    base = row("float32", 32, 1, nll(3.8))
    settings = {"profile": profile, "block_len": 256, "alphas": [0.0, 0.5, 1.0], "calib_blocks": 4}
    rows = [row("integer", 8, 32, jitter(nll(3.8), 1e-4)), row("integer", 4, 32, nll(3.9)),
            row("integer", 4, 192, jitter(nll(3.9 + g192_shift), 0.01)), row("minifloat_ieee", 4, 32, nll(4.0))]
    rtn, awq = row("integer", 4, 64, nll(4.0)), row("integer", 4, 64, jitter(nll(4.0 + awq_shift), 0.01))
    decode = {"new_tokens": 8, "tokens_equal": equal, "decode_ms_per_token": 20.0, "generate_ms_per_token": 25.0,
              "device": "cpu", "batch": 1, "prompt_len": 16}
    prov = {"device": "cpu", "versions": {"torch": "2"}, "created": "today", "commit": "x"}
    wrap = lambda n: {"numbers": n, "settings": settings, "provenance": prov}  # noqa: E731
    return {"perplexity": wrap({"base": base, "rows": rows}),
            "awq": wrap({"base": base, "rows": [{"width": 4, "group_size": 64, "rtn": rtn, "awq": awq}]}),
            "decode": wrap(decode)}


def test_verdicts_flip_with_the_numbers():
    r = by_key(lab5.readings(payloads()))
    assert r["int4.g192_vs_g32"].verdict == "higher" and "worse" in r["int4.g192_vs_g32"].says
    assert r["awq.int4.g64"].verdict == "lower" and "better" in r["awq.int4.g64"].says
    assert r["int8.g32.vs_fp32"].verdict == "level"
    assert r["decode.tokens_equal"].verdict == "holds"
    r = by_key(lab5.readings(payloads(g192_shift=0.0, awq_shift=0.1, equal=False)))
    assert r["int4.g192_vs_g32"].verdict == "level"
    assert r["awq.int4.g64"].verdict == "higher"
    assert r["decode.tokens_equal"].verdict == "fails" and "differ" in r["decode.tokens_equal"].says


def test_pairing_removes_the_blocks_spread():
    """A shift far below either side's spread over blocks is still established when every block moves alike."""
    q = lab5.paired_nll(nll(3.0, spread=1.0), nll(2.99, spread=1.0))
    assert q["difference"] == pytest.approx(0.01) and q["se"] < 1e-9 and q["established"]
    with pytest.raises(ValueError, match="same blocks"):
        lab5.paired_nll([1.0, 2.0], [1.0])


def test_missing_results_and_single_groups_give_fewer_readings():
    p = payloads()
    p["perplexity"]["numbers"]["rows"] = [r for r in p["perplexity"]["numbers"]["rows"] if r["group_size"] == 32]
    keys = {r.key for r in lab5.readings({**p, "awq": None, "decode": None})}
    assert keys == {"int8.g32.vs_fp32"}
    assert "no group sizes are compared" in answers.render({**p, "awq": None, "decode": None})


def test_claims_hold_on_the_committed_full_numbers_and_name_readings():
    from labkit.redraw import payloads_of

    found = {r.key: r for r in compute("lab5_llm", payloads_of("lab5_llm", "full"))}
    assert set(lab5.CLAIMS) <= set(found), set(lab5.CLAIMS) - set(found)
    assert all(found[k].verdict in v for k, v in lab5.CLAIMS.items())


def sens_payload(worst_gap=0.2, wider_gain=-0.1):
    base = row("float32", 32, 1, nll(3.8))
    kinds = [{**row("integer", 3, 64, jitter(nll(3.8 + d), 0.01)), "kind": k, "wide": None, "layers": 2,
              "weights": 100} for k, d in (("q_proj", 0.05), ("up_proj", 0.3), ("down_proj", 0.3 - worst_gap))]
    again = [{**k, "per_block": jitter(k["per_block"], 0.02)} for k in kinds[1:]]
    uniform = row("integer", 3, 64, nll(4.5))
    mixed = {**row("integer", 3, 64, jitter(nll(4.5 + wider_gain), 0.01)), "kind": None, "wide": "up_proj"}
    return {"base": base, "kinds": kinds, "again": again, "mixed": mixed, "uniform": uniform, "worst": "up_proj"}


def test_sensitivity_remeasures_its_selection_and_reads_keeping_it_wider():
    r = by_key(lab5.sensitivity_readings(sens_payload()))
    assert r["sensitivity.worst"].selection == 3 and r["sensitivity.worst"].remeasured_by == "sensitivity.worst_remeasured"
    assert r["sensitivity.worst_remeasured"].verdict == "higher" and "**" in r["sensitivity.worst_remeasured"].says
    assert r["sensitivity.keep_wider"].verdict == "lower"
    r = by_key(lab5.sensitivity_readings(sens_payload(worst_gap=0.0, wider_gain=0.1)))
    assert r["sensitivity.worst_remeasured"].verdict == "level" and r["sensitivity.keep_wider"].verdict == "higher"


def speed_payload(graph_ms=3.0, mx_ms=2.0, fraction=0.4):
    from labkit.perf.timing import Timing

    def timing(ms):
        calls = [ms * 32e-3 * f for f in (1.5, 1.0, 1.01, 0.99)]
        return Timing(device="cuda:0", warmup=1, per_call=calls, per_call_wall=[], clock="cuda_event").summary()
    rows = []
    for b in (1, 64):
        for loop, ms in (("generate", 30.0), ("labkit_graph", graph_ms), ("labkit_graph_mxint8", mx_ms)):
            rows.append({"shape": "smollm2-1.7b", "batch": b, "loop": loop, "ms_per_token": ms,
                         "tokens_per_s": b * 1e3 / ms, "fraction_of_roofline": fraction, "timing": timing(ms)})
    return {"rows": rows}


def test_speed_readings_compare_loops_and_the_roofline_goal():
    r = by_key(lab5.speed_readings(speed_payload()))
    assert r["speed.graph_vs_generate.smollm2-1.7b.b1"].verdict == "lower"
    assert r["speed.mxint8_vs_bf16.smollm2-1.7b.b64"].verdict == "lower"
    assert r["speed.roofline.smollm2-1.7b.b1"].verdict == "fails" and "below the 70% goal" in \
        r["speed.roofline.smollm2-1.7b.b1"].says
    r = by_key(lab5.speed_readings(speed_payload(mx_ms=4.0, fraction=0.8)))
    assert r["speed.mxint8_vs_bf16.smollm2-1.7b.b64"].verdict == "higher"
    assert r["speed.roofline.smollm2-1.7b.b1"].verdict == "holds"


def test_answers_word_the_readings_and_the_figure_draws():
    text = answers.render(payloads())
    assert "int4 g192 is worse than int4 g32" in text and "AWQ int4 g64 is better than RTN int4 g64" in text
    assert "same 8 tokens as generate" in text and "Q4_1" in text
    fig = plots.plot_perplexity(payloads()["perplexity"])
    assert len(fig.axes[0].get_legend().get_texts()) == 4  # float32 and three series
    assert get("lab5_llm").figures == ("perplexity", "decode_speed")


def test_settings_ranges_refuse_bad_values():
    from labkit.run.profiles import lab_settings

    assert lab_settings("lab5_llm", "smoke")["group_sizes"] == [32]
    for key, value in (("group_sizes", [0]), ("int_widths", [0]), ("block_len", 1), ("alphas", [1.5])):
        with pytest.raises(ValueError, match=f"setting {key}.*out of range"):
            lab_settings("lab5_llm", "quick", **{key: value})


def test_keeping_a_kind_wider_is_read_against_the_same_bits_spent_on_finer_groups():
    sens = sens_payload()
    sens["mixed"]["weight_bits"] = 3.5
    finer = row("integer", 3, 32, nll(4.2))  # 3 + 16/32 = 3.5 bits, better than the mixed model's 4.4
    r = by_key(lab5.equal_bits_readings(sens, {"rows": [row("integer", 3, 64, nll(4.5)), finer]}))
    assert r["sensitivity.keep_wider_vs_equal_bits"].verdict == "higher"
    assert "int3 g32 throughout (3.500 bits)" in r["sensitivity.keep_wider_vs_equal_bits"].says
    finer["per_block"] = nll(4.6)
    assert by_key(lab5.equal_bits_readings(sens, {"rows": [finer]}))["sensitivity.keep_wider_vs_equal_bits"].verdict \
        == "lower"
    assert lab5.equal_bits_readings(sens, {"rows": [row("integer", 3, 64, nll(4.5))]}) == []  # no point at 3.5 bits


def test_the_tokens_line_explains_a_low_share_only_where_the_pieces_were_unrounded():
    p = speed_payload()
    for r in p["rows"]:
        r["peer"] = "generate" if r["loop"] == "labkit_graph" else r["loop"]
        r["tokens_agree_with_peer"] = False
    p["rows"].append({**p["rows"][1], "loop": "labkit_compiled", "peer": "generate"})
    numbers = {**p, "device": "NVIDIA H200", "copy_bandwidth_bytes_per_s": 4e12, "new_tokens": 32, "prompt_len": 16}
    old = " ".join(answers.decode_speed({"numbers": numbers}, {}))
    assert "labkit_compiled 0% of generate's" in old and "without rounding between them" in old
    assert "a graphed copy_ alone, a memcpy node" in old  # a run before the copy kernel: its fractions are bounds
    numbers["compile_options"] = {"emulate_precision_casts": True}
    numbers["copy_rates_bytes_per_s"] = {"memcpy": 2.8e12, "kernel": 4e12}
    new = " ".join(answers.decode_speed({"numbers": numbers}, {}))
    assert "without rounding between them" not in new and "round their bf16 intermediates as eager does" in new
    assert "4.00 TB/s (the faster of memcpy 2.80, kernel 4.00)" in new and "memcpy node" not in new
