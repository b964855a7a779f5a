"""knowledge.rowsql writes and reads rows exactly as the ORM would."""

import time

from django.db import transaction

from knowledge import rowsql
from knowledge.models import AuditEvent, Memory, MemorySource, MemoryVersion, Revision, SourceState
from tests import factory


def test_a_row_and_its_children_are_one_insert_with_the_orms_values(db, django_assert_num_queries):
    owner = factory.make_agent("writer")
    memory = Memory(owner=owner, store="shared", text="VPN fix", key="vpn", value={"client": "5.2.1"})
    children = [MemoryVersion(memory=memory, version=1, text="VPN fix", content_hash="h")]
    sources = [MemorySource(memory=memory, kind="kb", ref=f"KB-{i}", snapshot={"v": i}) for i in range(3)]
    with transaction.atomic(), django_assert_num_queries(1):
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
