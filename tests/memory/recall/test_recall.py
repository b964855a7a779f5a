"""memory_search through the API: scope, routes, fusion, decay, expansion and the budget. The
local embedder runs for real (it is fast); nothing is mocked."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from knowledge.models import Entry, Memory
from knowledge.tokens import count_tokens
from memory.caches import forget_process_caches
from tests import factory

NOW = timezone.now().replace(microsecond=0)

SUPPORT_CHAT = [
    ("alice", "The VPN keeps dropping every few minutes since Tuesday's update", "s-1", 30),
    ("bob", "Did you try turning the laptop off and on again?", "s-2", 29),
    ("alice", "Yes. The client now shows error E4012 when it reconnects", "s-3", 28),
    ("bob", "Lunch today is at noon in the big meeting room", "s-4", 27),
    ("carol", "The quarterly budget review moved to Thursday afternoon", "s-5", 26),
    ("bob", "Printer on floor three is out of toner again", "s-6", 25),
    ("carol", "Please submit expense reports before the end of the month", "s-7", 24),
    ("alice", "The new coffee machine in the kitchen makes great espresso", "s-8", 23),
]


def post(channel, rows):
    return factory.post_messages(
        channel,
        [{"speaker": s, "text": t, "external_id": e, "ts": NOW - timedelta(days=d)} for s, t, e, d in rows],
    )


def search(client, **body):
    body.setdefault("agent", "copilot")
    response = client.post("/api/memory/search", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def found(result, kind, pk):
    return [r for r in result["results"] if r["kind"] == kind and r["id"] == pk]


@pytest.fixture
def general_chat(world):
    conv = factory.make_conversation(world.copilot, world.general)
    ids = post(world.general, SUPPORT_CHAT)
    factory.embed_all()
    return conv, dict(zip([row[2] for row in SUPPORT_CHAT], ids, strict=True))


def test_a_paraphrase_with_no_shared_keyword_is_found_by_the_vector_route(world, general_chat):
    conv, ids = general_chat
    result = search(
        world.client("copilot"), conversation=conv.pk, q="internet link to headquarters cuts out repeatedly"
    )
    hit = found(result, "message", ids["s-1"])
    assert hit, result["results"]
    assert "keyword_messages" not in hit[0]["routes"]
    assert hit[0]["routes"]["vector_episodes"]["rank"] == 1
    assert result["results"][0]["id"] == ids["s-1"]


def test_a_rare_exact_term_is_found_by_the_keyword_route(world, general_chat):
    conv, ids = general_chat
    result = search(world.client("copilot"), conversation=conv.pk, q="what does E4012 mean", k=3)
    top = result["results"][0]
    assert (top["kind"], top["id"]) == ("message", ids["s-3"])
    assert top["routes"]["keyword_messages"]["rank"] == 1
    assert top["external_id"] == "s-3"


def test_results_never_exceed_the_token_budget(world, general_chat):
    conv, _ = general_chat
    factory.make_memory_row(world.copilot, "VPN outages are escalated to the network team. " * 30)
    factory.embed_all()
    for budget in (1, 5, 20, 60, 150, 400, 2000):
        result = search(
            world.client("copilot"), conversation=conv.pk, q="VPN error network", budget_tokens=budget
        )
        total = sum(count_tokens(r["text"]) for r in result["results"])
        assert total == result["used_tokens"] <= budget
        assert all(r["tokens"] == count_tokens(r["text"]) for r in result["results"])
    big = search(world.client("copilot"), conversation=conv.pk, q="VPN error network", budget_tokens=2000)
    assert len(big["results"]) > 1  # the long memory is capped: it cannot crowd out the rest
    assert max(r["tokens"] for r in big["results"]) <= 500


def test_a_lone_message_is_expanded_with_its_neighbours_and_a_thread_with_the_thread(world, general_chat):
    conv, ids = general_chat
    factory.post_messages(
        world.general,
        [
            {
                "speaker": "dave",
                "text": "Anyone know the guest wifi password?",
                "thread": "t1",
                "external_id": "w-1",
            },
            {
                "speaker": "erin",
                "text": "It is on the whiteboard by reception",
                "thread": "t1",
                "external_id": "w-2",
            },
            {"speaker": "dave", "text": "Found it, thanks!", "thread": "t1", "external_id": "w-3"},
        ],
    )
    result = search(world.client("copilot"), conversation=conv.pk, q="E4012", k=1)
    lone = result["results"][0]
    assert lone["external_id"] == "s-3"
    assert set(lone["expanded_external_ids"]) == {"s-1", "s-2", "s-4", "s-5"}
    result = search(world.client("copilot"), conversation=conv.pk, q="guest wifi password", k=1)
    thread = result["results"][0]
    assert thread["thread"] == "t1"
    assert [m["external_id"] for m in thread["messages"]] == ["w-1", "w-2", "w-3"]
    assert "whiteboard by reception" in thread["text"]


def test_a_dm_private_memory_is_recalled_only_in_that_dm_by_its_owner(world):
    dm = factory.make_conversation(world.copilot, world.dm_alice)
    shared = factory.make_conversation(world.copilot, world.general)
    scribe_dm = factory.make_conversation(
        world.scribe,
        factory.make_channel("dm-alice-scribe", kind="dm", person=world.alice, agent=world.scribe),
    )
    secret = factory.make_memory_row(world.copilot, "Alice is allergic to peanuts", store="private:alice")
    factory.post_messages(
        world.dm_alice, [{"speaker": "alice", "text": "I am allergic to peanuts, by the way"}]
    )
    factory.embed_all()
    q = "peanuts allergy"
    in_dm = search(world.client("copilot"), conversation=dm.pk, q=q)
    assert found(in_dm, "memory", secret.pk)
    assert any(r["kind"] == "message" for r in in_dm["results"])
    in_shared = search(world.client("copilot"), conversation=shared.pk, q=q)
    assert in_shared["results"] == []
    by_channel = search(world.client("copilot"), channel="general", q=q)
    assert by_channel["results"] == []
    # scribe's own DM with alice reads the same store name, but neither copilot's private memory
    # nor the messages of copilot's DM: a DM's evidence belongs to that DM's agent.
    other_agent = search(world.client("scribe"), agent="scribe", conversation=scribe_dm.pk, q=q)
    assert other_agent["results"] == []


def test_channel_only_messages_stay_in_their_channel(world):
    support = factory.make_conversation(world.copilot, world.support)
    general = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(
        world.support, [{"speaker": "alice", "text": "Customer Zephyrcorp renewed for three years"}]
    )
    factory.post_messages(world.general, [{"speaker": "bob", "text": "Zephyrcorp visits next week"}])
    factory.embed_all()
    in_support = search(world.client("copilot"), conversation=support.pk, q="Zephyrcorp")
    in_general = search(world.client("copilot"), conversation=general.pk, q="Zephyrcorp")
    assert any("renewed" in r["text"] for r in in_support["results"])
    assert not any("renewed" in r["text"] for r in in_general["results"])
    assert any("visits next week" in r["text"] for r in in_general["results"])


def test_only_active_unexpired_memories_are_recalled(world):
    conv = factory.make_conversation(world.copilot, world.general)
    active = factory.make_memory_row(world.copilot, "The staging database password rotates monthly")
    queued = factory.make_memory_row(
        world.copilot, "The staging database password rotates weekly", status="queued"
    )
    expired = factory.make_memory_row(
        world.copilot,
        "The staging database password rotates daily",
        tier="episodic",
        expires_at=NOW - timedelta(hours=1),
    )
    requeued = factory.make_memory_row(
        world.copilot,
        "The staging database password rotates hourly",
        status="queued",
        queue_reason="requeued",
    )
    factory.embed_all()
    result = search(world.client("copilot"), conversation=conv.pk, q="staging database password rotation")
    ids = {r["id"] for r in result["results"] if r["kind"] == "memory"}
    assert active.pk in ids
    assert not ids & {queued.pk, expired.pk, requeued.pk}
    later = search(
        world.client("copilot"),
        conversation=conv.pk,
        q="staging database password rotation",
        now=(NOW - timedelta(days=30)).isoformat(),
    )
    assert later["results"] == []  # replayed before the memory existed


def test_newer_messages_rank_above_older_ones_and_replay_ignores_the_future(world):
    conv = factory.make_conversation(world.copilot, world.general)
    old, new = factory.post_messages(
        world.general,
        [
            {
                "speaker": "ops",
                "text": "The office wifi password is tulip-42",
                "ts": NOW - timedelta(days=200),
            },
            {
                "speaker": "ops",
                "text": "The office wifi password is now maple-77",
                "ts": NOW - timedelta(days=2),
            },
        ],
    )
    factory.embed_all()
    result = search(world.client("copilot"), conversation=conv.pk, q="office wifi password", k=1)
    assert result["results"][0]["id"] == new
    replay = search(
        world.client("copilot"),
        conversation=conv.pk,
        q="office wifi password",
        k=1,
        now=(NOW - timedelta(days=100)).isoformat(),
    )
    assert replay["results"][0]["id"] == old


def test_entries_are_found_by_alias_and_blocks_by_meaning(world):
    conv = factory.make_conversation(world.copilot, world.general)
    entry = Entry.objects.create(
        name="Northwind Traders",
        type="organization",
        aliases=["NWT"],
        summary="Key account",
        owner=world.copilot,
        store="shared",
    )
    block = factory.make_memory_row(
        world.copilot, "Prefers invoices by post, never by email", entry=entry, position=0
    )
    factory.embed_all()
    by_alias = search(world.client("copilot"), conversation=conv.pk, q="NWT")
    assert by_alias["results"][0]["kind"] == "entry" and by_alias["results"][0]["id"] == entry.pk
    by_meaning = search(
        world.client("copilot"), conversation=conv.pk, q="how does Northwind want to receive bills"
    )
    hit = found(by_meaning, "memory", block.pk)
    assert hit and "vector_knowledge" in hit[0]["routes"]
    assert hit[0]["text"].startswith("Northwind Traders: ")


@override_settings(BRAIN_EMBEDDINGS="none")
def test_with_embeddings_off_the_keyword_routes_still_answer(world):
    conv = factory.make_conversation(world.copilot, world.general)
    post(world.general, SUPPORT_CHAT)
    memory = factory.make_memory_row(world.copilot, "Error E4012 means the VPN certificate expired")
    result = search(world.client("copilot"), conversation=conv.pk, q="E4012")
    assert {r["kind"] for r in result["results"]} == {"memory", "message"}
    assert found(result, "memory", memory.pk)
    assert result["routes"]["vector_knowledge"]["ran"] is False
    assert "BRAIN_EMBEDDINGS=none" in result["routes"]["vector_episodes"]["reason"]
    assert Memory.objects.get(pk=memory.pk).embedding is None


def test_with_the_embedding_endpoint_down_the_keyword_routes_answer_and_say_why(world):
    conv = factory.make_conversation(world.copilot, world.general)
    memory = factory.make_memory_row(world.copilot, "Error E4012 means the VPN certificate expired")
    with override_settings(
        BRAIN_EMBEDDINGS="openai", BRAIN_EMBEDDINGS_BASE_URL="http://127.0.0.1:9", BRAIN_EMBEDDINGS_MODEL="m"
    ):
        result = search(world.client("copilot"), conversation=conv.pk, q="E4012")
    assert found(result, "memory", memory.pk)
    assert result["routes"]["keyword_knowledge"]["ran"] is True
    for route in ("vector_knowledge", "vector_episodes"):
        assert result["routes"][route]["ran"] is False
        assert result["routes"][route]["reason"].startswith("unavailable: ")


def test_search_refuses_other_agents_foreign_channels_and_integrations(world, general_chat):
    conv, _ = general_chat
    assert (
        world.client("scribe")
        .post("/api/memory/search", {"agent": "copilot", "conversation": conv.pk, "q": "vpn"}, format="json")
        .status_code
        == 403
    )
    assert (
        world.client("scribe")
        .post("/api/memory/search", {"agent": "scribe", "conversation": conv.pk, "q": "vpn"}, format="json")
        .status_code
        == 403
    )
    assert (
        world.client("copilot")
        .post("/api/memory/search", {"agent": "copilot", "channel": "support", "q": "vpn"}, format="json")
        .status_code
        == 403
    )
    assert (
        world.client("integration")
        .post("/api/memory/search", {"agent": "copilot", "conversation": conv.pk, "q": "vpn"}, format="json")
        .status_code
        == 403
    )
    assert (
        world.client("copilot")
        .post("/api/memory/search", {"agent": "copilot", "conversation": 999999, "q": "vpn"}, format="json")
        .status_code
        == 404
    )
    bad = world.client("copilot").post(
        "/api/memory/search", {"agent": "copilot", "q": "vpn", "k": 0}, format="json"
    )
    assert bad.status_code == 400 and set(bad.json()["fields"]) >= {"k"}
    # reviewers look through the agent's eyes (the playground)
    assert (
        world.client("reviewer")
        .post("/api/memory/search", {"agent": "copilot", "conversation": conv.pk, "q": "vpn"}, format="json")
        .status_code
        == 200
    )


def test_each_route_reports_its_rank_and_score(world, general_chat):
    conv, ids = general_chat
    result = search(world.client("copilot"), conversation=conv.pk, q="VPN dropping after the update")
    top = result["results"][0]
    assert top["id"] == ids["s-1"]
    # The second hop's keyword statement finds it again (its terms include the question's).
    assert set(top["routes"]) == {"keyword_messages", "vector_episodes", "second_hop_messages"}
    for route in top["routes"].values():
        assert route["rank"] >= 1 and isinstance(route["score"], float)
    assert top["score"] == pytest.approx(top["fused"] * top["decay"], rel=1e-3)
    assert set(result["routes"]) == {
        "keyword_knowledge",
        "vector_knowledge",
        "keyword_messages",
        "vector_episodes",
        "second_hop_messages",
    }


def test_a_filtered_vector_search_returns_all_k_it_can(world):
    """A selective scope (a small DM among many shared messages) still fills the vector route."""
    from memory.recall import recall_candidates, resolve_scope
    from memory.recall.params import VECTOR_EPISODES

    dm = factory.make_conversation(world.copilot, world.dm_alice)
    factory.make_conversation(world.copilot, world.support)
    factory.post_messages(
        world.support,
        [{"speaker": "bob", "text": f"support note number {i} about invoices"} for i in range(300)],
    )
    factory.post_messages(
        world.dm_alice, [{"speaker": "alice", "text": f"private note {i}"} for i in range(25)]
    )
    factory.embed_all()
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=dm)
    ranking = recall_candidates(scope, q="a note about invoices", limit=20, routes=(VECTOR_EPISODES,))
    assert len(ranking.rankings[VECTOR_EPISODES]) == 20


def test_browse_opens_the_thread_behind_a_result_within_scope(world, general_chat):
    conv, ids = general_chat
    client = world.client("copilot")
    body = client.get(f"/api/memory/browse/message/{ids['s-3']}?conversation={conv.pk}").json()
    assert [m["external_id"] for m in body["context"]][:3] == ["s-1", "s-2", "s-3"]
    dm_message = factory.post_messages(world.dm_alice, [{"speaker": "alice", "text": "my private thing"}])[0]
    assert client.get(f"/api/memory/browse/message/{dm_message}?conversation={conv.pk}").status_code == 403
    assert client.get(f"/api/memory/browse/message/{dm_message}").status_code == 403
    assert client.get("/api/memory/browse/message/999999").status_code == 404
    assert client.get(f"/api/memory/browse/nonsense/{ids['s-3']}").status_code == 400
    assert world.client("reviewer").get(f"/api/memory/browse/message/{dm_message}").status_code == 200
    conv_body = client.get(f"/api/memory/browse/conversation/{conv.pk}").json()
    assert conv_body["write_store"] == "shared"


def test_an_episode_is_found_by_its_summary_and_expands_to_its_messages(world):
    from knowledge.models import Episode, Message
    from memory.recall.seen import forget_stats

    conv = factory.make_conversation(world.copilot, world.general)
    ids = post(world.general, SUPPORT_CHAT)
    episode = Episode.objects.create(
        channel=world.general,
        store="shared",
        topic="VPN outage after the client update",
        summary="Remote access broke for several people; reconnecting showed an error code.",
        likely_question="Why can't I connect from home?",
        resolution="Re-import the profile.",
        start_ts=NOW - timedelta(days=30),
        end_ts=NOW - timedelta(days=28),
    )
    Message.objects.filter(pk__in=ids[:3]).update(episode=episode)
    factory.embed_all()
    forget_stats()
    result = search(world.client("copilot"), conversation=conv.pk, q="why can't people work from home")
    top = result["results"][0]
    assert (top["kind"], top["id"]) == ("episode", episode.pk)
    assert [m["external_id"] for m in top["messages"]] == ["s-1", "s-2", "s-3"]
    assert "Resolution: Re-import the profile." in top["text"]
    # messages an episode covers leave the vector route to it (keyword search still finds them)
    assert not any(r["kind"] == "message" and r["id"] in ids[:3] for r in result["results"])
    assert (
        world.client("copilot")
        .get(f"/api/memory/browse/episode/{episode.pk}")
        .json()["topic"]
        .startswith("VPN")
    )


def test_a_message_an_episode_covers_counts_towards_that_episode_once(world):
    """A keyword hit on a covered message and the vector hit on its episode make one result: the
    episode, listing the message as a hit. The message is neither a second result nor shown
    twice, and under a tight budget the hit line is what the episode keeps."""
    from knowledge.models import Episode, Message
    from memory.recall.seen import forget_stats

    conv = factory.make_conversation(world.copilot, world.general)
    ids = post(world.general, SUPPORT_CHAT)
    episode = Episode.objects.create(
        channel=world.general,
        store="shared",
        topic="VPN outage after the client update",
        summary="Remote access broke for several people after an update.",
        likely_question="Why does the VPN drop?",
        start_ts=NOW - timedelta(days=30),
        end_ts=NOW - timedelta(days=28),
    )
    Message.objects.filter(pk__in=ids[:3]).update(episode=episode)
    factory.embed_all()
    forget_stats()
    client = world.client("copilot")
    result = search(client, conversation=conv.pk, q="VPN error E4012 on reconnect", k=5)
    top = result["results"][0]
    assert (top["kind"], top["id"]) == ("episode", episode.pk)
    assert {"keyword_messages", "vector_episodes"} <= set(top["routes"])
    assert {m["external_id"] for m in top["messages"] if m["hit"]} >= {"s-3"}
    assert not any(r["kind"] == "message" and r["id"] in ids[:3] for r in result["results"])
    shown = [m["id"] for r in result["results"] for m in r.get("messages", [])]
    assert len(shown) == len(set(shown))
    # One result and room for little more than one line: the keyword hit, not the episode's
    # first messages.
    tight = search(client, conversation=conv.pk, q="VPN error E4012 on reconnect", k=1, budget_tokens=64)
    (only,) = tight["results"]
    assert only["kind"] == "episode" and "E4012" in only["text"]
    assert [m["external_id"] for m in only["messages"] if m["hit"]][:1] == ["s-3"]
    assert only["tokens"] <= 64


def test_the_entry_keyword_expression_matches_its_index(db):
    """The entry route's keyword expression (memory/recall/fts.py) is served by the GIN index of
    migration 0010."""
    from django.db import connection

    from memory.recall import fts

    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN SELECT id FROM knowledge_entry WHERE {fts.entry_tsv('knowledge_entry')} @@ 'x'::tsquery"
        )
        plan = "\n".join(r[0] for r in cursor.fetchall())
        cursor.execute("SET enable_seqscan = on")
    assert "entry_head_gin" in plan, plan


def test_an_optional_reranker_reweighs_and_a_failing_one_changes_nothing(world, general_chat):
    conv, ids = general_chat
    q = "error when the VPN reconnects"
    plain = search(world.client("copilot"), conversation=conv.pk, q=q, k=3)
    assert plain["reranker"] == "off" and all(r["rerank"] is None for r in plain["results"])
    with override_settings(BRAIN_RECALL_RERANKER="tests.memory.recall.rerankers.prefer_error_codes"):
        reranked = search(world.client("copilot"), conversation=conv.pk, q=q, k=3)
    assert reranked["reranker"] == "on"
    for r in reranked["results"]:
        expected = 1.0 if (r["kind"], r["id"]) == ("message", ids["s-3"]) else 0.0  # the E4012 message
        assert r["rerank"] == expected
        assert r["score"] == pytest.approx(r["fused"] * r["decay"] * (0.5 + r["rerank"]), rel=1e-3)
    with override_settings(BRAIN_RECALL_RERANKER="tests.memory.recall.rerankers.broken"):
        failed = search(world.client("copilot"), conversation=conv.pk, q=q, k=3)
    assert failed["reranker"].startswith("failed: model unavailable")
    assert [r["id"] for r in failed["results"]] == [r["id"] for r in plain["results"]]


def test_a_small_scope_is_searched_exactly_a_large_one_through_hnsw(world, monkeypatch):
    """The plan follows the scope's rows, counted inside the statement (no planner estimate, no
    remembered figure); both plans find the same."""
    import json

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.recall import recall_candidates, resolve_scope
    from memory.recall import routes as R
    from memory.recall.params import VECTOR_EPISODES, VECTOR_KNOWLEDGE
    from memory.recall.search import helper_routes

    dm = factory.make_conversation(world.copilot, world.dm_alice)
    factory.post_messages(
        world.dm_alice, [{"speaker": "alice", "text": f"private note {i} about invoices"} for i in range(40)]
    )
    factory.post_messages(  # the DM is a small share of all messages
        world.support, [{"speaker": "bob", "text": f"support note {i}"} for i in range(360)]
    )
    factory.embed_all()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_message")  # real estimates: 40 of 400 rows
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=dm)

    def run():
        """The hits, and which part of the message statement returned rows: the index part
        (HNSW, first) or the exact one."""
        R.forget_estimates()
        with CaptureQueriesContext(connection) as queries:
            ranking = recall_candidates(scope, q="an invoice note", limit=10, routes=(VECTOR_EPISODES,))
        (batch,) = [q["sql"] for q in queries.captured_queries if "v.embedding <=>" in q["sql"]]
        statement = next(st for st in batch.split("; ") if "v.embedding <=>" in st)
        with connection.cursor() as cursor:
            cursor.execute(R.search_settings(100))
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement)
            plan = cursor.fetchone()[0]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        parts = [p["Actual Rows"] for p in plan[0]["Plan"]["Plans"] if p["Parent Relationship"] == "Member"]
        return [h.id for h in ranking.rankings[VECTOR_EPISODES]], "index" if parts[0] else "exact"

    both = [VECTOR_KNOWLEDGE, VECTOR_EPISODES]
    exact_ids, part = run()
    assert len(exact_ids) == 10 and part == "exact"
    # An exact message search is the heavy statement: the helper thread takes it alone.
    assert helper_routes(scope, both) == [VECTOR_EPISODES]
    monkeypatch.setattr(R, "EXACT_MAX_ROWS", 0)  # every scope counts as large now
    hnsw_ids, part = run()
    assert part == "index"
    assert helper_routes(scope, both) == both
    assert hnsw_ids == exact_ids
    where, params = scope.where(R.Message)
    assert 30 <= R.estimated_rows("knowledge_message", where, params) <= 60


def test_a_scopes_row_estimate_is_kept_until_the_process_caches_are_forgotten(world):
    """Estimates are remembered per process (a conversation's scope repeats from search to
    search); forgetting the process caches (tests, a benchmark on a fresh database) drops them,
    so no estimate outlives the data it was made on."""
    from django.db import connection

    from memory.caches import forget_process_caches
    from memory.recall import routes as R

    def analysed_estimate():
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE knowledge_message")
        return R.estimated_rows("knowledge_message", "TRUE", [])

    first = analysed_estimate()
    factory.post_messages(world.support, [{"speaker": "bob", "text": f"note {i}"} for i in range(300)])
    assert analysed_estimate() == first  # remembered
    forget_process_caches()
    assert analysed_estimate() >= first + 250


def test_a_search_through_the_api_takes_a_bounded_number_of_queries(
    world, general_chat, django_assert_max_num_queries
):
    """Token, conversation, the scope's channels, settings, the routes, then one query per kind
    shown (hydration) and per kind of expansion: the count does not grow with the results."""
    conv, _ = general_chat
    for i in range(40):
        factory.make_memory(world.scribe, f"VPN note {i}: reconnect after error E4012", store="shared")
    factory.embed_all()
    client = world.client("copilot")

    def counted(k):
        with django_assert_max_num_queries(18) as queries:
            result = search(client, conversation=conv.pk, q="VPN error E4012", k=k, budget_tokens=100_000)
        return result["results"], len(queries.captured_queries)

    # The per-process caches (the scope estimates that place the vector routes) expire after a
    # minute: refresh them all now, so none expires during the counted searches.
    forget_process_caches()
    search(client, conversation=conv.pk, q="VPN error E4012", k=3)  # token last_used_at, estimates
    (three, n3), (twelve, n12), (all_, n_all) = counted(3), counted(12), counted(100)
    assert (len(three), len(twelve)) == (3, 12) and len(all_) > 12
    # Growing k adds at most the queries of the kinds that come into view (message rows, their
    # neighbours, channel names) — never one per result.
    assert n3 <= n12 <= n_all <= n3 + 3


def test_result_times_are_the_rows_own_to_the_microsecond(world):
    """Routes and expansion read times as epoch seconds (cheaper than timestamps); what a result
    shows, its context included, must still be the rows' exact times, and an ended validity still
    marks a memory as history."""
    from datetime import datetime

    from rest_framework.fields import DateTimeField

    conv = factory.make_conversation(world.copilot, world.general)
    ts = NOW - timedelta(days=3, microseconds=123457)
    reply_ts = ts + timedelta(seconds=41, microseconds=999999)  # shown as context of the hit
    message_id, reply_id = factory.post_messages(
        world.general,
        [
            {"speaker": "alice", "text": "The badge reader at gate K7 rejects new cards", "ts": ts},
            {"speaker": "bob", "text": "Facilities know, a new one is ordered", "ts": reply_ts},
        ],
    )
    ended = factory.make_memory_row(
        world.copilot, "Gate K7 badge reader was replaced in spring", valid_to=NOW - timedelta(days=1)
    )
    current = factory.make_memory_row(world.copilot, "Gate K7 badge reader is replaced in spring")
    factory.embed_all()
    result = search(world.client("copilot"), conversation=conv.pk, q="gate K7 badge reader")
    by_id = {(r["kind"], r["id"]): r for r in result["results"]}
    shown = datetime.fromisoformat(by_id[("message", message_id)]["time"])
    assert shown == ts
    (alone,) = search(world.client("copilot"), conversation=conv.pk, q="rejects new cards", k=1)["results"]
    assert (alone["kind"], alone["id"]) == ("message", message_id)  # with its reply as context
    assert {m["id"]: datetime.fromisoformat(m["ts"]) for m in alone["messages"]} == {
        message_id: ts,
        reply_id: reply_ts,
    }
    ended.refresh_from_db()
    assert datetime.fromisoformat(by_id[("memory", ended.pk)]["time"]) == ended.updated_at
    assert by_id[("memory", ended.pk)]["valid_to"] == DateTimeField().to_representation(ended.valid_to)
    # Same text weight, but the ended one is history: it ranks below the current one.
    assert by_id[("memory", current.pk)]["decay"] > by_id[("memory", ended.pk)]["decay"]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_vector_routes_run_on_a_connection_of_their_own(world, general_chat):
    """The vector side of a search runs on a helper thread; outside a transaction it has its own
    database connection, so its statements run while the keyword routes' do. The rankings are
    the same as a search inside a transaction, where the vector routes use the caller's
    connection after the keyword routes."""
    from django.db import DEFAULT_DB_ALIAS, connections, transaction

    from knowledge.principal import Principal
    from memory.recall import resolve_scope
    from memory.recall import search as S

    conv, _ = general_chat
    factory.make_memory(world.copilot, "The VPN client shows error E4012 after the update", store="shared")
    factory.embed_all()
    scope = resolve_scope(Principal.for_agent(world.copilot), agent=world.copilot, conversation=conv)
    q = "VPN error after the update"
    S.close_helper_connections()
    apart = S.recall_candidates(scope, q=q)
    helpers = list(S._helper_connections)
    assert len(helpers) == 1 and helpers[0] is not connections[DEFAULT_DB_ALIAS]
    with transaction.atomic():
        together = S.recall_candidates(scope, q=q)
    assert list(S._helper_connections) == helpers  # inside a transaction the helper ran no SQL
    for ranking in (apart, together):
        assert all(ranking.routes[r]["ran"] for r in ranking.routes)
    assert {r: [(h.kind, h.id) for h in hits] for r, hits in apart.rankings.items()} == {
        r: [(h.kind, h.id) for h in hits] for r, hits in together.rankings.items()
    }
    assert [(c.kind, c.id) for c in apart.candidates] == [(c.kind, c.id) for c in together.candidates]
    S.close_helper_connections()
    assert not S._helper_connections


def test_a_named_time_weighs_memories_by_when_they_held_not_when_they_were_learned(world):
    """Two memories written today about a badge swap; one held from 2025-03-02 (an import keeps
    it), the other from 2024-06-10. "before April 2025" and "after 2025" rank the one that held
    then first; a memory learned in the window but held outside it gains nothing."""
    conv = factory.make_conversation(world.copilot, world.general)
    march = factory.make_memory(
        world.copilot,
        "Badge swap at door 4: the reader was replaced",
        store="shared",
        valid_from=NOW.replace(2025, 3, 2),
    )
    june = factory.make_memory(
        world.copilot,
        "Badge swap at door 4: the reader was renewed",
        store="shared",
        valid_from=NOW.replace(2024, 6, 10),
    )
    factory.embed_all()
    client = world.client("copilot")

    def order(q):
        result = search(client, conversation=conv.pk, q=q)
        ids = [r["id"] for r in result["results"] if r["kind"] == "memory"]
        held = {r["id"]: r["held_from"][:10] for r in result["results"] if r["kind"] == "memory"}
        assert held == {march.pk: "2025-03-02", june.pk: "2024-06-10"}
        return ids

    assert order("badge swap door 4 in March 2025") == [march.pk, june.pk]
    assert order("badge swap door 4 in June 2024") == [june.pk, march.pk]
    assert order("badge swap door 4 before 1 January 2025") == [june.pk, march.pk]
    assert order("badge swap door 4 after 1 January 2025") == [march.pk, june.pk]
