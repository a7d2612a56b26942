"""Lab 2 remeasure tests' stored Task 1 result: two tiny architectures on the smoke settings, the best and its
runner-up."""
SMALL = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 128, "intermediate_size": 512}
WIDE = {**SMALL, "hidden_size": 192}


def task1_samplers(s: dict) -> dict:
    """A stored samplers.json of settings ``s``: one study whose best (SMALL) beats WIDE."""
    task1 = {"lab2-smoke-tpe-s0-x": [{"number": 0, "value": 0.6, "params": SMALL, "trial_seconds": 1.0},
                                     {"number": 1, "value": 0.55, "params": WIDE, "trial_seconds": 2.0}]}
    return {"numbers": {"best": {"study": "lab2-smoke-tpe-s0-x", "trial": 0, "value": 0.6, "params": SMALL},
                        "trials": task1}, "settings": s}
