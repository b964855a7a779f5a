"""Deciding many queued memories at once (issue 53): set-wise, a few statements per chunk
whatever its size, with every rule a lone approval applies — a memory that needs a decision a
bulk action cannot make is skipped with its reason, the rest decided in one audit batch that a
restore puts back in the queue."""

import datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from knowledge.models import AuditEvent, Memory
from knowledge.principal import Principal
from knowledge.principals import services
from memory.lifecycle import review
from tests import factory

RITA = Principal(kind="person", name="rita", role="reviewer")


def queued(world, n: int, prefix: str) -> list[Memory]:
    return [
        factory.make_queued_memory(
            world.copilot, f"{prefix} note {i}: ticket SUP-{prefix}-{i} waits on a call back", store="shared"
        )
        for i in range(n)
    ]


def statements(action: str, memories: list[Memory], reason: str = "") -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as done:
        result = review.memory_review_bulk(
            actor=RITA, memory_ids=[m.pk for m in memories], action=action, reason=reason
        )
    return len([q for q in done.captured_queries if "SAVEPOINT" not in q["sql"]]), result


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_a_batch_costs_the_same_statements_whatever_its_size(world, action):
    factory.make_memory(world.scribe, "ticket SUP-0 waits on a call back from the customer", store="shared")
    ten, hundred = queued(world, 10, "ten"), queued(world, 100, "hundred")
    small, result = statements(action, ten, reason="not needed")
    assert len(result["done"]) == 10
    large, result = statements(action, hundred, reason="not needed")
    assert len(result["done"]) == 100 and result["failed"] == {}
    expected = Memory.ACTIVE if action == "approve" else Memory.REJECTED
    assert {m.status for m in Memory.objects.filter(pk__in=[m.pk for m in hundred])} == {expected}
    # lock, the relation finder, one UPDATE, the events and their revisions: none per memory
    assert large <= small + 1 and large <= 12, (small, large)


def test_what_needs_a_decision_is_skipped_with_its_reason_and_the_rest_is_one_restorable_batch(world):
    plain = queued(world, 2, "plain")
    factory.make_memory(world.scribe, "deploy window", store="shared", key="deploy.window", value="friday")
    keyed = factory.make_queued_memory(
        world.copilot, "we deploy on mondays", store="shared", key="deploy.window", value="monday"
    )
    old = factory.make_memory(world.scribe, "VPN-4012 is fixed by client 5.2.1", store="shared")
    contradiction = factory.make_queued_memory(
        world.copilot, "VPN-4012 is fixed by client 5.2.3", store="shared"
    )
    # two of the batch with one key and two values: the first goes active, the second waits
    berlin, paris = (
        factory.make_queued_memory(
            world.copilot, f"office in {c}", store="shared", key="office.city", value=c
        )
        for c in ("Berlin", "Paris")
    )
    taken = queued(world, 1, "taken")[0]
    review.memory_reject(actor=RITA, memory_id=taken.pk, reason="taken first")
    ids = [plain[0].pk, keyed.pk, contradiction.pk, berlin.pk, taken.pk, paris.pk, plain[1].pk, 999999]

    result = review.memory_review_bulk(actor=RITA, memory_ids=ids, action="approve")

    assert result["done"] == [plain[0].pk, berlin.pk, plain[1].pk] and result["held"] == []
    failed = result["failed"]
    assert set(failed) == {keyed.pk, contradiction.pk, taken.pk, paris.pk, 999999}
    assert "key deploy.window" in failed[keyed.pk] and "Decide" in failed[keyed.pk]
    assert f"contradicts active #{old.pk}" in failed[contradiction.pk]
    assert f"#{berlin.pk} (Berlin)" in failed[paris.pk]
    assert "is rejected now" in failed[taken.pk] and failed[999999] == "Memory 999999 does not exist."
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[pk] for pk in result["done"]] == [Memory.ACTIVE] * 3
    assert {statuses[pk] for pk in (keyed.pk, contradiction.pk, paris.pk)} == {Memory.QUEUED}

    approvals = AuditEvent.objects.filter(action="memory.approved")
    assert sorted(int(e.object_ids[0]) for e in approvals) == sorted(result["done"])
    assert len({e.batch_id for e in approvals}) == 1
    assert approvals.get(object_ids=[str(berlin.pk)]).data == {
        "queue_reason": "new",
        "status": "active",
        "version": 1,
    }
    restored = world.client("admin").post(
        "/api/audit/restore", {"events": [e.pk for e in approvals]}, format="json"
    )
    assert restored.status_code == 200, restored.json()
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[pk] for pk in result["done"]] == [Memory.QUEUED] * 3


def test_a_memory_strict_anti_drift_refuses_is_skipped_and_recorded(world):
    active = factory.make_memory(
        world.scribe, "office in Berlin", store="shared", key="office.city", value="Berlin", tier="semantic"
    )
    drifting = factory.make_queued_memory(
        world.copilot, "office in Paris", store="shared", key="office.city", value="Paris"
    )
    services.setting_set(actor=factory.SYSTEM, name="BRAIN_STRICT_ANTI_DRIFT", value=True)
    fine = queued(world, 1, "fine")[0]
    result = review.memory_review_bulk(actor=RITA, memory_ids=[drifting.pk, fine.pk], action="approve")
    assert result["done"] == [fine.pk] and "Strict anti-drift" in result["failed"][drifting.pk]
    violation = AuditEvent.objects.get(action="memory.policy_violation")
    assert violation.data["conflicts_with"] == [active.pk] and violation.data["memory"] == drifting.pk


def test_rejecting_a_batch_makes_what_cites_each_memory_stale_once(world):
    a, b = queued(world, 2, "cited")
    citing = factory.make_memory(
        world.scribe,
        "summary of both notes",
        store="shared",
        sources=[{"kind": "memory", "ref": str(a.pk)}, {"kind": "memory", "ref": str(b.pk)}],
    )
    result = review.memory_review_bulk(actor=RITA, memory_ids=[a.pk, b.pk], action="reject", reason="wrong")
    assert result["done"] == [a.pk, b.pk]
    citing.refresh_from_db()
    assert citing.stale and citing.stale_reason == f"its source memory:{a.pk} was rejected"
    stale = AuditEvent.objects.get(action="memory.stale")
    assert stale.object_ids == [str(citing.pk)] and stale.data == {"source": f"memory:{a.pk}"}
    rejected = AuditEvent.objects.filter(action="memory.rejected")
    assert rejected.count() == 2 and len({e.batch_id for e in rejected}) == 1


def test_in_enforce_mode_the_gate_holds_each_memory_of_a_batch_and_the_console_says_so(
    client, world, model_stub
):
    from memory.gate.datasets import dataset_create
    from memory.models import GateCheck

    cases = [{"id": "vpn", "input": "Which VPN client fixes VPN-4012?", "expect": {"contains": ["5.2.1"]}}]
    dataset_create(actor=factory.SYSTEM, name="memory-gate-copilot", kind="agent_turn", cases=cases)
    services.setting_set(actor=factory.SYSTEM, name="BRAIN_MEMORY_ACTIVATION_GATE", value="enforce")
    memories = queued(world, 3, "gated")
    client.force_login(world.reviewer)
    response = client.post(
        "/review/bulk", {"ids": [m.pk for m in memories], "action": "approve"}, follow=True
    )
    assert "Approved 3 memories" in response.content.decode()
    assert "3 of them wait for the eval gate&#x27;s check." in response.content.decode()
    for memory in memories:
        memory.refresh_from_db()
        assert (memory.status, memory.queue_reason) == (Memory.QUEUED, "gate")
    assert AuditEvent.objects.filter(action="memory.held").count() == 3
    assert GateCheck.objects.filter(memory__in=memories).count() == 3
    assert model_stub.requests == []  # the checks run in the background


def test_a_memory_of_the_batch_that_another_of_it_supersedes_is_retired_not_approved(world):
    old = queued(world, 1, "old")[0]
    new = factory.make_queued_memory(
        world.copilot, "the printer moved to the second floor", store="shared", supersedes=old
    )
    result = review.memory_review_bulk(actor=RITA, memory_ids=[old.pk, new.pk], action="approve")
    assert result["done"] == [new.pk] and "is superseded now" in result["failed"][old.pk]
    old.refresh_from_db()
    assert (old.status, old.superseded_by_id) == (Memory.SUPERSEDED, new.pk)


def test_two_of_one_batch_that_contradict_each_other_are_marked_after_the_commit(
    world, django_capture_on_commit_callbacks
):
    """Each keyless memory of a batch is checked against what was active before it; two of the
    same batch are checked against each other by the relation finder's sweep after the commit,
    and end as a conflict in force, not as two facts."""
    from django.core.cache import cache

    from memory.lifecycle import selectors
    from memory.lifecycle.conflicts import contradictions_sweep

    friday = factory.make_queued_memory(world.copilot, "Deploys are allowed on Fridays", store="shared")
    frozen = factory.make_queued_memory(world.copilot, "Deploys are forbidden on Fridays", store="shared")
    cache.delete("brain:kick:memory.lifecycle.conflicts.contradictions_sweep")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        result = review.memory_review_bulk(actor=RITA, memory_ids=[friday.pk, frozen.pk], action="approve")
    assert len(result["done"]) == 2 and result["failed"] == {}
    assert len(callbacks) >= 1  # the sweep's kick; tasks run inline in tests
    assert selectors.conflict_pairs() == [(friday.pk, frozen.pk)]
    # a lone approval is not swept again: its reviewer decided its contradictions (here: keep both)
    factory.make_memory(world.scribe, "Deploys are forbidden on Mondays", store="shared")
    alone = factory.make_queued_memory(world.copilot, "Deploys are allowed on Mondays", store="shared")
    with django_capture_on_commit_callbacks(execute=True):
        review.memory_approve(
            actor=RITA,
            memory_id=alone.pk,
            decision="keep_both",
            boundary=timezone.now() + datetime.timedelta(hours=1),
        )
    alone.refresh_from_db()
    assert alone.status == Memory.ACTIVE
    contradictions_sweep()
    # (a recorded pair's validity windows decide whether it is listed: keep both closed them)
    assert all(alone.pk not in pair for pair in selectors.conflict_pairs())
    # and the sweep, meeting its write again, marks no pair the reviewer kept as of two times
    marked = AuditEvent.objects.filter(action="memory.contradictions_marked").values_list("data", flat=True)
    assert [d["memory"] for d in marked if d["memory"] == alone.pk] == []
    flags = AuditEvent.objects.filter(action="memory.approved").order_by("pk").values_list("data", flat=True)
    assert [d.get("went_active_together", False) for d in flags] == [True, True, False]
