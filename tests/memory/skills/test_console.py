"""The Skill experience tab and the agent library's skill pages."""

import re
from pathlib import Path

from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.models import AgentSkill, AuditEvent, Memory, Skill
from memory.skills import services
from tests import factory
from tests.memory.skills.conftest import ADMIN, experience

TEMPLATES = Path(__file__).resolve().parents[3] / "templates" / "memory" / "skills"
LESSON = "Ask for the ticket number before searching the knowledge base."


def test_the_skill_experience_tab_summarises_overlays_and_follows_the_owner_selector(client, world, triage):
    lesson = experience(world, LESSON)
    experience(world, "Close a ticket only after the customer confirms the fix.", who="copilot")
    client.force_login(world.reviewer)
    page = client.get("/knowledge/skills/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'aria-current="page">Skill experience' in html
    rows = {(r["agent"].name, r["skill"].name): r for r in page.context["rows"]}
    scribe = rows[("scribe", "ticket-triage")]
    assert (scribe["enabled"], scribe["active"], scribe["queued"], scribe["outcomes"]) == (True, 1, 0, 1)
    assert scribe["last_change"] == "lesson added" and scribe["changed_by"] == "agent scribe"
    assert 0 < scribe["tokens"] <= scribe["budget_tokens"]
    assert rows[("copilot", "ticket-triage")]["queued"] == 1
    assert "Edit in agent library" in html and "/agents/scribe/skills/ticket-triage/" in html
    assert "<form" not in html.split('id="overlays"')[1]  # read-only

    client.post("/owner", {"owner": "copilot", "next": "/knowledge/skills/"})
    page = client.get("/knowledge/skills/")
    assert [(r["agent"].name) for r in page.context["rows"]] == ["copilot"]
    assert Memory.objects.get(pk=lesson["id"]).text == LESSON


def test_the_tab_reads_in_a_few_queries_whatever_the_number_of_overlays(client, world, triage):
    client.force_login(world.reviewer)
    with CaptureQueriesContext(connection) as few:
        client.get("/knowledge/skills/")
    for i in range(4):
        skill = services.skill_create(actor=ADMIN, name=f"skill-{i}", title=f"Skill {i}")
        services.skill_enable(actor=ADMIN, agent=world.scribe, skill=skill, enabled=True)
        experience(world, f"Lesson number {i} about topic {i * 7}", skill=f"skill-{i}")
    with CaptureQueriesContext(connection) as many:
        client.get("/knowledge/skills/")
    assert len(many) == len(few)


def test_admins_create_and_edit_skills_in_the_agent_library(client, world):
    client.force_login(world.reviewer)
    assert client.post("/skills/", {"name": "refunds", "title": "Refunds"}).status_code == 302
    assert not Skill.objects.exists()
    client.force_login(world.admin)
    response = client.post("/skills/", {"name": "refunds", "title": "Refunds", "instructions": "Ask why."})
    assert response.status_code == 302 and response["Location"] == "/skills/refunds/"
    page = client.post(
        "/skills/refunds/", {"title": "Refunds", "instructions": "Ask why first.", "version": 1}
    )
    assert page.status_code == 302
    skill = Skill.objects.get(name="refunds")
    assert (skill.instructions, skill.version) == ("Ask why first.", 2)
    stale = client.post("/skills/refunds/", {"title": "Refund desk", "instructions": "x", "version": 1})
    assert stale.status_code == 200 and "since you opened it" in stale.content.decode()
    assert Skill.objects.get(name="refunds").title == "Refunds"


def test_admins_enable_and_disable_skills_per_agent(client, world, triage):
    client.force_login(world.admin)
    page = client.get("/agents/scribe/skills/")
    assert page.status_code == 200 and "Disable" in page.content.decode()
    client.post("/agents/scribe/skills/ticket-triage/enable", {"enabled": "0"})
    assert AgentSkill.objects.get(agent=world.scribe, skill=triage).enabled is False
    assert AuditEvent.objects.filter(action="skill.disabled").count() == 1
    client.force_login(world.reviewer)
    assert client.post("/agents/scribe/skills/ticket-triage/enable", {"enabled": "1"}).status_code == 403


def test_admins_edit_remove_and_reorder_lessons_with_a_reason(client, world, triage):
    a = experience(world, LESSON)
    b = experience(world, "Close a ticket only after the customer confirms the fix.")
    client.force_login(world.admin)
    page = client.get("/agents/scribe/skills/ticket-triage/")
    assert page.status_code == 200 and LESSON in page.content.decode()

    fragment = client.post(
        f"/lessons/{a['id']}/edit", {"text": "Ask for the ticket first."}, HTTP_HX_REQUEST="true"
    )
    assert "A reason is required" in fragment.content.decode() and "<html" not in fragment.content.decode()
    assert Memory.objects.get(pk=a["id"]).version == 1
    fragment = client.post(
        f"/lessons/{a['id']}/edit",
        {"text": "Ask for the ticket first.", "reason": "shorter"},
        HTTP_HX_REQUEST="true",
    )
    assert "Ask for the ticket first." in fragment.content.decode()
    assert Memory.objects.get(pk=a["id"]).version == 2

    client.post(f"/lessons/{b['id']}/move", {"direction": "up"})
    order = list(
        Memory.objects.filter(skill=triage, status="active").order_by("position").values_list("pk", flat=True)
    )
    assert order == [b["id"], a["id"]]

    assert client.post(f"/lessons/{b['id']}/remove", {"reason": ""}).status_code == 302
    assert Memory.objects.get(pk=b["id"]).status == "active"
    client.post(f"/lessons/{b['id']}/remove", {"reason": "duplicated by the base skill"})
    assert Memory.objects.get(pk=b["id"]).status == "invalidated"

    client.force_login(world.reviewer)
    assert client.post(f"/lessons/{a['id']}/remove", {"reason": "x"}).status_code == 403


def test_skill_templates_need_no_inline_script_style_or_event_handlers():
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text()
        assert "<script" not in text, template
        assert not re.search(r"\sstyle=", text), template
        assert not re.search(r"\son[a-z]+=", text), template


def test_an_agent_page_links_its_skills(client, world, triage):
    factory.make_user("ned", role="reviewer")
    client.force_login(world.reviewer)
    assert "/agents/copilot/skills/" in client.get("/agents/copilot/").content.decode()
    assert "/skills/" in client.get("/agents/").content.decode()


def test_a_queued_lesson_waits_in_the_review_queue_and_opens_as_a_memory(client, world, triage):
    lesson = experience(world, LESSON, who="copilot")
    client.force_login(world.reviewer)
    queue = client.get("/review/")
    assert queue.status_code == 200 and LESSON in queue.content.decode()
    detail = client.get(f"/memories/{lesson['id']}/")
    assert detail.status_code == 200 and "task_outcome" in detail.content.decode()
