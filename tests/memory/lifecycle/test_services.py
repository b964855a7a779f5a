"""The tricky parts of the lifecycle: the activation routes, time, clearing, concurrency."""

import datetime
import threading
from unittest import mock

import pytest
from django.db import connection, transaction
from django.utils import timezone

from knowledge.models import AuditEvent, Memory
from knowledge.principal import Principal
from knowledge.principals.services import setting_set
from memory.lifecycle import (
    activation,
    activation_hooks,
    common,
    expiry,
    operate,
    review,
    supersession,
    write,
)
from memory.tasks import expire_short_term_memory
from tests import factory

HOUR = datetime.timedelta(hours=1)


# --- the activation routes ----------------------------------------------------------------


def test_distiller_memories_wait_for_review_unless_auto_activation_is_on(world):
    distiller = Principal.system("distiller")
    queued = write.memory_write(
        actor=distiller,
        request=write.WriteRequest(owner=world.copilot, store="shared", text="a"),
        route="distiller",
    )
    assert (queued.status, queued.queue_reason) == (Memory.QUEUED, "new")
    setting_set(actor=factory.SYSTEM, name="BRAIN_DISTILLER_AUTO_ACTIVATE", value=True)
    active = write.memory_write(
        actor=distiller,
        request=write.WriteRequest(owner=world.copilot, store="shared", text="b"),
        route="distiller",
    )
    assert active.status == Memory.ACTIVE


def test_dreaming_writes_go_active_at_once(world):
    memory = write.memory_write(
        actor=Principal.system("dreaming"),
        request=write.WriteRequest(owner=world.copilot, store="self", text="x"),
        route="dreaming",
    )
    assert memory.status == Memory.ACTIVE


def test_the_gate_hook_can_hold_a_memory_in_the_queue(world, monkeypatch):
    calls = []

    def hold(memory, *, route, **asked):  # the hook also gets who asked and the conflict decision
        calls.append((memory, route))
        return activation_hooks.GateDecision(allow=False, reason="regressed case vpn-1", verdict="regressed")

    monkeypatch.setattr(activation, "gate_before_activation", hold)
    memory = factory.make_memory(world.scribe, "VPN fixed by 5.1.0")
    assert (memory.status, memory.queue_reason, memory.status_reason) == (
        Memory.QUEUED,
        "gate",
        "regressed case vpn-1",
    )
    assert [(m.pk, route) for m, route in calls] == [(memory.pk, "api_write")]
    # An untrusted write never reaches the gate: the route already queues it.
    factory.make_queued_memory(world.copilot)
    assert len(calls) == 1
    # A reviewer's approval passes the gate again — and is held again.
    held = review.memory_approve(actor=factory.SYSTEM, memory_id=memory.pk)
    assert held.status == Memory.QUEUED
    assert AuditEvent.objects.filter(action="memory.held", object_ids=[str(memory.pk)]).exists()


def test_activation_refuses_a_memory_that_is_not_queued(world):
    memory = factory.make_memory(world.scribe, "active already")
    with transaction.atomic(), pytest.raises(common.MemoryStateConflict):
        activation.memory_activate(actor=factory.SYSTEM, memory=memory, route="review")


def test_marking_dependants_stale_twice_writes_one_event(world):
    source = factory.make_memory(world.copilot, "source")
    factory.make_memory(world.copilot, "derived", sources=[{"kind": "memory", "ref": str(source.pk)}])
    first = supersession.memory_mark_dependants_stale(actor=factory.SYSTEM, memory=source, reason="changed")
    second = supersession.memory_mark_dependants_stale(actor=factory.SYSTEM, memory=source, reason="changed")
    assert len(first) == 1 and second == []
    assert AuditEvent.objects.filter(action="memory.stale").count() == 1


def test_a_memory_superseded_twice_keeps_its_first_successor(world):
    old = factory.make_memory(world.scribe, "v1")
    first = factory.make_memory(world.scribe, "v2", supersedes=old)
    # A second successor that was written while the old one was still live (e.g. queued).
    second = factory.make_queued_memory(world.scribe, "v2 again")
    Memory.objects.filter(pk=second.pk).update(supersedes=old)
    review.memory_approve(actor=factory.SYSTEM, memory_id=second.pk)
    old.refresh_from_db()
    assert old.superseded_by_id == first.pk
    assert AuditEvent.objects.filter(action="memory.superseded").count() == 1


# --- short-term expiry ------------------------------------------------------------------------


def test_short_term_memories_expire_after_their_ttl(world, settings):
    settings.BRAIN_SHORT_TERM_TTL_HOURS = 72
    t0 = timezone.now()
    working = factory.make_memory(world.copilot, "scratch", tier="working", now=t0)
    episodic = factory.make_queued_memory(world.copilot, "met alice", tier="episodic", now=t0)
    semantic = factory.make_memory(world.copilot, "fact", now=t0)
    assert working.expires_at == t0 + 72 * HOUR

    assert expiry.memory_expire_due(now=t0 + 71 * HOUR) == 0
    assert expiry.memory_expire_due(now=t0 + 73 * HOUR) == 2
    for memory in (working, episodic, semantic):
        memory.refresh_from_db()
    assert (working.status, episodic.status, semantic.status) == (
        Memory.EXPIRED,
        Memory.EXPIRED,
        Memory.ACTIVE,
    )
    assert working.valid_to == t0 + 72 * HOUR
    event = AuditEvent.objects.get(action="memory.expired")
    assert sorted(event.object_ids) == sorted([str(working.pk), str(episodic.pk)])
    assert event.counts == {"memories": 2}
    assert event.revisions.count() == 2
    # Idempotent: a second run finds nothing.
    assert expiry.memory_expire_due(now=t0 + 74 * HOUR) == 0
    assert AuditEvent.objects.filter(action="memory.expired").count() == 1


def test_the_hourly_task_expires_what_is_due_when_time_moves(world):
    t0 = timezone.now()
    memory = factory.make_memory(world.copilot, "scratch", tier="episodic", now=t0)
    with mock.patch("django.utils.timezone.now", return_value=t0 + 100 * HOUR):
        assert expire_short_term_memory() == 1
    memory.refresh_from_db()
    assert memory.status == Memory.EXPIRED


def test_expiry_runs_in_batches(world):
    t0 = timezone.now()
    for i in range(7):
        factory.make_memory(world.copilot, f"scratch {i}", tier="working", now=t0)
    assert expiry.memory_expire_due(now=t0 + 100 * HOUR, batch=3) == 7
    assert AuditEvent.objects.filter(action="memory.expired").count() == 3


def test_a_promoted_memory_no_longer_expires(world):
    t0 = timezone.now()
    memory = factory.make_memory(world.copilot, "keeps", tier="episodic", now=t0)
    operate.memory_promote(actor=factory.SYSTEM, memory_id=memory.pk)
    assert expiry.memory_expire_due(now=t0 + 100 * HOUR) == 0


def test_the_expiry_schedule_is_in_the_table():
    from django.utils.module_loading import import_string

    from curation.schedules import schedule_table

    rows = {func: minutes for _, func, minutes in schedule_table()}
    assert rows["memory.tasks.expire_short_term_memory"] == 60
    assert import_string("memory.tasks.expire_short_term_memory") is expire_short_term_memory


# --- clearing working memory ------------------------------------------------------------------


def test_finishing_a_run_clears_only_that_agents_working_memory(world):
    copilot, scribe = world.client("copilot"), world.client("scribe")
    ids = [
        copilot.post(
            "/api/memory", {"scope": "agent", "text": t, "tier": tier, "run_id": "r1"}, format="json"
        ).json()["id"]
        for t, tier in [("step 1", "working"), ("step 2", "working"), ("keep me", "semantic")]
    ]
    other_run = copilot.post(
        "/api/memory", {"scope": "agent", "text": "r2", "tier": "working", "run_id": "r2"}, format="json"
    ).json()["id"]
    scribes = scribe.post(
        "/api/memory", {"scope": "agent", "text": "s", "tier": "working", "run_id": "r1"}, format="json"
    ).json()["id"]

    response = copilot.post("/api/runs/r1/finish", {}, format="json")
    assert response.status_code == 200
    assert response.json() == {"run_id": "r1", "cleared": 2, "memory_ids": sorted(ids[:2])}
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[i] for i in ids] == [Memory.EXPIRED, Memory.EXPIRED, Memory.QUEUED]
    assert statuses[other_run] == Memory.ACTIVE == statuses[scribes]  # scratch, another run's
    event = AuditEvent.objects.get(action="memory.cleared")
    assert event.reason == "run r1 finished" and event.counts == {"memories": 2}
    # Twice is harmless.
    assert copilot.post("/api/runs/r1/finish", {}, format="json").json()["cleared"] == 0
    # An agent finishes only its own runs; a reviewer may finish any.
    assert copilot.post("/api/runs/r1/finish", {"agent": "scribe"}, format="json").status_code == 403
    response = world.client("reviewer").post("/api/runs/r1/finish", {"agent": "scribe"}, format="json")
    assert response.json()["memory_ids"] == [scribes]
    assert world.client("integration").post("/api/runs/r1/finish", {}, format="json").status_code == 403


def test_finishing_a_conversation_clears_its_working_memory(world):
    conversation = factory.make_conversation(world.copilot, world.general)
    scratch = factory.make_memory(world.copilot, "scratch", tier="working", conversation=conversation)
    fact = factory.make_memory(world.copilot, "fact", conversation=conversation)
    elsewhere = factory.make_memory(world.copilot, "other scratch", tier="working")
    cleared = expiry.memory_clear_working(actor=factory.SYSTEM, conversation=conversation)
    assert cleared == [scratch.pk]
    assert Memory.objects.get(pk=fact.pk).status == Memory.ACTIVE
    assert Memory.objects.get(pk=elsewhere.pk).status == Memory.ACTIVE
    assert AuditEvent.objects.get(action="memory.cleared").data == {"conversation": conversation.pk}


# --- two reviewers at once --------------------------------------------------------------------


def _race(*actions) -> list[str]:
    """Run the actions in threads released at the same instant, each on its own connection;
    returns "won" or the conflict message per action."""
    barrier = threading.Barrier(len(actions))
    outcomes = [""] * len(actions)

    def run(i, action):
        try:
            barrier.wait()
            action()
            outcomes[i] = "won"
        except common.MemoryStateConflict as exc:
            outcomes[i] = str(exc.detail["detail"])
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_acting_at_once_exactly_one_wins():
    """Two threads, two database connections, one queued memory: approve and reject race; one
    succeeds, the other gets MemoryStateConflict, and exactly one decision is recorded."""
    agent = factory.make_agent("racer")
    rita, adam = (Principal(kind="person", name=n, role="reviewer") for n in ("rita", "adam"))
    for n in range(5):
        memory = factory.make_queued_memory(agent, f"contested {n}")
        outcomes = _race(
            lambda m=memory: review.memory_approve(actor=rita, memory_id=m.pk),
            lambda m=memory: review.memory_reject(actor=adam, memory_id=m.pk, reason="no"),
        )
        assert sorted(o == "won" for o in outcomes) == [False, True], outcomes
        loser = next(o for o in outcomes if o != "won")
        assert "Nothing was changed" in loser
        memory.refresh_from_db()
        assert memory.status in (Memory.ACTIVE, Memory.REJECTED)
        decisions = AuditEvent.objects.filter(
            action__in=["memory.approved", "memory.rejected"], object_ids=[str(memory.pk)]
        )
        assert decisions.count() == 1
        assert decisions.get().action == (
            "memory.approved" if memory.status == Memory.ACTIVE else "memory.rejected"
        )


def test_bulk_review_skips_what_another_reviewer_took(world):
    a, b, c = (factory.make_queued_memory(world.copilot, t) for t in "abc")
    review.memory_reject(actor=factory.SYSTEM, memory_id=b.pk, reason="taken")
    result = review.memory_review_bulk(
        actor=factory.SYSTEM, memory_ids=[a.pk, b.pk, c.pk, 999999], action="approve"
    )
    assert result["done"] == [a.pk, c.pk]
    assert set(result["failed"]) == {b.pk, 999999}
    batches = set(AuditEvent.objects.filter(action="memory.approved").values_list("batch_id", flat=True))
    assert len(batches) == 1  # one batch id: restorable together
    with pytest.raises(Exception, match="reason"):
        review.memory_review_bulk(actor=factory.SYSTEM, memory_ids=[a.pk], action="reject", reason="")


def test_requeue_sends_a_live_memory_back_with_its_reason(world):
    memory = factory.make_memory(world.copilot, "INC-12 was caused by an expired certificate")
    review.memory_requeue(
        actor=factory.SYSTEM, memory_id=memory.pk, reason="re-check: its source ticket:INC-12 changed"
    )
    memory.refresh_from_db()
    assert (memory.status, memory.queue_reason) == (Memory.QUEUED, "requeued")
    assert memory.status_reason == "re-check: its source ticket:INC-12 changed"
    event = AuditEvent.objects.get(action="memory.requeued")
    assert event.data == {"queue_reason": "requeued", "from_status": "active"}
    # Approved again, it is active again; a retired memory cannot be requeued.
    review.memory_approve(actor=factory.SYSTEM, memory_id=memory.pk)
    operate.memory_revoke(actor=factory.SYSTEM, memory_id=memory.pk, reason="wrong")
    with pytest.raises(common.MemoryStateConflict):
        review.memory_requeue(actor=factory.SYSTEM, memory_id=memory.pk, reason="again")


def test_write_serializers_do_not_share_field_objects(world):
    from memory.lifecycle.serializers import MemoryWriteSerializer

    a, b = MemoryWriteSerializer(data={}), MemoryWriteSerializer(data={})
    assert a.fields["text"] is not b.fields["text"]
    assert a.fields["sources"] is not b.fields["sources"]
    assert a.fields["tier"].choices == b.fields["tier"].choices
