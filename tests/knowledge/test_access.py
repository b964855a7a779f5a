"""The whole store matrix: what each conversation reads and writes, for agents and people."""

import pytest

from knowledge import access
from knowledge.errors import Refused as PermissionDenied
from knowledge.models import Entry
from knowledge.principal import Principal
from tests import factory


def _entry(owner, store, name):
    return Entry.objects.create(owner=owner, store=store, name=name)


@pytest.fixture
def items(world):
    return {
        "shared-copilot": _entry(world.copilot, "shared", "shared by copilot"),
        "shared-scribe": _entry(world.scribe, "shared", "shared by scribe"),
        "self-copilot": _entry(world.copilot, "self", "copilot's own"),
        "self-scribe": _entry(world.scribe, "self", "scribe's own"),
        "private-alice-copilot": _entry(world.copilot, "private:alice", "copilot's DM with alice"),
        "private-alice-scribe": _entry(world.scribe, "private:alice", "scribe's DM with alice"),
        "channel-support": _entry(world.scribe, "channel:support", "support only"),
    }


def _visible(principal, conversation=None):
    return set(
        Entry.objects.filter(access.readable_q(principal, conversation=conversation)).values_list(
            "name", flat=True
        )
    )


def test_shared_channel_reads_shared_and_self_and_writes_shared(world, items):
    conv = factory.make_conversation(world.copilot, world.general)
    assert (conv.read_stores, conv.write_store) == (["shared", "self"], "shared")
    assert _visible(Principal.for_agent(world.copilot), conv) == {
        "shared by copilot",
        "shared by scribe",
        "copilot's own",
    }


def test_channel_only_routing_reads_channel_and_self_and_writes_channel(world, items):
    conv = factory.make_conversation(world.copilot, world.support)
    assert (conv.read_stores, conv.write_store) == (["channel:support", "self"], "channel:support")
    assert _visible(Principal.for_agent(world.copilot), conv) == {"support only", "copilot's own"}


def test_dm_reads_shared_self_and_its_private_store(world, items):
    conv = factory.make_conversation(world.copilot, world.dm_alice)
    assert (conv.read_stores, conv.write_store) == (["shared", "self", "private:alice"], "private:alice")
    # scribe's DM with alice is scribe's, not copilot's
    assert _visible(Principal.for_agent(world.copilot), conv) == {
        "shared by copilot",
        "shared by scribe",
        "copilot's own",
        "copilot's DM with alice",
    }


def test_a_changed_routing_rule_applies_only_to_the_next_conversation(world):
    before = factory.make_conversation(world.copilot, world.general)
    world.general.memory_scope = "channel"
    world.general.save()
    after = factory.make_conversation(world.copilot, world.general)
    before.refresh_from_db()
    assert before.write_store == "shared"
    assert after.write_store == "channel:general"


def test_an_agent_cannot_read_through_another_agents_conversation(world, items):
    scribe_dm = factory.make_channel("dm-alice-scribe", kind="dm", person=world.alice, agent=world.scribe)
    conv = factory.make_conversation(world.scribe, scribe_dm)
    assert _visible(Principal.for_agent(world.copilot), conv) == set()


def test_browsing_without_a_conversation_covers_only_stores_the_agent_took_part_in(world, items):
    copilot = Principal.for_agent(world.copilot)
    assert _visible(copilot) == {"shared by copilot", "shared by scribe", "copilot's own"}
    factory.make_conversation(world.copilot, world.dm_alice)
    factory.make_conversation(world.copilot, world.support)
    assert _visible(copilot) == {
        "shared by copilot",
        "shared by scribe",
        "copilot's own",
        "copilot's DM with alice",
        "support only",
    }


def test_people_with_a_role_read_everything_integrations_nothing(world, items):
    assert len(_visible(Principal.for_user(world.reviewer))) == len(items)
    assert len(_visible(Principal.for_user(world.admin))) == len(items)
    from knowledge.models import Integration

    integration = Principal.for_integration(Integration.objects.get(name="tickets"))
    assert _visible(integration) == set()


def test_write_matrix(world):
    copilot = Principal.for_agent(world.copilot)
    access.check_write(copilot, owner=world.copilot, store="shared")
    access.check_write(copilot, owner=world.copilot, store="self")
    with pytest.raises(PermissionDenied):
        access.check_write(copilot, owner=world.scribe, store="self")  # another agent's self store
    with pytest.raises(PermissionDenied):
        access.check_write(copilot, owner=world.copilot, store="private:alice")  # no DM with alice yet
    with pytest.raises(PermissionDenied):
        access.check_write(copilot, owner=world.copilot, store="channel:support")
    factory.make_conversation(world.copilot, world.dm_alice)
    factory.make_conversation(world.copilot, world.support)
    access.check_write(copilot, owner=world.copilot, store="private:alice")
    access.check_write(copilot, owner=world.copilot, store="channel:support")
    with pytest.raises(PermissionDenied):
        access.check_write(copilot, owner=world.copilot, store="private:bob")
    access.check_write(Principal.for_user(world.reviewer), owner=world.scribe, store="private:alice")
    from knowledge.models import Integration

    with pytest.raises(PermissionDenied):
        access.check_write(
            Principal.for_integration(Integration.objects.get(name="tickets")),
            owner=world.copilot,
            store="shared",
        )


@pytest.mark.parametrize(
    "value,store",
    [
        ("agent", "self"),
        ("workspace", "shared"),
        ("shared", "shared"),
        ("private:alice", "private:alice"),
        ("channel:x", "channel:x"),
    ],
)
def test_parse_scope(value, store):
    assert access.parse_scope(value) == store
