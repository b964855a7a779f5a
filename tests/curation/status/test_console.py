"""The Knowledge page's Status tab and GET /api/status: alerts first, embedding coverage,
pinned-memo budgets, background jobs (real django-q2 rows) and knowledge lints."""

import uuid
from datetime import timedelta

from django.test import override_settings
from django.utils import timezone
from django_q.models import OrmQ, Task
from django_q.signing import SignedPackage

from curation.status import selectors as status
from knowledge.entries.lints import OVERSIZED_TOKENS
from knowledge.models import Heartbeat
from memory.recall.memo import memo_update
from tests import factory


def _failed_job(result="boom"):
    now = timezone.now()
    return Task.objects.create(
        id=uuid.uuid4().hex,
        name="quiet-falcon",
        func="curation.tasks.embedding_backlog_run",
        started=now - timedelta(seconds=5),
        stopped=now,
        success=False,
        result=result,
    )


def _stuck_job():
    """A task a worker claimed 12 minutes ago (past the 10-minute timeout; the broker's lock is
    claim time + retry, 15 minutes, after which the task is handed out again)."""
    from django.conf import settings

    claimed = timezone.now() - timedelta(minutes=12)
    payload = SignedPackage.dumps(
        {"id": uuid.uuid4().hex, "name": "stuck-otter", "func": "curation.tasks.provenance_run"}
    )
    return OrmQ.objects.create(
        key="brain", payload=payload, lock=claimed + timedelta(seconds=settings.Q_CLUSTER["retry"])
    )


def test_status_tab_puts_alerts_first_then_coverage_memos_and_jobs(client, world, monkeypatch):
    monkeypatch.setattr(status, "BACKLOG_WARN_TEXTS", 1)  # two texts count as a long backlog here
    factory.make_memory_row(world.copilot, "Alice prefers email")
    factory.post_messages(world.general, [{"speaker": "alice", "text": "hello"}])
    memo_update(actor=factory.SYSTEM, agent=world.copilot, text="Always answer in English, briefly.")
    _failed_job(result="Traceback: <script>alert(1)</script>")
    _stuck_job()
    client.force_login(world.reviewer)

    with override_settings(BRAIN_MEMO_BUDGET_TOKENS=3):
        page = client.get("/knowledge/status/")
    assert page.status_code == 200
    html = page.content.decode()
    levels = [a["level"] for a in page.context["alerts"]]
    assert levels == sorted(levels, key=["error", "warning"].index)  # errors first
    texts = " ".join(a["text"] for a in page.context["alerts"])
    assert "worker has never reported" in texts
    assert "curation.tasks.provenance_run (stuck-otter)" in texts and "has not finished" in texts
    assert "1 job(s) failed" in texts
    assert "2 text(s) wait for a vector (1 memories, 1 messages)" in texts
    assert "pinned memo of copilot" in texts and "budget of 3" in texts
    assert html.index('id="alerts"') < html.index('id="embeddings"') < html.index('id="jobs"')
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    coverage = {c["kind"]: c for c in page.context["coverage"]}
    assert coverage["messages"]["backlog"] == 1 and coverage["messages"]["percent"] == 0.0
    assert 'href="/knowledge/status/" aria-current="page"' in html

    # The worker beats, the backlog is drained, the job queue is clean: nothing needs attention.
    Heartbeat.objects.create(name="worker", beat_at=timezone.now())
    factory.embed_all()
    Task.objects.all().delete()
    OrmQ.objects.all().delete()
    with override_settings(BRAIN_MODEL_BASE_URL="http://127.0.0.1:9/v1", BRAIN_MODEL="stub"):
        page = client.get("/knowledge/status/")  # a model is set up too (none answers: no call is made)
    assert page.context["alerts"] == []
    assert "Nothing needs attention." in page.content.decode()
    assert {c["kind"]: c["percent"] for c in page.context["coverage"]}["messages"] == 100.0


def test_the_status_panel_refreshes_itself_as_an_htmx_fragment(client, world):
    client.force_login(world.reviewer)
    page = client.get("/knowledge/status/").content.decode()
    assert 'id="status-panel"' in page and 'hx-trigger="every 15s"' in page
    assert "<tr><td>messages</td><td>0</td>" in page
    factory.post_messages(world.general, [{"speaker": "alice", "text": "hello"}])
    fragment = client.get("/knowledge/status/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="status-panel")
    body = fragment.content.decode()
    assert "<html" not in body and "<h1>" not in body
    assert body.lstrip().startswith('<div id="status-panel"') and 'id="coverage"' in body  # swapped in place
    assert (
        '<tr><td>messages</td><td>1</td><td>0</td><td><span class="badge warn">1</span>' in body
    )  # new since load


def test_status_tab_is_for_reviewers_and_admins(client, world):
    assert client.get("/knowledge/status/").status_code == 302  # to the login page
    assert world.client("copilot").get("/knowledge/status/").status_code in (302, 403)


def test_knowledge_lints_find_dated_duplicate_oversized_and_empty_entries(client, world):
    factory.make_entry(world.copilot, name="Pricing 2025", blocks=["Seats cost 12 EUR"])
    factory.make_entry(world.copilot, name="Q3 roadmap", blocks=["Ship recall"])
    factory.make_entry(world.copilot, name="Office hours", blocks=["Opens at 8"])  # clean
    factory.make_entry(world.copilot, name="Marketing 2 team", blocks=["Ads"])  # "Mar…" is no month
    factory.make_entry(world.copilot, name="Launch, Sept. 14", blocks=["Ship it"])
    factory.make_entry(world.copilot, name="On-call rota", blocks=["Rita this week"])
    factory.make_entry(world.copilot, name="on call  rotas", blocks=["Bob next week"])
    factory.make_entry(world.scribe, name="On call rota", blocks=["another owner's"])  # not a duplicate
    sentence = "The deployment checklist covers database migrations and rollback plans. "
    big = factory.make_entry(world.copilot, name="Runbook", blocks=[sentence * 40] * 3)
    factory.make_entry(world.copilot, name="Parking")  # no body
    client.force_login(world.admin)

    lints = {lint.code: lint for lint in client.get("/knowledge/status/").context["lints"]}
    assert [e.name for e in lints["dated-names"].entries] == [
        "Launch, Sept. 14",
        "Pricing 2025",
        "Q3 roadmap",
    ]
    groups = lints["near-duplicate-names"].groups
    assert lints["near-duplicate-names"].count == 1
    assert sorted(e.name for e in groups[0]) == ["On-call rota", "on call  rotas"]
    oversized = lints["oversized-entries"]
    assert [e.pk for e in oversized.entries] == [big.pk] and oversized.count == 1
    assert int(oversized.entries[0].lint_detail.split()[0].replace(",", "")) > OVERSIZED_TOKENS
    assert [e.name for e in lints["no-body"].entries] == ["Parking"]

    # The owner selector narrows the lints to that agent's entries.
    session = client.session
    session["owner"] = "scribe"
    session.save()
    page = client.get("/knowledge/status/")
    assert all(lint.count == 0 for lint in page.context["lints"])
    assert "Owner principal: scribe" in page.content.decode()


def test_api_status_gives_alerts_and_jobs_and_keeps_failure_texts_from_agents(world):
    _failed_job(result="could not embed 'secret text'")
    factory.post_messages(world.general, [{"speaker": "alice", "text": "hello"}])  # a short backlog: normal
    body = world.client("copilot").get("/api/status").json()
    assert any("failed in the last day" in a["text"] for a in body["alerts"])
    assert body["backlog"]["messages"] == 1 and not any(
        "wait for a vector" in a["text"] for a in body["alerts"]
    )
    assert body["jobs"]["failed_last_day"] == 1 and "recent_failures" not in body["jobs"]
    body = world.client("reviewer").get("/api/status").json()
    assert body["jobs"]["recent_failures"][0]["result"] == "could not embed 'secret text'"
    Heartbeat.objects.create(name="worker", beat_at=timezone.now() - timedelta(minutes=10))
    alerts = world.client("reviewer").get("/api/status").json()["alerts"]
    assert alerts[0]["level"] == "error" and "worker has not reported since" in alerts[0]["text"]


def test_the_status_page_reads_a_fixed_number_of_queries(client, world):
    """More entries, lints and memos do not mean more queries (CaptureQueriesContext)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(world.admin)

    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/knowledge/status/").status_code == 200
        return len(captured.captured_queries)

    factory.make_entry(
        world.copilot, name="Pricing 2025", blocks=["x" * 2100]
    )  # dated; long enough to be counted
    factory.make_entry(world.copilot, name="Empty")
    memo_update(actor=factory.SYSTEM, agent=world.copilot, text="Be brief.")
    queries()  # the first visit of a session stores its console preferences: not measured
    before = queries()
    for i in range(5):
        factory.make_entry(world.copilot, name=f"Roadmap 202{i}", blocks=["y" * 2100])
        factory.make_entry(world.scribe, name=f"Empty {i}")
    memo_update(actor=factory.SYSTEM, agent=world.scribe, text="Cite sources.")
    assert queries() == before


def test_the_lints_database_twins_agree_with_python(db):
    """The near-duplicate lint groups names by brain_name_key in the database, and the dated-names
    index holds the lint's expression: both must say what the Python side says."""
    import importlib

    from django.db import connection

    from knowledge.entries.lints import DATED_NAME, _name_key

    migration = importlib.import_module("knowledge.migrations.0020_status_indexes_dreaming")
    assert migration.DATED_NAME == DATED_NAME
    names = [
        "On-call rota",
        "on call  rotas",
        "Cats, Dogs!",
        "Glass",
        "bus",
        "ABCs",
        "class passes",
        "x_y",
        "café Crèmes",
        "  lots   of  space ",
        "sss",
        "12s 123s 1234s",
        "Pricing 2025",
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT n, brain_name_key(n) FROM unnest(%s::text[]) AS n", [names])
        assert {n: key for n, key in cursor.fetchall()} == {n: _name_key(n) for n in names}


def test_an_entry_of_many_short_blocks_is_oversized_too(client, world):
    """The oversized lint sums only candidates (a block over LONG_BLOCK characters, or more than
    FEW_BLOCKS blocks): a body of many short blocks is still found."""
    from knowledge.entries.lints import FEW_BLOCKS, LONG_BLOCK

    block = "The deployment checklist covers database migrations and rollback plans. " * 5
    assert len(block) <= LONG_BLOCK
    many = factory.make_entry(world.copilot, name="Runbook", blocks=[block] * 40)
    factory.make_entry(world.copilot, name="Short", blocks=[block] * FEW_BLOCKS)
    client.force_login(world.admin)
    lints = {lint.code: lint for lint in client.get("/knowledge/status/").context["lints"]}
    assert [e.pk for e in lints["oversized-entries"].entries] == [many.pk]
