"""The review queue at volume, as a reviewer meets it (server time through the console's views):

1. issue 51: 500 queued memories among 10,000 active ones, all with vectors — some exact copies,
   some near copies, some keyed with a conflicting active value — each card with its duplicate
   hints and the relation finder's related memories: GET /review/ (a page of 10, the default)
   and GET /review/?size=100 (the largest page);
2. issue 53: 4,500 more arrive — a Mem0 export for two people through `import_mem0` (2,500 for
   alice, 500 for bob) and 1,500 writes of an agent loop — so 5,000 wait: the page filtered to
   alice's part of the import;
3. approving everything one filter matches (bob's 500) through /review/all, confirmed with
   its count: every memory through the review service, one audit batch.

The load average goes beside each figure: the machine this runs on is often shared."""

import io
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from knowledge.memories.guard import writes_memory_rows as memory_rows_guarded

N_ACTIVE = 10_000
N_QUEUED = 500
MEM0 = {"alice": 2_500, "bob": 500}
N_LOOP = 1_500
RENDERS = 40
DIM = 384
TOPICS = ["VPN", "mail quota", "laptop", "printer", "badge", "wifi", "payroll", "SSO", "backup", "phone"]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@memory_rows_guarded  # seeding through the one writer's door (knowledge.memories.guard)
def seed() -> None:
    """The 10,000 active memories and the first 500 queued ones (issue 51's page)."""
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
    _analyze()


def _analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE knowledge_memory")
        cursor.execute("VACUUM ANALYZE knowledge_memorysource")


def seed_volume() -> None:
    """4,500 more queued: a Mem0 export for alice and bob through the real import (an untrusted
    agent's, so queued), and an agent loop's writes; then vectors for all of them, as the
    embedding backlog would leave them."""
    from django.core.management import call_command

    from knowledge.models import Memory
    from knowledge.principal import Principal
    from knowledge.principals import services
    from memory.lifecycle.bulk import memory_write_many

    system = Principal.system("bench")
    services.agent_create(actor=system, name="rq-mem0", trusted=False)
    loop = services.agent_create(actor=system, name="rq-loop", trusted=False)
    rng = random.Random(53)
    results = []
    for person, n in MEM0.items():
        for i in range(n):
            topic = rng.choice(TOPICS)
            # each about its own ticket, so none contradicts another once approved
            text = f"{person.title()} had a {topic} problem, ticket SUP-{i:05d}, fixed by step {rng.randint(1, 40)}"
            results.append(
                {"id": str(uuid.UUID(int=rng.getrandbits(128))), "memory": text, "user_id": person}
            )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mem0.json"
        path.write_text(json.dumps({"results": results}))
        call_command("import_mem0", str(path), agent="rq-mem0", stdout=io.StringIO(), stderr=io.StringIO())
    memory_write_many(
        actor=Principal.for_agent(loop),
        owner=loop,
        store="self",
        items=[
            {
                "text": f"Run {i // 10} step {i % 10}: ticket INC-{9000 + i} waits on a callback from the customer."
            }
            for i in range(N_LOOP)
        ],
    )
    missing = list(Memory.objects.filter(embedding__isnull=True).order_by("pk"))
    for memory, vector in zip(missing, _unit(np.random.default_rng(53), len(missing)), strict=True):
        memory.embedding = vector
    Memory.objects.bulk_update(missing, ["embedding"], batch_size=1000)
    _analyze()


def _renders(client, url: str) -> tuple[list[float], str]:
    for _ in range(3):  # warm the templates and the connection
        assert client.get(url).status_code == 200
    times = []
    for _ in range(RENDERS):
        t = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - t) * 1000)
        assert response.status_code == 200
    return sorted(times), response.content.decode()


def _page(report, client, url: str, name: str, cards: int) -> None:
    times, body = _renders(client, url)
    shown = body.count('<article class="card qitem"')
    assert shown == cards, (url, shown)
    exact, near = body.count('class="dup exact"'), body.count('class="dup near"')
    conflicts, contradictions = body.count("Conflicts with"), body.count("contradiction</span>")
    report(
        name,
        times[int(len(times) * 0.95)],
        "ms p95",
        target="≤ 300 ms",
        note=f"{RENDERS} renders, p50 {statistics.median(times):.1f} ms; {shown} cards with {exact} exact and "
        f"{near} near duplicate hints, {conflicts} keyed conflicts, {contradictions} contradictions; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
    )


def run(report):
    from django.test import Client

    from knowledge.models import AuditEvent, Memory
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
    print(f"   seeded 10k active and 500 queued in {seeded:.0f} s", flush=True)
    _page(
        report,
        client,
        "/review/",
        "review queue, 500 queued among 10k active, a page of 10 with relations",
        10,
    )
    _page(
        report, client, "/review/?size=100", "review queue, 500 queued among 10k active, a page of 100", 100
    )

    start = time.perf_counter()
    seed_volume()
    assert Memory.objects.filter(status=Memory.QUEUED).count() == 5_000
    print(f"   4,500 more queued (import and loop) in {time.perf_counter() - start:.0f} s", flush=True)
    alice = "/review/?import=mem0&store=private:alice"
    _page(
        report, client, alice, "review queue, 5,000 queued, filtered to alice's Mem0 import (page of 10)", 10
    )

    bob = "import=mem0&store=private:bob"
    ask = client.get(f"/review/all?{bob}&action=approve").content.decode()
    assert 'name="expected" value="500"' in ask, "the filter should match bob's 500"
    load = os.getloadavg()[0]
    t = time.perf_counter()
    response = client.post(f"/review/all?{bob}", {"action": "approve", "expected": "500"})
    elapsed = time.perf_counter() - t
    assert response.status_code == 302, response.status_code
    approved = Memory.objects.filter(store="private:bob", status=Memory.ACTIVE).count()
    batches = AuditEvent.objects.filter(action="memory.approved").values("batch_id").distinct().count()
    assert approved == 500 and batches == 1, (approved, batches)
    report(
        "approve everything a filter matches: bob's 500 of 5,000 queued",
        elapsed,
        "s",
        target="≤ 5 s",
        note=f"{approved} approved in one audit batch through /review/all; load average {load:.1f}",
    )
