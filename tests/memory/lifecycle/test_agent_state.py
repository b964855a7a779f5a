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


# --- Scratch that stays scratch (issue 62.3) -------------------------------------------------


def _write(client, **body) -> dict:
    response = client.post("/api/memory", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _recalled(client, conversation, q) -> set[int]:
    body = {"agent": conversation.agent.name, "conversation": conversation.pk, "q": q}
    response = client.post("/api/memory/search", body, format="json")
    assert response.status_code == 200, response.content
    return {r["id"] for r in response.json()["results"] if r["kind"] == "memory"}


def test_an_untrusted_agents_working_note_is_its_own_at_once_and_no_one_elses(world, copilot, settings):
    """Without `state`, a working-tier note in the agent's own store is active at once, expires
    with the working TTL, and is recalled by its writer alone."""
    import datetime

    from django.utils import timezone

    from tests import factory

    note = _write(copilot, scope="agent", text="Scratch: retry the Zephyr export", tier="working")
    assert (note["status"], note["store"]) == ("active", "self")
    ttl = datetime.timedelta(hours=settings.BRAIN_SHORT_TERM_TTL_HOURS)
    expires = datetime.datetime.fromisoformat(note["expires_at"])
    assert timezone.now() + ttl - datetime.timedelta(minutes=1) < expires <= timezone.now() + ttl
    assert not Memory.objects.filter(status=Memory.QUEUED).exists()
    own = factory.make_conversation(world.copilot, world.general)
    other = factory.make_conversation(world.scribe, world.general)
    assert note["id"] in _recalled(copilot, own, "Zephyr export")
    assert note["id"] not in _recalled(world.client("scribe"), other, "Zephyr export")
    assert world.client("scribe").get(f"/api/memory/{note['id']}").status_code == 403


def test_a_working_note_anywhere_else_or_for_longer_is_reviewed(world, copilot):
    """Scratch is the agent's own store within the working TTL: a working note into the shared
    store, one asking to live for a year, and one retiring a reviewed fact all wait for review."""
    from tests import factory

    shared = _write(copilot, scope="shared", text="Zephyr is flaky", tier="working")
    year = _write(
        copilot, scope="agent", text="Zephyr is slow", tier="working", expires_at="2099-01-01T00:00:00Z"
    )
    fact = factory.make_memory(world.copilot, "Bob prefers e-mail", store="self")
    over = _write(copilot, scope="agent", text="Bob prefers chat", tier="working", supersedes=fact.pk)
    assert [shared["status"], year["status"], over["status"]] == ["queued"] * 3
    assert Memory.objects.get(pk=fact.pk).status == Memory.ACTIVE


def test_a_scratch_note_enters_review_only_when_promoted_to_a_longer_tier(copilot):
    note = _write(copilot, scope="agent", text="Zephyr export needs VPN", tier="working")
    again = _write(
        copilot, scope="agent", text="Zephyr export needs VPN 5.2", tier="working", supersedes=note["id"]
    )
    assert again["status"] == "active" and Memory.objects.get(pk=note["id"]).status == Memory.SUPERSEDED
    promoted = _write(
        copilot, scope="agent", text="Zephyr export needs VPN 5.2", tier="semantic", supersedes=again["id"]
    )
    assert promoted["status"] == "queued"
    assert Memory.objects.get(pk=again["id"]).status == Memory.ACTIVE  # until a reviewer approves
    assert list(Memory.objects.filter(status=Memory.QUEUED).values_list("pk", flat=True)) == [promoted["id"]]


def test_a_queued_memory_is_recalled_by_no_one_its_writer_included(world, copilot):
    from tests import factory

    queued = _write(copilot, scope="agent", text="Quentin uses the Kestrel VPN profile")
    assert queued["status"] == "queued"
    conversation = factory.make_conversation(world.copilot, world.general)
    assert queued["id"] not in _recalled(copilot, conversation, "Kestrel VPN profile")
    context = copilot.post(
        "/api/agents/copilot/context",
        {"conversation": conversation.pk, "q": "Kestrel VPN profile"},
        format="json",
    )
    assert context.status_code == 200
    recalled = next(s for s in context.json()["sections"] if s["name"] == "recalled_memory")
    assert "Kestrel" not in recalled["text"] and not recalled["items"]
    factory.set_state([queued["id"]], status=Memory.ACTIVE)  # approved: now it is recalled
    assert queued["id"] in _recalled(copilot, conversation, "Kestrel VPN profile")
