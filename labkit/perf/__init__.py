"""Lab 4 performance engineering: honest timing, the torch.compile study, naive vs fused attention."""
from . import compile_study, sdpa, timing
from .timing import Timing, break_even_calls, check_device, device_label, fmt_seconds, resolve_devices, time_calls

__all__ = ["Timing", "break_even_calls", "check_device", "compile_study", "device_label", "fmt_seconds",
           "resolve_devices", "sdpa", "time_calls", "timing"]
