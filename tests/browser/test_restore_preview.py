"""A restore preview a person can judge (issue 62.4): each row shows the memory's text, its store
and its person, and the Restore button stands above the rows as well as below them."""

import json

import pytest
from playwright.sync_api import expect

from knowledge.models import AuditEvent, Memory
from tests.browser.conftest import login

pytestmark = pytest.mark.browser

TICKETS = {
    "alice": ["Alice's laptop needs the Falcon VPN profile", "Alice is on call on Fridays"],
    "bob": ["Bob's badge stopped opening door 4", "Bob prefers tickets over chat", "Bob moved to Oslo"],
}


def test_a_restore_preview_shows_text_store_and_person_with_the_button_at_top_and_bottom(page, world):
    from memory.imports.mem0 import mem0_import, mem0_parse

    items = [
        {"id": f"{person}-{i}", "memory": text, "user_id": person}
        for person, texts in TICKETS.items()
        for i, text in enumerate(texts)
    ]
    mem0_import(agent=world.copilot, memories=mem0_parse(json.dumps({"results": items})))
    # a reviewer approves them as one batch (the decision an admin may later undo)
    reviewer = world.client("reviewer")
    shown = reviewer.get("/api/memory/review?import=mem0").json()
    approved = reviewer.post(
        "/api/memory/review", {"action": "approve", "snapshot": shown["snapshot"]}, format="json"
    )
    assert approved.status_code == 200, approved.content
    (batch,) = {e.batch_id for e in AuditEvent.objects.filter(action="memory.approved")}

    login(page, world.admin.username)
    page.goto(f"/knowledge/audit/?batch={batch}")
    page.get_by_role("link", name="Preview restoring the whole batch").click()
    expect(page.locator("#restore-preview")).to_contain_text("Nothing has changed yet")
    rows = page.locator("section.outcome")
    expect(rows).to_have_count(5)
    for person, texts in TICKETS.items():
        for text in texts:
            row = rows.filter(has_text=text)
            expect(row).to_have_count(1)
            expect(row).to_contain_text(f"store private:{person}")
            expect(row).to_contain_text(f"person {person}")
    buttons = page.locator("form.restore-form button[type=submit]")
    expect(buttons).to_have_count(2)
    expect(buttons.first).to_have_text("Restore 5 records")
    # the top one sits above the first row, the other below the last
    assert buttons.first.bounding_box()["y"] < rows.first.bounding_box()["y"]
    assert buttons.last.bounding_box()["y"] > rows.last.bounding_box()["y"]
    buttons.first.click()
    expect(page.locator("ul.messages")).to_contain_text("Restored 5 records")
    assert set(Memory.objects.values_list("status", flat=True)) == {Memory.QUEUED}
