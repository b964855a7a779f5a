"""The second hop (memory.recall.hop): terms the first hits use that the question does not find
what answers it in other words — inside the same scope, and only when every route was asked.
Keyword routes only (embeddings off), so what each hop finds follows from the words alone."""

from dataclasses import replace
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from memory.recall import memory_search, resolve_scope
from memory.recall.params import DEFAULT_PARAMS, HOP_MESSAGES
from memory.recall.routes import RouteInput, weigh_query
from memory.recall.terms import Term, Weighed
from tests import factory

NOW = timezone.now().replace(microsecond=0)
QUESTION = "What music will play at the dance studio?"
# Words the filler shares with the studio turn (team, new, next, month, downtown): common, so the
# studio turn's rarest new word — "opening" — is the one the second hop adds.
FILLER = [
    "The team meets downtown next month for the new budget",
    "Next month the new team lead starts downtown",
    "A new parking rule downtown applies from next month, the team heard",
    "The team lunch moved downtown to the new place next month",
]


def _post(channel, rows):
    return factory.post_messages(
        channel,
        [
            {"speaker": speaker, "text": text, "ts": NOW - timedelta(minutes=len(rows) - i)}
            for i, (speaker, text) in enumerate(rows)
        ],
    )


@pytest.fixture
def studio(world):
    conv = factory.make_conversation(world.copilot, world.general)
    rows = [("carol", text) for text in FILLER * 3]
    rows += [
        ("alice", "Our team is opening the new dance studio downtown next month"),
        ("bob", "The grand opening party gets a salsa band and free tapas"),
    ]
    ids = _post(world.general, rows)
    return conv, ids[-2], ids[-1]


def _search(world, conv, **params):
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conv)
    return memory_search(scope, q=QUESTION, k=10, params=DEFAULT_PARAMS.__class__(**params))


def _hit(outcome, message_id):
    return [i.candidate for i in outcome.items if i.candidate.key == ("message", message_id)]


@override_settings(BRAIN_EMBEDDINGS="none")
def test_the_second_hop_finds_an_answer_that_shares_no_word_with_the_question(world, studio):
    conv, studio_turn, party_turn = studio
    outcome = _search(world, conv)
    hit = _hit(outcome, party_turn)
    assert hit, [i.candidate.key for i in outcome.items]
    assert set(hit[0].routes) == {HOP_MESSAGES}  # no first-hop route found it
    assert _hit(outcome, studio_turn)[0].routes["keyword_messages"]["rank"] == 1
    info = outcome.ranking.routes[HOP_MESSAGES]
    assert info["ran"] and info["hits"] >= 1 and info["reason"] == ""

    without = _search(world, conv, hop_weight=0.0)
    assert not _hit(without, party_turn)
    assert without.ranking.routes[HOP_MESSAGES] == {
        "ran": False,
        "hits": 0,
        "ms": 0.0,
        "reason": "off: hop_weight 0",
    }


@override_settings(BRAIN_EMBEDDINGS="none")
def test_the_second_hop_stays_inside_the_scope(world, studio):
    """A message of a channel-only channel shares the new term; the general conversation's second
    hop never sees it."""
    conv, _, party_turn = studio
    [hidden] = _post(world.support, [("dave", "Tickets for the opening night are sold out")])
    outcome = _search(world, conv)
    shown = {i.candidate.key for i in outcome.items}
    assert ("message", party_turn) in shown
    assert ("message", hidden) not in shown
    for hits in outcome.ranking.rankings.values():
        assert hidden not in {h.id for h in hits if h.kind == "message"}


@override_settings(BRAIN_EMBEDDINGS="none")
def test_a_search_asking_for_some_routes_runs_no_second_hop(world, studio):
    conv, _, party_turn = studio
    client = world.client("copilot")
    body = {"agent": "copilot", "conversation": conv.pk, "q": QUESTION}
    some = client.post("/api/memory/search", {**body, "routes": ["keyword_messages"]}, format="json").json()
    assert some["routes"][HOP_MESSAGES]["reason"] == "not asked"
    assert all(r["id"] != party_turn for r in some["results"])
    every = client.post("/api/memory/search", body, format="json").json()
    assert every["routes"][HOP_MESSAGES]["ran"]
    [party] = [r for r in every["results"] if r["id"] == party_turn]
    assert party["routes"][HOP_MESSAGES]["rank"] >= 1


def test_new_terms_are_the_heaviest_rare_words_added_where_each_corpus_holds_them():
    from memory.recall.hop import choose_terms

    first = {
        "memory": Weighed([Term("danc", 2.0, 0.01, 10)], 5.0, 1000),
        "message": Weighed([Term("danc", 1.0, 0.1, 100)], 7.0, 1000),
    }
    rows = [
        ("open", 1.0, "message", 5),  # rare and in a good hit
        ("team", 1.0, "message", 400),  # as good a hit, common
        ("tapa", 0.1, "message", 5),  # rare, in a weak hit
        ("open", 1.0, "memory", 2),
        ("gone", 5.0, "memory", 0),  # no document holds it any more
    ]
    out = choose_terms(rows, first, 2)
    assert [t.lexeme for t in out["message"].terms] == ["danc", "open", "team"]
    assert [t.lexeme for t in out["memory"].terms] == ["danc", "open"]
    assert out["message"].avg_length == 7.0 and out["message"].docs == 1000
    assert out["message"].terms[1].docs == 5 and out["memory"].terms[1].docs == 2


@override_settings(BRAIN_EMBEDDINGS="none")
def test_the_question_and_speaker_are_never_new_terms(world, studio):
    from memory.recall.hop import _lexemes_sql, feedback_hits
    from memory.recall.routes import execute_all

    conv, studio_turn, _ = studio
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conv)
    inp = RouteInput(q=QUESTION, now=NOW + timedelta(minutes=1), limit=10, scope=scope)
    outcome = memory_search(scope, q=QUESTION, k=3)
    hits = feedback_hits(outcome.ranking.candidates, 1)
    assert hits[0][:2] == ("message", studio_turn)
    (rows,) = execute_all([_lexemes_sql(hits, inp.lexemes)])
    lexemes = {r[0] for r in rows}
    assert "open" in lexemes and "downtown" in lexemes
    assert not lexemes & set(weigh_query(QUESTION, [])[0])  # danc, studio, music, play
    assert "alic" not in lexemes and "alice" not in lexemes  # the studio turn's speaker


def test_only_the_new_terms_select_the_second_hops_candidates_and_only_rare_ones():
    from memory.recall.terms import candidate_terms

    terms = [Term("danc", 1.0, 0.001, 10), Term("open", 2.0, 0.002, 40), Term("team", 0.5, 0.3, 450)]
    assert [t.lexeme for t in candidate_terms(Weighed(terms, 5.0, 1000))] == ["danc", "open", "team"]
    hop = Weighed(terms, 5.0, 1000, select=frozenset({"open", "team"}), candidate_docs=100, strict=True)
    assert [t.lexeme for t in candidate_terms(hop)] == ["open"]  # danc only scores; team is too common
    rare_only = Weighed(terms, 5.0, 1000, select=frozenset({"team"}), candidate_docs=100, strict=True)
    assert candidate_terms(rare_only) == []
    # Not strict (the first hop): the rarest term selects even when it alone is over the bound.
    assert [t.lexeme for t in candidate_terms(replace(rare_only, strict=False))] == ["team"]


@override_settings(BRAIN_EMBEDDINGS="none")
def test_the_playground_shows_the_second_hops_rank_in_its_own_column(client, world, studio):
    conv, _, party_turn = studio
    client.force_login(world.reviewer)
    page = client.get("/recall/", {"agent": "copilot", "conversation": conv.pk, "q": QUESTION})
    assert page.status_code == 200
    html = page.content.decode()
    assert ">second hop messages</th>" in html
    [party] = [r for r in page.context["outcome"]["results"] if r["id"] == party_turn]
    assert f"#{party['routes'][HOP_MESSAGES]['rank']}<br>" in html


def test_a_scope_without_messages_runs_no_second_hop(world):
    """The hop searches messages again; where the scope shows none (an agent in no channel, as
    the eval gate scopes a memory's store) it sends nothing and says why."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.recall import recall_candidates
    from memory.recall.scope import store_scope

    loner = factory.make_agent()
    factory.make_memory_row(loner, "The grand opening party gets a salsa band", store="self")
    with CaptureQueriesContext(connection) as queries:
        ranking = recall_candidates(store_scope(loner, "self"), q="grand opening party band")

    assert [c.kind for c in ranking.candidates] == ["memory"]
    assert ranking.routes[HOP_MESSAGES] == {
        "ran": False,
        "hits": 0,
        "ms": ranking.routes[HOP_MESSAGES]["ms"],
        "reason": "no messages in this scope",
    }
    assert not any("WITH h(kind, id, w)" in q["sql"] for q in queries.captured_queries)
