"""One full provenance check over 100,000 tracked sources, 10 % of them changed (target ≤ 5 s)."""

import time

from django.db import connection

from knowledge.memories.guard import writes_memory_rows as memory_rows_guarded
from knowledge.models import Agent
from memory.provenance.services import provenance_check

N = 100_000


@memory_rows_guarded  # seeding through the one writer's door (knowledge.memories.guard)
def seed() -> None:
    agent, _ = Agent.objects.get_or_create(name="bench-provenance")
    with connection.cursor() as c:
        c.execute(
            """
            INSERT INTO knowledge_memory (owner_id, store, text, key, tier, category, confidence, status,
                queue_reason, status_reason, stale, stale_reason, pinned, content_hash, version, replaces,
                author_kind, author_name, run_id, event_id, embedding_model, created_at, updated_at)
            SELECT %s, 'shared', 'ticket memory ' || g, '', 'semantic', 'note', 1, 'active', '', '', false, '',
                   false, md5(g::text), 1, '[]', 'agent', 'bench', '', '', '', now(), now()
            FROM generate_series(1, %s) g
            """,
            [agent.pk, N],
        )
        c.execute(
            """
            INSERT INTO knowledge_sourcestate (kind, ref, fields, fingerprint, deleted, pushed_by, updated_at)
            SELECT 'ticket', 'INC-' || g, '{}'::jsonb, md5('v1-' || g), false, 'bench', now()
            FROM generate_series(1, %s) g
            """,
            [N],
        )
        c.execute(
            """
            INSERT INTO knowledge_memorysource (memory_id, kind, ref, fingerprint, snapshot, state, created_at)
            SELECT m.id, 'ticket', 'INC-' || row_number() OVER (ORDER BY m.id), '', '{}'::jsonb, 'unchanged', now()
            FROM knowledge_memory m WHERE m.owner_id = %s
            """,
            [agent.pk],
        )
        c.execute(
            """UPDATE knowledge_memorysource ms SET fingerprint = ss.fingerprint
               FROM knowledge_sourcestate ss WHERE ss.kind = ms.kind AND ss.ref = ms.ref"""
        )
        # 10 % of the tickets change after the memories were written.
        c.execute(
            "UPDATE knowledge_sourcestate SET fingerprint = md5('v2-' || ref) WHERE substr(ref, 5)::int % 10 = 0"
        )
        c.execute("ANALYZE")


def run(report) -> None:
    seed()
    start = time.perf_counter()
    counts = provenance_check()
    first = time.perf_counter() - start
    report(
        "provenance check, 100k sources, 10 % changed",
        first,
        "s",
        target="≤ 5 s",
        note=f"{counts['checked']:,} checked, {counts['stale']:,} flagged stale, one audit event each",
    )
    start = time.perf_counter()
    again = provenance_check()
    report(
        "provenance check again (nothing new)",
        time.perf_counter() - start,
        "s",
        target="idempotent",
        note=f"{again['stale']} newly stale",
    )
