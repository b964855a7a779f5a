"""Scratch that stays scratch (issue 62.3's done-when): 200 working-tier notes of an untrusted
agent, written over HTTP through the Python client, leave the review queue empty and are
recalled by their writer alone."""

import pytest
from brain_client import Brain
from playwright.sync_api import expect

from knowledge.models import Memory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser

NOTES = 200


def test_two_hundred_scratch_notes_leave_the_queue_empty_and_reach_their_writer_alone(
    page, live_server, world
):
    with Brain(live_server.url, world.tokens["copilot"]) as brain:
        written = [
            brain.memory.write(
                f"Loop step {i}: ticket SUP-{5000 + i} waits on the Quokka mirror", tier="working"
            )
            for i in range(NOTES)
        ]
        assert {m.status for m in written} == {"active"}
        own = brain.conversations.open("general")
        mine = brain.memory.search("Quokka mirror SUP-5007", conversation=own.id, k=5)
    assert not Memory.objects.filter(status=Memory.QUEUED).exists()
    ids = {m.id for m in written}
    assert any(r["kind"] == "memory" and r["id"] in ids for r in mine.results)

    with Brain(live_server.url, world.tokens["scribe"]) as other:
        conversation = other.conversations.open("general")
        theirs = other.memory.search("Quokka mirror SUP-5007", conversation=conversation.id, k=20)
    assert not [r for r in theirs.results if r["kind"] == "memory" and r["id"] in ids]

    login(page, world.reviewer.username)
    page.goto("/review/")
    expect(page.locator("#queue-empty")).to_have_text("Nothing is waiting for review.")
    # the notes are there, active, for a person to see — just not waiting on one
    page.goto("/memories/?tier=working")
    expect(page.get_by_text("waits on the Quokka mirror").first).to_be_visible()
