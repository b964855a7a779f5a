"""Dreaming stage B through the real model client against the loopback model server: the
barbecue → vegetarian story end to end, each code-enforced rule refusing a bad operation while
the rest apply, model failures and a database error at commit writing nothing, restoring a whole
run, fitness arithmetic, the API, the Dreaming tab and the Status section."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from curation.dreaming.stage_a.services import stage_a_run
from curation.dreaming.stage_b import rules
from curation.dreaming.stage_b.operations import check as check_operations
from curation.dreaming.stage_b.selectors import fitness, review_lints, stage_b_due
from curation.dreaming.stage_b.services import stage_b_run
from curation.models import DreamingRun, StageBCursor
from knowledge.models import AuditEvent, Entry, EntryRelation, Episode, Memory, PinnedMemo
from knowledge.principal import Principal
from tests import factory

NOW = timezone.now().replace(microsecond=0)
PERSON = Principal(kind="person", name="tests", role="admin")


def post_one(channel, speaker, text, ts, ext):
    (mid,) = factory.post_messages(
        channel, [{"speaker": speaker, "text": text, "ts": ts, "external_id": ext}]
    )
    return mid


def stage_a_episode(model_stub, channel, mid, topic):
    """Stage A over the channel, scripted: the one new message becomes one episode."""
    model_stub.reply_json(
        {
            "episodes": [
                {
                    "topic": topic,
                    "summary": f"{topic}.",
                    "likely_question": "",
                    "resolution": "",
                    "systems": [],
                    "messages": [mid],
                    "evidence": [],
                }
            ],
            "noise": [],
            "leave_from": None,
        }
    )
    run = stage_a_run(channel=channel, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.DONE, run.reason
    return Episode.objects.get(messages=mid)


def script_b(model_stub, *, episodes=(), outcomes=(), entries=(), operations=()):
    model_stub.reply_json({"episodes": list(episodes), "outcomes": list(outcomes), "entries": list(entries)})
    model_stub.reply_json({"operations": list(operations)})


@pytest.fixture
def taking_part(world):
    factory.make_conversation(world.copilot, world.general)
    return world


# --- the story ------------------------------------------------------------------------------------


def test_barbecue_then_vegetarian_closes_the_old_block_and_opens_the_new_one(taking_part, model_stub):
    world = taking_part
    then, now = NOW - timedelta(days=730), NOW - timedelta(days=30)
    first = post_one(world.general, "alice", "I like barbecue, ribs every weekend", then, "bbq")
    ep1 = stage_a_episode(model_stub, world.general, first, "Alice's food")
    script_b(
        model_stub,
        episodes=[ep1.pk],
        operations=[
            {
                "op": "create_entry",
                "name": "Alice",
                "type": "person",
                "summary": "A teammate.",
                "store": "shared",
            },
            {
                "op": "add_block",
                "entry": "Alice",
                "text": "Alice likes barbecue.",
                "kind": "observation",
                "sources": [{"kind": "message", "ref": first}],
                "valid_from": f"{then:%Y-%m-%d}",
            },
        ],
    )
    run1 = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert (run1.state, run1.reason, run1.operations, run1.dropped) == (DreamingRun.DONE, "", 2, [])
    entry = Entry.objects.get(name="Alice")
    (old,) = Memory.objects.filter(entry=entry)
    assert (old.status, old.author_kind, old.category) == (Memory.ACTIVE, "dreaming", "observation")

    second = post_one(world.general, "alice", "I am now vegetarian, no more meat for me", now, "veg")
    ep2 = stage_a_episode(model_stub, world.general, second, "Alice is vegetarian")
    script_b(
        model_stub,
        episodes=[ep2.pk],
        entries=[entry.pk],
        operations=[
            {
                "op": "add_block",
                "entry": entry.pk,
                "text": "Alice is vegetarian.",
                "kind": "observation",
                "sources": [{"kind": "episode", "ref": ep2.pk}],
                "valid_from": f"{now:%Y-%m-%d}",
                "closes": old.pk,
                "reason": "Alice said she is now vegetarian",
            }
        ],
    )
    run2 = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert (run2.state, run2.operations, run2.dropped) == (DreamingRun.DONE, 1, [])
    old.refresh_from_db()
    new = Memory.objects.exclude(pk=old.pk).get(entry=entry)
    day = now.replace(hour=0, minute=0, second=0)
    assert old.status == new.status == Memory.ACTIVE  # nothing overwritten: both stay, dated
    assert (old.valid_to, new.valid_from, new.valid_to) == (day, day, None)
    assert [(s.kind, s.ref) for s in old.sources.all()] == [("message", str(first))]
    assert [(s.kind, s.ref) for s in new.sources.all()] == [("message", str(second))]
    # Everything of run 2 carries its id: the close, the new block and the run's own event.
    actions = set(AuditEvent.objects.filter(dreaming_run=run2.pk).values_list("action", flat=True))
    assert actions == {"block.closed", "memory.written", "dreaming.curated"}
    cursor = StageBCursor.objects.get(agent=world.copilot)
    assert (cursor.episode_id, cursor.failures, cursor.claimed_at) == (ep2.pk, 0, None)
    # The scan of run 2 saw only the new episode; the propose call was shown the entry's blocks.
    scan, propose = model_stub.chat_requests()[-2:]
    assert "Alice is vegetarian" in model_stub.prompt(scan) and "Alice's food" not in model_stub.prompt(scan)
    assert f"[block #{old.pk}" in model_stub.prompt(propose)

    # Recall puts the current block first and dates the closed one.
    conv = factory.make_conversation(world.copilot, world.general)
    factory.embed_all()
    found = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conv.pk, "q": "what does Alice eat barbecue vegetarian"},
        format="json",
    )
    blocks = [r for r in found.json()["results"] if r["kind"] == "memory" and r["id"] in (old.pk, new.pk)]
    assert [r["id"] for r in blocks] == [new.pk, old.pk]
    assert f"(since {now:%Y-%m-%d})" in blocks[0]["text"]
    assert f"(until {now:%Y-%m-%d})" in blocks[1]["text"]
    # Context compilation: the same order and dates in the prompt an agent gets.
    context = world.client("copilot").post(
        "/api/agents/copilot/context",
        {"conversation": conv.pk, "q": "what does Alice eat barbecue vegetarian", "budget_tokens": 2000},
        format="json",
    )
    text = next(s["text"] for s in context.json()["sections"] if s["name"] == "recalled_memory")
    current = text.index(f"Alice: Alice is vegetarian. (since {now:%Y-%m-%d})")
    assert current < text.index(f"Alice: Alice likes barbecue. (until {now:%Y-%m-%d})")


# --- the rules, each refusing a bad operation while the rest apply ---------------------------------


@pytest.fixture
def opened_world(taking_part, model_stub):
    """One message and its episode, ready for a stage B run."""
    world = taking_part
    world.mid = post_one(
        world.general, "alice", "Dana works for Acme since March", NOW - timedelta(days=3), "d1"
    )
    world.episode = stage_a_episode(model_stub, world.general, world.mid, "Dana's employer")
    return world


GOOD = {"op": "create_entry", "name": "Dana", "type": "person", "store": "shared"}


def block(**fields):
    return {
        "op": "add_block",
        "entry": "Dana",
        "text": "Dana works for Acme.",
        "kind": "observation",
        **fields,
    }


@pytest.mark.parametrize(
    "bad, reason",
    [
        (lambda w: block(), "must cite at least one source"),
        (lambda w: block(sources=[{"kind": "message", "ref": w.mid + 999}]), "which the scan did not open"),
        (
            lambda w: block(kind="induction", sources=[{"kind": "message", "ref": w.mid}]),
            "an induction needs",
        ),
        (lambda w: block(kind="deduction", sources=[{"kind": "message", "ref": w.mid}]), "name its premises"),
        (lambda w: block(sources=[{"kind": "task_outcome", "ref": 1}]), "a task outcome proves only"),
        (lambda w: {**GOOD, "name": "Acme", "type": "galaxy"}, "not in the curation guide's taxonomy"),
        (lambda w: {**GOOD, "name": "Acme", "store": "private:olga"}, "not one of the agent's stores"),
        (
            lambda w: {
                "op": "add_relation",
                "entry": "Dana",
                "predicate": "works for",
                "target": "Dana",
                "sources": [{"kind": "message", "ref": w.mid}],
                "quote": "Dana is the CEO of Acme",
            },
            "an inferred relation never becomes a graph edge",
        ),
        (
            lambda w: {"op": "revise_lesson", "skill": "nonexistent", "text": "x", "sources": []},
            "Dreaming creates no skill",
        ),
    ],
)
def test_an_operation_breaking_a_rule_is_dropped_and_the_rest_apply(opened_world, model_stub, bad, reason):
    world = opened_world
    ok = block(sources=[{"kind": "episode", "ref": world.episode.pk}])
    script_b(model_stub, episodes=[world.episode.pk], operations=[GOOD, bad(world), ok])
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.DONE
    assert run.operations == 2
    ((dropped),) = run.dropped
    assert dropped["op"] == 2 and reason in dropped["reason"], dropped
    assert Memory.objects.filter(entry__name="Dana").count() == 1
    assert not EntryRelation.objects.exists()


def test_a_deduction_is_stored_as_a_conditional_with_its_author_and_date(opened_world, model_stub):
    world = opened_world
    deduction = block(
        kind="deduction",
        text="Dana can approve Acme purchase orders",
        premises=["Dana works for Acme", "Acme staff approve their own orders"],
        sources=[{"kind": "message", "ref": world.mid}],
    )
    script_b(model_stub, episodes=[world.episode.pk], operations=[GOOD, deduction])
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    (memory,) = Memory.objects.filter(entry__name="Dana")
    assert memory.category == "deduction"
    assert memory.text == (
        "If Dana works for Acme; Acme staff approve their own orders: Dana can approve Acme purchase "
        f"orders. (Deduced by Dreaming run {run.pk} on {timezone.now():%Y-%m-%d}.)"
    )


def test_an_induction_needs_messages_from_different_conversations_or_times(opened_world, model_stub):
    world = opened_world
    later = post_one(world.general, "bob", "Dana again booked the Acme room", NOW - timedelta(days=1), "d2")
    ep2 = stage_a_episode(model_stub, world.general, later, "Dana books")
    induction = block(
        kind="induction",
        text="Dana regularly acts for Acme.",
        sources=[{"kind": "message", "ref": world.mid}, {"kind": "episode", "ref": ep2.pk}],
    )
    script_b(model_stub, episodes=[world.episode.pk, ep2.pk], operations=[GOOD, induction])
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert (run.operations, run.dropped) == (2, [])
    assert Memory.objects.get(entry__name="Dana").category == "induction"


def test_a_relation_is_written_only_when_its_quote_is_in_the_cited_message(opened_world, model_stub):
    world = opened_world
    acme = {**GOOD, "name": "Acme", "type": "organization"}
    relation = {
        "op": "add_relation",
        "entry": "Dana",
        "predicate": "works for",
        "target": "Acme",
        "sources": [{"kind": "episode", "ref": world.episode.pk}],
        "quote": "works  for ACME",
    }
    script_b(model_stub, episodes=[world.episode.pk], operations=[GOOD, acme, relation])
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert (run.operations, run.dropped) == (3, [])
    (edge,) = EntryRelation.objects.all()
    assert (edge.source.name, edge.predicate, edge.target.name) == ("Dana", "works for", "Acme")
    assert edge.sources == [{"kind": "message", "ref": str(world.mid)}]


def test_evidence_from_a_direct_message_never_goes_into_the_shared_store(world, model_stub):
    factory.make_conversation(world.copilot, world.dm_alice)
    mid = post_one(world.dm_alice, "alice", "My salary is 90k", NOW - timedelta(days=2), "p1")
    ep = stage_a_episode(model_stub, world.dm_alice, mid, "Alice's salary")
    shared = {"op": "create_entry", "name": "Alice", "type": "person", "store": "shared"}
    private = {"op": "create_entry", "name": "Alice pay", "type": "person", "store": "private:alice"}
    script_b(
        model_stub,
        episodes=[ep.pk],
        operations=[
            shared,
            {
                "op": "add_block",
                "entry": "Alice",
                "text": "Salary 90k",
                "sources": [{"kind": "message", "ref": mid}],
            },
            private,
            {
                "op": "add_block",
                "entry": "Alice pay",
                "text": "Salary 90k",
                "sources": [{"kind": "message", "ref": mid}],
            },
        ],
    )
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert (run.state, run.reason) == (DreamingRun.DONE, "")
    assert [d["op"] for d in run.dropped] == [2]
    assert "may not support knowledge in store shared" in run.dropped[0]["reason"]
    assert Memory.objects.get(entry__isnull=False).store == "private:alice"


def test_a_revision_may_not_move_validity_and_the_guide_is_not_an_operation(opened_world, model_stub):
    world = opened_world
    entry = factory.make_entry(world.copilot, name="Dana", type="person", blocks=["Dana works at Acme."])
    (b,) = Memory.objects.filter(entry=entry)
    revise = {
        "op": "revise_block",
        "entry": entry.pk,
        "block": b.pk,
        "text": "Dana worked at Acme.",
        "reason": "changed",
        "valid_to": "2026-01-01",
        "sources": [{"kind": "message", "ref": world.mid}],
    }
    script_b(model_stub, episodes=[world.episode.pk], entries=[entry.pk], operations=[revise])
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert "a revision may not change a block's validity" in run.dropped[0]["reason"]
    b.refresh_from_db()
    assert (b.text, b.valid_to) == ("Dana works at Acme.", None)
    # There is no operation on the curation guide: a reply proposing one fails the schema.
    later = post_one(world.general, "bob", "new", NOW, "n1")
    ep = stage_a_episode(model_stub, world.general, later, "new")
    script_b(model_stub, episodes=[ep.pk], operations=[{"op": "update_guide", "taxonomy": "x"}])
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.FAILED and "schema" in run.reason


def test_a_revision_keeps_every_claim_of_the_block_it_rewords(opened_world, model_stub):
    world = opened_world
    original = "Firmware 3.2.5 fixes printer error P0417; firmware 3.2.4 still shows it."
    entry = factory.make_entry(world.copilot, name="Office printers", type="person", blocks=[original])
    (b,) = Memory.objects.filter(entry=entry)

    def revise(text):  # each run reads a new message, so it has something new to read
        mid = post_one(world.general, "bob", text, NOW, text)
        episode = stage_a_episode(model_stub, world.general, mid, "printers")
        op = {"op": "revise_block", "entry": entry.pk, "block": b.pk, "text": text, "reason": "clearer"}
        op["sources"] = [{"kind": "message", "ref": mid}]
        script_b(model_stub, episodes=[episode.pk], entries=[entry.pk], operations=[op])
        return stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)

    for wrong, why in (
        ("Firmware 3.2.4 fixes printer error P0417; firmware 3.2.5 still shows it.", "swaps"),
        ("Firmware 3.2.5 fixes printer error P0417.", "drops: 3.2.4"),
    ):
        run = revise(wrong)
        assert "a revision must keep every claim of the block" in run.dropped[0]["reason"]
        assert why in run.dropped[0]["reason"]
        b.refresh_from_db()
        assert b.text == original
    run = revise("Printer error P0417 is fixed by firmware 3.2.5 and still shows on firmware 3.2.4.")
    assert run.dropped == []
    assert Memory.objects.get(pk=b.pk).text.startswith("Printer error P0417 is fixed")


# --- skill experience ---------------------------------------------------------------------------


@pytest.fixture
def skilled(world):
    from memory.skills.outcomes import outcome_record
    from memory.skills.services import skill_create, skill_enable

    skill = skill_create(actor=PERSON, name="triage", title="Ticket triage")
    skill_enable(actor=PERSON, agent=world.copilot, skill=skill, enabled=True)
    world.skill = skill
    world.plain, _ = outcome_record(
        actor=PERSON, agent=world.copilot, skill=skill, task="Triage INC-1", result="success", steps=["read"]
    )
    world.corrected, _ = outcome_record(
        actor=PERSON,
        agent=world.copilot,
        skill=skill,
        task="Triage INC-2",
        result="success",
        steps=["read", "assign"],
        correction={"text": "VPN tickets go to the network team, not the desk", "by": "rita"},
    )
    return world


def lesson(ref, text="Route VPN tickets to the network team."):
    return {
        "op": "revise_lesson",
        "skill": "triage",
        "text": text,
        "sources": [{"kind": "task_outcome", "ref": ref}],
    }


def test_lessons_come_from_corrections_not_plain_successes_and_revise_their_twin(skilled, model_stub):
    world = skilled
    script_b(
        model_stub,
        outcomes=[world.plain.pk, world.corrected.pk],
        operations=[lesson(world.plain.pk, "Read the ticket first."), lesson(world.corrected.pk)],
    )
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert (run.skill_updates, run.operations) == (1, 0)
    assert "a plain success alone never becomes a lesson" in run.dropped[0]["reason"]
    (first,) = Memory.objects.filter(skill=world.skill, status=Memory.ACTIVE)
    assert (first.author_kind, first.tier) == ("dreaming", Memory.PROCEDURAL)
    # A later run proposing nearly the same lesson revises it instead of appending.
    from memory.skills.outcomes import outcome_record

    again, _ = outcome_record(
        actor=PERSON,
        agent=world.copilot,
        skill=world.skill,
        task="Triage INC-3",
        result="failure",
        steps=["assign"],
        correction={"text": "network team again", "by": "rita"},
    )
    script_b(
        model_stub,
        outcomes=[again.pk],
        operations=[lesson(again.pk, "Route VPN tickets to the network team!")],
    )
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert (run.skill_updates, run.dropped) == (1, [])
    (live,) = Memory.objects.filter(skill=world.skill, status=Memory.ACTIVE)
    first.refresh_from_db()
    assert live.supersedes_id == first.pk and first.status == Memory.SUPERSEDED


def test_a_memo_rewrite_within_budget_applies_and_one_over_it_is_dropped(opened_world, model_stub, settings):
    world = opened_world
    settings.BRAIN_MEMO_BUDGET_TOKENS = 20
    script_b(
        model_stub,
        episodes=[world.episode.pk],
        operations=[
            {"op": "rewrite_memo", "text": "word " * 200},
            {"op": "rewrite_memo", "text": "Answer in English."},
        ],
    )
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert [d["op"] for d in run.dropped] == [1] and "budget" in run.dropped[0]["reason"]
    assert PinnedMemo.objects.get(agent=world.copilot).text == "Answer in English."


# --- failures write nothing --------------------------------------------------------------------


def nothing_written(world, cursor_episode=0):
    cursor = StageBCursor.objects.get(agent=world.copilot)
    return (
        not Entry.all_objects.exists()
        and not AuditEvent.objects.filter(dreaming_run__isnull=False, action__startswith="entry").exists()
        and cursor.episode_id == cursor_episode
        and cursor.claimed_at is None
    )


def test_an_outage_defers_the_run_which_curates_the_same_material_when_the_server_answers(
    opened_world, model_stub, settings
):
    """Issue 52: a timeout of the propose call is an outage: the run is deferred, nothing is
    written, the cursor stays with no failure counted (no back-off), and the run comes back
    after the back-off; when the server answers it curates the same episode."""
    from tests.deferred import deferred, run_deferred

    world = opened_world
    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 0.3
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    model_stub.reply_json({"episodes": [world.episode.pk], "outcomes": [], "entries": []})
    model_stub.reply_delay(1.5)
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.DEFERRED and "no answer within 0.3 s" in run.reason
    assert run.model_calls == 2
    assert nothing_written(world)
    cursor = StageBCursor.objects.get(agent=world.copilot)
    assert (cursor.failures, cursor.retry_at) == (0, None)
    (again,) = deferred("curation.dreaming.tasks.stage_b_agent")
    # the episode still waits, but the sweep leaves the agent to its deferral (not twice)
    assert stage_b_due() == []

    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 30
    ok = block(sources=[{"kind": "episode", "ref": world.episode.pk}])
    script_b(model_stub, episodes=[world.episode.pk], operations=[GOOD, ok])
    assert "done" in run_deferred(again)
    assert Memory.objects.filter(entry__name="Dana").count() == 1
    assert StageBCursor.objects.get(agent=world.copilot).episode_id == world.episode.pk


def test_invalid_json_writes_nothing(opened_world, model_stub):
    world = opened_world
    model_stub.reply_json({"episodes": [world.episode.pk], "outcomes": [], "entries": []})
    model_stub.reply_text("Sure! I would create an entry for Dana.")
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.FAILED and "not JSON" in run.reason
    assert nothing_written(world)


def test_without_a_model_stage_b_is_skipped_and_the_tab_says_why(world, client):
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.SKIPPED and "stage B did not run: the light model is" in run.reason
    client.force_login(world.admin)
    page = client.get("/knowledge/dreaming/?agent=copilot").content.decode()
    assert "Dreaming is not running" in page and "Run curation now" in page
    status = client.get("/knowledge/status/").content.decode()
    assert "Stage B is not running" in status


@pytest.mark.django_db(transaction=True)
def test_a_database_error_at_commit_writes_nothing_and_the_cursor_stays(model_stub):
    agent = factory.make_agent("solo")
    channel = factory.make_channel("general")
    factory.make_conversation(agent, channel)
    mid = post_one(channel, "alice", "Dana works for Acme", NOW - timedelta(days=1), "x1")
    ep = stage_a_episode(model_stub, channel, mid, "Dana")
    with connection.cursor() as cur:
        cur.execute(
            """CREATE FUNCTION brain_test_refuse() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN RAISE EXCEPTION 'injected failure at commit'; END $$;
               CREATE CONSTRAINT TRIGGER brain_test_refuse AFTER INSERT ON knowledge_entry
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION brain_test_refuse();"""
        )
    try:
        script_b(
            model_stub,
            episodes=[ep.pk],
            operations=[
                {**GOOD},
                block(sources=[{"kind": "message", "ref": mid}]),
                {"op": "rewrite_memo", "text": "Be brief."},
            ],
        )
        run = stage_b_run(agent=agent, trigger=DreamingRun.MANUAL)
    finally:
        with connection.cursor() as cur:
            cur.execute(
                "DROP TRIGGER brain_test_refuse ON knowledge_entry; DROP FUNCTION brain_test_refuse();"
            )
    assert run.state == DreamingRun.FAILED
    assert run.reason.startswith("database error, nothing written") and "injected failure" in run.reason
    assert not Entry.all_objects.exists() and not Memory.objects.filter(entry__isnull=False).exists()
    assert not PinnedMemo.objects.filter(agent=agent).exclude(text="").exists()
    assert not AuditEvent.objects.filter(dreaming_run=run.pk).exists()
    cursor = StageBCursor.objects.get(agent=agent)
    assert (cursor.episode_id, cursor.failures, cursor.claimed_at) == (0, 1, None)
    assert (run.operations, run.dropped) == (0, [])


# --- restore, fitness, API, tab, status ------------------------------------------------------------


def test_restore_this_run_undoes_it_as_one_batch(taking_part, model_stub, client):
    world = taking_part
    mid = post_one(world.general, "alice", "I am vegetarian now", NOW - timedelta(days=2), "v")
    ep = stage_a_episode(model_stub, world.general, mid, "Alice's food")
    entry = factory.make_entry(world.copilot, name="Alice", type="person", blocks=["Alice likes barbecue."])
    (old,) = Memory.objects.filter(entry=entry)
    script_b(
        model_stub,
        episodes=[ep.pk],
        entries=[entry.pk],
        operations=[
            {"op": "update_entry", "entry": entry.pk, "summary": "Vegetarian teammate."},
            {
                "op": "add_block",
                "entry": entry.pk,
                "text": "Alice is vegetarian.",
                "sources": [{"kind": "message", "ref": mid}],
                "valid_from": f"{NOW - timedelta(days=2):%Y-%m-%d}",
                "closes": old.pk,
            },
            {"op": "rewrite_memo", "text": "Alice is vegetarian: never suggest meat."},
        ],
    )
    client.force_login(world.admin)
    response = client.post("/knowledge/dreaming/run", {"agent": "copilot"})
    assert response.status_code == 302 and response["Location"].startswith("/models/jobs/")
    assert not DreamingRun.objects.filter(stage=DreamingRun.STAGE_B).exists()  # queued only
    factory.run_queued_jobs()
    run = DreamingRun.objects.get(stage=DreamingRun.STAGE_B)
    job_page = client.get(response["Location"]).content.decode()
    link = f"/knowledge/dreaming/?agent=copilot&amp;run={run.pk}"
    assert link in job_page
    page = client.get(link.replace("&amp;", "&")).content.decode()
    assert 'Knowledge operations: <strong class="result-operations">3</strong>' in page
    assert f"?dreaming_run={run.pk}" in page and "Restore this run" in page
    audit = client.get(f"/knowledge/audit/?dreaming_run={run.pk}").content.decode()
    assert "block.closed" in audit and "memo.updated" in audit

    response = client.post(f"/knowledge/dreaming/runs/{run.pk}/restore", follow=True)
    assert f"Run {run.pk} restored" in response.content.decode()
    old.refresh_from_db()
    entry.refresh_from_db()
    assert old.valid_to is None and entry.summary == ""
    assert Memory.objects.filter(entry=entry, status=Memory.ACTIVE).count() == 1
    assert PinnedMemo.objects.get(agent=world.copilot).text == ""


def test_a_run_changed_since_by_a_person_is_not_restored(taking_part, model_stub, client):
    from knowledge.entries.services import block_correct

    world = taking_part
    mid = post_one(world.general, "alice", "Dana works for Acme", NOW - timedelta(days=2), "v")
    ep = stage_a_episode(model_stub, world.general, mid, "Dana")
    script_b(
        model_stub, episodes=[ep.pk], operations=[GOOD, block(sources=[{"kind": "message", "ref": mid}])]
    )
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    b = Memory.objects.get(entry__name="Dana")
    block_correct(
        actor=PERSON, entry_id=b.entry_id, block_id=b.pk, text="Dana works for Acme Ltd.", reason="name"
    )
    client.force_login(world.admin)
    page = client.post(f"/knowledge/dreaming/runs/{run.pk}/restore", follow=True).content.decode()
    assert "was not restored; nothing was written" in page
    assert Entry.objects.filter(name="Dana").exists()


def test_fitness_is_the_share_of_mature_dreaming_blocks_no_person_changed(taking_part, model_stub, settings):
    from knowledge.entries.services import block_correct, block_remove

    world = taking_part
    settings.BRAIN_DREAMING_MATURE_DAYS = 7
    mid = post_one(world.general, "alice", "Dana works for Acme", NOW - timedelta(days=20), "f")
    ep = stage_a_episode(model_stub, world.general, mid, "Dana")
    src = [{"kind": "message", "ref": mid}]
    script_b(
        model_stub,
        episodes=[ep.pk],
        operations=[GOOD, *(block(text=f"Fact {i} about Dana.", sources=src) for i in range(4))],
    )
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    blocks = list(Memory.objects.filter(entry__name="Dana").order_by("pk"))
    # Three writes are mature (ten days old), one is recent.
    old_events = AuditEvent.objects.filter(dreaming_run=run.pk, action="memory.written")
    mature_ids = [str(b.pk) for b in blocks[:3]]
    for event in old_events:
        if event.object_ids[0] in mature_ids:
            AuditEvent.objects.filter(pk=event.pk).update(created_at=NOW - timedelta(days=10))
    block_correct(
        actor=PERSON, entry_id=blocks[0].entry_id, block_id=blocks[0].pk, text="Fixed.", reason="wrong"
    )
    block_remove(
        actor=PERSON, entry_id=blocks[3].entry_id, block_id=blocks[3].pk, reason="young, not counted"
    )
    (row,) = fitness(agent=world.copilot)
    assert (row["writes"], row["mature"], row["kept"]) == (4, 3, 2)
    assert row["share"] == pytest.approx(2 / 3)
    assert [c["block"] for c in row["changed"]] == [blocks[0].pk]
    assert row["changed"][0]["entry"] == blocks[0].entry_id


def test_the_api_runs_stage_b_for_admins_only(taking_part, model_stub):
    world = taking_part
    denied = world.client("reviewer").post("/api/dreaming/stage-b/run", {"agent": "copilot"}, format="json")
    assert denied.status_code == 403
    bad = world.client("admin").post(
        "/api/dreaming/stage-b/run", {"agent": "copilot", "stage": "a"}, format="json"
    )
    assert bad.status_code == 400 and "stage" in str(bad.json())
    assert (
        world.client("admin")
        .post("/api/dreaming/stage-b/run", {"agent": "nobody"}, format="json")
        .status_code
        == 404
    )
    job = factory.queued_run(world.client("admin"), "/api/dreaming/stage-b/run", {"agent": "copilot"})
    assert job["state"] == "done", job
    body = world.client("reviewer").get("/api/dreaming/runs?stage=b").json()[0]
    assert body["id"] == job["result"]["run"]
    assert (body["stage"], body["agent"], body["state"], body["reason"]) == (
        "b",
        "copilot",
        "done",
        "nothing new since the last run",
    )
    assert model_stub.chat_requests() == []  # nothing new: no model call, and never stage A
    listed = world.client("reviewer").get("/api/dreaming/runs?stage=b").json()
    assert [r["id"] for r in listed] == [body["id"]]


def test_status_lists_stage_b_per_agent_and_the_review_lints(opened_world, model_stub, client):
    world = opened_world
    unsourced = factory.make_entry(world.copilot, name="Dana", type="person", properties={"employer": "Acme"})
    factory.make_entry(
        world.copilot, name="Dana R", aliases=["Dana"], type="person", properties={"employer": "Initech"}
    )
    from knowledge.entries.services import block_add

    b = block_add(actor=PERSON, entry_id=unsourced.pk, text="No source here")
    ended = factory.make_memory(
        world.copilot, "The office is closed this week", valid_to=NOW - timedelta(days=1)
    )
    lints = review_lints()
    assert {"block": b.pk, "entry": unsourced.pk} in lints["unsourced_blocks"]
    assert [m["memory"] for m in lints["ended_but_current"]] == [ended.pk]
    assert [(c["name"], c["property"]) for c in lints["contradictions"]] == [("Dana", "employer")]
    client.force_login(world.admin)
    page = client.get("/knowledge/status/").content.decode()
    assert 'id="stage-b"' in page and 'data-agent="copilot"' in page and "1 episode" in page
    assert stage_b_due() == [world.copilot.pk]


def test_check_is_pure_over_what_was_opened():
    opened = rules.Opened(agent_id=1, types=["person"], stores=["shared"])
    kept, dropped = check_operations(
        [block(sources=[{"kind": "message", "ref": 5}])], opened, run=1, today=NOW.date()
    )
    assert kept == [] and "neither an opened entry nor one created" in dropped[0]["reason"]


def test_the_sweep_curates_agents_with_new_episodes_and_an_empty_pick_still_moves_the_cursor(
    opened_world, model_stub
):
    from curation.dreaming.tasks import stage_b_sweep

    world = opened_world
    model_stub.reply_json({"episodes": [], "outcomes": [], "entries": []})
    assert stage_b_sweep() == 1  # tasks run inline in tests
    run = DreamingRun.objects.get(stage=DreamingRun.STAGE_B)
    assert (run.agent, run.trigger, run.state, run.model_calls, run.materials) == (
        world.copilot,
        DreamingRun.THRESHOLD,
        DreamingRun.DONE,
        1,  # nothing picked: no propose call
        1,
    )
    assert StageBCursor.objects.get(agent=world.copilot).episode_id == world.episode.pk
    assert stage_b_due() == [] and stage_b_sweep() == 0


def test_the_status_api_reports_stage_b(opened_world):
    body = opened_world.client("reviewer").get("/api/status").json()
    (row,) = body["dreaming_stage_b"]["agents"]
    assert (row["agent"], row["lag_episodes"], row["failures"]) == ("copilot", 1, 0)
    assert set(body["dreaming_stage_b"]["lints"]) == {
        "unsourced_blocks",
        "ended_but_current",
        "contradictions",
    }


def test_the_status_api_answers_while_an_agent_is_created_between_its_reads(opened_world, monkeypatch):
    """A script creating agents beside GET /api/status: an agent that appears after the section
    counted the lags is not met with counts never taken for it (it was a KeyError, a 500)."""
    from curation.dreaming.stage_b import selectors

    counted = selectors._new_episode_counts

    def then_an_agent_is_created(*args, **kwargs):
        counts = counted(*args, **kwargs)
        factory.make_agent("newcomer")
        return counts

    monkeypatch.setattr(selectors, "_new_episode_counts", then_an_agent_is_created)
    answer = opened_world.client("reviewer").get("/api/status")
    assert answer.status_code == 200
    (row,) = answer.json()["dreaming_stage_b"]["agents"]
    assert (row["agent"], row["lag_episodes"], row["lag_outcomes"], row["failures"]) == ("copilot", 1, 0, 0)


def test_an_entry_deleted_while_the_model_read_is_a_refusal_not_a_crash(world):
    """Between the scan and the write a person may delete an opened entry: the operation on it
    is refused (and so dropped), it does not fail the run."""
    from curation.dreaming.stage_b.operations import _entry
    from curation.dreaming.stage_b.services import REFUSALS
    from knowledge.entries.services import entry_delete
    from knowledge.errors import Invalid as ValidationError

    entry = factory.make_entry(world.copilot, name="Dana", type="person")
    entry_delete(actor=PERSON, entry_id=entry.pk, reason="duplicate")
    with pytest.raises(ValidationError, match="no longer exists") as refused:
        _entry(entry.pk, {})
    assert isinstance(refused.value, REFUSALS)


def test_a_dead_workers_claim_on_an_agent_is_taken_over_and_its_run_marked_abandoned(
    opened_world, model_stub
):
    from curation.dreaming.stage_b.services import AgentBusy

    world = opened_world
    dead = DreamingRun.objects.create(
        stage=DreamingRun.STAGE_B, agent=world.copilot, trigger=DreamingRun.THRESHOLD, started_at=NOW
    )
    StageBCursor.objects.update_or_create(
        agent=world.copilot, defaults={"run": dead, "claimed_at": timezone.now() - timedelta(minutes=5)}
    )
    calls = len(model_stub.chat_requests())
    with pytest.raises(AgentBusy):
        stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert len(model_stub.chat_requests()) == calls  # a busy agent: no model call, no run
    assert DreamingRun.objects.filter(stage=DreamingRun.STAGE_B).count() == 1
    StageBCursor.objects.filter(agent=world.copilot).update(claimed_at=timezone.now() - timedelta(minutes=16))
    script_b(model_stub, episodes=[world.episode.pk], operations=[GOOD])
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    assert run.state == DreamingRun.DONE, run.reason
    dead.refresh_from_db()
    assert dead.state == DreamingRun.FAILED and dead.reason.startswith("abandoned")
    cursor = StageBCursor.objects.get(agent=world.copilot)
    assert cursor.run_id is None and cursor.last_run_id == run.pk


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_for_one_agent_make_one_run(model_stub):
    import threading

    from curation.dreaming.stage_b.services import AgentBusy

    agent = factory.make_agent("solo")
    channel = factory.make_channel("general")
    factory.make_conversation(agent, channel)
    mid = post_one(channel, "alice", "Dana works for Acme", NOW - timedelta(days=1), "r1")
    ep = stage_a_episode(model_stub, channel, mid, "Dana")
    gate = threading.Event()

    def slow(body):
        gate.wait(5)  # hold the first run's scan until the second worker has tried
        if "Pick only" in model_stub.prompt(body):
            return json.dumps({"episodes": [ep.pk], "outcomes": [], "entries": []})
        return json.dumps({"operations": [{"op": "rewrite_memo", "text": "Be brief."}]})

    model_stub.respond_with(slow)
    outcomes = []

    def worker():
        try:
            outcomes.append(stage_b_run(agent=agent, trigger=DreamingRun.THRESHOLD).state)
        except AgentBusy:
            outcomes.append("busy")
            gate.set()
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    gate.set()
    assert sorted(outcomes) == ["busy", "done"]
    assert DreamingRun.objects.filter(stage=DreamingRun.STAGE_B).count() == 1
    assert PinnedMemo.objects.get(agent=agent).text == "Be brief."
    assert StageBCursor.objects.get(agent=agent).episode_id == ep.pk
