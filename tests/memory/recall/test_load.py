"""Hydration reads the rows behind recall's candidates with one plain statement per kind, all
sent in one round trip, and builds them as the ORM would."""

from knowledge.models import Entry, Memory, Message
from memory.recall.fuse import Candidate
from memory.recall.load import hydrate
from memory.recall.routes import ENTRY, MEMORY, MESSAGE
from tests import factory


def candidate(kind, pk):
    return Candidate(kind=kind, id=pk)


def test_memories_come_with_owner_and_entry_and_equal_the_orm_rows(world, django_assert_num_queries):
    loose = factory.make_memory_row(
        world.copilot, "Alice prefers email", key="contact", value={"via": "email"}
    )
    entry = factory.make_entry(world.copilot, name="Office hours", blocks=["Opens at 8"])
    block = Memory.objects.get(entry=entry)
    gone = factory.make_memory_row(world.copilot, "deleted meanwhile")
    gone_id = gone.pk
    gone.delete()
    cands = [candidate(MEMORY, loose.pk), candidate(MEMORY, block.pk), candidate(MEMORY, gone_id)]
    with django_assert_num_queries(1):
        hydrate(cands)
        assert cands[0].obj.owner.name == "copilot" and cands[0].obj.entry is None
        assert cands[1].obj.entry.name == "Office hours" and cands[1].obj.owner == world.copilot
    assert cands[2].obj is None
    orm = Memory.objects.get(pk=loose.pk)
    for field in ("text", "store", "status", "tier", "confidence", "created_at", "valid_to", "key"):
        assert getattr(cands[0].obj, field) == getattr(orm, field)
    assert cands[0].obj.value == {"via": "email"}  # deferred: read when used


def test_messages_and_entries(world, django_assert_num_queries):
    factory.post_messages(
        world.general, [{"speaker": "alice", "text": "the printer is jammed", "external_id": "m1"}]
    )
    message = Message.objects.get()
    entry = factory.make_entry(world.copilot, name="Printers")
    cands = [candidate(MESSAGE, message.pk), candidate(ENTRY, entry.pk)]
    with django_assert_num_queries(1):  # both kinds' statements in one round trip
        hydrate(cands)
        assert cands[1].obj.owner.name == "copilot"  # loaded with the entry
    assert cands[0].obj.text == "the printer is jammed" and cands[0].obj.external_id == "m1"
    assert cands[0].obj.ts == message.ts and cands[0].obj.channel_id == world.general.pk
    assert cands[1].obj.name == "Printers"
    assert cands[1].obj.aliases == Entry.objects.get(pk=entry.pk).aliases
    with django_assert_num_queries(0):
        hydrate(cands)  # loaded already
