"""Wiring: every "module:function" string a record or an exercise names resolves (through the one resolver,
``labkit.records.resolve``) to a function, and the records name no such string outside ``Notebook.targets``."""
import dataclasses
import re

import pytest

from labkit import records
from labkit.exercises import registry
from labkit.search import plan

TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def strings(value):
    """Every string inside a record (dataclasses, mappings, sequences)."""
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from strings(getattr(value, f.name))
    elif isinstance(value, dict) or hasattr(value, "items"):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def every_target():
    out = {f"{key}.{where}": t for key, r in records.records().items() for where, t in r.targets().items()}
    out.update({f"exercise {ex.id}.install": ex.install for ex in registry().values() if ex.install})
    return out


def test_every_target_resolves_to_a_function():
    found = every_target()
    assert len(found) >= 17, sorted(found)
    bad = {}
    for where, target in found.items():
        try:
            fn = records.resolve(target)
        except ValueError as err:
            bad[where] = str(err)
        else:
            assert callable(fn)
    assert not bad, bad


def test_records_name_no_function_outside_their_targets():
    for key, r in records.records().items():
        named = {s for s in strings(r) if TARGET.fullmatch(s)}
        assert named <= set(r.targets().values()), f"{key}: {sorted(named - set(r.targets().values()))}"


def test_search_objectives_resolve_by_name_through_the_same_resolver():
    for name, target in plan.objectives().items():
        assert plan.resolve_objective(name) is records.resolve(target)


@pytest.mark.parametrize("target, message", [
    ("labkit.models", "is not 'module:function'"),
    ("labkit.nope:f", "no module 'labkit.nope'"),
    ("labkit.models:nope", "module labkit.models has no function 'nope'"),
    ("labkit.models:1x", "is not 'module:function'"),
])
def test_a_bad_target_names_what_is_wrong(target, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        records.resolve(target)
