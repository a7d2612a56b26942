"""Every registered number format declares, beside its class, what the course's studies take of it (``FormatSpec``:
Lab 3's study parameters, search space, fixed fields and its one-sentence why), and every table that reads those
declarations covers every format: a missing declaration or entry is an error naming the format and what is missing,
never a skipped format."""
import dataclasses

import pytest

from labkit.answers import lab3_search as answers
from labkit.exercises.catalog import registry
from labkit.labs import lab3_precision as precision
from labkit.quant import study
from labkit.quant.formats import FORMATS, NumberFormat, make_format
from labkit.quant.formats import base
from labkit.quant.formats.base import PARTS, FormatSpec, MissingDeclaration, check_covers, declared, register
from labkit.readings import lab3_search as read3
from labkit.readings import tables

ROLES = ("data_in", "weight", "bias")


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_declares_its_spec_beside_its_class(name):
    cls = FORMATS[name]
    spec = cls.__dict__.get("spec")  # on the class itself: a subclass never inherits another format's
    assert isinstance(spec, FormatSpec), f"{name}: no FormatSpec declared on {cls.__qualname__}"
    for part in PARTS:
        assert getattr(spec, part) is not None, f"{name}: its FormatSpec declares no {part}"
    fields = _fields(cls)
    # the search space: parameters of the format, each with its choices
    assert set(spec.space) <= fields, (name, set(spec.space) - fields)
    assert all(len(v) for v in spec.space.values())
    # the fixed fields: parameters of the format, never searched, and what the study sets too
    assert set(spec.fixed) <= fields and not set(spec.fixed) & set(spec.space), name
    at = spec.min_width or 8
    assert {k: spec.study(at)[k] for k in spec.fixed} == dict(spec.fixed), name
    # one sentence, cited after "**name**: " in a list joined by "; "
    assert spec.why.strip() == spec.why and not spec.why.endswith(".") and ". " not in spec.why, (name, spec.why)
    # a searched exponent field says what it must leave of the width; a format without one declares nothing to leave
    assert (spec.exponent_leaves is not None) == ({"width", "exponent_width"} <= set(spec.space)), name
    assert set(spec.roles) <= set(ROLES) and {"data_in", "weight"} <= set(spec.roles), name


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_the_study_parameters_and_every_search_choice_build_the_format(name):
    spec = FORMATS[name].__dict__["spec"]
    widths = [None] if spec.min_width is None else range(spec.min_width, 9)
    for width in widths:
        per_role = study.study_params(name, width or 8)
        assert list(per_role) == [r for r in ROLES if r in spec.roles]
        for params in per_role.values():
            make_format(name, **params)  # raises where a declared parameter set is not a valid format
    if spec.min_width is not None:
        with pytest.raises(ValueError, match=f"below its minimum {spec.min_width}"):
            study.study_params(name, spec.min_width - 1)
    space = precision.FORMAT_SPACE[name]
    combos = [{}]
    for k, choices in space.items():
        combos = [{**c, k: v} for c in combos for v in choices]
    for combo in combos:
        fmt = make_format(name, **{**precision.FIXED[name], **precision._effective(name, combo)})
        assert isinstance(fmt, NumberFormat)


def test_every_consumers_table_is_the_declarations_and_covers_every_format():
    names = set(FORMATS)
    assert set(study.STUDY_ORDER) == names and len(study.STUDY_ORDER) == len(names)
    assert list(precision.FORMAT_SPACE) == list(study.STUDY_ORDER)  # the all-formats search's categorical order
    assert precision.FORMAT_SPACE == {n: {k: list(v) for k, v in FORMATS[n].spec.space.items()} for n in names}
    assert precision.FIXED == {n: dict(FORMATS[n].spec.fixed) for n in names}
    assert answers.WHY == {n: FORMATS[n].spec.why for n in names}
    assert set(study.MIN_WIDTH) | set(study.FIXED_WIDTH) == names and not set(study.MIN_WIDTH) & set(study.FIXED_WIDTH)
    assert set(study.BINARY) == {n for n in names if "bias" not in FORMATS[n].spec.roles}
    assert set(precision._NON_EXPONENT_BITS) == {n for n in names if "exponent_width" in FORMATS[n].spec.space}
    for name in names:
        assert precision.space_of(name) == precision.FORMAT_SPACE[name]
        assert precision.fixed_of(name) == precision.FIXED[name]
        assert answers.why_of(name) == answers.WHY[name]
        cfg = precision.layer_config(name, {**precision.FIXED[name],
                                            **precision._effective(name, {k: v[-1] for k, v in
                                                                          precision.FORMAT_SPACE[name].items()})})
        assert {k.split("_", 1)[0] for k in cfg if k != "name"} <= {"data", "weight", "bias"}
        assert any(k.startswith("bias_") for k in cfg) == ("bias" in FORMATS[name].spec.roles)


def test_the_committed_tables_are_what_they_were():
    """The declarations hold the values the tables had before they moved beside the classes (the stored results
    and answers were measured and worded with these)."""
    assert precision.FORMAT_SPACE["integer"] == {"width": [8, 16, 32], "frac_width": [2, 4, 8]}
    assert precision.FORMAT_SPACE["minifloat_ieee"] == {"width": [4, 5, 6, 8], "exponent_width": [2, 3, 4, 5]}
    assert precision.FORMAT_SPACE["block_minifloat"] == {"width": [4, 5, 6, 8], "exponent_width": [2, 3],
                                                         "block_size": [16, 32]}
    assert {n: f for n, f in precision.FIXED.items() if f} == {
        "block_fp": {"exponent_width": 8}, "block_minifloat": {"exponent_bias_width": 8},
        "block_log": {"exponent_bias_width": 8}, "mxint8": {"group_size": 32}, "binary": {"stochastic": False},
        "binary_scaling": {"per_channel": True}, "binary_residual_sign": {"levels": 2}}
    assert study.study_params("block_minifloat", 3)["weight"] == {"width": 3, "exponent_width": 2,
                                                                  "exponent_bias_width": 8, "block_size": 16}
    assert study.study_params("minifloat_denorm", 4)["bias"] == {"width": 4, "exponent_width": 2}
    assert study.BINARY == ("binary", "binary_scaling", "binary_residual_sign")
    assert set(study.FIXED_WIDTH) == {"mxint8", *study.BINARY} and study.MIN_WIDTH["minifloat_denorm"] == 3
    assert precision._NON_EXPONENT_BITS == {"minifloat_denorm": 2, "minifloat_ieee": 1, "block_minifloat": 1}


def test_every_formats_hook_is_marked_and_every_exercise_installing_into_the_formats_names_one():
    hooks = {FORMATS[n].hook_path() for n in FORMATS} - {None}
    assert hooks == set(base.own_hooks()), "a declared hook that is not marked @hook, or a marked one no format names"
    for name in FORMATS:
        assert FORMATS[name].replaced() is None  # labkit's own is in place
    installs = {ex.install for ex in registry().values() if ex.install and ex.install.startswith("labkit.quant.")}
    assert installs <= hooks, f"an exercise installs where no format declares its hook: {installs - hooks}"


# --- a missing declaration or entry is an error naming the format and what is missing --------------------------

@pytest.fixture
def registered():
    """Register formats for one test, and take them out again."""
    added = []

    def add(cls):
        added.append(cls)
        return register(cls)

    yield add
    for cls in added:
        FORMATS.pop(cls.name, None)
        base._AT.pop(cls, None)


def _toy(name, spec=None):
    ns = {"__annotations__": {"width": int}, "width": 8, "name": name,
          "quantize_values": lambda self, x: x, "bits_per_element": lambda self, shape: float(self.width)}
    if spec is not None:
        ns["spec"] = spec
    return dataclasses.dataclass(frozen=True)(type(f"Toy_{name}", (NumberFormat,), ns))


FULL = dict(study=lambda w: {"width": w}, space={"width": (4, 8)}, fixed={}, why="a toy")


def test_a_format_without_a_spec_or_a_part_is_refused_at_registration(registered):
    with pytest.raises(MissingDeclaration, match=r"format 'toy_nospec' \(.*Toy_toy_nospec\) declares no FormatSpec"):
        registered(_toy("toy_nospec"))
    for part in PARTS:
        spec = FormatSpec(**{k: v for k, v in FULL.items() if k != part})
        with pytest.raises(MissingDeclaration, match=rf"format 'toy_{part}' .*declares no {part} in its FormatSpec"):
            registered(_toy(f"toy_{part}", spec))
        assert f"toy_{part}" not in FORMATS
    with pytest.raises(MissingDeclaration, match="declares no study and no why"):
        registered(_toy("toy_two", FormatSpec(space={}, fixed={})))
    # inherited is not declared: a subclass states its own
    parent = registered(_toy("toy_parent", FormatSpec(**FULL)))
    child = dataclasses.dataclass(frozen=True)(type("Toy_child", (parent,), {"name": "toy_child"}))
    with pytest.raises(MissingDeclaration, match="'toy_child'.*declares no FormatSpec"):
        registered(child)


def test_a_format_that_slipped_past_registration_is_named_by_every_consumer(monkeypatch):
    """A format in the registry without its declaration (put there by hand): every view of the declarations
    raises, naming it, instead of skipping it."""
    cls = _toy("toy_bare")
    monkeypatch.setitem(FORMATS, "toy_bare", cls)
    for call in (lambda: study.study_params("toy_bare", 8), lambda: declared("why"), lambda: declared("space")):
        with pytest.raises(MissingDeclaration, match=r"format 'toy_bare' .*declares no FormatSpec"):
            call()


def test_a_table_without_a_registered_format_is_named_never_skipped(registered):
    registered(_toy("toy_late", FormatSpec(**FULL)))  # registered after the tables were derived
    for table, what in ((precision.FORMAT_SPACE, "FORMAT_SPACE"), (precision.FIXED, "FIXED"), (answers.WHY, "WHY"),
                        (dict.fromkeys(study.STUDY_ORDER), "STUDY_ORDER")):
        with pytest.raises(MissingDeclaration, match=rf"{what} has no entry for format\(s\) 'toy_late'"):
            check_covers(table, what)
    for call, what in ((precision.space_of, "FORMAT_SPACE"), (precision.fixed_of, "FIXED"), (answers.why_of, "WHY")):
        with pytest.raises(MissingDeclaration, match=rf"{what} has no entry for format 'toy_late'"):
            call("toy_late")
    assert study.study_params("toy_late", 8) == {r: {"width": 8} for r in ROLES}  # read from the declaration
    with pytest.raises(KeyError, match="unknown number format 'nope'"):
        precision.space_of("nope")


def test_the_answers_name_a_lower_format_without_a_why_instead_of_skipping_it(registered):
    registered(_toy("toy_low", FormatSpec(**FULL)))
    rows = tables.format_rows({"integer": {"best": 0.864, "bits": 8.0, "trials": 25},
                                "toy_low": {"best": 0.50, "bits": 2.0, "trials": 1}}, 0.865)
    num = {"rows": rows, "best_so_far": {}, "all_formats": {"best": 0.866, "bits": 11.2, "counts": {"integer": 14}}}
    read = {r.key: r for r in read3.formats(num, 0.865, 25000, None, None)}
    assert read["format.toy_low.vs_fp32"].verdict == "lower"
    with pytest.raises(MissingDeclaration, match=r"WHY has no entry for format 'toy_low'"):
        answers.formats_answer(rows, 0.865, 25000, num["all_formats"], read)


def test_a_spec_part_of_the_wrong_kind_is_refused():
    with pytest.raises(TypeError, match="space"):
        FormatSpec(**{**FULL, "space": {"width": ()}})
    with pytest.raises(TypeError, match="why"):
        FormatSpec(**{**FULL, "why": " "})
    with pytest.raises(TypeError, match="study"):
        FormatSpec(**{**FULL, "study": {"width": 8}})
    with pytest.raises(ValueError, match="roles"):
        FormatSpec(**FULL, roles=("weights",))
    spec = FormatSpec(**FULL)
    with pytest.raises(TypeError):
        spec.space["width"] = (2,)  # a declaration is read-only
