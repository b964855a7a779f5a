import pytest

from knowledge.models import AuditEvent, Memory
from tests.browser.conftest import login, nav

pytestmark = pytest.mark.browser

LESSON = "Ask for the ticket number before searching the knowledge base."
EDITED = "Ask for the ticket number and the device before searching the knowledge base."


def test_admin_creates_a_skill_the_agent_learns_and_an_edit_is_restored_from_the_audit_tab(page, world):
    login(page, "adam")
    nav(page, "Agent library")
    page.click("text=Skills")
    page.fill("#skill-create input[name=name]", "ticket-triage")
    page.fill("#skill-create input[name=title]", "Ticket triage")
    page.fill("#skill-create textarea[name=instructions]", "Open every reply with the ticket number.")
    page.click("button:has-text('Create skill')")
    page.locator("text=Skill ticket-triage created.").wait_for()

    page.goto("/agents/scribe/")
    page.click("#skills >> text=Skills and experience")
    page.click("#skill-ticket-triage button:has-text('Enable')")
    page.locator("text=ticket-triage is enabled for scribe.").wait_for()

    # The agent reports an outcome and a lesson through the API, with its own token.
    auth = {"Authorization": f"Bearer {world.tokens['scribe']}"}
    outcome = page.request.post(
        "/api/task-outcomes",
        data={"skill": "ticket-triage", "task": "Triage INC-12", "result": "corrected", "external_id": "t-1"},
        headers=auth,
    )
    assert outcome.status == 201, outcome.text()
    lesson = page.request.post(
        "/api/agents/scribe/skills/ticket-triage/experience",
        data={"lesson": LESSON, "sources": [{"kind": "task_outcome", "ref": str(outcome.json()["id"])}]},
        headers=auth,
    )
    assert lesson.status == 201, lesson.text()
    lesson_id = lesson.json()["id"]

    nav(page, "Entries")
    page.click("nav[aria-label=Knowledge] >> text=Skill experience")
    row = page.locator("#overlay-scribe-ticket-triage")
    assert "1 active" in row.locator(".lessons").inner_text()
    assert "lesson added by agent scribe" in row.locator(".last-change").inner_text()
    assert "Triage INC-12" in row.locator(".outcomes").inner_text()
    row.locator("text=Edit in agent library").click()
    page.wait_for_url("**/agents/scribe/skills/ticket-triage/")

    item = page.locator(f"#lesson-{lesson_id}")
    item.locator("summary:has-text('Edit or remove')").click()
    item.locator("textarea[name=text]").fill(EDITED)
    item.locator("button:has-text('Save lesson')").click()
    page.locator(f"#lesson-{lesson_id} >> text=A reason is required to edit a lesson.").wait_for()
    assert Memory.objects.get(pk=lesson_id).version == 1
    item = page.locator(f"#lesson-{lesson_id}")
    item.locator("textarea[name=text]").fill(EDITED)
    item.locator("input[name=reason]").first.fill("the device decides the KB article")
    item.locator("button:has-text('Save lesson')").click()
    page.locator(f"#lesson-{lesson_id} .lesson-version:has-text('v2')").wait_for()
    assert page.locator(f"#lesson-{lesson_id} .lesson-author").inner_text() == "by person adam"
    assert page.locator(f"#lesson-{lesson_id} .lesson-text").inner_text() == EDITED

    event = AuditEvent.objects.get(action="lesson.edited")
    nav(page, "Entries")
    page.click("nav[aria-label=Knowledge] >> text=Audit")
    page.locator(f"#event-{event.pk}").locator("text=Before/after").click()
    page.click("text=Preview restore")
    page.click("button:has-text('Restore 1 record')")
    page.locator("text=Restored 1 record from 1 event").wait_for()
    memory = Memory.objects.get(pk=lesson_id)
    assert memory.text == LESSON and memory.version == 3
    page.goto("/agents/scribe/skills/ticket-triage/")
    assert page.locator(f"#lesson-{lesson_id} .lesson-text").inner_text() == LESSON
