"""Lab 5's own code: every quantized copy of the model measured on the evaluation blocks, the AWQ pairs, the
per-kind sensitivity sweep with its remeasure, and the decoding checks. Returns numbers; the notebook says them
(``labkit.narrate.lab5_llm``)."""
from __future__ import annotations

import copy
import math

import torch

from ..llm import awq_quantize, paired, quantize_llm_weights, text_blocks
from ..llm.decode import generate_greedy, greedy_decode, time_decode
from ..llm.perplexity import perplexity
from ..llm.static_decode import StaticDecoder


def _row(p) -> dict:
    return {**p.summary(), "per_block": list(p.per_block)}


def _only(kind: str):
    return lambda name, module: name.endswith("." + kind)


class Runs:
    """The model, its evaluation and calibration blocks, and every measured configuration (cached by key)."""

    def __init__(self, model, tok, settings: dict):
        self.model, self.tok, self.S = model, tok, settings
        s = settings
        self.blocks = text_blocks(tok, s["blocks"], s["block_len"], "test", s["seed"])
        self.calib = text_blocks(tok, s["calib_blocks"], s["block_len"], "train", s["seed"])  # AWQ's, other reviews
        self.base = perplexity(model, self.blocks, s["batch_size"])
        self.ref = _row(self.base)
        self.runs: dict[tuple, dict] = {}

    def measure(self, fmt: str, width: int, group: int, method: str = "rtn") -> dict:
        """A copy of the model quantized one way (RTN, or AWQ with the settings' alphas), on the evaluation blocks."""
        key = (fmt, width, group, method)
        if key not in self.runs:
            s, q = self.S, copy.deepcopy(self.model)
            report = (awq_quantize(q, self.calib, fmt, width, group, alphas=s["alphas"], n_samples=s["awq_samples"],
                                   batch_size=s["batch_size"], seed=s["seed"]) if method == "awq"
                      else quantize_llm_weights(q, fmt, width, group))
            alphas = [layer.extra["alpha"] for layer in report.layers.values() if "alpha" in layer.extra]
            self.runs[key] = {"format": fmt, "width": width, "group_size": group, **report.summary(),
                              **_row(perplexity(q, self.blocks, s["batch_size"])), "alphas": alphas}
        return self.runs[key]

    def sweep(self) -> list[dict]:
        s = self.S
        rows = [self.measure("integer", w, g) for w in s["int_widths"] for g in s["group_sizes"]]
        return rows + [self.measure(f, s["other_width"], s["other_group"]) for f in s["other_formats"]]

    def awq_rows(self) -> list[dict]:
        out, g = [], self.S["awq_group"]
        for w in self.S["awq_widths"]:
            rtn, awq = self.measure("integer", w, g), self.measure("integer", w, g, "awq")
            out.append({"width": w, "group_size": g, "rtn": rtn, "awq": awq,
                        "paired": paired(awq["per_block"], rtn["per_block"]).summary()})
        return out

    def kind_run(self, on_blocks, kind: str | None = None, wide: str | None = None) -> dict:
        """``kind`` alone at sens_width (the rest float32), or every Linear but the head at sens_width with ``wide``
        one bit wider; groups of awq_group."""
        s, q, g = self.S, copy.deepcopy(self.model), self.S["awq_group"]
        if wide is None:
            reports = [quantize_llm_weights(q, "integer", s["sens_width"], g, _only(kind))]
        else:
            rest = lambda name, module: not name.endswith("." + wide) and name != "lm_head"  # noqa: E731
            reports = [quantize_llm_weights(q, "integer", s["sens_width"] + 1, g, _only(wide)),
                       quantize_llm_weights(q, "integer", s["sens_width"], g, rest)]
        layers = {k: v for r in reports for k, v in r.layers.items()}
        if not layers or (wide and not reports[0].layers):
            allowed = sorted({n.rsplit(".", 1)[-1] for n, m in self.model.named_modules()
                              if isinstance(m, torch.nn.Linear) and n != "lm_head"})
            raise ValueError(f"sens_kinds: {kind or wide!r} names no Linear of the model; allowed: {', '.join(allowed)}")
        weights = sum(math.prod(v.shape) for v in layers.values())
        bits = sum(v.bits_per_weight * math.prod(v.shape) for v in layers.values()) / weights
        return {"kind": kind, "wide": wide, "layers": len(layers), "weights": weights, "weight_bits": bits,
                **_row(perplexity(q, on_blocks, s["batch_size"]))}

    def sensitivity(self) -> dict:
        """Each kind alone; the two most harmful measured again on fresh test blocks (seed + 1); the most harmful
        kept one bit wider against the uniform width."""
        s = self.S
        kinds = [self.kind_run(self.blocks, k) for k in s["sens_kinds"]]
        ranked = sorted(kinds, key=lambda r: -paired(r["per_block"], self.ref["per_block"]).mean)
        fresh = text_blocks(self.tok, s["sens_blocks"], s["block_len"], "test", s["seed"] + 1)
        again = [self.kind_run(fresh, r["kind"]) for r in ranked[:2]] if len(ranked) > 1 else []
        worst = ranked[0]["kind"]
        return {"base": self.ref, "kinds": kinds, "worst": worst,
                "fresh_base": _row(perplexity(self.model, fresh, s["batch_size"])), "again": again,
                "mixed": self.kind_run(self.blocks, wide=worst),
                "uniform": self.measure("integer", s["sens_width"], s["awq_group"])}

    def decode(self) -> dict:
        """Greedy KV-cache decoding and labkit's static step against generate's tokens, and their timing."""
        s = self.S
        prompt = self.blocks[:1, :s["decode_prompt"]]
        ours = greedy_decode(self.model, prompt, s["decode_tokens"])
        theirs = generate_greedy(self.model, prompt, s["decode_tokens"])
        static = StaticDecoder(self.model).generate(prompt, s["decode_tokens"])  # graphed on CUDA
        timed = time_decode(self.model, prompt, s["decode_tokens"], repeats=s["decode_repeats"])
        return {**timed, "tokens_equal": ours.tolist() == theirs.tolist(), "tokens": ours.tolist(),
                "static_tokens_equal": static.tolist() == theirs.tolist(), "text": self.tok.decode(ours[0])}
