"""Per-Linear quantization config: one format for each of ``data_in``, ``weight`` and ``bias``.

Accepted as a typed ``LinearQuantConfig`` or as the course's flat dict
``{"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, ...}``: the keys
after each role prefix are that format's parameters. A role with no keys stays in floating point.
Optional ``<role>_name`` keys give one role another format (mixed formats within a layer).
"""
from __future__ import annotations

from dataclasses import dataclass

from .formats import FORMATS, NumberFormat, make_format
from .formats._util import check_range
from .formats.integer import MAX_FRAC_WIDTH, MAX_WIDTH

ROLES = ("data_in", "weight", "bias")


@dataclass(frozen=True)
class LinearQuantConfig:
    data_in: NumberFormat | None = None
    weight: NumberFormat | None = None
    bias: NumberFormat | None = None

    def __post_init__(self):
        for role in ROLES:
            value = getattr(self, role)
            if value is not None and not isinstance(value, NumberFormat):
                raise TypeError(f"LinearQuantConfig.{role} must be a NumberFormat or None, got {value!r}")
        if all(getattr(self, r) is None for r in ROLES):
            raise ValueError("LinearQuantConfig quantizes nothing: give data_in, weight or bias a format")

    @classmethod
    def from_dict(cls, cfg: dict) -> "LinearQuantConfig":
        if isinstance(cfg, LinearQuantConfig):
            return cfg
        if not isinstance(cfg, dict):
            raise TypeError(f"a Linear quantization config is a dict or LinearQuantConfig, got {type(cfg).__name__}")
        if "name" not in cfg:
            raise KeyError(f"quantization config {cfg} has no 'name' (the number format); allowed: "
                           f"{', '.join(sorted(FORMATS))}")
        params: dict[str, dict] = {role: {} for role in ROLES}
        names = {role: cfg["name"] for role in ROLES}
        for key, value in cfg.items():
            if key == "name":
                continue
            role = next((r for r in ROLES if key.startswith(r + "_")), None)
            if role is None:
                raise KeyError(f"quantization config key {key!r} does not start with one of "
                               f"{[r + '_' for r in ROLES]} (nor is it 'name')")
            param = key[len(role) + 1:]
            if param == "name":
                names[role] = value
            else:
                params[role][param] = value
        formats = {}
        for role in ROLES:
            if params[role]:
                try:
                    formats[role] = make_format(names[role], **params[role])
                except (KeyError, TypeError, ValueError) as err:
                    raise type(err)(f"{role}: {err.args[0] if err.args else err}") from None
            else:
                formats[role] = None
        return cls(**formats)

    def describe(self) -> str:
        return ", ".join(f"{r}={getattr(self, r).describe()}" for r in ROLES if getattr(self, r) is not None)


def fixed_point(width: int, frac_width: int | None = None) -> dict:
    """The course's flat fixed-point config for data_in, weight and bias (frac width = width // 2 if None)."""
    # the integer format's own bounds, checked here so the error comes from the call that got the value
    check_range("fixed_point", "width", width, 1, MAX_WIDTH)
    if frac_width is not None:
        check_range("fixed_point", "frac_width", frac_width, -MAX_FRAC_WIDTH, MAX_FRAC_WIDTH)
    frac = width // 2 if frac_width is None else frac_width
    return {"name": "integer", **{f"{role}_{k}": v for role in ("data_in", "weight", "bias")
                                  for k, v in (("width", width), ("frac_width", frac))}}
