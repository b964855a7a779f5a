"""A principal's kind is not a public string: who may do what is asked of its predicates and of
knowledge/access.py; `kind_label` is only what author and audit fields record."""

import pytest

from knowledge.principal import Principal


def test_the_kind_cannot_be_read_to_compare():
    person = Principal(kind="person", name="ana", role="admin")
    with pytest.raises(AttributeError):
        person.kind  # noqa: B018  (reading it is the failure asserted)
    assert getattr(person, "kind", None) is None
    assert person.kind_label == "person" and person.is_person and person.is_admin and not person.is_agent


def test_every_kind_has_its_predicate():
    asked = {
        kind: [
            p
            for p in ("is_agent", "is_person", "is_integration", "is_system")
            if getattr(Principal(kind=kind, name="x"), p)
        ]
        for kind in ("agent", "person", "integration", "system")
    }
    assert asked == {
        "agent": ["is_agent"],
        "person": ["is_person"],
        "integration": ["is_integration"],
        "system": ["is_system"],
    }


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="not 'robot'"):
        Principal(kind="robot", name="x")
