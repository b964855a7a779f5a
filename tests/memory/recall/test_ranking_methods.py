"""Ranking methods of memory_search on small built conversations, each against the same search
with the method switched off: a named time weighs the messages of that time, a named speaker the
messages they said, and a reply borrows weight from the turn it answers (memory.recall.fuse.rank)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from django.test import override_settings

from memory.recall import memory_search, resolve_scope
from memory.recall.fuse import Candidate, add_support, named_speakers
from memory.recall.params import DEFAULT_PARAMS
from tests import factory

NOW = datetime(2024, 1, 15, 12, 0, tzinfo=UTC)


def ranked_ids(scope, q, params=DEFAULT_PARAMS, k=5):
    outcome = memory_search(scope, q=q, k=k, now=NOW, params=params)
    return [item.candidate.obj.external_id for item in outcome.items]


def test_a_question_naming_a_month_ranks_the_message_of_that_month_first(world):
    conv = factory.make_conversation(world.copilot, world.general)
    rows = [
        (
            "alice",
            "We went camping by the lake with the kids, it was lovely",
            "june",
            datetime(2023, 6, 18, 10),
        ),
        ("bob", "Quarterly numbers are in, revenue grew a little", "numbers", datetime(2023, 7, 2, 9)),
        (
            "alice",
            "We went camping by the lake with the kids, it was lovely",
            "august",
            datetime(2023, 8, 20, 10),
        ),
        ("carol", "The printer on floor two is fixed", "printer", datetime(2023, 9, 1, 9)),
    ]
    factory.post_messages(
        world.general,
        # Each its own thread: no turn before it, so the two camping messages embed the same.
        [
            {"speaker": s, "text": t, "external_id": e, "thread": e, "ts": ts.replace(tzinfo=UTC)}
            for s, t, e, ts in rows
        ],
    )
    factory.embed_all()
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conv)
    q = "When did Alice go camping by the lake in June?"
    # Without the named time the newer of the two same messages wins (age decay) ...
    assert ranked_ids(scope, q, replace(DEFAULT_PARAMS, when_boost=0.0))[0] == "august"
    # ... with it, the message of June does; a question naming no time is unchanged.
    assert ranked_ids(scope, q)[0] == "june"
    assert ranked_ids(scope, "When did Alice go camping by the lake?")[0] == "august"


# Keyword routes only: a message's vector is made from "speaker: text", which already leans
# towards the named speaker; this is the method's part.
@override_settings(BRAIN_EMBEDDINGS="none")
def test_a_question_naming_a_speaker_ranks_what_they_said_first(world):
    conv = factory.make_conversation(world.copilot, world.general)
    start = datetime(2023, 5, 2, 9, 0, tzinfo=UTC)
    rows = [
        # Caroline's own painting, then (newer) Melanie's, told to Caroline in more of the words
        ("Caroline", "I painted a sunrise over the lake last weekend", "caroline"),
        ("Melanie", "Caroline, I painted the lake at sunrise, then painted the lake at dusk", "melanie"),
    ]
    factory.post_messages(
        world.general,
        [
            {"speaker": s, "text": t, "external_id": e, "thread": e, "ts": start + timedelta(days=n)}
            for n, (s, t, e) in enumerate(rows)
        ],
    )
    factory.embed_all()
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conv)
    q = "What did Caroline paint at the lake?"
    # Without the method the newer of the two wins; with it, what Caroline said does.
    assert ranked_ids(scope, q, replace(DEFAULT_PARAMS, speaker_boost=0.0))[0] == "melanie"
    assert ranked_ids(scope, q)[0] == "caroline"
    assert ranked_ids(scope, "What did someone paint at the lake?")[0] == "melanie"


def test_a_speaker_is_named_by_the_whole_name_or_the_first_word():
    speakers = {"Fahim Khan", "Jo", "Caroline", "A"}
    assert named_speakers("when did fahim move to leeds?", speakers) == {"Fahim Khan"}
    assert named_speakers("What is Caroline's job?", speakers) == {"Caroline"}
    # a word containing a name is not the name; a one-letter name is never matched by a word; a
    # capitalised question names people with capitals
    assert named_speakers("Did Joanna bring a cake?", speakers) == set()
    assert named_speakers("When will Bob come?", {"Will", "Bob"}) == {"Bob"}
    assert named_speakers("when will bob come?", {"Bob"}) == {"Bob"}
    assert named_speakers("Was it a good day for Jo and Caroline?", speakers) == {"Jo", "Caroline"}


# Keyword routes only: a message's vector carries the turn before it (knowledge.embeddings), which
# lifts the reply on its own; this is support's part.
@override_settings(BRAIN_EMBEDDINGS="none")
def test_a_reply_borrows_weight_from_the_turn_it_answers(world):
    conv = factory.make_conversation(world.copilot, world.general)
    start = datetime(2023, 11, 3, 18, 0, tzinfo=UTC)
    rows = [
        # one sitting: the question names the trip, the reply holds the answer
        ("bob", "How was your trip to Lisbon last week?", "ask", start),
        ("alice", "Wonderful, I loved the grilled fish there", "reply", start + timedelta(minutes=1)),
        ("bob", "Glad to hear it, welcome back", "after", start + timedelta(minutes=2)),
        # a month later, the same words about another evening
        ("alice", "Wonderful, I loved the grilled fish there", "later", start + timedelta(days=30)),
    ]
    factory.post_messages(
        world.general, [{"speaker": s, "text": t, "external_id": e, "ts": ts} for s, t, e, ts in rows]
    )
    factory.embed_all()
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conv)
    q = "Did Alice love the food in Lisbon?"
    alone = replace(DEFAULT_PARAMS, neighbour_weight=0.0, neighbour_after_weight=0.0, burst_weight=0.0)
    # Alone, the later of the two same replies wins (it is newer); with support the reply is
    # lifted by the turn it answers, which names the trip.
    without = ranked_ids(scope, q, alone)
    assert without.index("later") < without.index("reply"), without
    with_support = ranked_ids(scope, q)
    assert with_support.index("reply") < with_support.index("later"), with_support


def candidate(kind, pk, when, fused):
    return Candidate(kind=kind, id=pk, fused=fused, stamp=(when, None, None, None, None))


def test_support_comes_from_hits_close_in_time_and_never_from_knowledge():
    params = replace(
        DEFAULT_PARAMS,
        neighbour_seconds=120.0,
        neighbour_weight=0.5,
        neighbour_after_weight=0.25,
        burst_seconds=1800.0,
        burst_weight=0.1,
    )
    before = candidate("message", 1, 1000.0, 0.4)
    hit = candidate("message", 2, 1060.0, 1.0)
    after = candidate("message", 3, 1120.0, 0.2)
    same_sitting = candidate("message", 4, 2000.0, 0.3)
    far = candidate("message", 5, 100000.0, 0.9)
    memory = candidate("memory", 6, 1060.0, 5.0)
    add_support([far, memory, after, same_sitting, hit, before], params)
    # 0.5 × the turn before + 0.25 × the turn after + 0.1 × the best other hit within 30 minutes
    assert round(hit.fused, 6) == round(1.0 + 0.5 * 0.4 + 0.25 * 0.2 + 0.1 * 0.4, 6)
    # the far hit stands alone, and a memory neither gives nor takes
    assert far.fused == 0.9 and memory.fused == 5.0
    # support is read from the scores before any was added (the order of candidates is irrelevant)
    assert round(before.fused, 6) == round(0.4 + 0.25 * (1.0 + 0.2) + 0.1 * 1.0, 6)
