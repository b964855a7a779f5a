"""knowledge.rowsql writes and reads rows exactly as the ORM would."""

import time

from django.db import transaction

from knowledge import rowsql
from knowledge.memories.guard import memory_rows_guard
from knowledge.models import AuditEvent, Memory, MemorySource, MemoryVersion, Revision, SourceState
from tests import factory


def test_a_row_and_its_children_are_one_insert_with_the_orms_values(db, django_assert_num_queries):
    owner = factory.make_agent("writer")
    memory = Memory(owner=owner, store="shared", text="VPN fix", key="vpn", value={"client": "5.2.1"})
    children = [MemoryVersion(memory=memory, version=1, text="VPN fix", content_hash="h")]
    sources = [MemorySource(memory=memory, kind="kb", ref=f"KB-{i}", snapshot={"v": i}) for i in range(3)]
    with memory_rows_guard(), django_assert_num_queries(1):  # the memory table's guard, opened
        rowsql.insert_with_children(memory, ("memory", children), ("memory", sources))
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.owner_id, stored.text, stored.value, stored.tier) == (
        owner.pk,
        "VPN fix",
        {"client": "5.2.1"},
        "semantic",
    )
    assert stored.created_at == memory.created_at and stored.created_at is not None  # auto_now_add
    assert list(stored.versions.values_list("version", "text")) == [(1, "VPN fix")]
    assert sorted(stored.sources.values_list("ref", "snapshot")) == [(f"KB-{i}", {"v": i}) for i in range(3)]
    assert all(s.memory_id == memory.pk for s in sources) and not memory._state.adding


def test_a_parent_without_children_is_inserted_alone(db):
    event = AuditEvent(action="x.tested", actor_kind="system", actor_name="tests")
    with transaction.atomic():
        rowsql.insert_with_children(event, ("event", []))
    assert AuditEvent.objects.get(pk=event.pk).action == "x.tested"
    assert not Revision.objects.filter(event_id=event.pk).exists()


def test_update_fields_writes_only_the_named_fields(db):
    memory = factory.make_memory_row(factory.make_agent("writer"), "before")
    Memory.objects.filter(pk=memory.pk).update(category="kept")
    old_updated = memory.updated_at
    time.sleep(0.002)
    memory.status, memory.text = Memory.QUEUED, "not written"
    with memory_rows_guard():
        rowsql.update_fields(memory, "status", "updated_at")
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.status, stored.text, stored.category) == (Memory.QUEUED, "before", "kept")
    assert stored.updated_at > old_updated  # auto_now, as save() sets it


def test_select_builds_instances_like_the_orm(db):
    SourceState.objects.create(kind="kb", ref="KB-1", fields={"title": "VPN"}, fingerprint="f1")
    SourceState.objects.create(kind="ticket", ref="T-9", fields={"status": "open"})
    (row,) = rowsql.select(SourceState, "t.kind = %s AND t.ref = %s", ["kb", "KB-1"])
    orm = SourceState.objects.get(kind="kb", ref="KB-1")
    assert {f.attname: getattr(row, f.attname) for f in SourceState._meta.concrete_fields} == {
        f.attname: getattr(orm, f.attname) for f in SourceState._meta.concrete_fields
    }
    assert row.fields == {"title": "VPN"} and not row._state.adding


def test_many_rows_are_one_insert_with_the_orms_values_in_order(db, django_assert_num_queries):
    import datetime
    import uuid

    owner = factory.make_agent("writer")
    since = datetime.datetime(2026, 3, 2, 17, 15, 4, 551020, tzinfo=datetime.UTC)
    memories = [
        Memory(owner=owner, store="self", text='He said "it\'s \\fixed"', value={"a": [1, 2.5, None]}),
        Memory(owner=owner, store="shared", text="plain", key="k", value="4h", valid_from=since, turn=3),
        Memory(owner=owner, store="shared", text="no value", confidence=0.25, pinned=True),
    ]
    with memory_rows_guard(), django_assert_num_queries(1):
        rowsql.insert_many(memories)
    stored = {m.pk: m for m in Memory.objects.filter(pk__in=[m.pk for m in memories])}
    assert [m.pk for m in memories] == sorted(stored)
    for memory in memories:
        row = stored[memory.pk]
        assert (row.text, row.key, row.value, row.valid_from, row.turn, row.confidence, row.pinned) == (
            memory.text,
            memory.key,
            memory.value,
            memory.valid_from,
            memory.turn,
            memory.confidence,
            memory.pinned,
        )
        assert row.created_at == memory.created_at is not None and row.embedding is None
    assert Memory.objects.filter(pk=memories[2].pk, value__isnull=True).exists()  # SQL NULL, not JSON null

    # a child row whose parent was saved after it was assigned; a UUID; a JSON list
    event = AuditEvent(
        action="x.tested", actor_kind="system", actor_name="t", object_ids=["1"], batch_id=uuid.uuid4()
    )
    revision = Revision(event=event, object_type="memory", object_id="1", before=None, after={"v": 1})
    with transaction.atomic():
        rowsql.insert_many([event])
        rowsql.insert_many([revision])
    assert AuditEvent.objects.get(pk=event.pk).batch_id == event.batch_id
    assert Revision.objects.get(pk=revision.pk).event_id == event.pk
