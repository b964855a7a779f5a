"""The one writer, guarded below Python: PostgreSQL refuses a memory row inserted, or its status
changed, anywhere but through knowledge/memories/ (knowledge.memories.guard) — raw SQL, a
queryset's update, a model's save — and the writer's own door closes again behind it."""

import pytest
from django.db import DatabaseError, connection, transaction

from knowledge.memories.guard import memory_rows_guard
from knowledge.memories.rows import memory_row_state
from knowledge.models import Memory
from tests import factory


def _refused(action):
    with pytest.raises(DatabaseError, match="only through knowledge/memories"), transaction.atomic():
        action()


def test_the_database_refuses_an_insert_outside_the_writer(world):
    def raw_insert():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO knowledge_memory (owner_id, store, text, key, value, tier, category, confidence,"
                " status, queue_reason, status_reason, stale, stale_reason, pinned, content_hash, version,"
                " author_kind, author_name, run_id, event_id, embedding_model, created_at, updated_at)"
                " VALUES (%s, 'shared', 'planted', '', 'null', 'semantic', '', 1, 'active', '', '', false, '',"
                " false, 'x', 1, 'system', 'x', '', '', '', now(), now())",
                [world.copilot.pk],
            )

    _refused(raw_insert)
    _refused(
        lambda: Memory.objects.create(owner=world.copilot, store="shared", text="planted", status="active")
    )
    assert not Memory.objects.filter(text="planted").exists()


def test_the_database_refuses_a_status_change_outside_the_writer(world):
    memory = factory.make_queued_memory(world.copilot, "Waiting for a reviewer", store="shared")

    def raw_update():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE knowledge_memory SET status = 'active' WHERE id = %s", [memory.pk])

    def model_save():
        memory.status = "active"
        memory.save()

    _refused(raw_update)
    _refused(lambda: Memory.objects.filter(pk=memory.pk).update(status="active"))
    _refused(model_save)
    assert Memory.objects.get(pk=memory.pk).status == "queued"
    # other fields are not the guard's: pinning is an ordinary update
    Memory.objects.filter(pk=memory.pk).update(pinned=True)


def test_the_writer_opens_the_door_and_closes_it_behind_itself(world):
    memory = factory.make_queued_memory(world.copilot, "Waiting for a reviewer", store="shared")
    with transaction.atomic():
        memory_row_state(memory, status="active", queue_reason="")
        # the same transaction, right after the writer returned: the door is shut again
        with pytest.raises(DatabaseError), transaction.atomic():
            Memory.objects.filter(pk=memory.pk).update(status="rejected")
    assert Memory.objects.get(pk=memory.pk).status == "active"
    with memory_rows_guard():  # the seeding door, for benchmarks building a world
        Memory.objects.filter(pk=memory.pk).update(status="rejected")
    assert Memory.objects.get(pk=memory.pk).status == "rejected"
