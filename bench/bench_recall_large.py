"""Recall at 100,000 and 1,000,000 messages (`make bench-large`, outside CI): one world, built
and grown by this command, timed at each size, with the 1M / 100k ratio of p95 at k=10 and k=50.

The world of bench_recall at ten times its size (200,000 memories, 50,000 entries at 1M). Its
ingest is timed stage by stage and reported: the first BRAIN_BENCH_LARGE_API messages (50,000)
go through POST /api/messages (in-process client, embedding deferred); the rest are inserted
set-wise, one INSERT … SELECT FROM unnest(…) per 50,000 rows (the search column and keyword
statistics kept by the same generated column and trigger as any insert). The embedding backlog
(the worker's job, run here) embeds for BRAIN_BENCH_LARGE_EMBED_SECONDS (300); every text still
without a vector then gets a noisy copy of an embedded one of its kind, and the HNSW indexes
are built once. Those vectors time searches truthfully (the index, the filters, the rows read)
but say nothing of recall quality. Embedding all 1,000,000 messages through the worker would
take about 3 hours here (98 messages/s end to end in the recorded run): `make bench-large` times
20,000 end to end instead (`bench ingest`). At the largest size memories and messages written
through the API must be found by the next vector-route search on the HNSW path, or the command
fails.

BRAIN_BENCH_LARGE_MESSAGES (default 1,000,000) ends at another size; BRAIN_BENCH_LARGE_SIZES
(default 100,000, comma-separated) are the smaller points the world is timed at first."""

import os
import random
import time
from contextlib import contextmanager
from datetime import timedelta

from django.db import connection
from django.test import override_settings
from django.utils import timezone

from bench import bench_recall as B
from bench.recall_seed import ACTOR, analyze, reset_recall_tables
from bench.textgen import FIRST, TextGen
from bench.vector_path import HNSW_INDEXES, vector_path
from knowledge.embeddings import embedder as embeddings
from knowledge.embeddings.backlog import message_own_text, run_backlog
from knowledge.models import Channel, Conversation, Memory, Person
from knowledge.principal import Principal
from knowledge.principals import services
from memory.recall import resolve_scope
from memory.recall import routes as R
from memory.recall.params import VECTOR_EPISODES, VECTOR_KNOWLEDGE
from memory.recall.routes import vector_literal

TOTAL = int(os.environ.get("BRAIN_BENCH_LARGE_MESSAGES", "1000000"))
THROUGH_API = min(int(os.environ.get("BRAIN_BENCH_LARGE_API", "50000")), TOTAL)
EMBED_SECONDS = float(os.environ.get("BRAIN_BENCH_LARGE_EMBED_SECONDS", "300"))
# The curve's points (messages): one world grown through them, the searches timed at each; the
# largest over the first is the scaling figure (BRAIN_BENCH_LARGE_SIZES, comma-separated).
SIZES = sorted(
    {TOTAL}
    | {
        int(size)
        for size in os.environ.get("BRAIN_BENCH_LARGE_SIZES", "100000").split(",")
        if size.strip() and int(size) < TOTAL
    }
)
CHUNK = 50_000


def _insert_messages(channels, gen, rng, first: int, total: int) -> None:
    """Messages first..total-1, set-wise, spread over the benchmark's days, with the stores and
    speakers the API gave the first ones in the same channels (the rule message_ingest applies)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT ON (channel_id) channel_id, store, posted_by FROM knowledge_message "
            "ORDER BY channel_id, id"
        )
        known = {c: (store, posted) for c, store, posted in cursor.fetchall()}
    weights = [8 if c.kind == Channel.KIND_SHARED else 1 for c in channels]
    usable = [(c, w) for c, w in zip(channels, weights, strict=True) if c.pk in known]
    picks, picked_weights = [c for c, _ in usable], [w for _, w in usable]
    people = dict(Person.objects.values_list("name", "pk"))  # the speakers the API created
    now = timezone.now()
    for start in range(first, total, CHUNK):
        cols: dict[str, list] = {
            k: [] for k in ("channel", "thread", "store", "person", "speaker", "text", "ts", "ext", "by")
        }
        for i in range(start, min(start + CHUNK, total)):
            channel = rng.choices(picks, picked_weights)[0]
            store, posted = known[channel.pk]
            cols["channel"].append(channel.pk)
            cols["thread"].append(f"t{channel.pk}-{rng.randrange(40)}" if rng.random() < 0.15 else "")
            cols["store"].append(store)
            speaker = gen.speaker()
            if speaker not in people:
                speaker = next(iter(people))
            cols["person"].append(people[speaker])
            cols["speaker"].append(speaker)
            cols["text"].append(gen.message())
            span = (i - first) / (total - first)  # each call's messages cover all DAYS
            cols["ts"].append(now - timedelta(days=B.DAYS * (1 - span), minutes=rng.random() * 60))
            cols["ext"].append(f"m-{i}")
            cols["by"].append(posted)
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO knowledge_message (channel_id, thread, store, speaker_person_id, speaker_name, text, ts, "
                "external_id, posted_by, learn, created_at) "
                "SELECT *, true, now() FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::bigint[], %s::text[], "
                "%s::text[], %s::timestamptz[], %s::text[], %s::text[])",
                [
                    cols[k]
                    for k in ("channel", "thread", "store", "person", "speaker", "text", "ts", "ext", "by")
                ],
            )


def _embed_message_sample(model: str, size: int = 2000) -> int:
    """When the backlog embedded no message yet (a loaded machine), `size` messages are embedded
    now (their own words, message_own_text, without the turn before: timing only), so the noisy
    copies start from real message vectors."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_messagevector WHERE model = %s", [model])
        if cursor.fetchone()[0]:
            return 0
        cursor.execute(
            "SELECT id, speaker_name, text FROM knowledge_message ORDER BY random() LIMIT %s", [size]
        )
        rows = cursor.fetchall()
    vectors = embeddings.embed_texts([message_own_text(speaker, text) for _, speaker, text in rows])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_messagevector (message_id, model, embedding) "
            "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::vector[])",
            [[r[0] for r in rows], [model] * len(rows), [vector_literal(v) for v in vectors]],
        )
    return len(rows)


def _fill_vectors() -> int:
    """Every message and memory without a vector of the current model gets one: the vector of an
    embedded row of the same kind (picked by id) plus noise of ±0.01 per dimension, normalised.
    The HNSW indexes are dropped first and built again after (one build instead of a million
    inserts). Returns the vectors written."""
    model, message_model = embeddings.model_name(), embeddings.message_model_name()
    written = _embed_message_sample(message_model)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(%s)", [list(HNSW_INDEXES)]
        )
        definitions = cursor.fetchall()
        for name, _ in definitions:
            cursor.execute(f"DROP INDEX {name}")
        noisy = (
            "l2_normalize((SELECT array_agg(x + (random() - 0.5) * 0.02 ORDER BY n) "
            "FROM unnest(s.embedding::real[]) WITH ORDINALITY u(x, n))::vector)"
        )
        cursor.execute(
            "CREATE TEMP TABLE sample_vec AS SELECT row_number() OVER () - 1 AS n, embedding "
            "FROM knowledge_messagevector WHERE model = %s",
            [message_model],
        )
        cursor.execute(
            f"INSERT INTO knowledge_messagevector (message_id, model, embedding) "
            f"SELECT m.id, %s, {noisy} FROM knowledge_message m "
            f"JOIN sample_vec s ON s.n = mod(m.id, (SELECT count(*) FROM sample_vec)) "
            f"WHERE NOT EXISTS (SELECT 1 FROM knowledge_messagevector v WHERE v.message_id = m.id)",
            [message_model],
        )
        written += cursor.rowcount
        cursor.execute(
            "CREATE TEMP TABLE sample_mem AS SELECT row_number() OVER () - 1 AS n, embedding "
            "FROM knowledge_memory WHERE embedding_model = %s",
            [model],
        )
        cursor.execute(
            f"UPDATE knowledge_memory m SET embedding = {noisy}, embedding_model = %s FROM sample_mem s "
            f"WHERE s.n = mod(m.id, (SELECT count(*) FROM sample_mem)) AND m.embedding_model <> %s",
            [model, model],
        )
        written += cursor.rowcount
        cursor.execute("DROP TABLE sample_vec, sample_mem")
        cursor.execute("SET maintenance_work_mem = '2GB'")
        for _, definition in definitions:
            cursor.execute(definition)
    return written


class Clock:
    """The world's build, stage by stage: printed as it goes, summed for the figures."""

    def __init__(self):
        self.stages: list[tuple[str, float]] = []
        self.t = time.perf_counter()

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        self.stages.append((name, now - self.t))
        print(f"   {name}: {now - self.t:.0f} s", flush=True)
        self.t = now

    def since(self, first: int) -> tuple[float, str]:
        """Seconds of the stages from index `first` on (timing stages excluded), and their list."""
        own = [(n, s) for n, s in self.stages[first:] if not n.startswith("searches")]
        return sum(s for _, s in own), "; ".join(f"{n} {s:,.0f} s" for n, s in own)


@contextmanager
def _newest_rows(n: int):
    kept = R.NEWEST_ROWS
    R.NEWEST_ROWS = n
    try:
        yield
    finally:
        R.NEWEST_ROWS = kept


def _read_your_writes(report, copilot, integration, channels, gen, rng) -> bool:
    """At the largest size: a trusted agent writes memories into the shared store and the
    integration posts messages into a shared channel, through the API, two of each: one in the
    world's own style (a generated text with a token of its own) and one unlike anything stored
    (the token and random words: an outlier, the hard case for a graph index). The backlog
    embeds them; the copilot's next vector-route search for each text (a conversation in that
    channel: a scope far over EXACT_MAX_ROWS) must find it, and the statement must have answered
    through HNSW (bench.vector_path)."""
    channel = next(
        c for c in channels if c.kind == Channel.KIND_SHARED and c.memory_scope == Channel.SCOPE_SHARED
    )
    conversation = Conversation.objects.get(agent=copilot, channel=channel)
    scribe = services.agent_create(actor=ACTOR, name="scribe", trusted=True)
    words = ["amber", "harbour", "violin", "glacier", "orchard", "lantern", "falcon", "meadow", "quartz"]
    texts, ids = {}, {}
    writer, poster = B._client(B._token(agent=scribe)), B._client(B._token(integration=integration))
    for kind in ("memory", "message"):
        for style in ("in style", "outlier"):
            token = f"zq{rng.randrange(16**10):010x}"
            own = gen.memory() if kind == "memory" else gen.message()
            text = f"{own} {token}" if style == "in style" else f"{token} {' '.join(rng.sample(words, 6))}"
            if kind == "memory":
                response = writer.post("/api/memory", {"scope": "shared", "text": text}, format="json")
            else:
                row = {"channel": channel.name, "speaker": FIRST[0], "text": text}
                response = poster.post("/api/messages", row, format="json")
            assert response.status_code == 201, response.content[:300]
            texts[kind, style], ids[kind, style] = text, response.json()["id"]
    t0 = time.perf_counter()
    run_backlog(max_seconds=120)
    embed_ms = (time.perf_counter() - t0) * 1000
    searcher = B._client(B._token(agent=copilot))
    scope = resolve_scope(Principal.for_agent(copilot), agent=copilot, conversation=conversation)
    outcome = {}
    for (kind, style), text in texts.items():
        route = VECTOR_KNOWLEDGE if kind == "memory" else VECTOR_EPISODES
        body = {"agent": "copilot", "conversation": conversation.pk, "q": text, "k": 10, "routes": [route]}
        response = searcher.post("/api/memory/search", body, format="json")
        assert response.status_code == 200, response.content[:300]
        found = any(r["kind"] == kind and r["id"] == ids[kind, style] for r in response.json()["results"])
        path, _ = vector_path(scope, route, text)
        with _newest_rows(0):  # the index part alone: would the graph have found it?
            _, alone = vector_path(scope, route, text)
        outcome[f"{kind} {style}"] = (found, path, ids[kind, style] in alone)
    passed = all(found and path == "hnsw" for found, path, _ in outcome.values())
    print(f"   read-your-writes on the HNSW path: {'PASS' if passed else 'FAIL'} {outcome}", flush=True)
    report(
        f"at {TOTAL // 1000:,}k messages: read your writes through HNSW",
        "PASS" if passed else "FAIL",
        "",
        target="PASS",
        note="memories (trusted agent, shared store) and messages (shared channel) written through the API, "
        f"embedded by the backlog ({embed_ms:,.0f} ms), then one vector-route search each from a conversation "
        "in that channel: "
        + ", ".join(
            f"{k} {'found' if f else 'MISSED'} via {p} (by the index alone: {'yes' if a else 'no'})"
            for k, (f, p, a) in outcome.items()
        )
        + " (the part of the statement that answered, by EXPLAIN ANALYZE; without the newest rows "
        "searched exactly, routes.NEWEST_ROWS)",
    )
    return passed


def _stage_growth(top: dict, base: dict) -> str:
    """Each Server-Timing stage's p95 at both sizes, the stages that grew most first."""
    names = sorted(top, key=lambda n: base.get(n, (0, 0))[1] - top[n][1])
    return ", ".join(
        f"{n} {top[n][1]:.1f} / {base[n][1]:.1f}" if n in base else f"{n} {top[n][1]:.1f} / –" for n in names
    )


def run(report):
    rng = random.Random(2027)
    gen = TextGen(2027)
    label = f"at {TOTAL // 1000:,}k messages: "
    clock = Clock()
    reset_recall_tables()
    copilot, integration, channels = B._world(rng)
    first = SIZES[0]
    through_api = min(THROUGH_API, first)
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        B._ingest(
            report, B._client(B._token(integration=integration)), channels, gen, rng, through_api, label
        )
    clock.stage(f"{through_api:,} messages through POST /api/messages")
    _insert_messages(channels, gen, rng, through_api, first)
    B._knowledge(copilot, channels, gen, rng, first // 5, first // 20)
    clock.stage(
        f"{first - through_api:,} messages set-wise, {first // 5:,} memories, {first // 20:,} entries"
    )
    sample = [m.text for m in Memory.objects.all()[:4000]]
    t0 = time.perf_counter()
    embeddings.embed_texts(sample)
    model_only = len(sample) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    done = run_backlog(max_seconds=EMBED_SECONDS)
    embedded = sum(v for v in done.values() if isinstance(v, int))
    report(
        f"{label}embedding backlog throughput",
        embedded / (time.perf_counter() - t0),
        "texts/s",
        note=f"{embedded:,} texts in {EMBED_SECONDS:.0f} s into HNSW-indexed columns holding the rows "
        f"before them; the model alone: {model_only:,.0f} texts/s",
    )
    clock.stage(f"embedding backlog ({embedded:,} texts embedded by the model)")
    figures: dict[int, dict] = {}
    held, held_before, filled, start = first, first, 0, 0
    for size in SIZES:  # one world, grown through the curve's points
        if size > held:
            _insert_messages(channels, gen, rng, held, size)
            B._knowledge(copilot, channels, gen, rng, (size - held) // 5, (size - held) // 20)
            clock.stage(f"grown to {size:,} messages set-wise")
        written = _fill_vectors()
        filled += written
        clock.stage(f"{written:,} vectors filled set-wise, HNSW indexes built")
        analyze()
        clock.stage("VACUUM ANALYZE")
        seconds, stages = clock.since(start)
        report(
            f"at {size // 1000:,}k messages: the world {'built' if size == first else f'grown from {held_before:,}'}",
            seconds / 60,
            "min",
            note=stages,
        )
        figures[size] = B.http_figures(report, copilot, gen, rng, f"at {size // 1000:,}k messages: ")
        clock.stage(f"searches at {size:,}")
        start, held_before, held = len(clock.stages), size, size
    total, _ = clock.since(0)
    report(
        f"{label}the world's ingest in all",
        total / 60,
        "min",
        note=f"{through_api:,} messages through POST /api/messages (in-process client, embedding deferred), "
        f"{TOTAL - through_api:,} set-wise; {embedded:,} texts embedded by the backlog (the worker's job, "
        f"run in this process), {filled:,} vectors filled set-wise (noisy copies of embedded ones); "
        "the searches' own time left out",
    )
    if len(SIZES) > 1:
        top, base = SIZES[-1], SIZES[0]
        for k in (10, 50):
            report(
                f"memory_search k={k} p95 (HTTP) at {top // 1000:,}k / at {base // 1000:,}k messages",
                figures[top][k][1] / figures[base][k][1],
                "×",
                target="≤ 1.3" if k == 10 else "",
                note=f"{figures[top][k][1]:.1f} / {figures[base][k][1]:.1f} ms (p50 {figures[top][k][0]:.1f} / "
                f"{figures[base][k][0]:.1f} ms), one world grown from {base:,} to {top:,} messages; "
                "Server-Timing p95 by stage, ms at the larger / the smaller size: "
                + _stage_growth(figures[top]["stages"][k], figures[base]["stages"][k]),
            )
    _read_your_writes(report, copilot, integration, channels, gen, rng)  # a FAIL row: `bench` exits 1
