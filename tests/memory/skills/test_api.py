"""Skills, task outcomes and experience through the API."""

from knowledge.models import AgentSkill, AuditEvent, Memory, Skill, TaskOutcome
from memory.recall.skills import overlay_budget_tokens
from tests.memory.skills.conftest import BASE, context, experience, outcome, section

LESSON = "Ask for the affected user's ticket number before searching the knowledge base."


def test_a_lesson_is_added_to_the_base_skill_when_it_loads_and_never_changes_it(world, triage):
    lesson = experience(world, LESSON)
    assert lesson["status"] == "active" and lesson["skill"] == "ticket-triage"
    memory = Memory.objects.get(pk=lesson["id"])
    assert (memory.tier, memory.category, memory.store, memory.owner) == (
        "procedural",
        "lesson",
        "self",
        world.scribe,
    )
    assert [(s.kind, s.state) for s in memory.sources.all()] == [("task_outcome", "unchanged")]

    loaded = world.client("scribe").get("/api/agents/scribe/skills/ticket-triage").json()
    assert loaded["text"].index(BASE) < loaded["text"].index(LESSON)
    assert loaded["enabled"] is True and [x["id"] for x in loaded["lessons"]] == [lesson["id"]]
    assert loaded["tokens"] > loaded["base_tokens"] > 0 and loaded["overlay_tokens"] > 0
    assert loaded["overlay_budget_tokens"] == overlay_budget_tokens()

    skill = Skill.objects.get(name="ticket-triage")
    assert (skill.instructions, skill.version) == (BASE, 1)
    assert world.client("scribe").get("/api/skills/ticket-triage").json()["instructions"] == BASE


def test_compiled_context_has_the_skills_section_within_the_budget(world, triage):
    lesson = experience(world, LESSON)
    compiled = context(world)
    names = [s["name"] for s in compiled["sections"]]
    assert names == ["instructions", "pinned_memo", "skills", "history", "recalled_memory"]
    skills = section(compiled, "skills")
    assert BASE in skills["text"] and LESSON in skills["text"]
    assert skills["skills"][0]["lessons"][0]["id"] == lesson["id"]
    assert compiled["total_tokens"] == sum(s["tokens"] for s in compiled["sections"]) <= 4000
    # The lesson reaches the prompt only through its skill, never a second time through recall.
    assert LESSON not in section(context(world, q="ticket number knowledge base"), "recalled_memory")["text"]


def test_one_agents_overlay_is_never_in_another_agents_context(world, triage):
    experience(world, LESSON, who="scribe")
    theirs = section(context(world, who="copilot"), "skills")
    assert BASE in theirs["text"] and LESSON not in theirs["text"]
    assert LESSON in section(context(world, who="scribe"), "skills")["text"]
    assert world.client("copilot").get("/api/agents/scribe/skills/ticket-triage").status_code == 403
    assert world.client("copilot").get("/api/agents/copilot/skills/ticket-triage").json()["lessons"] == []


def test_a_disabled_skills_overlay_is_kept_and_absent_from_context(world, triage):
    lesson = experience(world, LESSON)
    admin = world.client("admin")
    response = admin.put("/api/agents/scribe/skills/ticket-triage", {"enabled": False}, format="json")
    assert response.status_code == 200 and response.json()["enabled"] is False
    assert Memory.objects.get(pk=lesson["id"]).status == "active"
    compiled = context(world, q="ticket number knowledge base")
    assert LESSON not in str(compiled) and BASE not in str(compiled)
    admin.put("/api/agents/scribe/skills/ticket-triage", {"enabled": True}, format="json")
    assert LESSON in section(context(world), "skills")["text"]


def test_only_an_enabled_skill_takes_experience_and_no_skill_is_created(world, triage):
    world.client("admin").put("/api/agents/scribe/skills/ticket-triage", {"enabled": False}, format="json")
    body = experience(world, LESSON, status=409)
    assert "not enabled" in body["error"]
    assert (
        world.client("scribe")
        .post("/api/agents/scribe/skills/nope/experience", {}, format="json")
        .status_code
        == 404
    )
    assert Skill.objects.count() == 1 and not Memory.objects.filter(skill__isnull=False).exists()


def test_a_near_duplicate_lesson_is_refused_naming_the_existing_one(world, triage):
    first = experience(world, LESSON)
    same_terms = experience(
        world, "Before searching the knowledge base, ask for the affected user's ticket number!", status=409
    )
    assert same_terms["duplicate_of"] == first["id"] and str(first["id"]) in same_terms["error"]
    paraphrase = experience(
        world, "Ask the affected user for their ticket number before you search the KB.", status=409
    )
    assert paraphrase["duplicate_of"] == first["id"]
    different = experience(world, "Close a ticket only after the customer confirms the fix.")
    assert different["status"] == "active"
    assert Memory.objects.filter(skill__isnull=False).count() == 2


def test_revises_supersedes_the_old_lesson(world, triage):
    first = experience(world, LESSON)
    second = experience(
        world, "Ask for the ticket number and the device name before searching the KB.", revises=first["id"]
    )
    old = Memory.objects.get(pk=first["id"])
    assert old.status == "superseded" and old.superseded_by_id == second["id"]
    assert second["supersedes"] == first["id"] and second["position"] == old.position
    loaded = world.client("scribe").get("/api/agents/scribe/skills/ticket-triage").json()
    assert [x["id"] for x in loaded["lessons"]] == [second["id"]]
    assert experience(world, "x lesson", revises=first["id"], status=400)["fields"]["revises"]


def test_an_untrusted_agents_lesson_is_queued_for_review(world, triage):
    lesson = experience(world, LESSON, who="copilot")
    assert lesson["status"] == "queued" and lesson["queue_reason"] == "new"
    assert LESSON not in section(context(world, who="copilot"), "skills")["text"]
    queue = world.client("reviewer").get("/api/memory", {"status": "queued"}).json()
    assert lesson["id"] in [m["id"] for m in queue["results"]]
    approved = world.client("reviewer").post(f"/api/memory/{lesson['id']}/approve", {}, format="json")
    assert approved.status_code == 200 and approved.json()["status"] == "active"
    link = AgentSkill.objects.get(agent=world.copilot, skill=triage)
    assert (link.overlay_change, link.overlay_changed_by) == ("lesson approved", "person rita")
    assert LESSON in section(context(world, who="copilot"), "skills")["text"]


def test_a_task_outcome_is_idempotent_by_external_id(world, triage):
    body = {
        "skill": "ticket-triage",
        "task": "Triage INC-12",
        "result": "recovered",
        "external_id": "run-7/3",
        "steps": ["searched KB", "asked for the ticket"],
        "correction": {"text": "use KB-7", "by": "alice"},
    }
    first = world.client("scribe").post("/api/task-outcomes", body, format="json")
    again = world.client("scribe").post("/api/task-outcomes", {**body, "result": "failure"}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and again.json()["result"] == "recovered"
    assert TaskOutcome.objects.count() == 1
    assert AuditEvent.objects.filter(action="task_outcome.recorded").count() == 1
    listed = world.client("scribe").get("/api/task-outcomes", {"skill": "ticket-triage"}).json()["results"]
    assert [o["id"] for o in listed] == [first.json()["id"]]
    other = world.client("copilot").post("/api/task-outcomes", body, format="json")
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]  # per agent


def _nothing_written(before):
    assert (Memory.objects.count(), TaskOutcome.objects.count(), AuditEvent.objects.count()) == before


def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(world, triage):
    ref = str(outcome(world)["id"])
    before = (Memory.objects.count(), TaskOutcome.objects.count(), AuditEvent.objects.count())
    client = world.client("scribe")
    url = "/api/agents/scribe/skills/ticket-triage/experience"
    source = [{"kind": "task_outcome", "ref": ref}]
    cases = [
        ("/api/task-outcomes", {"skill": "nope", "task": "t", "result": "success"}, "skill"),
        ("/api/task-outcomes", {"skill": "ticket-triage", "task": "t", "result": "great"}, "result"),
        ("/api/task-outcomes", {"skill": "ticket-triage", "task": "t" * 501, "result": "success"}, "task"),
        (
            "/api/task-outcomes",
            {"skill": "ticket-triage", "task": "t", "result": "success", "colour": 1},
            "colour",
        ),
        (url, {"lesson": "", "sources": source}, "lesson"),
        (url, {"lesson": "   ", "sources": source}, "lesson"),
        (url, {"lesson": 5, "sources": source}, "lesson"),
        (url, {"lesson": "A lesson.", "sources": []}, "sources"),
        (url, {"lesson": "A lesson."}, "sources"),
        (url, {"lesson": "A lesson.", "sources": [{"kind": "kb", "ref": "KB-7"}]}, "sources"),
        (url, {"lesson": "A lesson.", "sources": [{"kind": "task_outcome", "ref": "999999"}]}, "sources"),
        (url, {"lesson": "x" * 2001, "sources": source}, "lesson"),
        (url, {"lesson": "A lesson.", "sources": source, "lesosn": "typo"}, "lesosn"),
        (
            url,
            {"lesson": "A lesson.", "sources": [{"kind": "task_outcome", "ref": ref, "state": {}}]},
            "sources",
        ),
        (
            "/api/task-outcomes",
            {
                "skill": "ticket-triage",
                "task": "t",
                "result": "success",
                "correction": {"text": "x", "who": "al"},
            },
            "correction",
        ),
    ]
    for path, body, field in cases:
        response = client.post(path, body, format="json")
        assert response.status_code == 400, (body, response.json())
        assert field in response.json()["fields"], (body, response.json())
    # Another agent's task outcome is no evidence for this one.
    copilot_ref = str(outcome(world, who="copilot")["id"])
    before = (Memory.objects.count(), TaskOutcome.objects.count(), AuditEvent.objects.count())
    response = client.post(
        url, {"lesson": "A lesson.", "sources": [{"kind": "task_outcome", "ref": copilot_ref}]}, format="json"
    )
    assert response.status_code == 400 and "sources" in response.json()["fields"]
    _nothing_written(before)


def test_the_overlay_budget_is_enforced(world, triage, settings):
    settings.BRAIN_OVERLAY_BUDGET_TOKENS = 30
    experience(world, LESSON)
    body = experience(
        world, "Quote the customer's currency in every price you give, with two decimals.", status=400
    )
    assert "budget" in body["fields"]["lesson"][0]


def test_only_admins_create_edit_and_enable_skills(world, triage):
    for who in ("scribe", "reviewer"):
        client = world.client(who)
        assert client.post("/api/skills", {"name": "x", "title": "X"}, format="json").status_code == 403
        assert client.patch("/api/skills/ticket-triage", {"title": "X"}, format="json").status_code == 403
        assert (
            client.put(
                "/api/agents/scribe/skills/ticket-triage", {"enabled": False}, format="json"
            ).status_code
            == 403
        )
    admin = world.client("admin")
    created = admin.post(
        "/api/skills", {"name": "refunds", "title": "Refunds", "instructions": "Ask why."}, format="json"
    )
    assert created.status_code == 201 and created.json()["version"] == 1
    assert admin.post("/api/skills", {"name": "refunds", "title": "Again"}, format="json").json()["fields"][
        "name"
    ]
    edited = admin.patch(
        "/api/skills/refunds", {"instructions": "Ask why, then check the order.", "version": 1}, format="json"
    )
    assert edited.status_code == 200 and edited.json()["version"] == 2
    stale = admin.patch("/api/skills/refunds", {"title": "Refund desk", "version": 1}, format="json")
    assert stale.status_code == 409
    assert admin.put("/api/agents/scribe/skills/refunds", {"enabled": "yes"}, format="json").json()["fields"][
        "enabled"
    ]


def test_a_skill_edit_is_restored_from_the_audit_trail(world, triage):
    admin = world.client("admin")
    admin.patch("/api/skills/ticket-triage", {"instructions": "Be brief."}, format="json")
    event = AuditEvent.objects.get(action="skill.updated")
    assert admin.post("/api/audit/restore", {"events": [event.pk]}, format="json").status_code == 200
    skill = Skill.objects.get(name="ticket-triage")
    assert skill.instructions == BASE and skill.version == 3


def test_the_skills_section_counts_exactly_its_text_and_cuts_an_overlay_at_the_context_budget(world, triage):
    from knowledge.tokens import count_tokens
    from memory.recall.skills import skills_section

    for text in (
        LESSON,
        "Close a ticket only after the customer confirms the fix.",
        "Quote prices in EUR, 2 decimals.",
    ):
        experience(world, text)
    full = skills_section(world.scribe, budget=4000)
    assert full["tokens"] == count_tokens(full["text"]) and len(full["skills"][0]["lessons"]) == 3
    assert full["skills"][0]["tokens"] == full["tokens"]
    tight = skills_section(world.scribe, budget=full["tokens"] - 5)
    assert tight["tokens"] == count_tokens(tight["text"]) <= full["tokens"] - 5
    assert len(tight["skills"][0]["lessons"]) == 2 and tight["skills"][0]["truncated"]
    tiny = skills_section(world.scribe, budget=3)
    assert tiny["text"] == "" and tiny["tokens"] == 0


def test_task_outcome_sources_never_go_stale(world, triage):
    lesson = experience(world, LESSON)
    response = world.client("reviewer").post("/api/memory-provenance/check", {}, format="json")
    assert response.status_code in (200, 201, 202), response.json()
    memory = Memory.objects.get(pk=lesson["id"])
    assert not memory.stale and memory.status == "active"
    assert [s.state for s in memory.sources.all()] == ["unchanged"]
    detail = world.client("reviewer").get(f"/api/memory-provenance/{lesson['id']}").json()
    assert detail["sources"][0]["kind"] == "task_outcome"


def test_enablement_is_restorable_and_a_skill_creation_is_not(world, triage):
    admin = world.client("admin")
    admin.put("/api/agents/scribe/skills/ticket-triage", {"enabled": False}, format="json")
    event = AuditEvent.objects.get(action="skill.disabled")
    assert admin.post("/api/audit/restore", {"events": [event.pk]}, format="json").status_code == 200
    assert AgentSkill.objects.get(agent=world.scribe, skill=triage).enabled is True
    created = AuditEvent.objects.get(action="skill.created")
    refused = admin.post("/api/audit/restore", {"events": [created.pk]}, format="json")
    assert refused.status_code == 400 and "never deleted" in str(refused.json())
    assert Skill.objects.filter(name="ticket-triage").exists()
