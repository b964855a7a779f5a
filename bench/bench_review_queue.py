"""The review queue page with its duplicate and conflict hints: 500 queued memories (the page
shows the oldest 100) among 10,000 active ones, all with vectors, some exact copies, some keyed
with a conflicting active value. Measures the server time of GET /review/ as a reviewer."""

import random
import statistics
import time

import numpy as np

N_ACTIVE = 10_000
N_QUEUED = 500
RENDERS = 40
DIM = 384


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def seed() -> None:
    from django.db import transaction

    from knowledge.memories.rows import memory_row_new
    from knowledge.models import Memory
    from knowledge.principal import Principal
    from knowledge.principals import services

    system = Principal.system("bench")
    agents = [services.agent_create(actor=system, name=f"rq-agent-{i}") for i in range(4)]
    rng, prng = np.random.default_rng(32), random.Random(32)
    active_vectors = _unit(rng, N_ACTIVE)
    rows = []
    for i in range(N_ACTIVE):
        keyed = i % 50 == 0
        memory = memory_row_new(
            owner=agents[i % 4],
            store="shared",
            text=f"Customer {i} prefers contact by e-mail before {8 + i % 10}:00 on weekdays.",
            author_kind="agent",
            author_name=agents[i % 4].name,
            status=Memory.ACTIVE,
            key=f"customer.{i}.contact" if keyed else "",
            value="email" if keyed else None,
        )
        memory.embedding = active_vectors[i]
        rows.append(memory)
    queued_vectors = _unit(rng, N_QUEUED)
    for j in range(N_QUEUED):
        near = j % 5 == 0  # a near-duplicate of an active memory
        source = prng.randrange(N_ACTIVE)
        vector = active_vectors[source] + 0.05 * queued_vectors[j] if near else queued_vectors[j]
        copy = j % 7 == 0
        keyed = j % 10 == 0
        memory = memory_row_new(
            owner=agents[j % 4],
            store="shared",
            text=rows[source].text
            if copy
            else f"Note: {rows[source].text}"
            if near
            else f"Queued note {j}: ticket INC-{j} needs a follow-up call.",
            author_kind="agent",
            author_name=agents[j % 4].name,
            status=Memory.QUEUED,
            queue_reason="new",
            key=f"customer.{(j // 10) * 50}.contact" if keyed else "",
            value="phone" if keyed else None,
        )
        memory.embedding = vector / np.linalg.norm(vector)
        rows.append(memory)
    with transaction.atomic():
        Memory.objects.bulk_create(rows, batch_size=2000)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE knowledge_memory")


def run(report):
    from django.test import Client

    from knowledge.principal import Principal
    from knowledge.principals import services

    start = time.perf_counter()
    seed()
    seeded = time.perf_counter() - start
    user = services.consoleuser_create(
        actor=Principal.system("bench"), username="rq-reviewer", role="reviewer", password="x" * 12
    )
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    for _ in range(3):  # warm the templates and the connection
        assert client.get("/review/").status_code == 200
    times = []
    for _ in range(RENDERS):
        t = time.perf_counter()
        response = client.get("/review/")
        times.append((time.perf_counter() - t) * 1000)
        assert response.status_code == 200
    body = response.content.decode()
    exact, near = body.count('class="dup exact"'), body.count('class="dup near"')
    conflicts = body.count("Conflicts with")
    times.sort()
    report(
        "review queue page, 500 queued (100 shown) among 10k active, with duplicate hints",
        times[int(len(times) * 0.95)],
        "ms p95",
        target="≤ 300 ms",
        note=f"{RENDERS} renders, p50 {statistics.median(times):.1f} ms; {exact} exact and {near} near "
        f"duplicate hints, {conflicts} conflicts on the page; seeded in {seeded:.0f} s",
    )
