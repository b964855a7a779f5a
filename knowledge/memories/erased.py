"""Erasure of memory rows (knowledge.erasure decides what goes; this is where the rows change,
beside the other row operations): `memories_erase` empties a memory of its content and puts it
in the `erased` state for good, `memories_erased_source_requeue` sends a memory that lost a
source to erasure but keeps other support back to review, stale. Both are set-wise: a person's
erasure takes thousands of rows in one transaction."""

import datetime

from django.db import connection

from knowledge.memories.guard import writes_memory_rows
from knowledge.models import Memory

ERASED_SOURCE_REASON = "re-check: a source it cited was erased"


@writes_memory_rows
def memories_erase(ids, *, now: datetime.datetime) -> dict[int, str]:
    """Erase the memories `ids` (row-locked here): text, key, value, vector, reasons, version
    history and the snapshots of their sources are emptied (the full-text column and the keyword
    statistics follow the text, by the generated column and the term triggers), the row stays
    with status `erased` so ids other rows hold stay valid. Returns {id: the content hash it had},
    for the ledger. Irreversible; the caller audits it in the same transaction."""
    assert connection.in_atomic_block, "memories_erase must run inside transaction.atomic()"
    ids = sorted(set(int(i) for i in ids))
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, content_hash FROM knowledge_memory WHERE id = ANY(%s) AND status <> %s "
            "ORDER BY id FOR UPDATE",
            [ids, Memory.ERASED],
        )
        hashes = dict(cursor.fetchall())
        if not hashes:
            return {}
        taken = list(hashes)
        cursor.execute(
            "UPDATE knowledge_memory SET text = '', key = '', value = NULL, embedding = NULL, "
            "embedding_model = '', status = %s, queue_reason = '', status_reason = '', stale = false, "
            "stale_reason = '', pinned = false, content_hash = '', replaces = '[]'::jsonb, run_id = '', "
            "event_id = '', updated_at = %s WHERE id = ANY(%s)",
            [Memory.ERASED, now, taken],
        )
        cursor.execute(
            "UPDATE knowledge_memoryversion SET text = '', key = '', value = NULL, content_hash = '', "
            "reason = '' WHERE memory_id = ANY(%s)",
            [taken],
        )
        # What an erased memory rested on says nothing any more; its source rows go.
        cursor.execute("DELETE FROM knowledge_memorysource WHERE memory_id = ANY(%s)", [taken])
        cursor.execute(
            "DELETE FROM knowledge_memorycontradiction WHERE memory_id = ANY(%s) OR other_id = ANY(%s)",
            [taken, taken],
        )
    return hashes


@writes_memory_rows
def memories_erased_source_requeue(ids, *, now: datetime.datetime) -> list[int]:
    """The memories `ids` lost a source to an erasure and keep other support: each live one is
    marked stale and a live active one goes back to the review queue (`requeued`), as the
    provenance check's `requeue` mode does. Returns the ids changed; the caller audits them."""
    assert connection.in_atomic_block, "memories_erased_source_requeue must run inside transaction.atomic()"
    ids = sorted(set(int(i) for i in ids))
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE knowledge_memory SET stale = true, stale_reason = %s, status = 'queued', "
            "queue_reason = 'requeued', status_reason = %s, updated_at = %s "
            "WHERE id = ANY(%s) AND status IN ('active', 'queued') RETURNING id",
            [ERASED_SOURCE_REASON, ERASED_SOURCE_REASON, now, ids],
        )
        return sorted(row[0] for row in cursor.fetchall())
