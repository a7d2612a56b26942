"""Decode speed on a GPU: tokens/s of ``generate`` and of labkit's static-shape step (eager, and replayed as a CUDA
graph; bf16, and with every Linear as ``MXINT8Linear``'s fused kernel), per batch, beside the weight-bandwidth
roofline (bytes a step reads for weights / the card's measured copy bandwidth).

The models are random-init Llamas of SmolLM2's shapes (``labkit.models.llm_from_config``): the speed of a step
does not depend on the weights' values, so each row names its weights as built from config. One row per (shape,
batch, loop); the loops of one (shape, batch, weights) are timed interleaved (``decode.time_loops``).
"""
from __future__ import annotations

import torch

from ..perf.timing import copy_times, graph_ms
from .decode import generate_greedy, roofline_tokens_per_s, time_loops
from .static_decode import COMPILE_OPTIONS, StaticDecoder, step_bytes

LOOPS_BF16 = ("generate", "labkit_eager", "labkit_graph", "labkit_compiled", "labkit_fused")
LOOPS_MXINT8 = ("generate_mxint8", "labkit_graph_mxint8", "labkit_compiled_mxint8", "labkit_fused_mxint8")
# the sweep's loops unless told: the host-bound eager loops (tens of ms a token, the slowest to time) left to ask for
DEFAULT_LOOPS = ("generate", "labkit_graph", "labkit_compiled", "labkit_fused", "labkit_graph_mxint8",
                 "labkit_compiled_mxint8", "labkit_fused_mxint8")
# the StaticDecoder options of each labkit loop (the _mxint8 loops: the same, on the converted model)
DECODERS = {"labkit_eager": dict(graph=False), "labkit_graph": dict(graph=True),
            "labkit_compiled": dict(graph=True, compile=True), "labkit_fused": dict(graph=True, compile=True, fuse=True)}
LOOP_WORDS = {
    "generate": "transformers generate (greedy, static cache, not compiled)",
    "labkit_eager": "labkit's static-shape step, eager",
    "labkit_graph": "labkit's static-shape step replayed as one CUDA graph",
    "labkit_compiled": "the same graph with the step's norms (each with its residual add), rotary and gate each "
                       "compiled (torch.compile) to fused kernels",
    "labkit_fused": "the compiled graphed step with q, k, v as one GEMM and gate, up as one (4 GEMMs a layer, not 7)",
    "generate_mxint8": "generate with every Linear as MXINT8Linear (fused kernel)",
    "labkit_graph_mxint8": "labkit's graphed step with every Linear as MXINT8Linear (fused kernel)",
    "labkit_compiled_mxint8": "the compiled graphed step with every Linear as MXINT8Linear (fused kernel)",
    "labkit_fused_mxint8": "the compiled graphed step with stacked projections, every Linear MXINT8 (fused kernel)",
}


def copy_rates(device, nbytes: int = 1 << 30) -> dict[str, float]:
    """The card's device-to-device copy rate in bytes/s (read + written) of ``nbytes``, per way of copying
    (``perf.timing.copy_times``)."""
    return {name: 2 * nbytes / (ms * 1e-3) for name, ms in copy_times(nbytes, 2, device).items()}


def _loops(model, ids, new: int, names) -> tuple[dict, dict]:
    """(name -> a call making ``new`` tokens, name -> its StaticDecoder where graphed); only the decoders named are
    built (a fused one copies its stacked weights)."""
    decoders = {name: StaticDecoder(model, **DECODERS[name.removesuffix("_mxint8")]) for name in names
                if name.removesuffix("_mxint8") in DECODERS}
    pad = model.config.pad_token_id
    make = {name: (lambda d=d: d.generate(ids, new)) for name, d in decoders.items()}
    make["generate"] = make["generate_mxint8"] = lambda: generate_greedy(
        model, ids, new, min_new_tokens=new, pad_token_id=pad, cache_implementation="static", disable_compile=True)
    return {name: make[name] for name in names}, {n: d for n, d in decoders.items() if d.graph}


def linears_ms(model, batch: int, replays: int = 7) -> float:
    """Milliseconds of every Linear of the model once on ``batch`` rows, in the step's order, in one CUDA graph
    (``perf.timing.graph_ms``): the weight reads of a step without the rest of it (norms, rotary, attention,
    residuals), so that step time - this = what the step's other kernels cost."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear) or hasattr(m, "mantissa")]
    dev = next(model.parameters()).device
    dtype = next(p for p in model.parameters() if p.is_floating_point()).dtype
    inputs = {m.in_features: torch.randn(batch, m.in_features, device=dev, dtype=dtype) for m in linears}

    def every_linear():
        for m in linears:
            m(inputs[m.in_features])

    with torch.no_grad():
        return graph_ms([every_linear], replays=replays)


def _agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    """Fraction of sequences whose tokens are all equal."""
    return float((a == b).all(dim=1).float().mean())


def measure(model, shape: str, weights: str, batches, new_tokens: int, prompt_len: int, bandwidth: float,
            names, repeats: int, warmup: int, seed: int = 0, progress=print) -> list[dict]:
    """Rows of ``names`` loops at every batch on ``model`` (on its CUDA device)."""
    dev = next(model.parameters()).device
    nbytes = step_bytes(model)
    rows = []
    for batch in batches:
        g = torch.Generator(device="cpu").manual_seed(seed + batch)
        ids = torch.randint(0, model.config.vocab_size, (batch, prompt_len), generator=g).to(dev)
        loops, graphed = _loops(model, ids, new_tokens, names)
        tokens = {name: fn() for name, fn in loops.items()}  # first calls: graph capture, Triton compiles
        timed = time_loops(loops, new_tokens, dev, repeats, warmup)
        peer = tokens[names[0]]
        linear_ms = linears_ms(model, batch)
        steps = {name: d.step_ms(ids, new_tokens) for name, d in graphed.items()}
        for name in names:
            ms = timed[f"{name}_ms_per_token"]
            roof = roofline_tokens_per_s(nbytes, bandwidth, batch)
            step = {"step_ms": steps[name], "step_fraction_of_roofline": batch * 1e3 / steps[name] / roof} \
                if name in steps else {}
            rows.append({"shape": shape, "weights": weights, "batch": batch, "loop": name, "ms_per_token": ms,
                         "tokens_per_s": batch * 1e3 / ms, "step_weight_bytes": nbytes,
                         "roofline_tokens_per_s": roof, "fraction_of_roofline": batch * 1e3 / ms / roof,
                         "peer": names[0], "tokens_agree_with_peer": _agreement(tokens[name], peer),
                         "linears_ms": linear_ms, **step, "timing": timed[f"{name}_timing"]})
            alone = (f"; step alone {step['step_ms']:.3f} ms, {100 * step['step_fraction_of_roofline']:.1f}%"
                     if step else "")
            progress(f"{shape} batch {batch:>2} {name:<22} {ms:7.3f} ms/token {batch * 1e3 / ms:9.1f} tokens/s "
                     f"{100 * rows[-1]['fraction_of_roofline']:5.1f}% of roofline{alone} (Linears {linear_ms:.3f} ms)")
    return rows


def sweep(shapes=("smollm2-135m", "smollm2-1.7b"), batches=(1, 4, 16, 64), new_tokens: int = 32,
          prompt_len: int = 16, repeats: int = 2, warmup: int = 1, mxint8: bool = True, group_size: int = 32,
          device="cuda", seed: int = 0, progress=print, loops=DEFAULT_LOOPS, on_rows=None) -> dict:
    """``loops`` at every (shape, batch), bf16 and (``mxint8``) MXINT8; the roofline from a copy measured here.
    ``on_rows(result so far)`` after each (shape, weights), e.g. to save what a cut-off run measured."""
    unknown = [n for n in loops if n not in LOOP_WORDS]
    if unknown or not loops:
        raise ValueError(f"decode_speed loops {unknown or list(loops)}: allowed (one or more) {', '.join(LOOP_WORDS)}")
    bf16_loops = tuple(n for n in LOOPS_BF16 if n in loops)
    mx_loops = tuple(n for n in LOOPS_MXINT8 if n in loops) if mxint8 else ()
    from ..kernels.packed_linear import convert_to_mxint8
    from ..models import llm_from_config

    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        raise RuntimeError(f"the decode speed sweep times CUDA graphs: it needs a CUDA device, got {device!r} "
                           f"(torch.cuda.is_available() = {torch.cuda.is_available()})")
    rates = copy_rates(dev)
    bandwidth = max(rates.values())  # a roofline is the best the card showed
    progress(f"copy bandwidth {bandwidth / 1e12:.3f} TB/s (read + written) on {torch.cuda.get_device_name(dev)}: "
             + ", ".join(f"{k} {v / 1e12:.3f}" for k, v in rates.items()))
    out = {"rows": [], "copy_bandwidth_bytes_per_s": bandwidth, "copy_rates_bytes_per_s": rates, "conversions": {},
           "new_tokens": new_tokens,
           "prompt_len": prompt_len, "repeats": repeats, "warmup": warmup,
           "loops": {n: LOOP_WORDS[n] for n in bf16_loops + mx_loops}, "device": torch.cuda.get_device_name(dev),
           "sm_count": torch.cuda.get_device_properties(dev).multi_processor_count,
           "compile_options": dict(COMPILE_OPTIONS),
           "method": "ms per token = median steady call (the prompt's prefill + new_tokens - 1 steps; labkit's "
                     "graphed loops replay a prefill graph and a step graph) / new_tokens; roofline = batch x copy "
                     "bandwidth / bytes a step reads for weights (KV cache not counted), the copy bandwidth the faster "
                     "of a graphed 1 GiB copy_ (a memcpy node) and a graphed elementwise copy kernel (read + "
                     "written); linears_ms: one graph replay of every Linear once on batch rows (a step's weight "
                     "reads alone); step_ms: a graphed loop's decode step alone (its replays after the prefill, CUDA "
                     "events)"}
    for shape in shapes:
        model = llm_from_config(shape, seed=seed, device=dev, dtype=torch.bfloat16)
        weights = f"random init from SmolLM2's {shape} config (seed {seed}), "
        for names, converted in ((bf16_loops, False), (mx_loops, True)):  # bf16 first: the conversion is in place
            if not names:
                continue
            if converted:
                report = convert_to_mxint8(model, group_size)
                conv = {k: report[k] for k in ("group_size", "weight_bytes_before", "weight_bytes_after")}
                out["conversions"][shape] = {**conv, "converted": len(report["converted"])}
            out["rows"] += measure(model, shape, weights + (f"every Linear MXINT8 g{group_size}" if converted else
                                                            "bf16"), batches, new_tokens, prompt_len, bandwidth,
                                   names, repeats, warmup, seed, progress)
            if on_rows:
                on_rows(out)
        del model
        torch.cuda.empty_cache()
    return out


def ratios(result: dict) -> list[dict]:
    """Per (shape, batch): labkit graph / generate, MXINT8 graph / bf16 graph, and each's fraction of roofline."""
    by = {(r["shape"], r["batch"], r["loop"]): r for r in result["rows"]}
    out = []
    for shape, batch in sorted({(r["shape"], r["batch"]) for r in result["rows"]}):
        def tps(loop):
            row = by.get((shape, batch, loop))
            return row["tokens_per_s"] if row else None
        row = {"shape": shape, "batch": batch}
        for name, a, b in (("graph_vs_generate", "labkit_graph", "generate"),
                           ("graph_vs_eager", "labkit_graph", "labkit_eager"),
                           ("compiled_vs_graph", "labkit_compiled", "labkit_graph"),
                           ("fused_vs_compiled", "labkit_fused", "labkit_compiled"),
                           ("fused_vs_generate", "labkit_fused", "generate"),
                           ("mxint8_vs_bf16_graph", "labkit_graph_mxint8", "labkit_graph"),
                           ("mxint8_vs_bf16_compiled", "labkit_compiled_mxint8", "labkit_compiled"),
                           ("mxint8_vs_bf16_fused", "labkit_fused_mxint8", "labkit_fused"),
                           ("mxint8_generate_vs_generate", "generate_mxint8", "generate")):
            if tps(a) and tps(b):
                row[name] = tps(a) / tps(b)
        for loop in ("labkit_graph", "labkit_compiled", "labkit_fused", "labkit_graph_mxint8", "labkit_compiled_mxint8",
                     "labkit_fused_mxint8"):
            if (shape, batch, loop) in by:
                r = by[shape, batch, loop]
                row[f"{loop}_roofline_fraction"] = r["fraction_of_roofline"]
                if "step_fraction_of_roofline" in r:  # the decode step alone, without the prefill
                    row[f"{loop}_step_roofline_fraction"] = r["step_fraction_of_roofline"]
        out.append(row)
    return out


COMMAND = "python -m labkit.llm.decode_speed"


def main(argv=None) -> int:
    import argparse
    import sys

    from .. import results
    from ..report import table

    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="JSON path (the Lab 5 notebook's full profile saves its own)")
    p.add_argument("--shapes", nargs="+", default=["smollm2-135m", "smollm2-1.7b"])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--tokens", type=int, default=32, help="new tokens per call")
    p.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--no-mxint8", action="store_true")
    p.add_argument("--loops", nargs="+", default=list(DEFAULT_LOOPS), choices=list(LOOP_WORDS))
    args = p.parse_args(argv)
    if any(b < 1 for b in args.batches) or args.tokens < 1 or args.prompt < 1 or args.repeats < 1:
        p.error("--batches, --tokens, --prompt and --repeats must be >= 1")

    def save(out, done=False):  # after every (shape, weights): a run cut off at its limit keeps what it measured
        out = {**out, "ratios": ratios(out), "complete": done, "versions": results.versions(),
               "command": " ".join([COMMAND, *argv])}
        return out, results.write_json(args.out, out, indent=2)

    out = sweep(args.shapes, args.batches, args.tokens, args.prompt, args.repeats, mxint8=not args.no_mxint8,
                loops=args.loops, on_rows=save)
    out, path = save(out, done=True)
    print(table(out["ratios"], list(out["ratios"][0]), floatfmt=".3f"))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
