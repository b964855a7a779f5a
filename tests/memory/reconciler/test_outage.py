"""Issue 52: a reconciler pass whose model work meets an outage defers that work — no
extractive digest nor formula winner in its place, the memories untouched — and the pass comes
back by itself through its deferral (knowledge.llm.outage) once the model server answers; the
tick and the hourly expiry leave an agent whose pass waits to that deferral."""

import datetime

from django.utils import timezone

from knowledge.models import Memory, ModelUsage
from memory.models import ConsolidationGroup, ConsolidationPlan, ReconcilerRun
from memory.reconciler.selectors import RESUME
from memory.reconciler.tasks import reconciler_tick
from memory.tasks import expire_short_term_memory
from tests import factory
from tests.deferred import deferred, run_deferred, server_down
from tests.memory.consolidation.test_consolidation import remember
from tests.memory.reconciler.test_reconciler import expired_episodes, run

TEXTS = ["Ana asked for the invoice copy", "Ana wants it by mail"]
SUMMARY = "Ana wants a copy of the invoice by mail."


def test_an_outage_defers_the_digest_keeps_the_episodes_and_the_pass_returns_when_the_server_answers(
    world, model_stub, settings
):
    settings.BRAIN_MEMORY_CONSOLIDATION = "apply"
    conv = factory.make_conversation(world.copilot, world.general)
    originals = expired_episodes(world.copilot, conv, TEXTS)
    ids = [m.pk for m in originals]

    server_down()  # the background check found the endpoint down
    expire_short_term_memory()
    assert model_stub.chat_requests() == []  # not called
    assert not Memory.objects.filter(category="digest").exists()  # no extractive digest instead
    assert Memory.objects.filter(pk__in=ids, status=Memory.ACTIVE).count() == 2  # kept, not expired
    (waiting,) = deferred(RESUME)
    first = ReconcilerRun.objects.get()
    assert first.state == ReconcilerRun.DONE and "deferred: unreachable" in first.note
    assert first.counts["digests_deferred"] == 1

    # an hour later, still down: no second pass, no second deferral, the episodes still kept
    expire_short_term_memory()
    assert ReconcilerRun.objects.count() == 1 and len(deferred(RESUME)) == 1
    assert Memory.objects.filter(pk__in=ids, status=Memory.ACTIVE).count() == 2

    # the deferral comes back while the server is still down: it defers again, calls nothing
    assert run_deferred(waiting).startswith("deferred again: unreachable")
    assert model_stub.chat_requests() == [] and ReconcilerRun.objects.count() == 1
    (waiting,) = deferred(RESUME)
    assert waiting.kwargs == repr({"deferrals": 2})

    server_down(down=False)
    model_stub.reply_json({"text": SUMMARY})
    assert run_deferred(waiting).startswith("run ")
    digest = Memory.objects.get(category="digest")
    assert SUMMARY in digest.text and digest.status == Memory.ACTIVE
    assert Memory.objects.filter(pk__in=ids, status=Memory.EXPIRED, superseded_by=digest).count() == 2
    assert ModelUsage.objects.get().purpose == "reconciler.digest"
    assert deferred(RESUME) == []


def test_a_call_the_server_does_not_answer_writes_no_lesser_digest_and_the_deferral_finishes_it(
    world, model_stub, settings
):
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    conv = factory.make_conversation(world.copilot, world.general)
    originals = expired_episodes(world.copilot, conv, TEXTS)
    model_stub.reply_error(503, "loading model")
    first = run(world.copilot, jobs=("digest",), mode="propose")
    assert first.plan.state == ConsolidationPlan.EMPTY  # nothing written in its place
    assert "deferred: failing: HTTP 503" in first.note
    assert Memory.objects.filter(pk__in=[m.pk for m in originals], status=Memory.ACTIVE).count() == 2
    (waiting,) = deferred(RESUME)
    assert not deferred("memory.consolidation.plans.consolidation_resume")  # not consolidation's

    model_stub.reply_json({"text": SUMMARY})
    run_deferred(waiting)
    group = ConsolidationPlan.objects.get(state=ConsolidationPlan.PROPOSED).groups.get()
    assert group.kind == ConsolidationGroup.DIGEST and SUMMARY in group.merged_text
    assert deferred(RESUME) == []


def test_with_the_arbiter_on_an_outage_defers_the_conflict_instead_of_the_formula_settling_it(
    world, model_stub, settings
):
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    settings.BRAIN_RECONCILER_ARBITER = True
    settings.BRAIN_MEMORY_CONSOLIDATION = "apply"  # the mode the deferred pass runs in, as the tick's
    old = remember(world.copilot, "Acme's SLA is 8 hours", key="acme.sla", value="8h", age_days=90)
    new = remember(world.copilot, "Acme's SLA is 4 hours", key="acme.sla", value="4h")
    model_stub.reply_error(503, "loading model")
    first = run(world.copilot, jobs=("conflicts",))
    assert first.plan.state == ConsolidationPlan.EMPTY and first.counts["conflicts_deferred"] == 1
    assert Memory.objects.filter(pk__in=[old.pk, new.pk], status=Memory.ACTIVE).count() == 2
    (waiting,) = deferred(RESUME)

    model_stub.reply_json({"winner": old.pk, "reason": "the contract says 8 hours"})
    run_deferred(waiting)
    group = ConsolidationPlan.objects.get(state=ConsolidationPlan.APPLIED).groups.get()
    assert group.target_id == old.pk and group.reason.startswith("arbiter v1:")
    assert Memory.objects.get(pk=new.pk).status == Memory.SUPERSEDED


def test_the_tick_leaves_an_agent_whose_pass_waits_to_its_deferral(world, model_stub, settings):
    settings.BRAIN_RECONCILER_ARBITER = True
    remember(world.copilot, "Acme's SLA is 8 hours", key="acme.sla", value="8h", age_days=90)
    remember(world.copilot, "Acme's SLA is 4 hours", key="acme.sla", value="4h")
    server_down()
    later = timezone.now() + datetime.timedelta(hours=1)  # idle long enough to be due
    assert reconciler_tick(now=later) == ["copilot"]
    assert len(deferred(RESUME)) == 1
    remember(world.copilot, "Acme's support line opens at 8", key="acme.hours", value="8")
    # due again (new activity, then quiet), but its pass waits for the server: not run twice
    assert reconciler_tick(now=later + datetime.timedelta(hours=1)) == []
    assert ReconcilerRun.objects.filter(agent=world.copilot).count() == 1
    assert len(deferred(RESUME)) == 1


def test_a_reconcile_job_whose_model_work_was_deferred_says_so(world, model_stub):
    from knowledge.llm.jobs import job_run
    from knowledge.models import ModelJob

    conv = factory.make_conversation(world.copilot, world.general)
    expired_episodes(world.copilot, conv, TEXTS)
    server_down()
    queued = world.client("reviewer").post("/api/agents/copilot/reconcile", format="json")
    assert queued.status_code == 202, queued.content
    assert job_run(queued.json()["id"]) == "deferred"  # not done: its digest waits
    job = ModelJob.objects.get(pk=queued.json()["id"])
    assert job.state == ModelJob.DEFERRED and "deferred: unreachable" in job.result["summary"]
    assert len(deferred(RESUME)) == 1 and not Memory.objects.filter(category="digest").exists()
