"""Consolidation plans, at the service level: what a run finds, and exact apply/revert."""

import datetime
import json

import pytest
from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import snapshot
from knowledge.llm import model_profile_save
from knowledge.memories.activation import memory_row_create
from knowledge.models import AuditEvent, Memory, MemorySource, ModelUsage
from memory.consolidation import (
    ConsolidationBusy,
    ConsolidationOff,
    PlanConflict,
    consolidation_run,
    plan_apply,
    plan_discard,
    plan_revert,
)
from memory.matching.terms import key_terms, overlap
from memory.models import ConsolidationGroup, ConsolidationPlan
from tests.factory import SYSTEM, set_state

FACT = "Alice prefers e-mail over phone calls"


def remember(owner, text, *, store="shared", sources=(), category="person_fact", age_days=0, **fields):
    with transaction.atomic():
        memory = memory_row_create(
            owner=owner,
            store=store,
            text=text,
            author_kind="agent",
            author_name=owner.name,
            status=fields.pop("status", Memory.ACTIVE),
            sources=sources,
            category=category,
            **fields,
        )
    if age_days:
        Memory.objects.filter(pk=memory.pk).update(
            created_at=timezone.now() - datetime.timedelta(days=age_days)
        )
        memory.refresh_from_db()
    return memory


def ten_copies(owner, store="shared"):
    spellings = [
        FACT,
        FACT.upper(),
        FACT.lower(),
        "  " + FACT + "  ",
        FACT.replace(" ", "   "),
        FACT.replace(" ", "\t"),
        FACT.replace("over", "OVER"),
        FACT.replace(" ", "\n"),
        FACT.title(),
        FACT.swapcase(),
    ]
    return [
        remember(
            owner, text, store=store, sources=[{"kind": "conversation", "ref": str(100 + n)}], age_days=10 - n
        )
        for n, text in enumerate(spellings)
    ]


def full_state(memory_ids):
    """Every memory's row and sources, exactly — what a revert must put back."""
    out = {}
    for memory in Memory.objects.filter(pk__in=memory_ids).defer("embedding"):
        sources = sorted(
            (s.kind, s.ref, s.fingerprint, json.dumps(s.snapshot), s.created_at.isoformat())
            for s in MemorySource.objects.filter(memory=memory)
        )
        out[memory.pk] = (snapshot(memory), sources)
    return out


def active_ids():
    return set(Memory.objects.filter(status=Memory.ACTIVE).values_list("id", flat=True))


def test_ten_copies_fold_into_the_newest_carrying_every_source(world):
    copies = ten_copies(world.copilot)
    newest = copies[-1]
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert plan.state == ConsolidationPlan.PROPOSED
    assert plan.counts["duplicate_groups"] == 1 and plan.counts["duplicates_folded"] == 9
    group = plan.groups.get()
    assert (group.kind, group.target_id) == (ConsolidationGroup.DUPLICATE, newest.pk)
    assert "model" in plan.model_note and "not configured" in plan.model_note  # the run says why

    plan_apply(actor=SYSTEM, plan_id=plan.pk)
    newest.refresh_from_db()
    assert newest.status == Memory.ACTIVE
    assert sorted(newest.sources.values_list("ref", flat=True)) == [str(100 + n) for n in range(10)]
    for copy in copies[:-1]:
        copy.refresh_from_db()
        assert (copy.status, copy.superseded_by_id) == (Memory.SUPERSEDED, newest.pk)
        assert copy.sources.count() == 1  # nothing is taken away from the folded rows
    assert Memory.objects.count() == 10  # nothing deleted, nothing created


def test_duplicates_are_only_folded_within_one_store_category_and_owner(world):
    remember(world.copilot, FACT)
    remember(world.copilot, FACT, store="self")
    remember(world.scribe, FACT)
    remember(world.copilot, FACT, category="workspace_note")
    remember(world.copilot, FACT, tier=Memory.EPISODIC)
    remember(world.copilot, FACT, status=Memory.QUEUED)
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert plan.state == ConsolidationPlan.EMPTY
    assert plan.counts["groups"] == 0


def test_near_duplicates_are_merged_by_the_model_into_one_statement(world, model_stub):
    a = remember(
        world.copilot,
        "Alice prefers e-mail over phone calls for ticket updates",
        sources=[{"kind": "conversation", "ref": "1"}],
    )
    b = remember(
        world.copilot,
        "Alice prefers e-mail over phone calls, except for outages",
        sources=[{"kind": "ticket", "ref": "INC-7"}],
    )
    other = remember(world.copilot, "Bob is on call on weekends")
    merged_text = "Alice prefers e-mail over phone calls for ticket updates, except for outages"
    model_stub.reply_json({"text": merged_text})

    before = active_ids()
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert active_ids() == before  # propose: nothing recalled changes

    group = plan.groups.get()
    assert group.kind == ConsolidationGroup.NEAR_DUPLICATE
    assert group.merged_text == merged_text
    merged = Memory.objects.get(pk=group.target_id)
    assert (merged.status, merged.queue_reason, merged.replaces) == (Memory.QUEUED, "merge", [a.pk, b.pk])
    assert merged.text == merged_text
    assert sorted(merged.sources.values_list("kind", "ref")) == [("conversation", "1"), ("ticket", "INC-7")]
    (request,) = model_stub.chat_requests()
    assert request["model"] == "stub-light"
    prompt = model_stub.prompt(request)
    assert a.text in prompt and b.text in prompt and other.text not in prompt
    assert ModelUsage.objects.get().purpose == "consolidation.merge"

    plan_apply(actor=SYSTEM, plan_id=plan.pk)
    merged.refresh_from_db()
    a.refresh_from_db()
    assert merged.status == Memory.ACTIVE
    assert (a.status, a.superseded_by_id) == (Memory.SUPERSEDED, merged.pk)
    assert active_ids() == (before - {a.pk, b.pk}) | {merged.pk}


def test_key_terms_overlap_decides_what_is_near():
    assert (
        overlap(
            key_terms("Alice prefers e-mail over phone calls"),
            key_terms("alice prefers e-mail, not phone calls"),
        )
        >= 0.65
    )
    assert overlap(key_terms("Alice prefers e-mail"), key_terms("Bob prefers the phone")) < 0.65


@pytest.mark.parametrize("failure", ["unreachable", "over_budget"])
def test_without_a_usable_model_only_duplicates_fold_and_the_run_says_why(world, model_stub, failure):
    ten_copies(world.copilot)
    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    if failure == "unreachable":
        model_stub.respond_with(lambda body: {"status": 503, "message": "overloaded"})
    else:
        model_profile_save(actor=SYSTEM, name="light", daily_calls=0)
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    kinds = list(plan.groups.values_list("kind", flat=True))
    assert kinds == [ConsolidationGroup.DUPLICATE]
    assert Memory.objects.filter(queue_reason="merge").count() == 0
    expected = (
        "failing: HTTP 503" if failure == "unreachable" else "over budget: profile light made 0 of 0 calls"
    )
    assert expected in plan.model_note
    assert "only exact duplicates" in plan.model_note
    event = AuditEvent.objects.get(action="memory.consolidation.run")
    assert expected in event.reason  # the audit says why as well (no memory text in it)
    assert "Alice" not in event.reason
    if failure == "unreachable":
        assert (
            len(model_stub.chat_requests()) == 3
        )  # one group tried (with retries), then the run stopped asking


def test_an_outage_defers_the_model_work_which_runs_when_the_server_answers(world, model_stub, settings):
    """Issue 52: the model server does not answer. What needs no model is written now, the plan
    says the rest is deferred, and the run comes back after a back-off: still down (by the
    background check), it defers again without calling; answering, it merges the same group."""
    from tests.deferred import deferred, run_deferred, server_down

    settings.BRAIN_MODEL_MAX_RETRIES = 0
    ten_copies(world.copilot)
    a = remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    b = remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    model_stub.reply_error(503, "loading model")
    first = consolidation_run(actor=SYSTEM, mode="propose")
    assert list(first.groups.values_list("kind", flat=True)) == [ConsolidationGroup.DUPLICATE]
    assert "deferred: failing: HTTP 503" in first.model_note and "asked for again" in first.model_note
    (again,) = deferred("memory.consolidation.plans.consolidation_resume")
    # the 6-hourly run leaves it to the deferral: not run twice, not deferred twice
    from curation.tasks import consolidation_scheduled

    assert consolidation_scheduled().startswith("left to the deferred run")
    assert ConsolidationPlan.objects.count() == 1
    assert len(deferred("memory.consolidation.plans.consolidation_resume")) == 1

    server_down()
    calls = len(model_stub.chat_requests())
    assert run_deferred(again).startswith("deferred again: unreachable")
    assert len(model_stub.chat_requests()) == calls
    assert ConsolidationPlan.objects.count() == 1  # no empty plan per try
    (again,) = deferred("memory.consolidation.plans.consolidation_resume")

    server_down(down=False)
    merged_text = "Alice prefers e-mail over phone calls for ticket updates, except for outages"
    model_stub.reply_json({"text": merged_text})
    assert run_deferred(again).endswith("proposed")
    second = ConsolidationPlan.objects.order_by("-pk").first()
    group = second.groups.get()
    assert group.kind == ConsolidationGroup.NEAR_DUPLICATE and group.merged_text == merged_text
    assert Memory.objects.get(pk=group.target_id).replaces == [a.pk, b.pk]
    assert not deferred("memory.consolidation.plans.consolidation_resume")


def test_a_consolidation_job_whose_model_work_was_deferred_says_so(world, model_stub, settings):
    """Run now from the console or the API during an outage: the job ends deferred, not done,
    saying why; the run comes back by itself."""
    from knowledge.llm.jobs import job_run
    from knowledge.models import ModelJob
    from tests.deferred import deferred, server_down

    settings.BRAIN_MODEL_MAX_RETRIES = 0
    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    server_down()
    queued = world.client("admin").post("/api/memory-consolidations/run", {}, format="json")
    assert queued.status_code == 202, queued.content
    assert job_run(queued.json()["id"]) == "deferred"
    job = ModelJob.objects.get(pk=queued.json()["id"])
    assert job.state == ModelJob.DEFERRED and "deferred: unreachable" in job.result["summary"]
    assert len(deferred("memory.consolidation.plans.consolidation_resume")) == 1


def test_malformed_model_output_writes_nothing(world, model_stub):
    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    model_stub.reply_text("Sure! Here is the merged memory: Alice prefers e-mail.")
    model_stub.reply_text("Here it is again: Alice prefers e-mail.")  # the one repair
    count = Memory.objects.count()
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert Memory.objects.count() == count
    assert plan.state == ConsolidationPlan.EMPTY
    assert "invalid model output" in plan.model_note
    first, repair = ModelUsage.objects.order_by("pk")
    assert first.outcome == repair.outcome == "invalid" and "not JSON" in first.error


def test_apply_then_revert_restores_every_memory_exactly(world, model_stub):
    copies = ten_copies(world.copilot)
    near = [
        remember(
            world.copilot,
            "VPN-4012 is fixed by client 5.2.1 on Windows",
            sources=[{"kind": "kb", "ref": "KB-7"}],
        ),
        remember(
            world.copilot,
            "VPN-4012 is fixed by client 5.2.1 on macOS too",
            sources=[{"kind": "ticket", "ref": "INC-12"}],
        ),
    ]
    loser = remember(
        world.copilot,
        "Alice's timezone is CET",
        key="alice.timezone",
        value="CET",
        age_days=40,
        confidence=0.6,
        category="preference",
    )
    winner = remember(
        world.copilot,
        "Alice's timezone is PT",
        key="alice.timezone",
        value="PT",
        confidence=0.9,
        category="preference",
        sources=[{"kind": "record", "ref": "crm/person/7"}],
    )
    model_stub.reply_json({"text": "VPN-4012 is fixed by client 5.2.1 on Windows and macOS"})
    originals = [m.pk for m in copies + near + [loser, winner]]
    before = full_state(originals)

    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert sorted(plan.groups.values_list("kind", flat=True)) == ["conflict", "duplicate", "near_duplicate"]
    assert full_state(originals) == before  # proposing changes no original

    plan_apply(actor=SYSTEM, plan_id=plan.pk)
    loser.refresh_from_db()
    assert (loser.status, loser.superseded_by_id) == (Memory.SUPERSEDED, winner.pk)
    assert loser.valid_to == winner.created_at  # closed where the winning value begins
    assert full_state(originals) != before

    plan_revert(actor=SYSTEM, plan_id=plan.pk)
    assert full_state(originals) == before
    merged = Memory.objects.get(pk=plan.groups.get(kind="near_duplicate").target_id)
    assert merged.status == Memory.INVALIDATED  # retired, row kept
    plan.refresh_from_db()
    assert plan.state == ConsolidationPlan.REVERTED
    actions = list(
        AuditEvent.objects.filter(action__startswith="memory.consolidation").values_list("action", flat=True)
    )
    assert sorted(set(actions)) == sorted(
        {
            "memory.consolidation.run",
            "memory.consolidation.proposed",
            "memory.consolidation.apply",
            "memory.consolidation.applied",
            "memory.consolidation.revert",
            "memory.consolidation.reverted",
        }
    )
    for event in AuditEvent.objects.filter(action__startswith="memory.consolidation"):
        assert "VPN" not in json.dumps([event.reason, event.data, event.counts])  # ids and counts only


def test_a_plan_is_applied_and_reverted_once(world):
    ten_copies(world.copilot)
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    with pytest.raises(PlanConflict, match="only an applied plan"):
        plan_revert(actor=SYSTEM, plan_id=plan.pk)
    plan_apply(actor=SYSTEM, plan_id=plan.pk)
    with pytest.raises(PlanConflict, match="only a proposed plan"):
        plan_apply(actor=SYSTEM, plan_id=plan.pk)
    plan_revert(actor=SYSTEM, plan_id=plan.pk)
    with pytest.raises(PlanConflict):
        plan_revert(actor=SYSTEM, plan_id=plan.pk)
    with pytest.raises(PlanConflict):
        plan_apply(actor=SYSTEM, plan_id=plan.pk)


def test_apply_refuses_when_a_memory_changed_since_the_plan_was_made(world):
    copies = ten_copies(world.copilot)
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    set_state([copies[0].pk], status=Memory.REJECTED)
    state = full_state([c.pk for c in copies])
    with pytest.raises(PlanConflict, match="changed since") as info:
        plan_apply(actor=SYSTEM, plan_id=plan.pk)
    assert info.value.extra["changed"] == [copies[0].pk]
    assert full_state([c.pk for c in copies]) == state
    plan.refresh_from_db()
    assert plan.state == ConsolidationPlan.PROPOSED


def test_revert_refuses_when_a_memory_changed_since_the_apply(world):
    copies = ten_copies(world.copilot)
    plan = consolidation_run(actor=SYSTEM, mode="apply")
    assert plan.state == ConsolidationPlan.APPLIED  # apply mode applies its own plan
    set_state([copies[-1].pk], status=Memory.INVALIDATED)
    state = full_state([c.pk for c in copies])
    with pytest.raises(PlanConflict, match="changed since"):
        plan_revert(actor=SYSTEM, plan_id=plan.pk)
    assert full_state([c.pk for c in copies]) == state


def test_an_open_plan_keeps_its_memories_out_of_the_next_run(world):
    ten_copies(world.copilot)
    first = consolidation_run(actor=SYSTEM, mode="propose")
    second = consolidation_run(actor=SYSTEM, mode="propose")
    assert (first.state, second.state) == (ConsolidationPlan.PROPOSED, ConsolidationPlan.EMPTY)
    # issue 52.8: the empty plan says what holds its memories and how to free them
    assert f"10 in proposed plan #{first.pk}" in second.model_note
    assert "apply or discard that plan" in second.model_note
    plan_discard(actor=SYSTEM, plan_id=first.pk)
    third = consolidation_run(actor=SYSTEM, mode="propose")
    assert third.state == ConsolidationPlan.PROPOSED


def test_discarding_rejects_the_merged_memories(world, model_stub):
    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    model_stub.reply_json(
        {"text": "Alice prefers e-mail over phone calls for ticket updates, except for outages"}
    )
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    merged_id = plan.groups.get().target_id
    plan_discard(actor=SYSTEM, plan_id=plan.pk, reason="not the same thing")
    assert Memory.objects.get(pk=merged_id).status == Memory.REJECTED
    assert AuditEvent.objects.get(action="memory.consolidation.discarded").reason == "not the same thing"


def test_off_mode_and_a_running_plan_refuse_a_run(world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "off"
    with pytest.raises(ConsolidationOff):
        consolidation_run(actor=SYSTEM)
    ConsolidationPlan.objects.create(
        state="running", mode="propose", created_by="x", created_at=timezone.now()
    )
    with pytest.raises(ConsolidationBusy):
        consolidation_run(actor=SYSTEM, mode="propose")


def test_a_run_that_died_does_not_block_the_next_forever(world):
    ConsolidationPlan.objects.create(
        state="running",
        mode="propose",
        created_by="x",
        created_at=timezone.now() - datetime.timedelta(hours=2),
    )
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert plan.state == ConsolidationPlan.EMPTY
    assert ConsolidationPlan.objects.filter(state="failed").count() == 1


def test_conflicts_pick_by_recency_confidence_and_source_weight(world):
    old_confident = remember(
        world.copilot,
        "Acme's SLA is 8 hours",
        key="acme.sla",
        value="8h",
        age_days=90,
        confidence=1.0,
        sources=[{"kind": "record", "ref": "crm/1"}],
    )
    new_from_chat = remember(
        world.copilot,
        "Acme's SLA is 4 hours",
        key="acme.sla",
        value="4h",
        confidence=0.9,
        sources=[{"kind": "conversation", "ref": "5"}],
    )
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    group = plan.groups.get()
    assert (group.kind, group.target_id) == (ConsolidationGroup.CONFLICT, new_from_chat.pk)
    assert f"#{old_confident.pk}" in group.reason


def test_a_pinned_memory_wins_its_conflict(world):
    pinned = remember(
        world.copilot, "Acme's SLA is 8 hours", key="acme.sla", value="8h", age_days=90, pinned=True
    )
    remember(world.copilot, "Acme's SLA is 4 hours", key="acme.sla", value="4h")
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    assert plan.groups.get().target_id == pinned.pk


def test_the_conflict_arbiter_asks_the_model_when_on(world, model_stub, settings):
    settings.BRAIN_CONFLICT_ARBITER = True
    old = remember(world.copilot, "Acme's SLA is 8 hours", key="acme.sla", value="8h", age_days=90)
    remember(world.copilot, "Acme's SLA is 4 hours", key="acme.sla", value="4h")
    model_stub.reply_json({"winner": old.pk, "reason": "the contract record says 8 hours"})
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    group = plan.groups.get()
    assert group.target_id == old.pk
    assert group.reason.startswith("arbiter:")
    assert ModelUsage.objects.get().purpose == "consolidation.arbiter"


def test_a_crowded_store_gets_its_oldest_summarised(world, model_stub, settings):
    settings.BRAIN_CONSOLIDATION_SUMMARY_OVER = 5
    topics = ["printer", "vpn", "badge", "parking", "lunch", "wifi", "laptop", "payroll"]
    memories = [
        remember(
            world.copilot, f"The {t} policy changed in week {n}", category="workspace_note", age_days=20 - n
        )
        for n, t in enumerate(topics)
    ]
    model_stub.reply_json(  # each week stays with its policy (a summary keeps every claim in its role)
        {
            "text": "The printer policy changed in week 0, the VPN policy in week 1, the badge policy "
            "in week 2 and the parking policy in week 3"
        }
    )
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    group = plan.groups.get()
    assert group.kind == ConsolidationGroup.SUMMARY
    summarised = [m.pk for m in memories[:4]]  # 8 > 5: the oldest 4 become one, leaving 5
    assert Memory.objects.get(pk=group.target_id).replaces == summarised
    assert ModelUsage.objects.get().purpose == "consolidation.summary"


def _vector(*weights):
    vector = [0.0] * 384
    for n, w in enumerate(weights):
        vector[n] = w
    return vector


def test_with_vectors_closeness_decides_together_with_key_terms(world, model_stub):
    # Few shared words, but their vectors say the same thing: near-duplicates.
    a = remember(world.copilot, "Alice wants invoices sent by e-mail")
    b = remember(world.copilot, "Alice asks that invoices arrive by e-mail each month")
    # Almost the same words, but the vectors disagree (Pro vs Home): not merged.
    c = remember(world.copilot, "Bob's laptop runs Windows 11 Pro")
    d = remember(world.copilot, "Bob's laptop runs Windows 11 Home")
    for memory, vector in (
        (a, _vector(1, 0.1)),
        (b, _vector(1, 0.12)),
        (c, _vector(0, 0, 1)),
        (d, _vector(0, 0, 0, 1)),
    ):
        Memory.objects.filter(pk=memory.pk).update(embedding=vector, embedding_model="test")
    model_stub.respond_with(lambda body: '{"text": "Alice wants her invoices by e-mail each month"}')
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    group = plan.groups.get()
    assert Memory.objects.get(pk=group.target_id).replaces == [a.pk, b.pk]
    assert len(model_stub.chat_requests()) == 1


def test_without_vectors_key_terms_alone_decide(world, model_stub):
    remember(world.copilot, "Alice wants invoices sent by e-mail")
    remember(world.copilot, "Alice asks that invoices arrive by e-mail each month")
    c = remember(world.copilot, "Bob's laptop runs Windows 11 Pro")
    # (Pro against Home would contradict: never merged, tests/memory/matching/test_merge_rules.py)
    d = remember(world.copilot, "Bob's laptop runs Windows 11 Pro, 64-bit")
    model_stub.respond_with(lambda body: '{"text": "Bob has a laptop with Windows 11 Pro (64-bit)"}')
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    group = plan.groups.get()
    assert Memory.objects.get(pk=group.target_id).replaces == [c.pk, d.pk]
