"""The memory event feed and webhook fan-out over 3,000 memory writes (through the real write
service, so each is audited with its revision): GET /api/events read in pages of 100 by an admin
(every event) and by an agent (half the memories are another agent's own, so it sees half), and
one webhook's fan-out of every `memory.written` event into deliveries."""

import statistics
import time

from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from bench.recall_seed import ACTOR, agent, reset_recall_tables
from bench.textgen import TextGen
from knowledge.events.services import webhook_create, webhooks_fanout
from knowledge.models import WebhookDelivery
from knowledge.principal import Principal
from knowledge.principals import services
from memory.lifecycle.write import WriteRequest, memory_write

WRITES = 3_000
PAGE = 100


def _p95(values):
    values = sorted(values)
    return values[max(int(len(values) * 0.95) - 1, 0)]


def _settle():
    with connection.cursor() as cursor:
        for _ in range(600):
            cursor.execute(
                "SELECT coalesce(max(xact), '0') < pg_snapshot_xmin(pg_current_snapshot()) "
                "FROM knowledge_revision WHERE object_type = 'memory'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.1)


def _read_all(client) -> tuple[list[float], int]:
    timings, seen, cursor = [], 0, "0-0"
    while True:
        t0 = time.perf_counter()
        response = client.get("/api/events", {"after": cursor, "limit": PAGE})
        timings.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.content[:300]
        page = response.json()
        seen += len(page["events"])
        cursor = page["next_cursor"]
        if not page["has_more"]:
            return timings, seen


def run(report):
    gen = TextGen(2033)
    reset_recall_tables()
    WebhookDelivery.objects.all().delete()
    mine, other = agent("events-reader"), agent("events-other")
    admin = Principal(kind="person", name="bench", role="admin")
    # A receiver on this machine (the discard port): named, as an internal receiver must be.
    with override_settings(BRAIN_WEBHOOK_ALLOW_HOSTS=["127.0.0.1"]):
        webhook = webhook_create(
            actor=admin, url="http://127.0.0.1:9/none", events=["memory.written"], secret="x" * 32
        )
    t0 = time.perf_counter()
    for i in range(WRITES):
        owner = mine if i % 2 == 0 else other
        memory_write(
            actor=ACTOR,
            request=WriteRequest(
                owner=owner, store="self", text=gen.message(), run_id=f"run-{i // 50}", turn=i
            ),
        )
    write_ms = (time.perf_counter() - t0) * 1000 / WRITES
    _settle()

    clients = {"admin": APIClient(HTTP_HOST="localhost"), "agent": APIClient(HTTP_HOST="localhost")}
    admin_user = services.consoleuser_create(
        actor=ACTOR, username="events-bench-admin", role="admin", password="bench-password-7"
    )
    clients["admin"].credentials(
        HTTP_AUTHORIZATION=f"Bearer {services.token_create(actor=ACTOR, user=admin_user)}"
    )
    clients["agent"].credentials(
        HTTP_AUTHORIZATION=f"Bearer {services.token_create(actor=ACTOR, agent=mine)}"
    )

    admin_pages, admin_seen = _read_all(clients["admin"])
    agent_pages, agent_seen = _read_all(clients["agent"])
    assert admin_seen >= WRITES and agent_seen >= WRITES // 2, (admin_seen, agent_seen)

    t0 = time.perf_counter()
    queued = webhooks_fanout()
    fanout_s = time.perf_counter() - t0
    assert queued == WRITES == WebhookDelivery.objects.filter(webhook=webhook).count(), queued

    report(
        "event feed page of 100, p95 (admin, API)",
        _p95(admin_pages),
        "ms",
        note=f"{len(admin_pages)} pages, {admin_seen:,} events after {WRITES:,} memory writes; "
        f"p50 {statistics.median(admin_pages):.1f} ms; writes took {write_ms:.1f} ms each",
    )
    report(
        "event feed page of 100, p95 (agent, store-filtered, API)",
        _p95(agent_pages),
        "ms",
        note=f"{len(agent_pages)} pages, {agent_seen:,} events visible of {admin_seen:,}; "
        f"p50 {statistics.median(agent_pages):.1f} ms",
    )
    report(
        "webhook fan-out",
        queued / fanout_s,
        "events/s",
        note=f"{queued:,} deliveries queued in {fanout_s:.2f} s (pages of 500, one transaction each)",
    )
