"""Two times (issue 62.1's done-when): a Mem0 memory created 2025-03-02, imported today and
approved in the review queue, shows 2025-03-02 as when it held — in the context line the agent
reads, in recall's results and in the console — and today as when Brain learned it."""

import json

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from knowledge.models import Memory
from tests import factory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser


def test_a_mem0_memory_shows_when_it_held_and_when_brain_learned_it(page, world):
    from memory.imports.mem0 import mem0_import, mem0_parse

    item = {
        "id": "m-1",
        "memory": "Alice switched her laptop to the Falcon VPN profile",
        "user_id": "alice",
        "created_at": "2025-03-02T09:30:00Z",
    }
    mem0_import(agent=world.copilot, memories=mem0_parse(json.dumps({"results": [item]})))
    memory = Memory.objects.get()
    today = f"{timezone.now():%Y-%m-%d}"

    login(page, world.reviewer.username)
    page.goto("/review/")
    card = page.locator(f"#memory-{memory.pk}")
    expect(card).to_contain_text("held from 2025-03-02 · learned")  # what the reviewer judges by
    card.locator('form[action$="/approve"] button[type=submit]').click()
    expect(page.locator(f"#memory-{memory.pk}.result")).to_be_visible()
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE and f"{memory.valid_from:%Y-%m-%d}" == "2025-03-02"

    # the context line the agent reads: when it held first, then when Brain learned it
    conversation = factory.make_conversation(world.copilot, world.dm_alice)
    context = world.client("copilot").post(
        "/api/agents/copilot/context",
        {"conversation": conversation.pk, "q": "Falcon VPN profile"},
        format="json",
    )
    recalled = next(s for s in context.json()["sections"] if s["name"] == "recalled_memory")
    assert f"[memory {memory.pk} · semantic · held 2025-03-02 · learned {today}]" in recalled["text"]
    (listed,) = [i for i in recalled["items"] if i["id"] == memory.pk]
    assert listed["held_from"].startswith("2025-03-02") and listed["learned_at"].startswith(today)

    # the console: recall's playground, the memory list and the memory's page
    page.goto(f"/recall/?agent=copilot&conversation={conversation.pk}&q=Falcon+VPN+profile")
    expect(page.locator("#recall-results .when").first).to_have_text(f"held 2025-03-02 · learned {today}")
    page.goto("/memories/")
    row = page.locator(f"tr[data-memory='{memory.pk}']")
    expect(row.locator("td.held")).to_have_text("2025-03-02")
    expect(row.locator("td.learned")).to_have_text(today)
    page.goto(f"/memories/{memory.pk}/")
    expect(page.locator("#memory-held td")).to_contain_text("2025-03-02 → now")
    expect(page.locator("#memory-learned td")).to_contain_text(today)
    held, learned = (page.locator(s).bounding_box()["y"] for s in ("#memory-held", "#memory-learned"))
    assert held < learned  # when it held comes first
