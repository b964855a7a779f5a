"""Machine state never needs a human (issue 53): a write with `state` is the agent's own working
memory in its own store, active at once by route agent_state, whoever the agent; anything else
an untrusted agent writes is still reviewed."""

import pytest

from knowledge.models import AuditEvent, Memory


@pytest.fixture
def copilot(world):
    assert not world.copilot.trusted
    return world.client("copilot")


def test_an_untrusted_agents_state_is_active_at_once_in_its_own_store(copilot):
    first = copilot.post(
        "/api/memory",
        {"scope": "agent", "key": "loop/count", "value": {"count": 3}, "state": True},
        format="json",
    )
    assert first.status_code == 201, first.json()
    body = first.json()
    assert (body["status"], body["tier"], body["store"]) == ("active", "working", "self")
    assert body["expires_at"]  # working memory expires like any other
    second = copilot.post(
        "/api/memory",
        {
            "scope": "agent",
            "key": "loop/count",
            "value": {"count": 4},
            "state": True,
            "supersedes": body["id"],
        },
        format="json",
    ).json()
    assert second["status"] == "active"
    assert Memory.objects.get(pk=body["id"]).status == Memory.SUPERSEDED
    assert not Memory.objects.filter(status=Memory.QUEUED).exists()
    written = AuditEvent.objects.filter(action="memory.written", object_ids=[str(second["id"])]).get()
    assert written.data["route"] == "agent_state"
    # Without the flag the same agent's write still waits for a reviewer.
    fact = copilot.post("/api/memory", {"scope": "agent", "text": "Bob prefers e-mail"}, format="json").json()
    assert fact["status"] == "queued"


def test_state_is_only_working_memory_of_the_agents_own_store(copilot):
    shared = copilot.post("/api/memory", {"scope": "shared", "text": "x", "state": True}, format="json")
    assert shared.status_code == 400 and "scope" in shared.json()["fields"]
    semantic = copilot.post(
        "/api/memory", {"scope": "agent", "text": "x", "tier": "semantic", "state": True}, format="json"
    )
    assert semantic.status_code == 400 and "tier" in semantic.json()["fields"]
    assert not Memory.objects.exists()


def test_state_never_shows_in_the_review_queue(client, world, copilot):
    copilot.post("/api/memory", {"scope": "agent", "text": '{"count": 3}', "state": True}, format="json")
    client.force_login(world.reviewer)
    body = client.get("/review/").content.decode()
    assert "Nothing is waiting for review." in body and "{&quot;count&quot;: 3}" not in body


def test_state_supersedes_only_the_agents_own_state(world, copilot):
    """An untrusted agent's state write naming its own reviewer-approved facts — a shared one and
    a self one — is refused and retires nothing; its own state it may replace."""
    from tests import factory

    shared = factory.make_memory(world.copilot, "Refunds take five days", store="shared")
    own_fact = factory.make_memory(world.copilot, "Bob prefers e-mail", store="self")
    for fact in (shared, own_fact):
        refused = copilot.post(
            "/api/memory",
            {"scope": "agent", "key": "loop/count", "value": 1, "state": True, "supersedes": fact.pk},
            format="json",
        )
        assert refused.status_code == 400, refused.content
        assert "own state" in refused.json()["fields"]["supersedes"][0]
        assert Memory.objects.get(pk=fact.pk).status == Memory.ACTIVE
    assert not Memory.objects.filter(key="loop/count").exists()
    # the same write with `state` left out is queued for a reviewer, and retires nothing yet
    queued = copilot.post(
        "/api/memory",
        {"scope": "shared", "text": "Refunds take a week", "supersedes": shared.pk},
        format="json",
    ).json()
    assert queued["status"] == "queued" and Memory.objects.get(pk=shared.pk).status == Memory.ACTIVE


def test_state_expires_within_the_working_ttl(copilot, settings):
    import datetime

    from django.utils import timezone

    far = copilot.post(
        "/api/memory",
        {"scope": "agent", "text": "cursor 7", "state": True, "expires_at": "9999-01-01T00:00:00Z"},
        format="json",
    )
    assert far.status_code == 400 and "expires_at" in far.json()["fields"]
    assert not Memory.objects.exists()
    soon = timezone.now() + datetime.timedelta(hours=settings.BRAIN_SHORT_TERM_TTL_HOURS - 1)
    ok = copilot.post(
        "/api/memory",
        {"scope": "agent", "text": "cursor 7", "state": True, "expires_at": soon.isoformat()},
        format="json",
    )
    assert ok.status_code == 201, ok.content
