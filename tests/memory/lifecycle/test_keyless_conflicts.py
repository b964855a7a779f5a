"""Contradictions without a key where people decide (issue 51): the queue card shows the active
memories a queued memory contradicts, with the finder's reason, and approving it needs the same
decision as a keyed conflict (replace, keep both as of different times, or reject)."""

import datetime

from django.utils import timezone

from knowledge.models import AuditEvent, Memory
from memory.lifecycle import selectors
from memory.lifecycle.conflicts import contradictions_sweep
from tests import factory


def card(body: str, memory) -> str:
    return body.split(f'id="memory-{memory.pk}"')[1].split("</article>")[0]


def search(world, conv, q):
    body = world.client("copilot").post(
        "/api/memory/search", {"agent": "copilot", "conversation": conv.pk, "q": q}, format="json"
    )
    assert body.status_code == 200, body.content
    return [r["id"] for r in body.json()["results"] if r["kind"] == "memory"]


def test_the_vpn_case_replace_leaves_one_answer(client, world):
    conv = factory.make_conversation(world.copilot, world.general)
    first = factory.make_memory(world.scribe, "VPN-4012 is fixed by client 5.2.0", store="shared")
    second = factory.make_memory(world.scribe, "VPN-4012 is fixed by client 5.2.1", store="shared")
    new = factory.make_queued_memory(world.copilot, "VPN-4012 is fixed by client 5.2.3", store="shared")
    client.force_login(world.reviewer)
    shown = card(client.get("/review/").content.decode(), new)
    for old in (first, second):
        assert f'class="conflict" data-memory="{old.pk}"' in shown
    assert "another number" in shown and 'name="decision" value="replace" required' in shown
    assert "Reject as duplicate" not in shown

    client.post(f"/review/{new.pk}/approve", {})  # no decision: nothing changes
    assert Memory.objects.get(pk=new.pk).status == "queued"
    client.post(f"/review/{new.pk}/approve", {"decision": "replace"})
    assert Memory.objects.get(pk=new.pk).status == "active"
    for old in (first, second):
        old = Memory.objects.get(pk=old.pk)
        assert old.status == "superseded" and old.superseded_by_id == new.pk
    event = AuditEvent.objects.get(action="memory.approved", object_ids__contains=[str(new.pk)])
    assert event.data["decision"] == "replace" and sorted(event.data["retired"]) == [first.pk, second.pk]
    assert search(world, conv, "Which VPN client fixes VPN-4012?") == [new.pk]


def test_the_friday_deploys_case_keeps_both_as_of_different_times(world):
    frozen = factory.make_memory(
        world.scribe, "Deploys are prohibited every Friday after 14:00", store="shared"
    )
    allowed = factory.make_queued_memory(world.copilot, "Deploys are allowed on Fridays.", store="shared")
    client = world.client("reviewer")
    response = client.post(f"/api/memory/{allowed.pk}/approve", {}, format="json")
    assert response.status_code == 409
    assert response.json()["conflicts_with"] == [frozen.pk]
    assert "contradicts active" in response.json()["error"]
    boundary = timezone.now() + datetime.timedelta(hours=1)
    response = client.post(
        f"/api/memory/{allowed.pk}/approve",
        {"decision": "keep_both", "boundary": boundary.isoformat()},
        format="json",
    )
    assert response.status_code == 200, response.json()
    frozen, allowed = Memory.objects.get(pk=frozen.pk), Memory.objects.get(pk=allowed.pk)
    assert frozen.status == allowed.status == "active"
    assert frozen.valid_to == boundary == allowed.valid_from


def test_a_queued_memory_that_only_adds_a_detail_is_approved_without_a_decision(world):
    factory.make_memory(world.scribe, "Deploys are allowed on Fridays.", store="shared")
    detail = factory.make_queued_memory(
        world.copilot, "Deploys are allowed on Fridays, with a second reviewer.", store="shared"
    )
    response = world.client("reviewer").post(f"/api/memory/{detail.pk}/approve", {}, format="json")
    assert response.status_code == 200, response.json()


def test_a_contradiction_the_writer_cannot_read_is_not_in_its_way(world):
    other = factory.make_agent("other-agent")
    factory.make_memory(other, "VPN-4012 is fixed by client 5.2.1")  # another agent's own store
    new = factory.make_queued_memory(world.copilot, "VPN-4012 is fixed by client 5.2.3")
    response = world.client("reviewer").post(f"/api/memory/{new.pk}/approve", {}, format="json")
    assert response.status_code == 200, response.json()


def trusted_write(world, text, capture):
    """The scribe's write, and the finder's background sweep (queued after the commit at most
    once per KICK_SECONDS per process, so run here too)."""
    body = {"scope": "shared", "text": text, "sources": [{"kind": "kb", "ref": "KB-1"}]}
    with capture(execute=True):
        written = world.client("scribe").post("/api/memory", body, format="json").json()
    contradictions_sweep()
    return written


def test_a_trusted_contradiction_stays_active_and_is_listed_until_someone_decides(
    client, world, django_capture_on_commit_callbacks
):
    old = factory.make_memory(world.copilot, "Acme wants support updates by e-mail only", store="shared")
    body = trusted_write(
        world, "Acme wants support updates by phone only", django_capture_on_commit_callbacks
    )
    assert body["status"] == "active"
    assert Memory.objects.get(pk=old.pk).status == "active"
    assert (old.pk, body["id"]) in selectors.conflict_pairs()
    event = AuditEvent.objects.get(action="memory.contradictions_marked")
    assert event.data == {"memory": body["id"], "conflict_with": [old.pk]}

    client.force_login(world.reviewer)
    page = client.get("/review/").content.decode()
    section = page.split('id="conflicts-in-force"')[1].split("</section>")[0]
    assert f'data-memory="{old.pk}"' in section and f'data-memory="{body["id"]}"' in section
    assert "contradiction" in section

    client.post(f"/review/{body['id']}/keep", {"decision": "replace"})
    assert Memory.objects.get(pk=old.pk).superseded_by_id == body["id"]
    assert selectors.conflict_pairs() == []


def test_a_trusted_write_that_agrees_marks_nothing(world, django_capture_on_commit_callbacks):
    factory.make_memory(world.copilot, "Acme wants support updates by e-mail only", store="shared")
    body = trusted_write(
        world, "Acme wants support updates by e-mail only, weekly", django_capture_on_commit_callbacks
    )
    assert body["status"] == "active"
    assert selectors.conflict_pairs() == []
    assert not AuditEvent.objects.filter(action="memory.contradictions_marked").exists()


def test_recall_shows_an_undecided_contradiction_as_the_newest_with_the_older_dated(
    world, django_capture_on_commit_callbacks
):
    conv = factory.make_conversation(world.copilot, world.general)
    old = factory.make_memory(world.copilot, "Acme wants support updates by e-mail only", store="shared")
    Memory.objects.filter(pk=old.pk).update(valid_from=timezone.now() - datetime.timedelta(days=30))
    new = trusted_write(world, "Acme wants support updates by phone only", django_capture_on_commit_callbacks)
    body = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conv.pk, "q": "How does Acme want support updates?"},
        format="json",
    )
    memories = [r for r in body.json()["results"] if r["kind"] == "memory"]
    assert [r["id"] for r in memories] == [new["id"]]
    since = (timezone.now() - datetime.timedelta(days=30)).date().isoformat()
    assert (
        f"(disagrees with #{old.pk} from {since}: Acme wants support updates by e-mail only)"
        in memories[0]["text"]
    )
    assert memories[0]["conflict_with"] == [old.pk]


def test_the_sweep_checks_each_write_once_and_is_queued_after_the_commit(
    world, django_capture_on_commit_callbacks
):
    from django.core.cache import cache

    old = factory.make_memory(world.copilot, "Acme wants support updates by e-mail only", store="shared")
    cache.delete("brain:kick:memory.lifecycle.conflicts.contradictions_sweep")
    body = {
        "scope": "shared",
        "text": "Acme wants support updates by phone only",
        "sources": [{"kind": "kb", "ref": "KB-1"}],
    }
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        new = world.client("scribe").post("/api/memory", body, format="json").json()
    assert len(callbacks) == 1  # the kick; tasks run inline in tests, so the sweep ran
    swept = AuditEvent.objects.get(action="memory.contradictions_swept")
    assert swept.data["checked"] == 2 and swept.data["marked"] == 1  # the older write, then this one
    assert selectors.conflict_pairs() == [(old.pk, new["id"])]
    assert contradictions_sweep() == 0  # nothing new since
    assert AuditEvent.objects.filter(action="memory.contradictions_marked").count() == 1
