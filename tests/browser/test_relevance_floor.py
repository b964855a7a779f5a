"""A padded context (issue 62.2's done-when): with 60 unrelated tickets active, a question about
one error gets that one memory, and says how many less relevant ones it left out — in the
console's recall playground and in the context the agent compiles."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login
from tests.memory.recall.test_relevance_floor import _padded

pytestmark = pytest.mark.browser


def test_the_padded_search_shows_only_the_related_memory_and_what_it_left_out(page, world):
    scope, related = _padded(world)
    conversation = scope.conversation

    login(page, world.reviewer.username)
    page.goto(f"/recall/?agent=copilot&conversation={conversation.pk}&q=VPN+error+E4012")
    rows = page.locator("#recall-results tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("VPN error E4012 is fixed by installing client 5.2.1")
    expect(page.locator("#left-out")).to_have_text("9 less relevant left out")

    context = world.client("copilot").post(
        "/api/agents/copilot/context",
        {"conversation": conversation.pk, "q": "VPN error E4012"},
        format="json",
    )
    recalled = next(s for s in context.json()["sections"] if s["name"] == "recalled_memory")
    assert [i["id"] for i in recalled["items"]] == [related.pk] and recalled["left_out"] >= 20
