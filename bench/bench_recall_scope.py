"""A small scope costs the same whatever else the database holds: one channel-only channel's
searches over HTTP, timed alone, then again after 100,000 messages land in other channels.

The channel (2,000 messages, posted through the API and embedded by the backlog) is what a team's
project channel or a benchmark's conversation is; the other channels' messages are inserted
set-wise with noisy copies of real vectors (bench_recall_large: timing, not quality), then
VACUUM ANALYZE. The same questions are asked in the same order both times and the answers
compared: they may differ, since a word's rarity (BM25's idf) is counted over the whole corpus,
which the other channels change."""

import random
import statistics
import time
from datetime import timedelta

from django.db import connection
from django.test import override_settings
from django.utils import timezone

from bench import bench_recall as B
from bench.bench_recall_large import _fill_vectors, _insert_messages
from bench.recall_seed import ACTOR, agent, analyze, reset_recall_tables
from bench.textgen import TextGen, question
from knowledge.conversations import services as messages
from knowledge.embeddings.backlog import run_backlog
from knowledge.models import Channel, Integration
from knowledge.principals import services

OWN = 2_000
OTHERS = 100_000
QUERIES = 200


def _timed(raw: str, conversation, questions: list[str]) -> tuple[list[float], list[list]]:
    """p50-able timings and the result ids of each question, over HTTP (bench_recall's server)."""
    import httpx

    from bench.bench_load import _start_server
    from bench.bench_memory_write import _free_port

    port = _free_port()
    server = _start_server(port)
    timings, answers = [], []
    try:
        headers = {"Authorization": f"Bearer {raw}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as http:
            for i, q in enumerate(questions[:20] + questions):  # the first 20 warm every process
                body = {"agent": "copilot", "conversation": conversation.pk, "q": q, "k": 10}
                t0 = time.perf_counter()
                response = http.post("/api/memory/search", json=body)
                spent = (time.perf_counter() - t0) * 1000
                assert response.status_code == 200, response.content[:500]
                if i >= 20:
                    timings.append(spent)
                    answers.append([(item["kind"], item["id"]) for item in response.json()["results"]])
    finally:
        server.terminate()
        server.wait(timeout=30)
    return timings, answers


def _figures(timings: list[float]) -> tuple[float, float]:
    ordered = sorted(timings)
    return statistics.median(ordered), B._pct(ordered, 0.95)


def run(report):
    rng = random.Random(49)
    gen = TextGen(49)
    reset_recall_tables()
    copilot = agent("copilot")
    integration = Integration.objects.filter(name="slack").first() or services.integration_create(
        actor=ACTOR, name="slack"
    )
    project = messages.channel_open(
        actor=ACTOR, name="project", memory_scope=Channel.SCOPE_CHANNEL, integrations=[integration]
    )
    others = [
        messages.channel_open(actor=ACTOR, name=f"team-{i}", integrations=[integration]) for i in range(20)
    ]
    conversation = messages.conversation_start(actor=ACTOR, agent=copilot, channel=project)
    client = B._client(B._token(integration=integration))
    now = timezone.now()
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        for start in range(0, OWN, B.BATCH):
            rows = [
                {
                    "channel": project.name,
                    "speaker": gen.speaker(),
                    "text": gen.message(),
                    "ts": (now - timedelta(days=B.DAYS * (1 - i / OWN))).isoformat(),
                    "external_id": f"p-{i}",
                }
                for i in range(start, min(start + B.BATCH, OWN))
            ]
            assert client.post("/api/messages", {"messages": rows}, format="json").status_code == 201
        # one message per other channel through the API: the set-wise insert copies its store
        first = [
            {"channel": c.name, "speaker": gen.speaker(), "text": gen.message(), "external_id": "o-0"}
            for c in others
        ]
        assert client.post("/api/messages", {"messages": first}, format="json").status_code == 201
        run_backlog(max_seconds=3600)
    analyze()
    raw = B._token(agent=copilot)
    questions = [question(gen) for _ in range(QUERIES)]
    alone, alone_answers = _timed(raw, conversation, questions)

    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_message")
        before = cursor.fetchone()[0]
    _insert_messages(others, gen, rng, before, before + OTHERS)
    _fill_vectors()
    analyze()
    print(f"   {OTHERS:,} messages in 20 other channels: {time.perf_counter() - t0:.0f} s", flush=True)
    beside, beside_answers = _timed(raw, conversation, questions)

    (a50, a95), (b50, b95) = _figures(alone), _figures(beside)
    same = sum(a == b for a, b in zip(alone_answers, beside_answers, strict=True))
    note = f"{QUERIES} searches in a channel-only channel of {OWN:,} messages, k=10 over HTTP"
    report("small scope alone: search p95", a95, "ms", note=f"p50 {a50:.1f} ms; {note}")
    report(
        f"small scope beside {OTHERS:,} other messages: search p95",
        b95,
        "ms",
        target=f"≤ 1.2 × alone ({1.2 * a95:.1f} ms)",
        note=f"p50 {b50:.1f} ms; ratio p95 {b95 / a95:.2f}, p50 {b50 / a50:.2f}; "
        f"{same} of {QUERIES} answers identical (idf is corpus-wide)",
    )
