"""Capture a model as a torch.fx graph, run analysis/transform passes on it, draw it."""
from .capture import capture, example_inputs, forward_inputs
from .draw import draw, topology_diff
from .passes import (CountDropout, GraphPassResult, MetadataPass, RemoveDropout, run_passes)

__all__ = ["capture", "example_inputs", "forward_inputs", "draw", "topology_diff", "CountDropout",
           "GraphPassResult", "MetadataPass", "RemoveDropout", "run_passes"]
