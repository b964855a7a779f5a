"""The reconciler, job by job, through the consolidation machinery: vector dedup at θ, same-key
conflicts, promotion after three distinct turns, session digests, links, cadence, exact revert."""

import datetime

import numpy as np
import pytest
from django.utils import timezone

from knowledge.models import Memory, MessageVector, ModelUsage
from knowledge.principal import Principal
from memory.consolidation import consolidation_run, plan_apply, plan_revert
from memory.consolidation.find import conflict_score
from memory.links.selectors import memory_links
from memory.models import ConsolidationGroup, ConsolidationPlan, MemoryLink, ReconcilerRun
from memory.reconciler import find
from memory.reconciler.dedup import same_statement_guard
from memory.reconciler.selectors import reconciler_due
from memory.reconciler.services import reconciler_run
from memory.reconciler.tasks import reconciler_tick
from tests import factory
from tests.factory import SYSTEM
from tests.memory.consolidation.test_consolidation import full_state, remember

DIM = 384


def unit(*parts):
    v = np.zeros(DIM, dtype=np.float32)
    for i, x in enumerate(parts):
        v[i] = x
    return v / np.linalg.norm(v)


def at_cosine(c):
    """A unit vector at cosine `c` from unit(1)."""
    return unit(c, float(np.sqrt(1 - c * c)))


def set_vector(memory, vector):
    Memory.objects.filter(pk=memory.pk).update(embedding=list(map(float, vector)), embedding_model="test")


def run(agent, **kw):
    kw.setdefault("mode", "apply")
    return reconciler_run(actor=SYSTEM, agent=agent, trigger=ReconcilerRun.MANUAL, **kw)


A = "Alice prefers e-mail over phone calls."
B = "Alice would rather be contacted by email than by phone."


# --- dedup ----------------------------------------------------------------------------------


@pytest.mark.parametrize("delta, merged", [(+0.001, True), (-0.001, False)])
def test_vector_duplicates_merge_at_theta_and_not_below(world, settings, delta, merged):
    settings.BRAIN_RECONCILER_DEDUP_COSINE = 0.9
    keep = remember(world.copilot, A, confidence=0.9, sources=[{"kind": "ticket", "ref": "T-1"}])
    fold = remember(world.copilot, B, confidence=0.6, sources=[{"kind": "conversation", "ref": "7"}])
    set_vector(keep, unit(1))
    set_vector(fold, at_cosine(0.9 + delta))
    result = run(world.copilot, jobs=("dedup",))
    fold.refresh_from_db()
    if not merged:
        assert result.plan.state == ConsolidationPlan.EMPTY and fold.status == Memory.ACTIVE
        return
    assert result.plan.state == ConsolidationPlan.APPLIED
    group = result.plan.groups.get()
    assert (group.kind, group.target_id) == (ConsolidationGroup.VECTOR_DUPLICATE, keep.pk)  # more confident
    assert (fold.status, fold.superseded_by_id) == (Memory.SUPERSEDED, keep.pk)
    assert sorted(keep.sources.values_list("kind", "ref")) == [("conversation", "7"), ("ticket", "T-1")]


def test_close_vectors_of_a_different_fact_are_not_merged(world):
    a = remember(world.copilot, "Refunds over 500 euros need a manager's approval.")
    b = remember(world.copilot, "Refunds over 50 euros need a manager's approval.")
    set_vector(a, unit(1))
    set_vector(b, at_cosine(0.99))
    assert run(world.copilot, jobs=("dedup",)).plan.state == ConsolidationPlan.EMPTY
    assert not same_statement_guard("Bob is allergic to peanuts.", "Bob is allergic to shellfish.")
    assert not same_statement_guard("Eve wants a summary.", "Eve does not want a summary.")
    assert same_statement_guard("Bob is allergic to peanuts.", "Bob has a peanut allergy.")


def test_dedup_stays_within_one_agent_store_and_tier(world):
    rows = [
        remember(world.copilot, A),
        remember(world.copilot, A, store="self"),
        remember(world.scribe, A),
        remember(world.copilot, A, tier=Memory.PROCEDURAL),
    ]
    for m in rows:
        set_vector(m, unit(1))
    assert run(world.copilot, jobs=("dedup",)).plan.state == ConsolidationPlan.EMPTY


# --- conflicts ------------------------------------------------------------------------------


def test_a_conflict_is_won_by_recency_times_confidence_times_source_weight(world):
    old = remember(
        world.copilot,
        "Acme's SLA is 8 hours",
        key="acme.sla",
        value="8h",
        confidence=1.0,
        sources=[{"kind": "ticket", "ref": "C-1"}],
        age_days=10,
    )
    new = remember(
        world.copilot,
        "Acme's SLA is 4 hours",
        key="acme.sla",
        value="4h",
        confidence=0.6,
        sources=[{"kind": "message", "ref": "1"}],
    )
    now = timezone.now()
    assert conflict_score(
        confidence=1.0, created_at=old.created_at, kinds=["ticket"], now=now
    ) > conflict_score(
        confidence=0.6, created_at=new.created_at, kinds=["message"], now=now
    )  # the older one wins although the newer one is newer
    result = run(world.copilot, jobs=("conflicts",))
    group = result.plan.groups.get()
    assert (group.kind, group.target_id) == (ConsolidationGroup.CONFLICT, old.pk)
    assert "recency × confidence × source weight" in group.reason
    new.refresh_from_db()
    assert (new.status, new.superseded_by_id) == (Memory.SUPERSEDED, old.pk)  # both stay visible
    assert Memory.objects.filter(pk__in=[old.pk, new.pk]).count() == 2


def test_the_arbiter_is_opt_in_and_its_reply_is_checked(world, model_stub, settings):
    old = remember(world.copilot, "Acme's SLA is 8 hours", key="acme.sla", value="8h", age_days=90)
    new = remember(world.copilot, "Acme's SLA is 4 hours", key="acme.sla", value="4h")
    # off (the default): no model call even with a model configured
    plan = run(world.copilot, jobs=("conflicts",), mode="propose").plan
    assert plan.groups.get().target_id == new.pk and ModelUsage.objects.count() == 0
    ConsolidationPlan.objects.filter(pk=plan.pk).update(state=ConsolidationPlan.DISCARDED)

    settings.BRAIN_RECONCILER_ARBITER = True
    model_stub.reply_json({"winner": old.pk, "reason": "the contract says 8 hours"})
    plan = run(world.copilot, jobs=("conflicts",), mode="propose").plan
    group = plan.groups.get()
    assert group.target_id == old.pk and group.reason.startswith("arbiter v1:")
    assert ModelUsage.objects.get().purpose == "reconciler.arbiter"
    ConsolidationPlan.objects.filter(pk=plan.pk).update(state=ConsolidationPlan.DISCARDED)

    model_stub.reply_json({"winner": 999999, "reason": "made up"})  # invalid: the formula stands
    plan = run(world.copilot, jobs=("conflicts",), mode="propose").plan
    assert plan.groups.get().target_id == new.pk
    assert plan.counts["model_invalid_outputs"] == 1


# --- promotion ------------------------------------------------------------------------------


def test_an_episodic_memory_restated_in_three_distinct_turns_is_promoted(world):
    c1 = factory.make_conversation(world.copilot, world.general)
    c2 = factory.make_conversation(world.copilot, world.general)
    first = remember(
        world.copilot,
        A,
        tier=Memory.EPISODIC,
        conversation=c1,
        turn=1,
        sources=[{"kind": "conversation", "ref": str(c1.pk)}],
    )
    second = remember(world.copilot, B, tier=Memory.EPISODIC, conversation=c1, turn=4)
    third = remember(world.copilot, A, tier=Memory.EPISODIC, conversation=c2, turn=1)
    factory.embed_all()
    result = run(world.copilot, jobs=("promotion",))
    groups = {g.target_id: g for g in result.plan.groups.filter(kind=ConsolidationGroup.PROMOTION)}
    assert set(groups) == {first.pk, second.pk, third.pk}  # each is restated by the other two
    first.refresh_from_db()
    assert (first.tier, first.expires_at) == (Memory.SEMANTIC, None)
    assert "restated in 3 distinct turns" in first.status_reason
    refs = set(first.sources.values_list("kind", "ref"))
    assert {("conversation", str(c1.pk)), ("memory", str(second.pk)), ("memory", str(third.pk))} <= refs


def test_three_copies_from_one_turn_are_not_a_promotion(world):
    c1 = factory.make_conversation(world.copilot, world.general)
    for _ in range(3):
        remember(world.copilot, A, tier=Memory.EPISODIC, conversation=c1, turn=2)
    factory.embed_all()
    result = run(world.copilot, jobs=("promotion",))
    assert result.counts["promotion_candidates"] == 3
    assert not result.plan.groups.filter(kind=ConsolidationGroup.PROMOTION).exists()
    assert not Memory.objects.filter(tier=Memory.SEMANTIC).exists()


def test_a_turn_counts_as_a_restatement_by_its_own_words_not_the_turn_before_it(world):
    """Message vectors carry the turn before them; a reply that only agrees ("Yes, exactly") is
    near the fact through that turn, but did not say it: the message that said it counts, the
    reply does not, so two turns are not a promotion."""
    conv = factory.make_conversation(world.copilot, world.general)
    memory = remember(world.copilot, A, tier=Memory.EPISODIC, conversation=conv, turn=1)
    said, agreed = factory.post_messages(
        world.general,
        [
            {"speaker": "alice", "text": "I prefer e-mail over phone calls."},
            {"speaker": "bob", "text": "Yes, exactly."},
        ],
    )
    factory.embed_all()
    stored = dict(MessageVector.objects.values_list("message_id", "embedding"))
    mine = np.array(Memory.objects.get(pk=memory.pk).embedding)
    assert float(np.array(stored[agreed]) @ mine) >= 0.80 - find.CONTEXT_SLACK  # the sieve lets it by
    result = run(world.copilot, jobs=("promotion",))
    assert not result.plan.groups.filter(kind=ConsolidationGroup.PROMOTION).exists()
    # A third turn of its own (another memory) makes three: the memory's, the message's, its own.
    remember(world.copilot, B, tier=Memory.EPISODIC, conversation=conv, turn=4)
    factory.embed_all()
    run(world.copilot, jobs=("promotion",))
    memory.refresh_from_db()
    assert memory.tier == Memory.SEMANTIC
    refs = set(memory.sources.values_list("kind", "ref"))
    assert ("message", str(said)) in refs and ("message", str(agreed)) not in refs


def test_message_vectors_of_another_model_are_not_compared(world):
    """Right after an upgrade (or a model change) a message's stored vector is of another model
    or recipe: it is backlog, and a restatement is only found once the backlog re-embeds it."""
    from knowledge.embeddings import embedder

    conv = factory.make_conversation(world.copilot, world.general)
    memory = remember(world.copilot, A, tier=Memory.EPISODIC, conversation=conv, turn=1)
    remember(world.copilot, B, tier=Memory.EPISODIC, conversation=conv, turn=4)
    (said,) = factory.post_messages(
        world.general, [{"speaker": "alice", "text": "I prefer e-mail over phone calls."}]
    )
    factory.embed_all()
    MessageVector.objects.filter(message_id=said).update(model=embedder.model_name())  # the old recipe
    run(world.copilot, jobs=("promotion",), mode="propose")
    assert not ConsolidationPlan.objects.filter(groups__kind=ConsolidationGroup.PROMOTION).exists()
    MessageVector.objects.filter(message_id=said).update(model=embedder.message_model_name())
    run(world.copilot, jobs=("promotion",))
    memory.refresh_from_db()
    assert memory.tier == Memory.SEMANTIC
    assert ("message", str(said)) in set(memory.sources.values_list("kind", "ref"))


# --- session digests ------------------------------------------------------------------------


def expired_episodes(agent, conversation, texts):
    past = timezone.now() - datetime.timedelta(hours=1)
    out = []
    for n, text in enumerate(texts):
        m = remember(
            agent,
            text,
            tier=Memory.EPISODIC,
            conversation=conversation,
            turn=n,
            sources=[{"kind": "conversation", "ref": str(conversation.pk)}],
        )
        Memory.objects.filter(pk=m.pk).update(expires_at=past)
        out.append(m)
    return out


def test_expired_episodes_become_one_digest_citing_them_and_are_no_longer_recalled(world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "apply"
    conv = factory.make_conversation(world.copilot, world.general)
    texts = [
        "The customer asked about the vpn outage on gateway seven",
        "We promised a vpn status update by Friday",
    ]
    originals = expired_episodes(world.copilot, conv, texts)
    from memory.tasks import expire_short_term_memory

    expire_short_term_memory()  # the hourly expiry digests first
    digest = Memory.objects.get(category="digest")
    assert (digest.status, digest.tier, digest.store) == (Memory.ACTIVE, Memory.SEMANTIC, "shared")
    assert sorted(digest.replaces) == sorted(m.pk for m in originals)
    assert all(f"#{m.pk}" in digest.text for m in originals) and texts[1] in digest.text
    assert {("memory", str(m.pk)) for m in originals} <= set(digest.sources.values_list("kind", "ref"))
    for m in originals:
        m.refresh_from_db()
        assert (m.status, m.superseded_by_id) == (Memory.EXPIRED, digest.pk)
    factory.embed_all()
    response = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conv.pk, "q": "vpn status update friday gateway"},
        format="json",
    )
    assert response.status_code == 200, response.content
    ids = {r["id"] for r in response.json()["results"] if r["kind"] == "memory"}
    assert digest.pk in ids and not ids & {m.pk for m in originals}


def test_a_digest_waiting_for_review_keeps_its_originals_out_of_plain_expiry(world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "propose"
    conv = factory.make_conversation(world.copilot, world.general)
    originals = expired_episodes(
        world.copilot, conv, ["Ana asked for the invoice copy", "Ana wants it by mail"]
    )
    from memory.tasks import expire_short_term_memory

    expire_short_term_memory()
    plan = ConsolidationPlan.objects.get(state=ConsolidationPlan.PROPOSED)
    assert Memory.objects.filter(pk__in=[m.pk for m in originals], status=Memory.ACTIVE).count() == 2
    expire_short_term_memory()  # an hour later: no second digest, no empty plan
    assert ConsolidationPlan.objects.count() == 1
    plan_apply(actor=SYSTEM, plan_id=plan.pk)
    assert Memory.objects.filter(pk__in=[m.pk for m in originals], status=Memory.EXPIRED).count() == 2


def test_the_digest_uses_the_model_when_there_is_one(world, model_stub, settings):
    conv = factory.make_conversation(world.copilot, world.general)
    originals = expired_episodes(
        world.copilot, conv, ["Ana asked for the invoice copy", "Ana wants it by mail"]
    )
    model_stub.reply_json({"text": "Ana wants a copy of the invoice by mail."})
    group = run(world.copilot, jobs=("digest",), mode="propose").plan.groups.get()
    assert group.merged_text.startswith("Session digest of conversation")
    assert "Ana wants a copy of the invoice by mail." in group.merged_text
    assert all(f"#{m.pk}" in group.merged_text for m in originals)
    assert ModelUsage.objects.get().purpose == "reconciler.digest"


# --- links ----------------------------------------------------------------------------------


def test_links_go_both_ways_and_stay_in_one_store(world, settings):
    settings.BRAIN_RECONCILER_LINK_FLOOR = 0.5
    a = remember(world.copilot, "The VPN gateway vpn-gw-2 uses port 1194.")
    b = remember(world.copilot, "VPN clients connect through gateway vpn-gw-2.")
    far = remember(world.copilot, "Lunch is served at noon in the big room.")
    private = remember(world.copilot, "The VPN gateway vpn-gw-2 is flaky for Alice.", store="private:alice")
    for m, v in ((a, unit(1)), (b, at_cosine(0.8)), (far, unit(0, 0, 1)), (private, at_cosine(0.95))):
        set_vector(m, v)
    result = run(world.copilot, jobs=("links",))
    pairs = set(MemoryLink.objects.values_list("memory_id", "neighbour_id"))
    assert pairs == {(a.pk, b.pk), (b.pk, a.pk)}
    assert all(link.plan_id == result.plan.pk for link in MemoryLink.objects.all())
    # the memory page and memory_browse show what the reader may see
    assert [x["id"] for x in memory_links(a, principal=Principal.for_agent(world.copilot))] == [b.pk]
    body = world.client("copilot").get(f"/api/memory/browse/memory/{a.pk}").json()
    assert [x["id"] for x in body["links"]] == [b.pk]


# --- cadence --------------------------------------------------------------------------------


def test_an_agent_is_due_after_25_turns(world, settings):
    conv = factory.make_conversation(world.copilot, world.general)
    for turn in range(24):
        remember(world.copilot, f"note {turn}", tier=Memory.WORKING, conversation=conv, turn=turn)
        remember(
            world.copilot, f"copy {turn}", tier=Memory.WORKING, conversation=conv, turn=turn
        )  # same turn
    assert reconciler_due(world.copilot) == ("", 24)
    remember(world.copilot, "note 24", tier=Memory.WORKING, conversation=conv, turn=24)
    assert reconciler_due(world.copilot) == (ReconcilerRun.TURNS, 25)
    assert reconciler_tick() == ["copilot"]
    assert ReconcilerRun.objects.get().trigger == ReconcilerRun.TURNS
    assert reconciler_due(world.copilot) == ("", 0)  # counted again from this run


def test_an_agent_is_due_after_ten_idle_minutes(world):
    m = remember(world.copilot, "one note")
    now = timezone.now()
    assert reconciler_due(world.copilot, now=now) == ("", 0)
    assert reconciler_due(world.copilot, now=m.created_at + datetime.timedelta(minutes=10)) == (
        ReconcilerRun.IDLE,
        0,
    )
    assert reconciler_tick(now=now) == []
    assert reconciler_tick(now=now + datetime.timedelta(minutes=11)) == ["copilot"]
    assert reconciler_tick(now=now + datetime.timedelta(minutes=30)) == []  # nothing new since


def test_nothing_runs_when_consolidation_is_off(world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "off"
    remember(world.copilot, "one note")
    assert reconciler_tick(now=timezone.now() + datetime.timedelta(hours=1)) == []
    assert not ReconcilerRun.objects.exists()


# --- revert ---------------------------------------------------------------------------------


def test_a_reconciler_change_set_reverts_exactly(world):
    c1 = factory.make_conversation(world.copilot, world.general)
    c2 = factory.make_conversation(world.copilot, world.general)
    ep = [
        remember(world.copilot, A, tier=Memory.EPISODIC, conversation=c, turn=t)
        for c, t in ((c1, 1), (c1, 2), (c2, 1))
    ]
    dup_keep = remember(world.copilot, "Bob is allergic to peanuts.", confidence=0.9)
    dup_fold = remember(
        world.copilot, "Bob has a peanut allergy.", confidence=0.5, sources=[{"kind": "message", "ref": "5"}]
    )
    gone = expired_episodes(world.copilot, c2, ["Ana asked for the invoice copy"])
    factory.embed_all()
    set_vector(dup_keep, unit(1))
    set_vector(dup_fold, at_cosine(0.95))
    near = [
        remember(world.copilot, "The VPN gateway uses port 1194."),
        remember(world.copilot, "VPN clients use gw-2."),
    ]
    set_vector(near[0], unit(0, 1))
    set_vector(near[1], unit(0, 0.7, 0.714))
    ids = [m.pk for m in [*ep, dup_keep, dup_fold, *gone, *near]]
    before = full_state(ids)
    result = run(world.copilot)
    kinds = set(result.plan.groups.values_list("kind", flat=True))
    assert {"promotion", "vector_duplicate", "digest", "link"} <= kinds, kinds
    assert full_state(ids) != before and MemoryLink.objects.exists()

    plan_revert(actor=SYSTEM, plan_id=result.plan.pk)
    assert full_state(ids) == before
    assert not MemoryLink.objects.exists()
    assert Memory.objects.get(category="digest").status == Memory.INVALIDATED  # retired, kept


def test_a_reconciler_plan_is_a_consolidation_plan_and_one_run_at_a_time(world):
    remember(world.copilot, A)
    result = run(world.copilot, mode="propose")
    assert result.plan.created_by == "system:reconciler" and result.state == ReconcilerRun.DONE
    ConsolidationPlan.objects.create(
        state="running", mode="propose", created_by="x", created_at=timezone.now()
    )
    from memory.consolidation import ConsolidationBusy

    with pytest.raises(ConsolidationBusy):
        run(world.copilot)
    assert ReconcilerRun.objects.order_by("-id").first().state == ReconcilerRun.SKIPPED
    assert consolidation_run  # the same machinery


def test_after_the_first_pass_dedup_compares_only_what_is_new(world, settings):
    settings.BRAIN_RECONCILER_DEDUP_COSINE = 0.9
    old_a = remember(world.copilot, A, confidence=0.9)
    old_b = remember(world.copilot, B, confidence=0.5)
    set_vector(old_a, unit(1))
    set_vector(old_b, unit(0, 1))
    assert run(world.copilot, jobs=("dedup",)).plan.state == ConsolidationPlan.EMPTY
    # an old pair made close behind the reconciler's back (no write touches updated_at) is not
    # compared again; a new copy is, against everything
    Memory.objects.filter(pk=old_b.pk).update(embedding=list(map(float, at_cosine(0.95))))
    Memory.objects.filter(pk__in=[old_a.pk, old_b.pk]).update(
        updated_at=timezone.now() - datetime.timedelta(days=1)
    )
    new = remember(world.copilot, A, confidence=0.4)
    set_vector(new, unit(1))
    group = run(world.copilot, jobs=("dedup",)).plan.groups.get()
    assert (group.target_id, group.items.get(role="fold").memory_id) == (old_a.pk, new.pk)


def test_messages_of_the_conversation_channel_that_restate_a_memory_count_as_turns(world):
    conv = factory.make_conversation(world.copilot, world.general)
    memory = remember(world.copilot, A, tier=Memory.EPISODIC, conversation=conv, turn=1)
    now = timezone.now()
    ids = factory.post_messages(
        world.general,
        [
            {"speaker": "alice", "text": A, "external_id": "r-1", "ts": now},
            {"speaker": "alice", "text": B, "external_id": "r-2", "ts": now},
            {"speaker": "bob", "text": "Lunch is at noon today.", "external_id": "r-3", "ts": now},
        ],
    )
    factory.embed_all()
    group = run(world.copilot, jobs=("promotion",)).plan.groups.get()
    assert group.target_id == memory.pk and group.reason == "restated in 3 distinct turns"
    assert {("message", str(ids[0])), ("message", str(ids[1]))} <= set(
        memory.sources.values_list("kind", "ref")
    )


def test_strict_anti_drift_still_refuses_a_promotion_that_contradicts(world, settings):
    settings.BRAIN_STRICT_ANTI_DRIFT = True
    remember(world.copilot, "Acme's SLA is 8 hours", key="acme.sla", value="8h", confidence=0.95)
    conv = factory.make_conversation(world.copilot, world.general)
    for turn in (1, 2, 3):
        remember(
            world.copilot,
            "Acme's SLA is 4 hours",
            key="acme.sla",
            value="4h",
            tier=Memory.EPISODIC,
            conversation=conv,
            turn=turn,
        )
    factory.embed_all()
    plan = run(world.copilot, jobs=("promotion",)).plan
    assert not plan.groups.exists()
    assert "strict anti-drift" in plan.model_note


def test_recall_shows_a_winners_linked_neighbour_only_when_switched_on(world, settings):
    from dataclasses import replace

    from memory.recall import memory_search
    from memory.recall.params import DEFAULT_PARAMS
    from memory.recall.scope import store_scope

    settings.BRAIN_RECONCILER_LINK_FLOOR = 0.5
    a = remember(world.copilot, "The VPN gateway vpn-gw-2 uses port 1194.")
    b = remember(world.copilot, "Clients reach the gateway through the office tunnel.")
    private = remember(world.copilot, "The office tunnel is flaky for Alice.", store="private:alice")
    for m, v in ((a, unit(1)), (b, at_cosine(0.8)), (private, at_cosine(0.95))):
        set_vector(m, v)
    run(world.copilot, jobs=("links",))
    scope = store_scope(world.copilot, "shared")

    def first_item(params):
        outcome = memory_search(scope, q="port 1194", k=1, params=params)
        assert outcome.items[0].candidate.id == a.pk
        return outcome.items[0].text

    assert "office tunnel" not in first_item(DEFAULT_PARAMS)  # off by default
    shown = first_item(replace(DEFAULT_PARAMS, link_neighbours=2))
    assert f"linked: {b.text}" in shown
    assert "Alice" not in shown  # the private neighbour stays out of a shared scope
