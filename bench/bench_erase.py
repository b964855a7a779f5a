"""Forgetting a person (issue 60): erase one person with 10,000 messages (half in their direct
messages, half said in a shared channel) and 2,000 private memories, plus 1,000 shared memories
distilled from their DMs (erased with them) and 500 that also cite someone else (back to review),
among 20,000 messages and 5,000 memories of other people. One transaction; target ≤ 10 s. Also
checks that recall for a query that never matched the person ranks the same before and after."""

import time

from django.db import connection

from knowledge.erasure.services import erasure_apply
from knowledge.memories.guard import memory_rows_guard
from knowledge.models import Agent, Channel, Person
from knowledge.principal import Principal

MESSAGES, MEMORIES, DERIVED, SUPPORTED = 10_000, 2_000, 1_000, 500
OTHER_MESSAGES, OTHER_MEMORIES = 20_000, 5_000
ADMIN = Principal(kind="person", name="bench-admin", role="admin")


def _memories(cursor, agent, store: str, text: str, n: int) -> None:
    cursor.execute(
        """
        INSERT INTO knowledge_memory (owner_id, store, text, key, tier, category, confidence, status,
            queue_reason, status_reason, stale, stale_reason, pinned, content_hash, version, replaces,
            author_kind, author_name, run_id, event_id, embedding_model, created_at, updated_at)
        SELECT %s, %s, %s || ' ' || g, '', 'semantic', 'note', 1, 'active', '', '', false, '',
               false, md5(%s || g), 1, '[]', 'agent', 'bench', '', '', '', now(), now()
        FROM generate_series(1, %s) g
        """,
        [agent.pk, store, text, store, n],
    )


def seed():
    agent = Agent.objects.create(name="bench-erase")
    alice, bob = Person.objects.create(name="alice"), Person.objects.create(name="bob")
    dm = Channel.objects.create(name="dm-alice", kind=Channel.KIND_DM, person=alice, agent=agent)
    general = Channel.objects.create(name="general")
    # Rows are seeded set-wise through the one writer's door (knowledge.memories.guard).
    with memory_rows_guard(), connection.cursor() as c:
        for channel, person, store, n, words in (
            (dm, alice, "private:alice", MESSAGES // 2, "alice private badge locker"),
            (general, alice, "shared", MESSAGES // 2, "alice says the printer toner"),
            (general, bob, "shared", OTHER_MESSAGES, "bob reports the vpn client timeout"),
        ):
            c.execute(
                """
                INSERT INTO knowledge_message (channel_id, thread, store, speaker_person_id, speaker_name,
                    text, ts, posted_by, learn, created_at)
                SELECT %s, '', %s, %s, %s, %s || ' ' || g, now() - make_interval(secs => g), 'system:bench',
                       true, now()
                FROM generate_series(1, %s) g
                """,
                [channel.pk, store, person.pk, person.name, words, n],
            )
        _memories(c, agent, "private:alice", "alice keeps her locker code", MEMORIES)
        _memories(c, agent, "shared", "distilled from alice's dm about the badge", DERIVED)
        _memories(c, agent, "shared", "the printer toner is on floor two", SUPPORTED)
        _memories(c, agent, "shared", "bob's vpn client times out after the update", OTHER_MEMORIES)
        # Sources: the distilled memories cite one DM message each; the supported ones cite one
        # of alice's shared messages and one of bob's.
        c.execute(
            """
            WITH d AS (SELECT id, row_number() OVER (ORDER BY id) r FROM knowledge_memory WHERE text LIKE 'distilled%%'),
                 m AS (SELECT id, row_number() OVER (ORDER BY id) r FROM knowledge_message WHERE channel_id = %s)
            INSERT INTO knowledge_memorysource (memory_id, kind, ref, fingerprint, snapshot, state, created_at)
            SELECT d.id, 'message', m.id::text, '', jsonb_build_object('text', 'alice dm'), 'unchanged', now()
            FROM d JOIN m ON m.r = d.r
            """,
            [dm.pk],
        )
        for speaker in (alice, bob):
            c.execute(
                """
                WITH d AS (SELECT id, row_number() OVER (ORDER BY id) r FROM knowledge_memory WHERE text LIKE 'the printer%%'),
                     m AS (SELECT id, row_number() OVER (ORDER BY id) r FROM knowledge_message
                           WHERE channel_id = %s AND speaker_person_id = %s)
                INSERT INTO knowledge_memorysource (memory_id, kind, ref, fingerprint, snapshot, state, created_at)
                SELECT d.id, 'message', m.id::text, '', NULL, 'unchanged', now() FROM d JOIN m ON m.r = d.r
                """,
                [general.pk, speaker.pk],
            )
        # Each memory's written event and its revision (the copies of its text an erasure scrubs).
        c.execute(
            """
            WITH e AS (
                INSERT INTO knowledge_auditevent (action, actor_kind, actor_name, store, owner, object_type,
                    object_ids, reason, counts, data, batch_id, request_id, created_at)
                SELECT 'memory.written', 'agent', 'bench', store, 'bench-erase', 'memory', jsonb_build_array(id::text),
                       '', '{}', jsonb_build_object('memory', id), gen_random_uuid(), '', now()
                FROM knowledge_memory RETURNING id, (data->>'memory')::bigint AS memory_id
            )
            INSERT INTO knowledge_revision (event_id, object_type, object_id, before, after)
            SELECT e.id, 'memory', e.memory_id::text, NULL, jsonb_build_object('text', m.text, 'status', m.status)
            FROM e JOIN knowledge_memory m ON m.id = e.memory_id
            """
        )
        c.execute("ANALYZE")
    return agent, general


def _ranking(agent, channel) -> list:
    from memory.recall import memory_search, resolve_scope

    scope = resolve_scope(Principal.system("bench"), agent=agent, channel=channel)
    out = memory_search(scope, q="vpn client timeout after the update", k=10)
    return [(i.candidate.kind, i.candidate.id) for i in out.items]


def run(report) -> None:
    agent, general = seed()
    before = _ranking(agent, general)
    preview_start = time.perf_counter()
    preview = erasure_apply(actor=ADMIN, kind="person", ref="alice", reason="bench", dry_run=True)
    preview_s = time.perf_counter() - preview_start
    start = time.perf_counter()
    result = erasure_apply(actor=ADMIN, kind="person", ref="alice", reason="bench")
    spent = time.perf_counter() - start
    counts = result.plan.counts()
    report(
        "erase a person: 10k messages, 2k private memories, 1.5k citing",
        spent,
        "s",
        target="≤ 10 s",
        note=f"{counts['messages']:,} messages, {counts['memories']:,} memories "
        f"({counts['derived_memories']:,} derived), {counts['requeued_memories']:,} back to review; one transaction",
    )
    report(
        "erase a person: the dry run's preview", preview_s, "s", target="", note=str(preview.plan.counts())
    )
    after = _ranking(agent, general)
    report(
        "recall for others unchanged",
        100.0 * (before == after),
        "%",
        target="100 %",
        note=f"the same {len(after)} results in the same order" if before == after else f"{before} → {after}",
    )
