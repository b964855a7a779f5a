"""The eval gate through the real model client against the loopback stub."""

import pytest

from knowledge.models import AuditEvent, Memory, ModelUsage
from knowledge.principals import services
from memory.gate.datasets import dataset_create
from memory.gate.services import gate_context
from memory.models import GateCheck
from memory.recall.context import context_text
from memory.tasks import gate_run_pending
from tests.factory import SYSTEM

CASES = [
    {"id": "vpn-fix", "input": "Which VPN client fixes VPN-4012?", "expect": {"contains": ["5.2.1"]}},
    {"id": "greeting", "input": "Say hello", "expect": {"regex": ["(?i)hello"]}},
    {"id": "skipped", "input": "no expectations here"},
]
BAD = "VPN-4012 is fixed by client 5.1.0"
GOOD = "The VPN portal is vpn.example.com"


def answers(body):
    """The stub agent: it repeats a client version it finds in its prompt, else knows 5.2.1."""
    prompt = " ".join(m["content"] for m in body["messages"])
    if "hello" in body["messages"][-1]["content"].lower():
        return "Hello!"
    return "Use client 5.1.0" if "5.1.0" in prompt else "Use client 5.2.1"


@pytest.fixture
def gated(world, model_stub):
    dataset_create(actor=SYSTEM, name="memory-gate-copilot", kind="agent_turn", cases=CASES)
    model_stub.respond_with(answers)
    return model_stub


def set_gate(mode):
    services.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_ACTIVATION_GATE", value=mode)


def write(world, text, who="copilot"):
    response = world.client(who).post(
        "/api/memory", {"agent": who, "scope": "shared", "text": text}, format="json"
    )
    assert response.status_code == 201, response.json()
    return Memory.objects.get(pk=response.json()["id"])


def test_a_memory_that_makes_the_agent_answer_wrong_is_regressed(world, gated):
    memory = write(world, BAD)
    response = world.client("reviewer").post(f"/api/memory-gate/{memory.pk}/check")
    assert response.status_code == 201
    body = response.json()
    assert body["verdict"] == "regressed"
    assert body["regressed_cases"] == ["vpn-fix"]
    assert body["calls"] == 4  # two cases with expectations, two calls each
    assert len(gated.requests) == 4
    assert ModelUsage.objects.filter(purpose="gate").count() == 4
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED  # a check changes nothing else
    event = AuditEvent.objects.get(action="memory.gate.regressed")
    assert event.data["regressed_cases"] == ["vpn-fix"] and BAD not in str(event.data)
    listed = world.client("reviewer").get("/api/memory-gate/checks", {"verdict": "regressed"}).json()
    assert [c["memory"] for c in listed["results"]] == [memory.pk]


def test_a_harmless_memory_passes(world, gated):
    memory = write(world, GOOD)
    assert world.client("reviewer").post(f"/api/memory-gate/{memory.pk}/check").json()["verdict"] == "pass"


def test_the_with_memory_prompt_is_what_context_compilation_produces(world, gated):
    memory = write(world, BAD)
    world.client("reviewer").post(f"/api/memory-gate/{memory.pk}/check")
    sent = [r["json"]["messages"] for r in gated.requests]
    turn = CASES[0]["input"]
    without = context_text(gate_context(agent=world.copilot, q=turn, candidate=memory, with_candidate=False))
    with_ = context_text(gate_context(agent=world.copilot, q=turn, candidate=memory, with_candidate=True))
    assert sent[0] == [{"role": "system", "content": without}, {"role": "user", "content": turn}]
    assert sent[1] == [{"role": "system", "content": with_}, {"role": "user", "content": turn}]
    assert BAD in with_ and BAD not in without


def test_an_agent_without_a_dataset_is_untested_and_nothing_is_called(world, model_stub):
    memory = write(world, BAD)
    body = world.client("reviewer").post(f"/api/memory-gate/{memory.pk}/check").json()
    assert body["verdict"] == "untested"
    assert model_stub.requests == []


def test_enforce_mode_keeps_a_regressing_memory_in_the_queue_with_the_case(world, gated):
    set_gate("enforce")
    # scribe has no dataset yet: an untested memory goes into force, and its verdict is audited
    untested = write(world, GOOD, who="scribe")
    assert untested.status == Memory.ACTIVE
    assert AuditEvent.objects.filter(action="memory.gate.untested", object_ids=[str(untested.pk)]).exists()
    dataset_create(actor=SYSTEM, name="memory-gate", kind="agent_turn", cases=CASES)  # gates scribe too
    memory = write(world, BAD, who="scribe")  # a trusted write would go into force
    assert memory.status == Memory.QUEUED
    assert memory.queue_reason == "gate"
    assert "vpn-fix" in memory.status_reason
    assert GateCheck.objects.get(memory=memory).verdict == "regressed"


def test_enforce_mode_lets_a_harmless_memory_through(world, gated):
    set_gate("enforce")
    memory = write(world, GOOD, who="copilot")
    approve = world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    assert approve.status_code == 200, approve.json()
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    assert AuditEvent.objects.filter(action="memory.gate.pass").exists()


def test_a_model_error_during_an_enforce_check_leaves_the_memory_queued(world, gated):
    set_gate("enforce")
    memory = write(world, BAD)
    gated.respond_with(lambda body: {"status": 500, "message": "upstream down"})
    response = world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"
    assert "could not run" in memory.status_reason
    assert GateCheck.objects.get(memory=memory).verdict == "error"
    assert response.status_code == 200


def test_shadow_mode_activates_then_lists_the_regression(world, gated, django_capture_on_commit_callbacks):
    memory = write(world, BAD)
    with django_capture_on_commit_callbacks(execute=True):
        world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE  # activation is exactly as before
    assert GateCheck.objects.get(memory=memory).verdict == "pending"
    assert gated.requests == []  # nothing is asked inside the approval
    assert gate_run_pending() == 1
    assert GateCheck.objects.get(memory=memory).verdict == "regressed"
    assert gate_run_pending() == 0
    listed = world.client("reviewer").get("/api/memory-gate/checks?verdict=regressed").json()
    assert [c["memory"] for c in listed["results"]] == [memory.pk]


def test_off_mode_checks_nothing(world, gated, django_capture_on_commit_callbacks):
    set_gate("off")
    memory = write(world, BAD)
    with django_capture_on_commit_callbacks(execute=True):
        world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    assert not GateCheck.objects.exists()
    assert gated.requests == []


def test_procedures_are_gated_the_same_way(world, gated):
    set_gate("enforce")
    response = world.client("copilot").post(
        "/api/memory",
        {
            "agent": "copilot",
            "scope": "shared",
            "tier": "procedural",
            "text": "To fix VPN-4012 install client 5.1.0",
        },
        format="json",
    )
    memory = Memory.objects.get(pk=response.json()["id"])
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"


def test_the_memory_page_and_queue_show_both_answers(client, world, gated):
    set_gate("enforce")
    memory = write(world, BAD)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    client.force_login(world.reviewer)
    for url in (f"/memories/{memory.pk}/", "/review/", "/gate/"):
        body = client.get(url).content.decode()
        assert "Use client 5.1.0" in body and "Use client 5.2.1" in body, url


def test_only_reviewers_run_checks(world, gated):
    memory = write(world, BAD)
    assert world.client("copilot").post(f"/api/memory-gate/{memory.pk}/check").status_code == 403
    assert world.client("reviewer").post("/api/memory-gate/999999/check").status_code == 404
    assert world.client("reviewer").get("/api/memory-gate/checks?verdict=nope").status_code == 400


def test_shadow_mode_queues_nothing_for_an_agent_without_a_dataset(
    world, model_stub, django_capture_on_commit_callbacks
):
    memory = write(world, BAD)
    with django_capture_on_commit_callbacks(execute=True):
        world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    assert not GateCheck.objects.exists()
