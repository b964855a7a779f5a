"""A conversation ends through the API: its working memory is cleared and the distiller learns
from its messages (through the real model client, against the loopback stub)."""

from django.utils import timezone

from knowledge.models import Memory, MemorySource
from tests import factory


def test_finishing_a_conversation_clears_working_memory_and_distils_its_messages(
    world, model_stub, django_capture_on_commit_callbacks
):
    copilot = world.client("copilot")
    conv = copilot.post(
        "/api/conversations", {"agent": "copilot", "channel": "dm-alice"}, format="json"
    ).json()
    now = timezone.now()
    factory.post_messages(
        world.dm_alice,
        [
            {"speaker": "alice", "text": "Please always email me, I never pick up the phone.", "ts": now},
            {"speaker": "copilot", "text": "Noted: e-mail only.", "ts": now},
        ],
    )
    working = copilot.post(
        "/api/memory",
        {
            "agent": "copilot",
            "scope": "private:alice",
            "text": "draft reply",
            "tier": "working",
            "conversation": conv["id"],
        },
        format="json",
    )
    assert working.status_code == 201, working.json()
    model_stub.reply_json(
        {"memories": [{"text": "Alice wants e-mail, never phone calls", "category": "preference"}]}
    )

    with django_capture_on_commit_callbacks(execute=True):  # the distiller starts after commit
        response = copilot.post(f"/api/conversations/{conv['id']}/finish")
    assert response.status_code == 200, response.json()

    assert Memory.objects.get(pk=working.json()["id"]).status == Memory.EXPIRED
    learnt = Memory.objects.get(author_kind="distiller")
    assert learnt.text == "Alice wants e-mail, never phone calls"
    assert (learnt.status, learnt.store, learnt.queue_reason) == (Memory.QUEUED, "private:alice", "new")
    assert list(MemorySource.objects.filter(memory=learnt).values_list("kind", "ref")) == [
        ("conversation", str(conv["id"]))
    ]
    prompt = model_stub.requests[-1]["json"]["messages"]
    assert "I never pick up the phone" in str(prompt)
    # finishing twice is a conflict and distils nothing more
    assert copilot.post(f"/api/conversations/{conv['id']}/finish").status_code == 409
    assert Memory.objects.filter(author_kind="distiller").count() == 1
