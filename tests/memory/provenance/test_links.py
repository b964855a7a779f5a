"""Provenance is links, not text: every source kind opens where it can be read, and an untracked
source is marked as such (queue, memory page, recall results)."""

from knowledge.models import MemorySource
from memory.provenance import services as provenance
from tests import factory

ADMIN_ACTOR = factory.SYSTEM


def test_sources_open_where_they_can_be_read_and_untracked_ones_say_so(client, world):
    conv = factory.make_conversation(world.copilot, world.general)
    (message_id,) = factory.post_messages(world.general, [{"speaker": "alice", "text": "Acme wants Slack"}])
    entry = factory.make_entry(world.copilot, name="Acme")
    other = factory.make_memory(world.copilot, "Acme is a customer", store="shared")
    provenance.source_push(actor=ADMIN_ACTOR, kind="ticket", ref="INC-77", fields={"status": "open"})
    sources = [
        {"kind": "conversation", "ref": str(conv.pk)},
        {"kind": "message", "ref": str(message_id)},
        {"kind": "memory", "ref": str(other.pk)},
        {"kind": "entry", "ref": str(entry.pk)},
        {"kind": "ticket", "ref": "INC-77"},
        {"kind": "kb", "ref": "KB-404"},
    ]
    memory = factory.make_queued_memory(
        world.copilot, "Acme wants Slack updates", store="shared", sources=sources
    )
    client.force_login(world.reviewer)
    expected = {
        "conversation": f'href="/recall/browse/conversation/{conv.pk}"',
        "message": f'href="/recall/browse/message/{message_id}"',
        "memory": f'href="/memories/{other.pk}/"',
        "entry": f'href="/knowledge/entries/{entry.pk}/"',
        "ticket": 'href="/sources/ticket/INC-77"',
    }
    for page in ("/review/", f"/memories/{memory.pk}/", f"/recall/browse/memory/{memory.pk}"):
        body = client.get(page).content.decode()
        for kind, link in expected.items():
            assert link in body, (page, kind)
    assert MemorySource.objects.get(memory=memory, kind="kb").state == "untracked"
    detail = client.get(f"/memories/{memory.pk}/").content.decode()
    assert 'class="badge warn untracked"' in detail
    tracked = client.get("/sources/ticket/INC-77").content.decode()
    assert "tracked" in tracked and "open" in tracked and f"#{memory.pk}" in tracked
    untracked = client.get("/sources/kb/KB-404").content.decode()
    assert 'class="badge warn untracked"' in untracked


def test_the_playground_links_a_results_sources(client, world):
    conv = factory.make_conversation(world.copilot, world.general)
    factory.make_memory(
        world.copilot,
        "Acme wants support updates in Slack",
        store="shared",
        sources=[{"kind": "kb", "ref": "KB-9"}],
    )
    client.force_login(world.reviewer)
    body = client.get(
        "/recall/", {"agent": "copilot", "conversation": conv.pk, "q": "Acme support updates"}
    ).content.decode()
    assert 'href="/sources/kb/KB-9"' in body and "untracked" in body
