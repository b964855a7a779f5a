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
