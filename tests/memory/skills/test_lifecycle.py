"""Lessons through the one activation function (the eval gate) and the Audit tab's restore."""

from knowledge.models import AuditEvent, Memory
from knowledge.principals import services as knowledge_services
from memory.gate.datasets import dataset_create
from memory.gate.services import gate_context
from memory.models import GateCheck
from memory.recall.context import context_text
from tests.factory import SYSTEM
from tests.memory.gate.test_gate import run_checks
from tests.memory.skills.conftest import context, experience, section

HARMFUL = "Tell the customer to reinstall client 5.1.0 whenever the VPN drops."
CASES = [{"id": "vpn-fix", "input": "Which VPN client fixes VPN-4012?", "expect": {"contains": ["5.2.1"]}}]


def answers(body):
    prompt = " ".join(m["content"] for m in body["messages"])
    return "Use client 5.1.0" if "5.1.0" in prompt else "Use client 5.2.1"


def test_the_enforcing_gate_regresses_a_harmful_lesson_and_keeps_it_queued(world, triage, model_stub):
    dataset_create(actor=SYSTEM, name="memory-gate-scribe", kind="agent_turn", cases=CASES)
    model_stub.respond_with(answers)
    knowledge_services.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_ACTIVATION_GATE", value="enforce")

    lesson = experience(world, HARMFUL)  # scribe is trusted: without the gate it would be active
    assert lesson["status"] == "queued" and lesson["queue_reason"] == "gate"
    run_checks()
    assert "vpn-fix" in Memory.objects.get(pk=lesson["id"]).status_reason
    check = GateCheck.objects.get(memory_id=lesson["id"])
    assert check.verdict == "regressed" and check.regressed_cases == ["vpn-fix"]
    assert HARMFUL not in section(context(world), "skills")["text"]

    # The gate placed the lesson where it stands when the skill loads: in the skill's overlay.
    memory = Memory.objects.get(pk=lesson["id"])
    with_ = gate_context(agent=world.scribe, q=CASES[0]["input"], candidate=memory, with_candidate=True)
    without = gate_context(agent=world.scribe, q=CASES[0]["input"], candidate=memory, with_candidate=False)
    assert HARMFUL in section(with_, "skills")["text"] and HARMFUL not in context_text(without)
    assert HARMFUL not in section(with_, "recalled_memory")["text"]
    sent = [r["json"]["messages"][0]["content"] for r in model_stub.requests]
    assert sent == [context_text(without), context_text(with_)]


def test_a_lesson_that_passes_the_enforcing_gate_goes_into_force(world, triage, model_stub):
    dataset_create(actor=SYSTEM, name="memory-gate-scribe", kind="agent_turn", cases=CASES)
    model_stub.respond_with(answers)
    knowledge_services.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_ACTIVATION_GATE", value="enforce")
    lesson = experience(world, "Ask for the ticket number before searching the knowledge base.")
    assert lesson["status"] == "queued" and lesson["queue_reason"] == "gate"
    run_checks()
    assert Memory.objects.get(pk=lesson["id"]).status == "active"


def test_a_lessons_removal_is_restored_from_the_audit_tab(world, triage, client):
    lesson = experience(world, "Ask for the ticket number before searching the knowledge base.")
    admin = world.client("admin")
    assert admin.post(f"/api/lessons/{lesson['id']}/remove", {}, format="json").json()["fields"]["reason"]
    removed = admin.post(
        f"/api/lessons/{lesson['id']}/remove", {"reason": "obsolete since KB search asks"}, format="json"
    )
    assert removed.status_code == 200 and removed.json()["status"] == "invalidated"
    assert "before searching" not in section(context(world), "skills")["text"]

    event = AuditEvent.objects.get(action="lesson.removed")
    assert event.reason == "obsolete since KB search asks" and event.data["skill"] == "ticket-triage"
    client.force_login(world.admin)
    page = client.get("/knowledge/audit/restore", {"events": [event.pk]})
    assert page.status_code == 200
    response = client.post("/knowledge/audit/restore", {"events": [event.pk]})
    assert response.status_code == 302
    assert Memory.objects.get(pk=lesson["id"]).status == "active"
    assert "before searching" in section(context(world), "skills")["text"]


def test_an_admins_edit_is_a_new_version_with_a_reason_and_restorable(world, triage):
    lesson = experience(world, "Ask for the ticket number before searching the knowledge base.")
    admin = world.client("admin")
    body = {"text": "Ask for the ticket number and device before searching the knowledge base."}
    assert admin.patch(f"/api/lessons/{lesson['id']}", body, format="json").json()["fields"]["reason"]
    edited = admin.patch(
        f"/api/lessons/{lesson['id']}", {**body, "reason": "device matters"}, format="json"
    ).json()
    assert edited["version"] == 2 and edited["author"] == "person:adam"
    assert (
        world.client("scribe").patch(f"/api/lessons/{lesson['id']}", body, format="json").status_code == 403
    )
    event = AuditEvent.objects.get(action="lesson.edited")
    assert admin.post("/api/audit/restore", {"events": [event.pk]}, format="json").status_code == 200
    memory = Memory.objects.get(pk=lesson["id"])
    assert memory.text == lesson["text"] and memory.version == 3


def test_lessons_are_reordered_by_admins(world, triage):
    a = experience(world, "Ask for the ticket number before searching the knowledge base.")
    b = experience(world, "Close a ticket only after the customer confirms the fix.")
    admin = world.client("admin")
    assert (
        admin.put(
            "/api/agents/scribe/skills/ticket-triage/order", {"order": [b["id"]]}, format="json"
        ).status_code
        == 400
    )
    loaded = admin.put(
        "/api/agents/scribe/skills/ticket-triage/order", {"order": [b["id"], a["id"]]}, format="json"
    ).json()
    assert [x["id"] for x in loaded["lessons"]] == [b["id"], a["id"]]
    text = section(context(world), "skills")["text"]
    assert text.index("Close a ticket") < text.index("Ask for the ticket number")
    assert AuditEvent.objects.filter(action="lesson.reordered").count() == 1


def test_status_alerts_overlays_over_budget_and_lints_lessons_without_source(world, triage, client, settings):
    from django.db import transaction

    from knowledge.memories.activation import memory_row_create

    experience(world, "Ask for the ticket number before searching the knowledge base.")
    with transaction.atomic():  # an imported row that cites nothing (the API refuses such a lesson)
        bare = memory_row_create(
            owner=world.scribe,
            store="self",
            text="Always escalate on Fridays.",
            author_kind="system",
            author_name="import",
            status="active",
            tier="procedural",
            category="lesson",
            skill=triage,
            position=1,
        )
    client.force_login(world.admin)
    page = client.get("/knowledge/status/")
    lint = next(x for x in page.context["lints"] if x.code == "lessons-without-source")
    assert lint.count == 1 and [i["memory"] for i in lint.items] == [bare.pk]
    assert f"/memories/{bare.pk}/" in page.content.decode()
    assert not page.context["status"]["overlays_over_budget"]

    settings.BRAIN_OVERLAY_BUDGET_TOKENS = 10
    body = world.client("reviewer").get("/api/status").json()
    assert [(o["agent"], o["skill"]) for o in body["overlays_over_budget"]] == [("scribe", "ticket-triage")]
    assert any("over the overlay budget" in a["text"] for a in body["alerts"])
    assert "over the overlay budget" in client.get("/knowledge/status/").content.decode()


def test_consolidation_leaves_lessons_to_their_overlay(world, triage):
    from django.db import transaction

    from knowledge.memories.activation import memory_row_create
    from memory.consolidation import consolidation_run

    with transaction.atomic():  # two identical lessons (imported rows; the API refuses the second)
        for position in (0, 1):
            memory_row_create(
                owner=world.scribe,
                store="self",
                text="Always escalate on Fridays.",
                author_kind="system",
                author_name="import",
                status="active",
                tier="procedural",
                category="lesson",
                skill=triage,
                position=position,
            )
    plan = consolidation_run(actor=SYSTEM, mode="apply")
    assert plan.counts.get("duplicates_folded", 0) == 0
    assert Memory.objects.filter(skill=triage, status="active").count() == 2
