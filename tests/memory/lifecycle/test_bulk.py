"""memory_write_many is memory_write batched: for a mixed batch (a trusted and an untrusted
agent; exact duplicates inside the batch and of older memories; a near duplicate; a keyed
memory that conflicts with an active one; another tier) it stores the same rows, writes the same
events and makes the same queue decisions as writing each memory alone — in a number of
statements that grows with the chunks, not with the memories."""

import datetime

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from knowledge.models import AuditEvent, Memory
from knowledge.principal import Principal
from memory.imports.mem0 import Mem0Memory, mem0_import
from memory.lifecycle.bulk import ItemRefused, memory_write_many
from memory.lifecycle.write import WriteRequest, memory_write
from tests import factory

pytestmark = pytest.mark.django_db

SOURCE = {"kind": "record", "ref": "crm:acme"}


def _items():
    return [
        {"text": "VPN client 5.2.1 fixes VPN-4012", "sources": [SOURCE]},
        {"text": "  vpn client 5.2.1 FIXES   VPN-4012 "},  # exact duplicate of the first
        {"text": "The VPN client 5.2.1 fixes VPN-4012 on work laptops"},  # near duplicate: stored
        {"text": "Acme's SLA is 8 hours", "key": "acme.sla", "value": "8h"},  # conflicts
        {"text": "Escalations go to the on-call engineer after 30 minutes", "category": "procedure"},
        {"text": "Acme renews in March"},  # exact duplicate of an older memory
        {"text": "VPN client 5.2.1 fixes VPN-4012 "},  # after the keyed one: still a duplicate
        {"text": "Escalations go to the on-call engineer after 30 minutes", "tier": Memory.EPISODIC},
        {"text": "Badge readers reset at midnight", "sources": [SOURCE, {"kind": "ticket", "ref": "INC-9"}]},
        {"key": "acme.region", "value": "EU"},  # keyed, no conflict, its text derived
    ]


def _world(world):
    """What both paths start from: each agent's older memories, one of them keyed."""
    for agent in (world.scribe, world.copilot):
        factory.make_memory(agent, "Acme renews in March")
        factory.make_memory(agent, "Acme's SLA is 4 hours", key="acme.sla", value="4h")


def _outcome(agent, answers, since_memory, since_event):
    """Rows, events and answers, with ids named by the item that wrote them (ids differ between
    two runs) and times left out (each run has its own now)."""
    new = {
        m.pk: f"item{n}"
        for n, m in enumerate(answers)
        if m.pk > since_memory and not hasattr(m, "duplicate_of")
    }

    def name(pk):
        return new.get(int(pk), f"old#{pk}")

    timeless = ("id", "created_at", "updated_at", "valid_from", "expires_at")
    rows = []
    for m in Memory.objects.filter(pk__gt=since_memory, owner=agent).prefetch_related("sources", "versions"):
        rows.append(
            (
                name(m.pk),
                m.text,
                m.status,
                m.queue_reason,
                m.status_reason,
                m.tier,
                m.category,
                m.key,
                m.value,
                m.valid_from is not None,
                m.expires_at is not None,
                m.content_hash,
                m.author_kind,
                m.author_name,
                sorted((s.kind, s.ref, s.state, s.fingerprint) for s in m.sources.all()),
                [(v.version, v.text, v.content_hash) for v in m.versions.all()],
            )
        )
    events = []
    for e in AuditEvent.objects.filter(pk__gt=since_event).order_by("pk").prefetch_related("revisions"):
        events.append(
            (
                e.action,
                e.actor_kind,
                e.actor_name,
                e.store,
                e.owner,
                [name(i) for i in e.object_ids],
                e.reason,
                e.data,
                [
                    (
                        r.object_type,
                        name(r.object_id),
                        r.before,
                        {k: v for k, v in r.after.items() if k not in timeless},
                    )
                    for r in e.revisions.all()
                ],
            )
        )
    said = [
        f"duplicate of {name(m.pk)}" if hasattr(m, "duplicate_of") else f"{name(m.pk)} {m.status}"
        for m in answers
    ]
    return sorted(rows), events, said


def _last_ids():
    last_memory = Memory.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    last_event = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    return last_memory, last_event


@pytest.mark.parametrize("name", ["scribe", "copilot"])  # trusted, untrusted
def test_many_at_once_writes_what_one_by_one_writes(world, name):
    _world(world)
    agent = getattr(world, name)
    actor = Principal.for_agent(agent)

    outcomes = []
    for many in (False, True):
        with transaction.atomic():
            since = _last_ids()
            if many:
                answers = memory_write_many(actor=actor, owner=agent, store="self", items=_items(), chunk=4)
            else:
                answers = [
                    memory_write(actor=actor, request=WriteRequest(owner=agent, store="self", **item))
                    for item in _items()
                ]
            outcomes.append(_outcome(agent, answers, *since))
            transaction.set_rollback(True)  # the other path starts from the same memories

    one_by_one, at_once = outcomes
    assert at_once == one_by_one
    rows, events, said = at_once
    first = "active" if name == "scribe" else "queued"
    assert said[:3] == [f"item0 {first}", "duplicate of item0", f"item2 {first}"]
    assert said[3] == "item3 queued"  # the conflict waits for a person, trusted or not
    assert said[5].startswith("duplicate of old#") and said[6] == "duplicate of item0"
    assert said[7] == f"item7 {first}"  # the same words in another tier are another memory
    assert said[9] == f"item9 {first}"
    assert [e[0] for e in events] == ["memory.written"] * 7
    conflict = next(r for r in rows if r[0] == "item3")
    assert conflict[3] == "conflict" and "Same key as active" in conflict[4]


def test_an_item_refused_anywhere_writes_nothing(world):
    items = [{"text": f"Fact number {n}"} for n in range(250)]
    items[230] = {"text": "A fact that expires", "expires_at": timezone.now() + datetime.timedelta(hours=1)}
    before = Memory.objects.count(), AuditEvent.objects.count()
    with pytest.raises(ItemRefused) as refused:
        memory_write_many(
            actor=Principal.for_agent(world.scribe), owner=world.scribe, store="self", items=items, chunk=100
        )
    assert refused.value.index == 230 and "Only working and episodic memories expire." in str(
        refused.value.error.detail
    )
    assert (Memory.objects.count(), AuditEvent.objects.count()) == before


def _mem0(n, offset=0):
    return [
        Mem0Memory(
            id=f"m-{offset + i}", text=f"User {i} prefers channel {offset + i}", created_at=None, value={}
        )
        for i in range(n)
    ]


def test_statements_grow_with_chunks_not_memories(world):
    counts = []
    for n, offset in ((100, 0), (400, 1000)):
        with CaptureQueriesContext(connection) as queries:
            result = mem0_import(agent=world.copilot, memories=_mem0(n, offset))
        assert result.imported == n and result.queued == n
        counts.append(len(queries))
    small, large = counts
    assert large < 2 * small, counts  # four times the memories, not four times the statements
    assert large <= 40, counts
    assert AuditEvent.objects.filter(action="memory.written", actor_name="import_mem0").count() == 500
