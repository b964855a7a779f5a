"""No HTTP request waits on a model (issue 52): every model-backed action, started through the API
and through the console, answers while a model that takes 20 s per reply has not even been
asked. The stub records each chat request as it arrives, before its delay, and counts the ones
it has not answered (`in_flight`); the client's timeout is raised past the delay, so a request
that called the model inline would show a recorded call and take the full 20 s.

What each request leaves for the worker (a model job, the distiller, material learning, the
history fold) is captured, not run: the tests assert it was queued, and the work itself is
covered by each package's own tests. The time bound is far below the model's 20 s rather than a
tight one, so a loaded machine does not fail it; the proof is that no call had started."""

import time
from dataclasses import dataclass

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Material, Memory, ModelJob
from knowledge.principals import services as settings_service
from memory.gate.datasets import dataset_create
from tests import factory
from tests.factory import SYSTEM
from tests.memory.consolidation.test_consolidation import remember
from tests.memory.gate.test_gate import CASES

MODEL_SECONDS = 20
BOUND_SECONDS = MODEL_SECONDS / 2  # an inline call would take all of MODEL_SECONDS


@pytest.fixture
def sleepy(world, model_stub, settings):
    """A model that takes 20 s per reply; the gate enforcing over every agent; data for every
    model-backed action to work on."""
    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 60
    model_stub.respond_with(lambda body: {"content": "{}", "delay": MODEL_SECONDS})
    settings_service.setting_set(actor=SYSTEM, name="BRAIN_MEMORY_ACTIVATION_GATE", value="enforce")
    dataset_create(actor=SYSTEM, name="memory-gate", kind="agent_turn", cases=CASES)
    factory.post_messages(world.general, [{"speaker": "ana", "text": "The VPN is down again."}])
    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    return model_stub


@dataclass
class Answered:
    response: object
    seconds: float
    queued: int  # on-commit work the request left for the worker (jobs, tasks)


def answered(stub, django_capture_on_commit_callbacks, send) -> Answered:
    """Send one request; assert the model was not asked while it ran."""
    jobs_before = ModelJob.objects.count()
    in_flight = stub.in_flight  # an earlier test's slow call may still be sleeping in the stub
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        started = time.monotonic()
        response = send()
        seconds = time.monotonic() - started
    assert response.status_code < 400, getattr(response, "content", b"")[:500]
    # recorded on arrival, before the stub's delay: none came, none of this test's is in flight
    assert stub.chat_requests() == [] and stub.in_flight <= in_flight, "the request asked the model"
    assert seconds < BOUND_SECONDS, f"{seconds:.1f} s"
    assert ModelJob.objects.count() >= jobs_before
    return Answered(response, seconds, len(callbacks))


def queued_memory(world, text="VPN-4012 is fixed by client 5.1.0"):
    response = world.client("copilot").post(
        "/api/memory", {"agent": "copilot", "scope": "shared", "text": text}, format="json"
    )
    assert response.status_code == 201, response.json()
    return Memory.objects.get(pk=response.json()["id"])


def a_conversation_with_turns(world):
    conversation = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(
        world.general, [{"speaker": "ana", "text": f"Turn {i} about billing."} for i in range(8)]
    )
    return conversation


def an_uploaded_material(world):
    response = world.client("admin").post(
        "/api/materials",
        {
            "file": SimpleUploadedFile("notes.md", b"# Refunds\nRefunds are paid within 30 days."),
            "agent": "copilot",
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    material = Material.objects.get(pk=response.json()["material"]["id"])
    Material.objects.filter(pk=material.pk).update(state=Material.FAILED, reason="the model failed")
    return material


# --- the API -------------------------------------------------------------------------------------

API_JOBS = [
    ("stage A", "/api/dreaming/stage-a/run", {"channel": "general"}, "dreaming.stage_a"),
    ("stage B", "/api/dreaming/stage-b/run", {"agent": "copilot"}, "dreaming.stage_b"),
    ("consolidation", "/api/memory-consolidations/run", {}, "consolidation.run"),
    ("reconcile", "/api/agents/copilot/reconcile", None, "reconciler.run"),
]


@pytest.mark.parametrize("name,path,data,kind", API_JOBS, ids=[a[0] for a in API_JOBS])
def test_an_api_run_answers_202_before_the_model_is_asked(
    world, sleepy, django_capture_on_commit_callbacks, name, path, data, kind
):
    client = world.client("admin")
    done = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: client.post(path, data, format="json") if data is not None else client.post(path),
    )
    assert done.response.status_code == 202 and done.queued == 1
    assert ModelJob.objects.get(pk=done.response.json()["id"]).kind == kind


def test_an_api_gate_check_answers_202_before_the_model_is_asked(
    world, sleepy, django_capture_on_commit_callbacks
):
    memory = queued_memory(world)
    done = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: world.client("reviewer").post(f"/api/memory-gate/{memory.pk}/check"),
    )
    assert done.response.status_code == 202 and done.response.json()["kind"] == "gate.check"


def test_an_enforced_write_and_approval_answer_before_the_gate_asks_the_model(
    world, sleepy, django_capture_on_commit_callbacks
):
    trusted = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: world.client("scribe").post(
            "/api/memory",
            {"agent": "scribe", "scope": "shared", "text": "VPN portal is vpn.example.com"},
            format="json",
        ),
    )
    assert trusted.response.json()["queue_reason"] == "gate" and trusted.queued >= 1
    memory = queued_memory(world)
    approval = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: world.client("reviewer").post(f"/api/memory/{memory.pk}/approve", {}, format="json"),
    )
    memory.refresh_from_db()
    assert memory.queue_reason == "gate" and approval.queued >= 1
    block = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: world.client("scribe").post(
            "/api/entries",
            {"name": "VPN", "scope": "shared", "blocks": [{"text": "VPN needs MFA."}]},
            format="json",
        ),
    )
    assert Memory.objects.get(pk=block.response.json()["blocks"][0]["id"]).queue_reason == "gate"
    assert ModelJob.objects.filter(kind="gate.check", state=ModelJob.QUEUED).count() == 3


def test_the_context_request_leaves_the_history_fold_to_the_worker(
    world, sleepy, django_capture_on_commit_callbacks
):
    conversation = a_conversation_with_turns(world)
    done = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: world.client("copilot").post(
            "/api/agents/copilot/context", {"conversation": conversation.pk, "q": "billing"}, format="json"
        ),
    )
    history = next(s for s in done.response.json()["sections"] if s["name"] == "history")
    assert "in the background" in history["summary"]["note"] and done.queued >= 1


def test_finishing_a_conversation_leaves_the_distiller_to_the_worker(
    world, sleepy, django_capture_on_commit_callbacks
):
    conversation = a_conversation_with_turns(world)
    done = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: world.client("copilot").post(f"/api/conversations/{conversation.pk}/finish"),
    )
    assert done.queued >= 1


def test_a_material_upload_and_retry_leave_learning_to_the_worker(
    world, sleepy, django_capture_on_commit_callbacks
):
    upload = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: world.client("admin").post(
            "/api/materials",
            {"file": SimpleUploadedFile("plan.md", b"# A\nalpha\n# B\nbeta"), "agent": "copilot"},
            format="multipart",
        ),
    )
    assert upload.queued >= 1
    material = an_uploaded_material(world)
    retry = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: world.client("admin").post(
            f"/api/materials/{material.pk}/retry", {"again": True}, format="json"
        ),
    )
    assert retry.queued >= 1


# --- the console ---------------------------------------------------------------------------------

CONSOLE_JOBS = [
    ("stage A", "/knowledge/status/stage-a/general/run", {}, "dreaming.stage_a"),
    ("stage B", "/knowledge/dreaming/run", {"agent": "copilot"}, "dreaming.stage_b"),
    ("consolidation", "/consolidation/run", {}, "consolidation.run"),
    ("reconcile", "/agents/copilot/reconcile", {}, "reconciler.run"),
]


@pytest.mark.parametrize("name,path,data,kind", CONSOLE_JOBS, ids=[c[0] for c in CONSOLE_JOBS])
def test_a_console_run_button_redirects_to_its_job_before_the_model_is_asked(
    world, sleepy, client, django_capture_on_commit_callbacks, name, path, data, kind
):
    client.force_login(world.admin)
    done = answered(sleepy, django_capture_on_commit_callbacks, lambda: client.post(path, data))
    assert done.response.status_code == 302 and done.response["Location"].startswith("/models/jobs/")
    job_id = int(done.response["Location"].rstrip("/").rsplit("/", 1)[1])
    assert ModelJob.objects.get(pk=job_id).kind == kind and done.queued == 1


def test_the_console_gate_button_and_approvals_answer_before_the_model_is_asked(
    world, sleepy, client, django_capture_on_commit_callbacks
):
    client.force_login(world.reviewer)
    memory = queued_memory(world)
    check = answered(
        sleepy, django_capture_on_commit_callbacks, lambda: client.post(f"/memories/{memory.pk}/gate-check")
    )
    assert check.response["Location"].startswith("/models/jobs/")
    approve = answered(
        sleepy, django_capture_on_commit_callbacks, lambda: client.post(f"/review/{memory.pk}/approve")
    )
    memory.refresh_from_db()
    assert approve.response.status_code in (200, 302) and memory.queue_reason == "gate"
    others = [queued_memory(world, f"Printer {i} is on floor {i}") for i in range(2)]
    bulk = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: client.post("/review/bulk", {"ids": [m.pk for m in others], "action": "approve"}),
    )
    assert bulk.response.status_code in (200, 302)
    assert {m.queue_reason for m in Memory.objects.filter(pk__in=[m.pk for m in others])} == {"gate"}
    assert ModelJob.objects.filter(kind="gate.check").count() == 4


def test_the_console_material_upload_and_retry_answer_before_the_model_is_asked(
    world, sleepy, client, django_capture_on_commit_callbacks
):
    client.force_login(world.admin)
    upload = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: client.post(
            "/knowledge/materials/new",
            {
                "agent": "copilot",
                "scope": "shared",
                "title": "Plan",
                "file": SimpleUploadedFile("plan.md", b"# A\nalpha"),
            },
        ),
    )
    assert upload.response.status_code == 302 and upload.queued >= 1
    material = an_uploaded_material(world)
    retry = answered(
        sleepy,
        django_capture_on_commit_callbacks,
        lambda: client.post(f"/knowledge/materials/{material.pk}/retry"),
    )
    assert retry.queued >= 1
