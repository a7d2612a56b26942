"""Lab 3 formats, part 1, for one training seed: the seed's SFT model in fp32, then PTQ and QAT of every
number format under study (``labkit.quant.study``: the formats' parameters at a width, ``ptq_qat``)."""
from __future__ import annotations

import copy

from ..quant.study import flat_config, ptq_qat
from ..recipes import finetuned_model, freeze_embeddings, sft_record
from ..training import train


def formats_seed(s: dict, dl, seed: int, configs: dict[str, dict], freeze=None) -> dict:
    """Lab 3 part 1 for one training seed: that seed's SFT model in fp32, then PTQ and QAT (with the seed) of
    every format of ``configs`` (``{name: study_params(...)}``), each from a fresh copy."""
    base, sft = finetuned_model(s, dl, seed=seed)
    fp32 = train.evaluate(base, dl.test, device=s["device"], desc="fp32", progress=False)
    at = {**s, "seed": seed}  # this seed's QAT; the data stay s["seed"]'s
    formats = {}
    for name, params in configs.items():
        r = ptq_qat(lambda: copy.deepcopy(base), flat_config(name, params), dl, at, freeze=freeze or freeze_embeddings)
        print(f"seed {seed} {name:22s} PTQ {r['ptq']['accuracy']:.4f}  QAT {r['qat']['accuracy']:.4f}  "
              f"({r['seconds']:.0f} s{', ' + r['qat_error'] if r['qat_error'] else ''})", flush=True)
        formats[name] = {"params": params, **r}
    return {"fp32": fp32, "sft": sft_record(sft), "formats": formats}
