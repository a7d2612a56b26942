"""Plain values across a process boundary, as JSON: what a graded function returns reaches the staff process
only as ``None``, bools, ints, floats, strings, lists, tuples, dicts and plain tensors.

``encode`` runs where the student's code ran and turns anything else into an ``Opaque`` description (its type
and a short repr), never an object of the student's; ``decode`` runs in the staff process and builds only
those plain types, checking every size, so no ``__eq__``, subclass or pickle of the student's reaches a
comparison.
"""
from __future__ import annotations

import base64
import json
import math

import torch

DTYPES = {str(d).replace("torch.", ""): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.uint8, torch.bool, torch.complex64)}
MAX_DEPTH = 40
MAX_BYTES = 64 * 2 ** 20


class Opaque:
    """A value the codec does not carry: its type's name and a short repr; equal only to itself."""

    def __init__(self, type_name: str, text: str):
        self.type_name, self.text = type_name, text

    def __repr__(self):
        return f"<{self.type_name}: {self.text}>" if self.text else f"<{self.type_name}>"

    def __eq__(self, other):
        return self is other

    __hash__ = object.__hash__


def _type_name(value) -> str:
    t = type(value)
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', t.__name__)}"


def _short_repr(value) -> str:
    try:
        text = object.__repr__(value)  # the object's own __repr__ may loop or raise
    except Exception:  # noqa: BLE001
        return ""
    return text[:120]


def plain(value, depth: int = 0):
    """``value`` as JSON-ready data: tagged dicts for tensors, tuples, dicts and non-finite floats."""
    if depth > MAX_DEPTH:
        return {"$": "opaque", "type": "nesting", "repr": f"nested deeper than {MAX_DEPTH}"}
    if value is None or type(value) in (bool, str):
        return value
    if type(value) is int:
        return value if abs(value) < 2 ** 1000 else {"$": "opaque", "type": "int", "repr": "an int over 2**1000"}
    if type(value) is float:
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    if isinstance(value, (bool, int, float, str)):  # a subclass: carried as its plain value
        base = next(t for t in (bool, int, float, str) if isinstance(value, t))
        return plain(base(value), depth + 1)
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "shape", None) == ():  # a NumPy scalar
        return plain(value.item(), depth + 1)
    if type(value) is list:
        return [plain(v, depth + 1) for v in value]
    if type(value) is tuple:
        return {"$": "tuple", "items": [plain(v, depth + 1) for v in value]}
    if type(value) is dict:
        return {"$": "dict", "items": [[plain(k, depth + 1), plain(v, depth + 1)] for k, v in value.items()]}
    return {"$": "opaque", "type": _type_name(value), "repr": _short_repr(value)}


def _tensor(t: torch.Tensor) -> dict:
    out = {"$": "tensor"}
    if type(t) is not torch.Tensor:
        out["subclass"] = _type_name(t)
        t = torch.Tensor.as_subclass(t, torch.Tensor)
    t = t.detach()
    if t.device.type == "meta":
        return {"$": "opaque", "type": "meta tensor", "repr": f"shape {list(t.shape)}, {t.dtype}"}
    t = t.cpu().contiguous()
    name = str(t.dtype).replace("torch.", "")
    if name not in DTYPES:
        return {"$": "opaque", "type": f"tensor of {name}", "repr": f"shape {list(t.shape)}"}
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    out.update(dtype=name, shape=list(t.shape), data=base64.b64encode(raw).decode("ascii"))
    return out


def encode(value) -> bytes:
    return json.dumps(plain(value), separators=(",", ":")).encode()


class Malformed(ValueError):
    """What came back is not a value the codec writes."""


def decode(data: bytes, limit: int = MAX_BYTES):
    if len(data) > limit:
        raise Malformed(f"{len(data)} bytes, over the {limit}-byte limit")
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as err:
        raise Malformed(f"not JSON: {str(err)[:80]}") from None
    return build(raw)


def build(raw, depth: int = 0):
    """The plain value of ``plain``'s data; anything else raises ``Malformed``."""
    if depth > MAX_DEPTH + 2:
        raise Malformed("nested too deep")
    if raw is None or type(raw) in (bool, int, float, str):
        return raw
    if type(raw) is list:
        return [build(v, depth + 1) for v in raw]
    if type(raw) is not dict or not isinstance(raw.get("$"), str):
        raise Malformed(f"an untagged {type(raw).__name__}")
    tag = raw["$"]
    if tag == "float" and raw.get("v") in ("nan", "inf", "-inf"):
        return float(raw["v"])
    if tag == "tuple" and type(raw.get("items")) is list:
        return tuple(build(v, depth + 1) for v in raw["items"])
    if tag == "dict" and type(raw.get("items")) is list:
        out = {}
        for pair in raw["items"]:
            if type(pair) is not list or len(pair) != 2:
                raise Malformed("a dict entry that is not a [key, value] pair")
            key = build(pair[0], depth + 1)
            if isinstance(key, (list, dict, torch.Tensor, Opaque)):
                raise Malformed(f"an unhashable dict key ({type(key).__name__})")
            out[key] = build(pair[1], depth + 1)
        return out
    if tag == "tensor":
        return _build_tensor(raw)
    if tag == "opaque":
        return Opaque(str(raw.get("type", "?"))[:200], str(raw.get("repr", ""))[:200])
    raise Malformed(f"unknown tag {str(tag)[:40]!r}")


def _build_tensor(raw: dict) -> torch.Tensor:
    dtype, shape, data = DTYPES.get(raw.get("dtype")), raw.get("shape"), raw.get("data")
    if dtype is None or type(shape) is not list or type(data) is not str:
        raise Malformed("a tensor needs a known dtype, a shape and its data")
    if not all(type(d) is int and 0 <= d < 2 ** 40 for d in shape):
        raise Malformed(f"a tensor shape of non-negative ints, got {str(shape)[:80]}")
    numel = math.prod(shape)
    size = numel * torch.empty((), dtype=dtype).element_size()
    if size > MAX_BYTES:
        raise Malformed(f"a tensor of {size} bytes, over the limit")
    try:
        buf = base64.b64decode(data, validate=True)
    except ValueError:
        raise Malformed("tensor data that is not base64") from None
    if len(buf) != size:
        raise Malformed(f"tensor data of {len(buf)} bytes for shape {shape} of {raw['dtype']} ({size} bytes)")
    if not numel:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(buf), dtype=torch.uint8).view(dtype).reshape(shape).clone()


def roundtrip(value):
    """``value`` as the staff process receives it."""
    return decode(encode(value))
