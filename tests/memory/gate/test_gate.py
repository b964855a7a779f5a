"""The eval gate through the real model client against the loopback stub. Every check is a
queued model job: a request queues it and answers at once; the tests run the job (`run_checks`)
as the worker would, after the request."""

import pytest

from knowledge.llm.jobs import job_run
from knowledge.models import AuditEvent, Memory, ModelJob, ModelUsage
from knowledge.principals import services
from memory.gate.datasets import dataset_create
from memory.gate.services import MAX_DEFERRALS, gate_context
from memory.models import GateCheck
from memory.recall.context import context_text
from memory.tasks import gate_run_pending
from tests.deferred import server_down
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


def set_gate(mode, unchecked=None):
    services.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_ACTIVATION_GATE", value=mode)
    if unchecked:
        services.setting_set(actor=SYSTEM, name="BRAIN_GATE_UNCHECKED", value=unchecked)


def write(world, text, who="copilot"):
    response = world.client(who).post(
        "/api/memory", {"agent": who, "scope": "shared", "text": text}, format="json"
    )
    assert response.status_code == 201, response.json()
    return Memory.objects.get(pk=response.json()["id"])


def run_checks() -> list[dict]:
    """What the worker does after the request: run every queued gate-check job."""
    ran = []
    for job in ModelJob.objects.filter(kind="gate.check", state=ModelJob.QUEUED).order_by("id"):
        job_run(job.pk)
        ran.append(ModelJob.objects.get(pk=job.pk).result)
    return ran


def check_now(world, memory, who="reviewer"):
    """POST …/check answers 202 with a queued job, having asked the model nothing; then the job runs."""
    response = world.client(who).post(f"/api/memory-gate/{memory.pk}/check")
    assert response.status_code == 202, response.content
    job = response.json()
    assert job["kind"] == "gate.check" and job["state"] == "queued"
    assert GateCheck.objects.get(pk=job["args"]["check"]).verdict == "pending"
    assert ModelUsage.objects.filter(purpose="gate").count() == 0
    job_run(job["id"])
    shown = world.client(who).get(job["url"]).json()
    assert shown["state"] == "done", shown
    return shown["result"], GateCheck.objects.get(pk=job["args"]["check"])


def test_a_memory_that_makes_the_agent_answer_wrong_is_regressed(world, gated):
    memory = write(world, BAD)
    result, check = check_now(world, memory)
    assert result["verdict"] == check.verdict == "regressed" and result["memory"] == memory.pk
    assert check.regressed_cases == ["vpn-fix"]
    assert check.calls == 4  # two cases with expectations, two calls each
    assert len(gated.requests) == 4
    assert ModelUsage.objects.filter(purpose="gate").count() == 4
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "new"  # a check changes nothing else
    event = AuditEvent.objects.get(action="memory.gate.regressed")
    assert event.data["regressed_cases"] == ["vpn-fix"] and BAD not in str(event.data)
    listed = world.client("reviewer").get("/api/memory-gate/checks", {"verdict": "regressed"}).json()
    assert [c["memory"] for c in listed["results"]] == [memory.pk]


def test_a_harmless_memory_passes(world, gated):
    memory = write(world, GOOD)
    assert check_now(world, memory)[1].verdict == "pass"


def test_the_with_memory_prompt_is_what_context_compilation_produces(world, gated):
    memory = write(world, BAD)
    check_now(world, memory)
    sent = [r["json"]["messages"] for r in gated.requests]
    turn = CASES[0]["input"]
    without = context_text(gate_context(agent=world.copilot, q=turn, candidate=memory, with_candidate=False))
    with_ = context_text(gate_context(agent=world.copilot, q=turn, candidate=memory, with_candidate=True))
    assert sent[0] == [{"role": "system", "content": without}, {"role": "user", "content": turn}]
    assert sent[1] == [{"role": "system", "content": with_}, {"role": "user", "content": turn}]
    assert BAD in with_ and BAD not in without


def test_an_agent_without_a_dataset_is_untested_and_nothing_is_called(world, model_stub):
    memory = write(world, BAD)
    assert check_now(world, memory)[1].verdict == "untested"
    assert model_stub.requests == []


def test_the_console_button_queues_the_check_and_shows_the_job(client, world, gated):
    memory = write(world, BAD)
    client.force_login(world.reviewer)
    response = client.post(f"/memories/{memory.pk}/gate-check")
    assert response.status_code == 302 and response["Location"].startswith("/models/jobs/")
    assert gated.requests == []
    run_checks()
    page = client.get(response["Location"]).content.decode()
    assert "regressed" in page and f"/memories/{memory.pk}/" in page


# --- enforce: held in the queue, activated by the job -------------------------------------------


def test_enforce_mode_holds_a_trusted_write_until_its_check_and_keeps_a_regression(world, gated):
    set_gate("enforce")
    # scribe has no dataset yet: an untested memory goes into force, and its verdict is audited
    untested = write(world, GOOD, who="scribe")
    assert untested.status == Memory.ACTIVE
    assert AuditEvent.objects.filter(action="memory.gate.untested", object_ids=[str(untested.pk)]).exists()
    dataset_create(actor=SYSTEM, name="memory-gate", kind="agent_turn", cases=CASES)  # gates scribe too
    memory = write(world, BAD, who="scribe")  # a trusted write would go into force
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"
    assert "waiting for the eval gate" in memory.status_reason
    assert gated.requests == []  # nothing asked inside the write
    assert GateCheck.objects.get(memory=memory).verdict == "pending"
    [result] = run_checks()
    assert result["verdict"] == "regressed" and result["status"] == "queued"
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"
    assert "vpn-fix" in memory.status_reason


def test_a_held_trusted_write_goes_into_force_when_its_check_passes(world, gated):
    set_gate("enforce")
    dataset_create(actor=SYSTEM, name="memory-gate", kind="agent_turn", cases=CASES)
    memory = write(world, GOOD, who="scribe")
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"
    [result] = run_checks()
    assert result["verdict"] == "pass" and result["status"] == "active"
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE and memory.queue_reason == "" and memory.valid_from is not None
    event = AuditEvent.objects.get(action="memory.activated", object_ids=[str(memory.pk)])
    assert event.actor_name == "eval-gate" and event.data["route"] == "api_write"


def test_the_check_is_started_by_the_worker_once_the_write_commits(
    world, gated, django_capture_on_commit_callbacks
):
    """The write's transaction queues the job; django-q2 (synchronous in tests) runs it after the
    commit, outside the request's transaction and lock."""
    set_gate("enforce")
    dataset_create(actor=SYSTEM, name="memory-gate", kind="agent_turn", cases=CASES)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        memory = write(world, GOOD, who="scribe")
    assert memory.status == Memory.QUEUED and gated.requests == []
    for callback in callbacks:  # what the commit starts
        callback()
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    assert ModelJob.objects.get(kind="gate.check").state == ModelJob.DONE


def test_enforce_mode_holds_an_approval_and_the_job_activates_it(world, gated):
    set_gate("enforce")
    memory = write(world, GOOD, who="copilot")
    approve = world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    assert approve.status_code == 200, approve.json()
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"
    assert gated.requests == []
    # a second approval while it waits queues no second check
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    assert GateCheck.objects.filter(memory=memory).count() == 1
    run_checks()
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    assert AuditEvent.objects.filter(action="memory.gate.pass").exists()
    assert AuditEvent.objects.get(action="memory.activated").data["route"] == "review"


def test_an_outage_defers_the_check_and_the_sweep_finishes_it_when_the_server_answers(world, gated):
    set_gate("enforce")
    memory = write(world, GOOD)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    gated.respond_with(lambda body: {"status": 503, "message": "upstream down"})
    [result] = run_checks()
    check = GateCheck.objects.get(memory=memory)
    assert result["verdict"] == "pending" and "put off" in result["summary"]
    assert check.verdict == "pending" and check.deferrals == 1 and "HTTP 503" in check.reason
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"  # not a regression
    assert not AuditEvent.objects.filter(action__startswith="memory.gate.").exists()

    gated.respond_with(answers)  # the server is back
    assert gate_run_pending() == 1
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    assert GateCheck.objects.get(memory=memory).verdict == "pass"


def test_an_outage_that_lasts_ends_as_unchecked_and_hold_leaves_it_to_a_reviewer(world, gated):
    set_gate("enforce")
    memory = write(world, BAD)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    gated.respond_with(lambda body: {"status": 503, "message": "upstream down"})
    GateCheck.objects.filter(memory=memory).update(deferrals=MAX_DEFERRALS - 1)
    run_checks()
    check = GateCheck.objects.get(memory=memory)
    assert check.verdict == "unchecked" and f"in {MAX_DEFERRALS} tries" in check.reason
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"
    assert "not checked" in memory.status_reason and "reviewer" in memory.status_reason
    # hold: the reviewer's approval now decides, without asking the model again
    asked = len(gated.requests)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE and len(gated.requests) == asked
    assert GateCheck.objects.filter(memory=memory).count() == 1


def test_a_memory_held_unchecked_by_an_outage_is_checked_again_once_the_server_answers(world, gated):
    """Not left to a reviewer for good: once the server answers, the sweep runs the check
    again by itself, and the memory goes into force when it passes."""
    set_gate("enforce")
    memory = write(world, GOOD)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    gated.respond_with(lambda body: {"status": 503, "message": "upstream down"})
    GateCheck.objects.filter(memory=memory).update(deferrals=MAX_DEFERRALS - 1)
    run_checks()
    assert GateCheck.objects.get(memory=memory).verdict == "unchecked"
    server_down("default")  # the background check finds the server down: not asked again
    assert gate_run_pending() == 0
    assert GateCheck.objects.get(memory=memory).verdict == "unchecked"

    server_down("default", down=False)  # the server is back
    gated.respond_with(answers)
    assert gate_run_pending() == 1
    check = GateCheck.objects.get(memory=memory)
    assert check.verdict == "pass" and check.deferrals == 0
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE


def test_a_cut_answer_is_asked_again_once(world, gated):
    memory = write(world, BAD)
    gated.reply_cut("Use client")
    assert check_now(world, memory)[1].verdict == "regressed"
    assert len(gated.requests) == 5  # four answers, one of them asked twice


def test_two_cut_answers_are_unchecked_never_a_regression(world, gated):
    set_gate("enforce", unchecked="activate")
    memory = write(world, BAD, who="copilot")
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    gated.respond_with(lambda body: {"content": "Use client", "finish_reason": "length"})
    [result] = run_checks()
    check = GateCheck.objects.get(memory=memory)
    assert check.verdict == "unchecked" and check.regressed_cases == []
    assert "cut off" in check.reason and len(gated.requests) == 2
    assert AuditEvent.objects.filter(action="memory.gate.unchecked").exists()
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE  # BRAIN_GATE_UNCHECKED activate
    assert result["status"] == "active"


def test_a_model_that_is_not_configured_is_unchecked_and_held(world, gated, settings):
    set_gate("enforce")
    memory = write(world, GOOD)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    settings.BRAIN_MODEL_BASE_URL = ""
    run_checks()
    check = GateCheck.objects.get(memory=memory)
    assert check.verdict == "unchecked" and check.calls == 1
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and "not checked" in memory.status_reason


def test_a_check_a_dead_worker_left_running_is_taken_back_by_the_sweep(world, gated):
    from datetime import timedelta

    from django.utils import timezone

    set_gate("enforce")
    memory = write(world, GOOD)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    GateCheck.objects.update(verdict="running", started_at=timezone.now() - timedelta(hours=1))
    assert gate_run_pending() == 1
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE


def test_a_memory_decided_while_its_check_waited_is_left_alone(world, gated):
    set_gate("enforce")
    memory = write(world, BAD)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    rejected = world.client("reviewer").post(
        f"/api/memory/{memory.pk}/reject", {"reason": "wrong version"}, format="json"
    )
    assert rejected.status_code == 200, rejected.json()
    [result] = run_checks()
    assert result["verdict"] == "regressed" and "status" not in result
    memory.refresh_from_db()
    assert memory.status == Memory.REJECTED


def test_a_conflict_that_came_up_while_the_check_waited_is_left_to_a_reviewer(world, gated):
    from tests.memory.consolidation.test_consolidation import remember

    set_gate("enforce")
    key = "customer.acme.preferences"
    response = world.client("copilot").post(
        "/api/memory",
        {
            "agent": "copilot",
            "scope": "shared",
            "key": key,
            "value": {"channel": "email"},
            "text": "Acme prefers e-mail",
        },
        format="json",
    )
    memory = Memory.objects.get(pk=response.json()["id"])
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    other = remember(world.copilot, "Acme prefers Slack", key=key, value={"channel": "slack"})
    [result] = run_checks()
    assert result["verdict"] == "pass" and result["status"] == "queued"
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "new"
    assert memory.status_reason.startswith("passed the eval gate, but")
    other.refresh_from_db()
    assert other.status == Memory.ACTIVE  # nothing retired without the reviewer's decision
    # the reviewer decides now; the version that passed is not checked again
    asked = len(gated.requests)
    decided = world.client("reviewer").post(
        f"/api/memory/{memory.pk}/approve", {"decision": "replace"}, format="json"
    )
    assert decided.status_code == 200, decided.json()
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE and len(gated.requests) == asked


# --- shadow and off --------------------------------------------------------------------------------


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
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE  # shadow reports; it never holds


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
    run_checks()
    memory.refresh_from_db()
    assert memory.status == Memory.QUEUED and memory.queue_reason == "gate"
    assert GateCheck.objects.get(memory=memory).verdict == "regressed"


def test_the_memory_page_and_queue_show_both_answers(client, world, gated):
    set_gate("enforce")
    memory = write(world, BAD)
    world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    run_checks()
    client.force_login(world.reviewer)
    for url in (f"/memories/{memory.pk}/", "/review/", "/gate/"):
        body = client.get(url).content.decode()
        assert "Use client 5.1.0" in body and "Use client 5.2.1" in body, url


def test_only_reviewers_run_checks(world, gated):
    memory = write(world, BAD)
    assert world.client("copilot").post(f"/api/memory-gate/{memory.pk}/check").status_code == 403
    assert world.client("reviewer").post("/api/memory-gate/999999/check").status_code == 404
    assert world.client("reviewer").get("/api/memory-gate/checks?verdict=nope").status_code == 400
    assert not ModelJob.objects.exists() and not GateCheck.objects.exists()


def test_shadow_mode_queues_nothing_for_an_agent_without_a_dataset(
    world, model_stub, django_capture_on_commit_callbacks
):
    memory = write(world, BAD)
    with django_capture_on_commit_callbacks(execute=True):
        world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json")
    memory.refresh_from_db()
    assert memory.status == Memory.ACTIVE
    assert not GateCheck.objects.exists()
