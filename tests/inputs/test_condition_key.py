"""A condition's key and identity are its one definition: every field of a condition (and of what
it is made of) either changes its identity, and so the content key its result is stored under, or
is named here as one that must not. A field added without deciding fails these tests."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.inputs.assembly import Assembled
from harness.inputs.checks import TargetCheck
from harness.inputs.conditions import KEY_FIELDS, Condition
from harness.inputs.isolation import MODES, Isolation
from harness.inputs.texts import Insertion
from harness.runs.schema import KEY_COLUMNS

# Fields that are deliberately not part of a condition's identity, and why.
NOT_IDENTITY = {
    (Isolation, "head_set"): "a head set's name; two equal sets of heads share one result",
    **{(Insertion, name): "what an inserted span is made of: the input ids it gives are the identity"
       for name in ("span", "fill", "match", "mention")},
}

A = Condition("p1", "A", None, 0, Assembled((1, 2, 3), 1, 1, 1, 3))
X = Condition("p1", "C", "inj", 4, Assembled((1, 9, 9, 9, 9, 2, 3), 1, 5, 5, 7, 1, 5),
              Isolation("decay", 4.0, heads=((0, 1),), head_set="top1"), "raw",
              TargetCheck("cat", "absent", ("cat", "cats"), None), "pair-1",
              Insertion("span", "fill", "match", "corpus", "attack", "goal", "document", "mention", "role"), (1, 3),
              "middle")


def _other(value, name: str = ""):
    """A different value of the same kind as ``value`` (for an isolation mode, another registered one)."""
    if name == "mode":
        return next(m for m in MODES if m != value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "-other"
    if isinstance(value, tuple):
        return value + ((1, 2),) if value and isinstance(value[0], tuple) else value + (value[-1] if value else 7,)
    if value is None:
        return "something"
    raise AssertionError(f"no other value for {value!r} ({type(value).__name__}): teach _other this type")


def _variants():
    """(owner class, field name, a condition differing from X in that field alone)."""
    for field in dataclasses.fields(Condition):
        value = getattr(X, field.name)
        if dataclasses.is_dataclass(value):
            for inner in dataclasses.fields(value):
                changed = dataclasses.replace(value, **{inner.name: _other(getattr(value, inner.name), inner.name)})
                yield type(value), inner.name, dataclasses.replace(X, **{field.name: changed})
        else:
            yield Condition, field.name, dataclasses.replace(X, **{field.name: _other(value)})


VARIANTS = list(_variants())


@pytest.mark.parametrize("owner, name, changed", VARIANTS, ids=[f"{o.__name__}.{n}" for o, n, _ in VARIANTS])
def test_every_field_is_part_of_the_identity_or_named_as_not(owner, name, changed):
    if (owner, name) in NOT_IDENTITY:
        assert changed.identity(A) == X.identity(A), f"{owner.__name__}.{name} is said not to matter, but it does"
    else:
        assert changed.identity(A) != X.identity(A), (
            f"{owner.__name__}.{name} does not reach Condition.identity: add it there (and to key() if it names a "
            f"row), or to NOT_IDENTITY with the reason")


def test_the_fields_covered_include_every_dataclass_reached():
    owners = {owner for owner, _, _ in VARIANTS}
    assert owners == {Condition, Assembled, Isolation, TargetCheck, Insertion}


def test_the_reference_is_part_of_the_identity():
    other_a = dataclasses.replace(A, assembled=Assembled((1, 2, 4), 1, 1, 1, 3))
    assert X.identity(other_a) != X.identity(A)


def test_the_table_key_is_the_condition_key_with_the_model():
    assert KEY_COLUMNS == ["model", *KEY_FIELDS]
    assert list(X.key()) == list(KEY_FIELDS)
    assert X.key() == {"prompt_id": "p1", "group": "C", "prefix_id": "inj", "prefix_len": 4, "placement": "raw",
                       "isolation": "decay", "beta": 4.0}


def test_a_head_set_keys_its_results_the_same_whatever_its_integer_type():
    def with_heads(heads):
        return dataclasses.replace(X, isolation=Isolation("mask_heads", heads=heads))

    plain = with_heads(((3, 4), (0, 1)))
    numpy = with_heads(((np.int64(0), np.int64(1)), (np.int64(3), np.int64(4))))
    assert plain.identity(A) == numpy.identity(A)
    assert with_heads(((10, 2), (9, 3))).identity(A)["keys"][-1] == [[9, 3], [10, 2]]  # as numbers, not text
