"""What Lab 1's notebooks show beside their figures (labkit.labs.lab1_quantize, labkit.labs.lab1_prune,
lab1_sweeps.combined, worded by labkit.narrate), on a tiny model: the stored tensors and their average bits, the
texts, the mask table."""
import torch

from labkit import quant
from labkit.narrate import lab1_prune as prune_words, lab1_quantize as words
from labkit.labs import lab1_prune, lab1_quantize
from labkit.labs.lab1_sweeps import combined
from labkit.quant import fixed_point
from labkit.quant.bits import mean_bits


def tiny():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2, bias=False))


def average_bits(layers):
    return mean_bits((t["width"], t["numel"]) for t in layers)


def test_stored_tensors_lists_weights_biases_and_inputs():
    weights, inputs = lab1_quantize.stored_tensors(tiny())
    assert weights == [{"numel": 12, "width": 32, "frac_width": None}, {"numel": 3, "width": 32, "frac_width": None},
                       {"numel": 6, "width": 32, "frac_width": None}]
    assert inputs == [{"numel": 4, "width": 32, "frac_width": None}, {"numel": 3, "width": 32, "frac_width": None}]


def test_bits_check_agrees_with_labkit_on_the_int8_model():
    base = tiny()
    config = {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": fixed_point(8)}}
    q8 = quant.quantize(base, config)
    weights, _ = lab1_quantize.stored_tensors(q8.model)
    assert {t["width"] for t in weights} == {8}
    bits = lab1_quantize.bits_check(q8, base, average_bits)
    assert bits["yours"] == bits["labkit"] == {"weights": 8.0, "inputs": 8.0, "fp32": 32.0}
    line, text = words.bits_line(bits), words.bits_text(bits)
    assert line == ("average_bits: weights 8.0, inputs 8.0, fp32 model 32.0; labkit's quant.average_bits: "
                    "weights 8.0, inputs 8.0, fp32 model 32.0")
    assert text.startswith(f"int8 quantizes **{len(q8.changed)}** Linear layers")
    assert text.endswith("Average bits: weights 8.0, inputs 8.0 (fp32 model: 32).")


def test_base_text_and_combined():
    text = words.base_text({"accuracy": 0.81234, "cached": True}, {"test": 1200}, [3, 4])
    assert text == ("Base: the SFT model of Lab 0 (training seed 3), **0.8123** accuracy on 1,200 test reviews "
                    "(from the cache); training seeds [3, 4].")
    numbers = combined([{"fp32": 0.5}, {"fp32": 0.7}], [3, 4], {"test": 1200})
    assert numbers == {"fp32": 0.6, "fp32_seeds": [0.5, 0.7], "seeds": [3, 4], "dataset_sizes": {"test": 1200}}


def test_mask_check_compares_a_mask_with_labkits_prune():
    def l1_mask(w, sparsity):
        k = round(sparsity * w.numel())
        keep = torch.ones(w.numel(), dtype=torch.bool)
        keep[torch.argsort(w.abs().flatten(), stable=True)[:k]] = False
        return keep.view(w.shape)

    model = tiny()
    rows = lab1_prune.mask_rows(model[0], [0.0, 0.5], l1_mask)
    assert [r["achieved (yours)"] for r in rows] == [r["achieved (labkit's prune)"] for r in rows] == [0.0, 0.5]
    assert rows[0]["largest pruned abs(w)"] == "-" and float(rows[1]["largest pruned abs(w)"]) <= float(
        rows[1]["smallest kept abs(w)"])
    mask = lab1_prune.mask_check(model, [0.5], l1_mask)
    assert (mask["layer"], mask["weights"]) == ("0", 12)
    text = prune_words.mask_text(mask)
    assert text.startswith("Layer `0` (12 weights):\n\n| sparsity | achieved (yours) |")
    assert not hasattr(model[0], "parametrizations")  # the comparison leaves the model as it was


def test_sweep_table_has_the_sweeps_columns():
    rows = [{"method": "random", "scope": "local", "sparsity": 0.5, "pruned": 0.5, "finetuned": 0.6}]
    head = prune_words.sweep_table({"rows": rows}).splitlines()[0]
    assert head.startswith("| method | scope | sparsity | achieved_weight_sparsity |")
