"""The distiller, through the real model client against the loopback model server."""

import datetime

import pytest
from django.utils import timezone

from curation import distiller
from curation.distiller import distill_conversation, distill_pending
from curation.models import DistillerRun
from knowledge.models import AuditEvent, Conversation, Memory, ModelUsage
from knowledge.signals import conversation_finished
from tests import factory

T0 = datetime.datetime(2026, 11, 2, 9, 0, tzinfo=datetime.UTC)
TRANSCRIPT = [
    {"speaker": "alice", "text": "Please never call me, e-mail works best.", "at": T0},
    {"speaker": "copilot", "text": "Noted. To reset the VPN token, run vpn-reset then re-enrol.", "at": T0},
]
LEARNT = {
    "memories": [
        {
            "text": "Alice prefers e-mail and does not want phone calls",
            "category": "preference",
            "confidence": 0.9,
        },
        {"text": "To reset a VPN token: run vpn-reset, then re-enrol the device", "category": "procedure"},
    ]
}


@pytest.fixture
def finished(world, monkeypatch):
    """A finished DM conversation between copilot and alice, with a transcript."""
    conversation = factory.make_conversation(world.copilot, world.dm_alice)
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Conversation.FINISHED, finished_at=timezone.now()
    )
    monkeypatch.setattr(
        distiller, "conversation_transcript", lambda c: TRANSCRIPT if c.pk == conversation.pk else []
    )
    conversation.refresh_from_db()
    return conversation


def test_it_proposes_one_memory_per_thing_learnt_into_the_write_store(world, finished, model_stub):
    model_stub.reply_json(LEARNT)
    run = distill_conversation(finished.pk)
    assert run.state == DistillerRun.DONE
    memories = list(Memory.objects.filter(conversation=finished).order_by("id"))
    assert [m.text for m in memories] == [m["text"] for m in LEARNT["memories"]]
    for memory in memories:
        assert (memory.owner, memory.store, memory.status) == (world.copilot, "private:alice", Memory.QUEUED)
        assert memory.author_kind == "distiller"
        assert list(memory.sources.values_list("kind", "ref")) == [("conversation", str(finished.pk))]
    assert [m.tier for m in memories] == [Memory.SEMANTIC, Memory.PROCEDURAL]
    assert memories[0].confidence == 0.9
    (request,) = model_stub.chat_requests()
    assert request["model"] == "stub-light"
    assert "Please never call me" in model_stub.prompt(request)
    usage = ModelUsage.objects.get()
    assert (usage.purpose, usage.agent, usage.outcome, usage.actor) == (
        "distill",
        world.copilot,
        "ok",
        "system:distiller",
    )
    assert AuditEvent.objects.filter(action="memory.written").count() == 2
    event = AuditEvent.objects.get(action="conversation.distilled")
    assert "Alice" not in str(event.data) + event.reason


def test_a_conversation_is_distilled_once(world, finished, model_stub):
    model_stub.respond_with(lambda body: '{"memories": [{"text": "x is y", "category": "workspace_note"}]}')
    distill_conversation(finished.pk)
    assert distill_conversation(finished.pk) is None
    assert distill_pending() == 0
    assert len(model_stub.chat_requests()) == 1
    assert Memory.objects.filter(conversation=finished).count() == 1


def test_auto_activation_puts_distilled_memories_in_force(world, finished, model_stub, settings):
    settings.BRAIN_DISTILLER_AUTO_ACTIVATE = True
    model_stub.reply_json(LEARNT)
    distill_conversation(finished.pk)
    assert set(Memory.objects.filter(conversation=finished).values_list("status", flat=True)) == {
        Memory.ACTIVE
    }


@pytest.mark.parametrize(
    "reply",
    [
        "Alice likes e-mail.",  # prose, not JSON
        '{"memories": [{"text": "Alice likes e-mail", "category": "gossip"}]}',  # unknown category
        '{"memories": [{"text": "   "}]}',  # blank and no category
    ],
)
def test_malformed_output_writes_nothing_and_is_recorded(world, finished, model_stub, reply):
    model_stub.reply_text(reply)
    model_stub.reply_text(reply)  # the one repair gets the same
    run = distill_conversation(finished.pk)
    assert run.state == DistillerRun.FAILED
    assert run.reason.startswith("invalid model output")
    assert Memory.objects.count() == 0
    first, repair = ModelUsage.objects.order_by("pk")
    assert first.outcome == repair.outcome == "invalid" and first.error
    assert run.usage_id == repair.pk
    assert "That reply was refused" in model_stub.prompt(model_stub.chat_requests()[1])
    # A later attempt with good output succeeds.
    model_stub.reply_json(LEARNT)
    assert distill_pending() == 1
    run.refresh_from_db()
    assert (run.state, run.attempts) == (DistillerRun.DONE, 2)


def test_without_a_model_nothing_is_written_and_the_run_says_why(world, finished):
    run = distill_conversation(finished.pk)
    assert run.state == DistillerRun.FAILED
    assert run.reason.startswith("not configured")
    assert Memory.objects.count() == 0 and ModelUsage.objects.count() == 0


def test_over_budget_the_distiller_waits(world, finished, model_stub):
    from knowledge.llm import agent_model_set

    agent_model_set(
        actor=factory.SYSTEM, agent=world.copilot, profile="default", daily_calls=0, daily_tokens=None
    )
    run = distill_conversation(finished.pk)
    assert run.state == DistillerRun.FAILED
    assert "over budget: agent copilot" in run.reason
    assert model_stub.chat_requests() == []


def test_open_conversations_and_empty_ones_are_not_sent_to_the_model(world, model_stub):
    open_one = factory.make_conversation(world.copilot, world.general)
    assert distill_conversation(open_one.pk) is None
    Conversation.objects.filter(pk=open_one.pk).update(status=Conversation.FINISHED)
    run = distill_conversation(open_one.pk)
    assert run.state == DistillerRun.SKIPPED and "no messages" in run.reason
    assert model_stub.chat_requests() == []


def test_finishing_a_conversation_starts_the_distiller(
    world, finished, model_stub, django_capture_on_commit_callbacks
):
    model_stub.reply_json(LEARNT)
    with django_capture_on_commit_callbacks(execute=True):
        conversation_finished.send(sender=Conversation, conversation=finished)
    assert DistillerRun.objects.get(conversation=finished).state == DistillerRun.DONE
    assert Memory.objects.filter(conversation=finished).count() == 2


def test_a_distilled_memory_strict_anti_drift_refuses_stays_queued_with_the_reason(
    world, finished, model_stub, settings
):
    """The distiller writes through memory_write (route distiller); a proposal that contradicts
    a confident semantic memory is kept in the queue, not lost, and nothing else is retired."""
    settings.BRAIN_DISTILLER_AUTO_ACTIVATE = True
    settings.BRAIN_STRICT_ANTI_DRIFT = True
    fact = factory.make_memory(
        world.copilot,
        "Alice prefers phone calls",
        store=finished.write_store,
        key="alice.contact",
        value="phone",
        confidence=0.95,
    )
    model_stub.reply_json(
        {"memories": [{"text": "Alice prefers e-mail", "category": "preference", "key": "alice.contact"}]}
    )
    distill_conversation(finished.pk)
    memory = Memory.objects.get(conversation=finished)
    assert (memory.status, memory.queue_reason) == (Memory.QUEUED, "new")
    assert memory.status_reason == f"contradicts active memories [{fact.pk}]"
    assert memory.versions.get().reason == f"distilled from conversation {finished.pk}"
    assert Memory.objects.get(pk=fact.pk).status == Memory.ACTIVE
    written = AuditEvent.objects.get(action="memory.written", object_ids=[str(memory.pk)])
    assert (written.data["route"], written.data["status"]) == ("distiller", "queued")


def test_an_outage_defers_the_run_with_the_same_input_and_never_fails_it(
    world, finished, model_stub, settings
):
    """A transport failure is not the request's fault: the run waits (pending, the attempt not
    counted) and comes back by itself through its deferral, reading the same messages; the
    sweep leaves it to that deferral (not before its back-off, not twice); an endpoint the
    background check marks unreachable is not called at all; nothing is failed for good by an
    outage."""
    from tests.deferred import deferred, run_deferred, server_down

    task = "curation.tasks.distill_conversation"
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    model_stub.reply_error(503, "loading model")
    assert distill_pending() == 1
    run = DistillerRun.objects.get(conversation=finished)
    assert (run.state, run.attempts) == (DistillerRun.PENDING, 0)
    assert run.reason.startswith("deferred: failing: HTTP 503")
    (waiting,) = deferred(task)
    assert waiting.args == repr((finished.pk,))

    calls = len(model_stub.chat_requests())
    assert distill_pending() == 0  # the sweep leaves it to its deferral
    assert len(model_stub.chat_requests()) == calls and len(deferred(task)) == 1

    for _ in range(3):  # more outages than a run has attempts
        model_stub.reply_error(503, "loading model")
        assert run_deferred(waiting) == DistillerRun.PENDING
        run.refresh_from_db()
        assert (run.state, run.attempts) == (DistillerRun.PENDING, 0)
        (waiting,) = deferred(task)
    assert waiting.kwargs == repr({"deferrals": 4})
    assert Memory.objects.count() == 0

    server_down()
    calls = len(model_stub.chat_requests())
    run_deferred(waiting)
    assert len(model_stub.chat_requests()) == calls  # Status knew: not called
    run.refresh_from_db()
    assert run.state == DistillerRun.PENDING and "did not answer the background check" in run.reason
    (waiting,) = deferred(task)

    server_down(down=False)
    model_stub.reply_json(LEARNT)
    assert run_deferred(waiting) == DistillerRun.DONE
    run.refresh_from_db()
    assert (run.state, run.attempts) == (DistillerRun.DONE, 1)
    prompt = model_stub.prompt(model_stub.chat_requests()[-1])
    assert "never call me" in prompt and "vpn-reset" in prompt  # both messages: nothing was halved
    assert deferred(task) == [] and distill_pending() == 0
