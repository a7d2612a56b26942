"""Capture a model as a torch.fx graph, run analysis/transform passes on it, draw it."""
from .capture import capture, example_inputs, forward_inputs
from .draw import can_render, draw, topology_diff, write_dot
from .passes import (CountDropout, GraphPassResult, MetadataPass, RemoveDropout, run_passes)

__all__ = ["capture", "example_inputs", "forward_inputs", "can_render", "draw", "topology_diff", "write_dot", "CountDropout",
           "GraphPassResult", "MetadataPass", "RemoveDropout", "run_passes"]
