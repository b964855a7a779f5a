"""No request waits on a model: every endpoint that starts a model-backed run queues a job and
answers at once (202), with a model that would take 30 s to answer; the worker runs the job."""

import pytest

from knowledge.models import ModelJob
from tests import factory
from tests.memory.consolidation.test_consolidation import remember


@pytest.fixture
def slow_model(model_stub):
    model_stub.respond_with(lambda body: {"content": "{}", "delay": 30})
    return model_stub


def _queued(response, stub):
    assert response.status_code == 202, response.content
    assert stub.chat_requests() == []  # the request never reached the model
    job = response.json()
    assert job["state"] == "queued" and job["url"] == f"/api/model-jobs/{job['id']}"
    return job


ENDPOINTS = [
    ("/api/dreaming/stage-a/run", {"channel": "general"}, "dreaming.stage_a"),
    ("/api/dreaming/stage-b/run", {"agent": "copilot"}, "dreaming.stage_b"),
    ("/api/memory-consolidations/run", {}, "consolidation.run"),
    ("/api/agents/copilot/reconcile", None, "reconciler.run"),
]


@pytest.mark.parametrize("path,data,kind", ENDPOINTS)
def test_a_run_request_answers_at_once_with_a_queued_job(world, slow_model, path, data, kind):
    factory.post_messages(world.general, [{"speaker": "ana", "text": "The VPN is down again."}])
    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    client = world.client("admin")
    response = client.post(path, data, format="json") if data is not None else client.post(path)
    job = _queued(response, slow_model)
    assert job["kind"] == kind and job["requested_by"] == "person:adam"
    assert client.get(job["url"]).json()["state"] == "queued"


def test_the_console_run_buttons_queue_and_show_progress(world, slow_model, client):
    client.force_login(world.admin)
    for path in ("/knowledge/status/stage-a/general/run", "/consolidation/run", "/agents/copilot/reconcile"):
        response = client.post(path)
        assert response.status_code == 302 and response["Location"].startswith("/models/jobs/"), path
    response = client.post("/knowledge/dreaming/run", {"agent": "copilot"})
    assert response["Location"].startswith("/models/jobs/")
    assert slow_model.chat_requests() == []
    assert ModelJob.objects.filter(state=ModelJob.QUEUED).count() == 4
    page = client.get(response["Location"]).content.decode()
    assert "queued" in page and 'hx-trigger="every 2s"' in page


def test_a_job_that_is_refused_fails_with_the_reason(world, model_stub):
    from django.utils import timezone

    from curation.models import StageBCursor
    from knowledge.llm.jobs import job_enqueue, job_run

    job = job_enqueue(
        kind="dreaming.stage_b", args={"agent": world.copilot.pk, "started_by": "x"}, actor="person:adam"
    )
    StageBCursor.objects.update_or_create(agent=world.copilot, defaults={"claimed_at": timezone.now()})
    assert job_run(job.pk) == "failed"
    job.refresh_from_db()
    assert job.state == ModelJob.FAILED and "another stage B run" in job.error
    assert job_run(job.pk).startswith("not claimed")  # a job runs once
    shown = world.client("reviewer").get(f"/api/model-jobs/{job.pk}").json()
    assert shown["state"] == "failed" and "another stage B run" in shown["error"]
    assert world.client("copilot").get(f"/api/model-jobs/{job.pk}").status_code == 403
    assert world.client("reviewer").get("/api/model-jobs/999999").status_code == 404


def test_the_context_request_never_waits_on_the_history_fold(world, slow_model):
    conversation = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(
        world.general, [{"speaker": "ana", "text": f"Turn {i} about billing."} for i in range(8)]
    )
    response = world.client("copilot").post(
        "/api/agents/copilot/context", {"conversation": conversation.pk, "q": "billing"}, format="json"
    )
    assert response.status_code == 200
    assert slow_model.chat_requests() == []
    history = next(s for s in response.json()["sections"] if s["name"] == "history")
    assert "in the background" in history["summary"]["note"]


def test_a_job_whose_run_failed_is_failed_not_done(world, model_stub, client):
    """A stage A run that fails (here: the model's reply is not JSON, twice) ends its job as
    failed, with the run's reason: the job page is not headed "done"."""
    from knowledge.llm.jobs import job_run

    factory.post_messages(world.general, [{"speaker": "ana", "text": "The VPN is down again."}])
    for _ in range(2):
        model_stub.reply_text("no json here")
    queued = world.client("admin").post("/api/dreaming/stage-a/run", {"channel": "general"}, format="json")
    assert queued.status_code == 202
    job_id = queued.json()["id"]
    assert job_run(job_id) == "failed"
    job = ModelJob.objects.get(pk=job_id)
    assert job.state == ModelJob.FAILED and "failed" in job.error and job.result["state"] == "failed"
    client.force_login(world.admin)
    page = client.get(f"/models/jobs/{job_id}").content.decode()
    assert '<span class="badge bad">failed</span>' in page


def test_a_job_whose_run_was_deferred_says_so(world, model_stub, client):
    """A stage A job while the model server is down: its run is deferred (issue 52) and so is
    the job — not "done" — with the reason, and it says the run goes on by itself."""
    from knowledge.llm.jobs import job_run
    from tests.deferred import server_down

    factory.post_messages(world.general, [{"speaker": "ana", "text": "The VPN is down again."}])
    server_down()
    queued = world.client("admin").post("/api/dreaming/stage-a/run", {"channel": "general"}, format="json")
    assert job_run(queued.json()["id"]) == "deferred"
    job = ModelJob.objects.get(pk=queued.json()["id"])
    assert job.state == ModelJob.DEFERRED and "deferred: unreachable" in job.result["summary"]
    client.force_login(world.admin)
    page = client.get(f"/models/jobs/{job.pk}").content.decode()
    assert '<span class="badge warn">deferred</span>' in page and "goes on by itself" in page
