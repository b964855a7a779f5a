"""The memory event feed: order, resume after a cursor, the visibility horizon for transactions
still open, store visibility and bad parameters. These tests commit (the feed shows only
finished transactions), so they run with transaction=True."""

import threading
import time

import pytest
from django.db import connection, transaction

from knowledge.events.feed import feed_read
from knowledge.models import Memory
from knowledge.principal import Principal
from tests import factory

pytestmark = pytest.mark.django_db(transaction=True)
ADMIN = Principal.system("test reader")


def settle(timeout=60.0):
    """Wait until every transaction up to the newest revision has ended everywhere on the server
    (another process's open transaction — a benchmark, a worker — holds the feed back)."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT coalesce(max(xact), '0') < pg_snapshot_xmin(pg_current_snapshot()) "
                "FROM knowledge_revision WHERE object_type = 'memory'"
            )
            if cursor.fetchone()[0] or time.monotonic() > deadline:
                return
            time.sleep(0.05)


def _all(client, **params):
    settle()
    response = client.get("/api/events", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_events_come_in_order_with_hash_and_provenance(world):
    first = factory.make_memory(
        world.copilot, "Ana prefers tea", store="shared", run_id="run-7", turn=3, event_id="evt-1"
    )
    # the successor's write retires the first in the same transaction, before its own event
    second = factory.make_memory(world.copilot, "Ana prefers coffee now", store="shared", supersedes=first)

    page = _all(world.client("admin"))
    events = [e for e in page["events"] if e["memory"] in (first.pk, second.pk)]
    assert [(e["type"], e["memory"]) for e in events] == [
        ("memory.written", first.pk),
        ("memory.superseded", first.pk),
        ("memory.written", second.pk),
    ]
    written = events[0]
    assert written["content_hash"] == first.content_hash and written["content_hash"]
    assert written["provenance"] == {"run_id": "run-7", "turn": 3, "event_id": "evt-1"}
    assert written["status"] == "active" and written["store"] == "shared" and written["owner"] == "copilot"
    assert events[1]["status"] == "superseded" and events[1]["previous_status"] == "active"
    cursors = [tuple(map(int, e["cursor"].split("-"))) for e in page["events"]]
    assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
    assert page["next_cursor"] == page["events"][-1]["cursor"] and page["has_more"] is False


def test_a_reader_resumes_after_its_cursor_without_gaps_or_repeats(world):
    ids = [factory.make_memory(world.copilot, f"fact number {i}", store="shared").pk for i in range(5)]
    client = world.client("admin")
    whole = [e["cursor"] for e in _all(client)["events"]]

    seen, cursor = [], "0-0"
    while True:
        page = _all(client, after=cursor, limit=2)
        assert len(page["events"]) <= 2
        seen += [e["cursor"] for e in page["events"]]
        cursor = page["next_cursor"]
        if not page["has_more"]:
            break
    assert seen == whole
    # a consumer that was down: what it missed is still there, after its last cursor
    later = factory.make_memory(world.copilot, "written while the consumer was down", store="shared")
    missed = _all(client, after=cursor)["events"]
    assert [e["memory"] for e in missed] == [later.pk]
    assert set(ids) <= {e["memory"] for e in _all(client)["events"]}
    assert _all(client, after=missed[-1]["cursor"])["events"] == []


def test_a_transaction_still_open_holds_the_feed_back_and_its_event_comes_first(world):
    """A write that began first but commits last must not be skipped by a reader that already
    read a later write: the feed stops before the oldest open transaction."""
    began, release, done = threading.Event(), threading.Event(), threading.Event()
    slow = {}

    def slow_writer():
        try:
            with transaction.atomic():
                slow["memory"] = factory.make_memory(world.copilot, "the slow write", store="shared")
                began.set()
                release.wait(10)
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=slow_writer)
    thread.start()
    try:
        assert began.wait(10)
        fast = factory.make_memory(world.copilot, "the fast write", store="shared")  # commits first
        page = feed_read(ADMIN)
        assert fast.pk not in [e["memory"] for e in page.events]
        cursor = page.next_cursor
    finally:
        release.set()
        thread.join(10)
    assert done.is_set()
    settle()
    resumed = [e["memory"] for e in feed_read(ADMIN, after=cursor).events]
    assert resumed == [slow["memory"].pk, fast.pk]


def test_a_token_sees_only_events_of_memories_it_may_see(world):
    own = factory.make_memory(world.copilot, "copilot's own note")  # self store of copilot
    other = factory.make_memory(world.scribe, "scribe's own note")  # self store of scribe
    shared = factory.make_memory(world.scribe, "a shared fact", store="shared")

    seen = {e["memory"] for e in _all(world.client("copilot"))["events"]}
    assert own.pk in seen and shared.pk in seen and other.pk not in seen
    seen_by_admin = {e["memory"] for e in _all(world.client("admin"))["events"]}
    assert {own.pk, other.pk, shared.pk} <= seen_by_admin
    assert world.client("integration").get("/api/events").status_code == 403


def test_types_filter_the_feed(world):
    first = factory.make_memory(world.copilot, "old plan", store="shared")
    factory.make_memory(world.copilot, "new plan", store="shared", supersedes=first)
    events = _all(world.client("admin"), types="memory.superseded")["events"]
    assert [(e["type"], e["memory"]) for e in events] == [("memory.superseded", first.pk)]
    assert _all(world.client("admin"), types="memory.changed")["events"] == []
    # an entry's body block is a memory row too: its changes come as memory.changed
    entry = factory.make_entry(world.copilot, blocks=["The export runs nightly."])
    block = Memory.objects.get(entry=entry)
    changed = _all(world.client("admin"), types="memory.changed,memory.superseded")["events"]
    assert [e["type"] for e in changed] == ["memory.superseded", "memory.changed"]
    assert changed[1]["action"] == "entry.created" and changed[1]["memory"] == block.pk


def test_bad_parameters_are_400_naming_them(world):
    client = world.client("admin")
    response = client.get("/api/events", {"after": "yesterday"})
    assert response.status_code == 400 and "after" in response.json()["fields"]
    response = client.get("/api/events", {"types": "memory.exploded"})
    assert response.status_code == 400 and "types" in response.json()["fields"]
    response = client.get("/api/events", {"limit": 0})
    assert response.status_code == 400 and "limit" in response.json()["fields"]
    response = client.get("/api/events", {"colour": "red"})
    assert response.status_code == 400 and "colour" in response.json()["fields"]


def test_the_python_client_reads_the_feed_and_resumes(world, live_server):
    from brain_client import Brain

    first = factory.make_memory(world.copilot, "first for the client", store="shared")
    settle()
    with Brain(live_server.url, world.tokens["copilot"]) as brain:
        events = list(brain.events.iter())
        assert first.pk in [e["memory"] for e in events]
        second = factory.make_memory(world.copilot, "second for the client", store="shared")
        settle()
        resumed = list(brain.events.iter(after=events[-1]["cursor"], types=["memory.written"]))
    assert [e["memory"] for e in resumed] == [second.pk]


def test_the_provenance_checks_stale_flags_are_events_with_the_memorys_hash(world):
    """The provenance check records only lifecycle fields in its revisions; the event still
    carries the memory's hash and provenance, and its owner's visibility."""
    integration = world.client("integration")
    fields = {"title": "VPN drops", "description": "d", "status": "open", "resolution": "", "category": "net"}
    assert integration.put("/api/sources/ticket/INC-9", fields, format="json").status_code == 200
    memory = factory.make_memory(
        world.copilot,
        "VPN-9 is fixed by 5.2",
        store="shared",
        run_id="r9",
        turn=4,
        sources=[{"kind": "ticket", "ref": "INC-9"}],
    )
    cursor = _all(world.client("admin"))["next_cursor"]
    integration.put("/api/sources/ticket/INC-9", {**fields, "resolution": "reopened"}, format="json")
    assert world.client("reviewer").post("/api/memory-provenance/check").status_code == 200

    events = _all(world.client("copilot"), after=cursor)["events"]
    assert [(e["type"], e["memory"]) for e in events] == [("memory.stale", memory.pk)]
    assert events[0]["content_hash"] == memory.content_hash
    assert events[0]["provenance"]["run_id"] == "r9" and events[0]["store"] == "shared"
