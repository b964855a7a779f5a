"""The reconciler: dedup precision/recall on the labelled pair set (bench/data/dedup_pairs.json,
real ONNX embedder) at several θ, with and without the code guards; the link floor against
unrelated pairs; whether a linked neighbour of the winner in recall's places helps; and one
pass over one agent holding 20,000 active memories (apply mode), in seconds and SQL statements
per memory.

The 20,000 memories get synthetic unit vectors (embedding them would time the embedder, not the
reconciler): 10 % are near copies (same text, vector + small noise) of others, 1,000 are
episodic memories of 20 conversations past their expiry (→ 20 session digests), and every
long-term memory is new, so the pass links its newest LINK_BATCH."""

import time

import numpy as np
from django.db import connection
from django.test.utils import override_settings

from bench.dedup_eval import THETAS, load_pairs, pair_cosines, precision_recall
from knowledge.memories.guard import writes_memory_rows as memory_rows_guarded

TOTAL = 20_000
COPIES = TOTAL // 10
EPISODIC = 1_000
CONVERSATIONS = 20


def _guarded(scored, pairs):
    from memory.reconciler.dedup import same_statement_guard

    return [
        (c if same_statement_guard(p["a"], p["b"]) else -1.0, same)
        for (c, same), p in zip(scored, pairs, strict=True)
    ]


def dedup_quality(report) -> None:
    from django.conf import settings

    pairs = load_pairs()
    scored = pair_cosines(pairs)
    guarded = _guarded(scored, pairs)
    chosen = settings.BRAIN_RECONCILER_DEDUP_COSINE
    near_misses = sum(1 for p in pairs if not p["same"])
    print(f"   {len(pairs)} pairs ({len(pairs) - near_misses} paraphrases, {near_misses} near misses)")
    print("   θ      cosine only: P / R / false merges      with guards: P / R / false merges")
    for theta in sorted({*THETAS, chosen}):
        p0, r0, f0 = precision_recall(scored, theta)
        p1, r1, f1 = precision_recall(guarded, theta)
        print(
            f"   {theta:.2f}   {p0:.2f} / {r0:.2f} / {f0:2d}                      {p1:.2f} / {r1:.2f} / {f1:2d}"
        )
    p, r, f = precision_recall(guarded, chosen)
    report(
        f"dedup precision at θ={chosen:.2f} (with guards)",
        100 * p,
        "%",
        note=f"{f} of {near_misses} near misses merged",
    )
    report(
        f"dedup recall at θ={chosen:.2f} (with guards)",
        100 * r,
        "%",
        note="also promotion's restatement test",
    )
    p0, r0, _ = precision_recall(scored, chosen)
    report(
        f"dedup precision at θ={chosen:.2f}, cosine only",
        100 * p0,
        "%",
        note=f"recall {r0:.2f}: near misses score like paraphrases",
    )


def link_quality(report) -> None:
    """The floor against unrelated pairs, and recall expansion by links on the pair set: the b
    texts are the memories, each paraphrase's a text a query; a hit is its b in the top 3.
    Expansion puts the winner's best linked neighbour (cosine ≥ floor) in third place."""
    from django.conf import settings

    from knowledge.embeddings.embedder import embed_texts

    pairs = load_pairs()
    a = np.asarray(embed_texts([p["a"] for p in pairs]))
    b = np.asarray(embed_texts([p["b"] for p in pairs]))
    topic = np.arange(len(pairs)) // 2
    cross = (a @ b.T)[topic[:, None] != topic[None, :]]
    floor = settings.BRAIN_RECONCILER_LINK_FLOOR
    report(
        "link floor: unrelated pairs above it",
        100 * float((cross >= floor).mean()),
        "%",
        note=f"floor {floor:.2f}; unrelated p99.9 {np.percentile(cross, 99.9):.2f}, related p5 {np.percentile((a * b).sum(1), 5):.2f}",
    )
    links = b @ b.T
    np.fill_diagonal(links, -1)
    plain = expanded = 0
    queries = [n for n, p in enumerate(pairs) if p["same"]]
    for n in queries:
        order = [int(i) for i in np.argsort(-(b @ a[n]))]
        plain += n in order[:2]
        # the same two places: the winner and its best link (when above the floor), else the 2nd hit
        neighbour = int(np.argmax(links[order[0]]))
        second = neighbour if links[order[0], neighbour] >= floor else order[1]
        expanded += n in (order[0], second)
    report(
        "recall hit@2 without link expansion",
        100 * plain / len(queries),
        "%",
        note=f"{len(queries)} paraphrase queries over {len(pairs)} memories",
    )
    report(
        "recall hit@2 with link expansion",
        100 * expanded / len(queries),
        "%",
        note="2nd place taken by the winner's best link; recall does not expand through links",
    )


@memory_rows_guarded  # seeding through the one writer's door (knowledge.memories.guard)
def seed(owner, conversations) -> None:
    rng = np.random.default_rng(7)
    base = TOTAL - COPIES - EPISODIC
    # Topics of 10 memories each, members at cosine ≈ 0.6 (above the link floor, below θ).
    centres = rng.standard_normal((base // 10 + 1, 384)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.standard_normal((base, 384)).astype(np.float32)
    noise *= 0.8 / np.linalg.norm(noise, axis=1, keepdims=True)
    vectors = centres[np.arange(base) // 10] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    copies = vectors[:COPIES] + 0.02 * rng.standard_normal((COPIES, 384)).astype(np.float32)
    copies /= np.linalg.norm(copies, axis=1, keepdims=True)
    episodic = rng.standard_normal((EPISODIC, 384)).astype(np.float32)
    episodic /= np.linalg.norm(episodic, axis=1, keepdims=True)

    def lit(m):
        return ["[" + ",".join(f"{x:.5f}" for x in row) + "]" for row in m]

    with connection.cursor() as cursor:
        common = """INSERT INTO knowledge_memory (owner_id, store, text, key, tier, category, confidence, status,
                queue_reason, status_reason, stale, stale_reason, pinned, content_hash, version, replaces,
                author_kind, author_name, run_id, event_id, embedding, embedding_model, created_at, updated_at,
                expires_at, conversation_id, turn)"""
        cursor.execute(
            common
            + """ SELECT %s, 'shared', 'Customer ' || i || ' prefers contact by ' || (ARRAY['e-mail','phone','chat'])[1 + i %% 3],
                   '', 'semantic', '', 0.8, 'active', '', '', false, '', false, md5(i::text), 1, '[]', 'agent', 'bench',
                   '', '', v::vector, 'bench', now() - (i || ' seconds')::interval, now(), NULL, NULL, NULL
            FROM unnest(%s::text[]) WITH ORDINALITY AS t(v, i)""",
            [owner.pk, lit(vectors)],
        )
        cursor.execute(
            common
            + """ SELECT %s, 'shared', 'Customer ' || i || ' prefers contact by ' || (ARRAY['e-mail','phone','chat'])[1 + i %% 3],
                   '', 'semantic', '', 0.5, 'active', '', '', false, '', false, md5('c' || i), 1, '[]', 'agent', 'bench',
                   '', '', v::vector, 'bench', now(), now(), NULL, NULL, NULL
            FROM unnest(%s::text[]) WITH ORDINALITY AS t(v, i)""",
            [owner.pk, lit(copies)],
        )
        cursor.execute(
            common
            + """ SELECT %s, 'shared', 'In this session the customer mentioned order ' || i,
                   '', 'episodic', '', 0.7, 'active', '', '', false, '', false, md5('e' || i), 1, '[]', 'agent', 'bench',
                   '', '', v::vector, 'bench', now() - interval '4 days', now(), now() - interval '1 hour',
                   (%s::bigint[])[1 + i %% %s], i
            FROM unnest(%s::text[]) WITH ORDINALITY AS t(v, i)""",
            [owner.pk, [c.pk for c in conversations], len(conversations), lit(episodic)],
        )
        cursor.execute("ANALYZE knowledge_memory")


def reconciler_pass(report) -> None:
    from knowledge.models import Channel, Conversation, Memory
    from knowledge.principal import Principal
    from knowledge.principals import services
    from memory.consolidation import plan_revert
    from memory.models import ReconcilerRun
    from memory.reconciler.find import LINK_BATCH
    from memory.reconciler.services import reconciler_run

    actor = Principal.system("bench")
    owner = services.agent_create(actor=actor, name="bench-reconciler")
    channel = Channel.objects.create(name="bench-reconciler", kind=Channel.KIND_SHARED)
    conversations = [
        Conversation.objects.create(
            agent=owner, channel=channel, read_stores=["shared"], write_store="shared"
        )
        for _ in range(CONVERSATIONS)
    ]
    seed(owner, conversations)
    statements = 0

    def count(execute, sql, params, many, context):
        nonlocal statements
        statements += 1
        return execute(sql, params, many, context)

    with override_settings(BRAIN_MODEL_BASE_URL="", BRAIN_MODEL=""):
        from memory.reconciler.find import reconcile_find

        start = time.perf_counter()
        reconcile_find(owner_id=owner.pk, actor=actor)
        report(
            "reconciler pass: finding alone (reads and numpy, no writes)", time.perf_counter() - start, "s"
        )
    with override_settings(BRAIN_MODEL_BASE_URL="", BRAIN_MODEL=""), connection.execute_wrapper(count):
        start = time.perf_counter()
        run = reconciler_run(actor=actor, agent=owner, trigger=ReconcilerRun.MANUAL, mode="apply")
        elapsed = time.perf_counter() - start
    counts = run.counts
    assert run.plan.state == "applied", (run.plan.state, run.plan.error)
    assert counts.get("digests") == CONVERSATIONS, counts
    report(
        f"reconciler pass, one agent with {TOTAL:,} memories, apply mode",
        elapsed,
        "s",
        note=(
            f"{counts.get('vector_duplicates_folded', 0):,} vector duplicates folded, {counts.get('digested', 0):,} "
            f"episodic → {counts.get('digests', 0)} digests, {counts.get('links', 0):,} links for the newest "
            f"{LINK_BATCH:,}; no model"
        ),
    )
    report(
        "reconciler pass: SQL statements per 1,000 memories",
        1000 * statements / TOTAL,
        "statements",
        note=f"{statements:,} in all: set-wise, not per memory",
    )
    start = time.perf_counter()
    plan_revert(actor=actor, plan_id=run.plan_id)
    report("reconciler pass: exact revert of its plan", time.perf_counter() - start, "s")
    assert Memory.objects.filter(owner=owner, status="active").count() == TOTAL


def run(report) -> None:
    dedup_quality(report)
    link_quality(report)
    reconciler_pass(report)
