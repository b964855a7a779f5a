"""Consolidation over 100,000 active long-term memories, 10 % of them duplicates (with changed
case and spacing), no model configured: the run finds and folds them set-wise in SQL. Reports
the run in apply mode (find + write the plan + apply it) and the exact revert."""

import time

from django.db import connection
from django.test.utils import override_settings

from knowledge.memories.guard import writes_memory_rows as memory_rows_guarded

TOTAL = 100_000
DUPLICATES = TOTAL // 10


@memory_rows_guarded  # seeding through the one writer's door (knowledge.memories.guard)
def seed() -> None:
    from knowledge.principal import Principal
    from knowledge.principals import services

    actor = Principal.system("bench")
    owners = [services.agent_create(actor=actor, name=f"bench-consolidation-{n}") for n in range(4)]
    ids = [o.pk for o in owners]
    with connection.cursor() as cursor:
        # 90,000 distinct memories over 4 owners × 2 stores × 5 categories …
        cursor.execute(
            """
            INSERT INTO knowledge_memory (owner_id, store, text, key, tier, category, confidence, status,
                queue_reason, status_reason, stale, stale_reason, pinned, content_hash, version, replaces,
                author_kind, author_name, run_id, event_id, embedding_model, created_at, updated_at)
            SELECT (%s::bigint[])[1 + i %% 4], CASE WHEN i %% 3 = 0 THEN 'self' ELSE 'shared' END,
                   'Customer ' || i || ' prefers ' || (ARRAY['e-mail','phone','chat','letters'])[1 + i %% 4]
                       || ' for updates about ticket INC-' || (i * 7) %% 100000,
                   '', 'semantic', (ARRAY['person_fact','procedure','workspace_note','preference','lesson'])[1 + i %% 5],
                   0.8, 'active', '', '', false, '', false, md5(i::text), 1, '[]', 'agent', 'bench', '', '', '',
                   now() - (i || ' minutes')::interval, now()
            FROM generate_series(1, %s) AS i
            """,
            [ids, TOTAL - DUPLICATES],
        )
        # … and 10,000 copies of some of them, told with different case and spacing.
        cursor.execute(
            """
            INSERT INTO knowledge_memory (owner_id, store, text, key, tier, category, confidence, status,
                queue_reason, status_reason, stale, stale_reason, pinned, content_hash, version, replaces,
                author_kind, author_name, run_id, event_id, embedding_model, created_at, updated_at)
            SELECT owner_id, store,
                   CASE WHEN n %% 2 = 0 THEN upper(text) ELSE '  ' || replace(text, ' ', '   ') END,
                   key, tier, category, confidence, status, queue_reason, status_reason, stale, stale_reason,
                   pinned, md5('dup' || n), 1, replaces, author_kind, author_name, run_id, event_id, '',
                   now() - (n || ' seconds')::interval, now()
            FROM (SELECT m.*, row_number() OVER (ORDER BY m.id) AS n FROM knowledge_memory m
                  WHERE m.owner_id = ANY(%s) ORDER BY m.id LIMIT %s) AS src
            """,
            [ids, DUPLICATES],
        )
        # Every memory rests on one source, so folding merges provenance too.
        cursor.execute(
            """
            INSERT INTO knowledge_memorysource (memory_id, kind, ref, fingerprint, created_at)
            SELECT id, 'conversation', id::text, '', now() FROM knowledge_memory WHERE owner_id = ANY(%s)
            """,
            [ids],
        )
        cursor.execute("ANALYZE knowledge_memory; ANALYZE knowledge_memorysource")


def run(report) -> None:
    from knowledge.models import Memory
    from knowledge.principal import Principal
    from memory.consolidation import consolidation_run, plan_revert

    seed()
    actor = Principal.system("bench")
    active = Memory.objects.filter(status="active").count()
    with override_settings(BRAIN_MODEL_BASE_URL="", BRAIN_MODEL=""):
        start = time.perf_counter()
        plan = consolidation_run(actor=actor, mode="apply")
        elapsed = time.perf_counter() - start
    folded = plan.counts.get("duplicates_folded", 0)
    assert plan.state == "applied", plan.state
    assert folded == DUPLICATES, folded
    report(
        "consolidation run, 100k active memories (10 % duplicates, no model), apply mode",
        elapsed,
        "s",
        target="≤ 10 s",
        note=f"{active:,} active; {folded:,} folded into {plan.counts['duplicate_groups']:,} kept memories, sources merged",
    )
    start = time.perf_counter()
    plan_revert(actor=actor, plan_id=plan.pk)
    report(
        "consolidation revert of that plan",
        time.perf_counter() - start,
        "s",
        note="every memory's status, reasons, validity, update time and sources put back",
    )
    assert Memory.objects.filter(status="active").count() == active
