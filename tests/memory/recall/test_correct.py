"""Recall and compiled context never show a conflict as two facts, and hold one copy of a fact."""

from django.utils import timezone

from tests import factory

KEY = "customer.acme.contact"


def in_force(owner, text, value, *, days_ago=0):
    """A conflict in force, as older data holds it: the row is put active directly."""
    memory = factory.make_queued_memory(owner, text, store="shared", key=KEY, value=value)
    start = timezone.now() - timezone.timedelta(days=days_ago)
    factory.set_state([memory.pk], status="active", queue_reason="", valid_from=start)
    return memory


def test_search_returns_the_newest_value_of_a_conflict_with_a_note(world):
    conv = factory.make_conversation(world.copilot, world.general)
    old = in_force(world.copilot, "Acme wants support updates in Slack", "Slack", days_ago=5)
    new = in_force(world.scribe, "Acme wants support updates by phone call", "phone", days_ago=1)
    body = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conv.pk, "q": "How does Acme want support updates?"},
        format="json",
    )
    assert body.status_code == 200, body.content
    memories = [r for r in body.json()["results"] if r["kind"] == "memory"]
    assert [r["id"] for r in memories] == [new.pk]
    assert memories[0]["conflict_with"] == [old.pk]
    assert f"(conflicts with #{old.pk}: Slack)" in memories[0]["text"]


def test_compiled_context_holds_one_value_and_one_copy_of_each_fact(world):
    conv = factory.make_conversation(world.copilot, world.general)
    old = in_force(world.copilot, "Acme wants support updates in Slack", "Slack", days_ago=5)
    new = in_force(world.scribe, "Acme wants support updates by phone call", "phone", days_ago=1)
    for text in (
        "VPN-4012 is fixed by client 5.2.1",
        "VPN-4012 is fixed by client 5.2.1 ",
        "vpn-4012 is FIXED by client 5.2.1",
    ):
        factory.make_memory_row(world.copilot, text)
    body = (
        world.client("copilot")
        .post(
            "/api/agents/copilot/context",
            {
                "conversation": conv.pk,
                "q": "Acme support updates and the VPN-4012 fix",
                "budget_tokens": 1500,
            },
            format="json",
        )
        .json()
    )
    recalled = body["sections"][-1]
    ids = [i["id"] for i in recalled["items"] if i["kind"] == "memory"]
    assert old.pk not in ids and new.pk in ids
    assert f"(conflicts with #{old.pk}: Slack)" in recalled["text"]
    assert recalled["text"].lower().count("vpn-4012 is fixed by client 5.2.1") == 1
    item = next(i for i in recalled["items"] if i["id"] == new.pk)
    assert item["conflict_with"] == [old.pk]


def test_the_playground_marks_a_conflict(client, world):
    conv = factory.make_conversation(world.copilot, world.general)
    old = in_force(world.copilot, "Acme wants support updates in Slack", "Slack", days_ago=5)
    in_force(world.scribe, "Acme wants support updates by phone call", "phone", days_ago=1)
    client.force_login(world.reviewer)
    page = client.get("/recall/", {"agent": "copilot", "conversation": conv.pk, "q": "Acme support updates"})
    assert page.status_code == 200
    body = page.content.decode()
    assert 'class="badge bad conflict"' in body and f"#{old.pk}" in body


def test_a_context_line_says_when_a_memory_held_and_when_brain_learned_it(world):
    """An imported fact from 2025-03-02 approved today: its line shows the day it held first,
    then the day Brain learned it — not the approval's day as if it were the fact's."""
    import datetime

    conv = factory.make_conversation(world.copilot, world.general)
    held = datetime.datetime(2025, 3, 2, 9, 0, tzinfo=datetime.UTC)
    memory = factory.make_memory(
        world.copilot, "Acme's renewal is due in April", store="shared", valid_from=held
    )
    body = world.client("copilot").post(
        "/api/agents/copilot/context",
        {"conversation": conv.pk, "q": "When is Acme's renewal?"},
        format="json",
    )
    assert body.status_code == 200, body.content
    today = timezone.now().date().isoformat()
    text = " ".join(section["text"] for section in body.json()["sections"])
    assert f"[memory {memory.pk} · semantic · held 2025-03-02 · learned {today}]" in text
