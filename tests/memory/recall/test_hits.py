"""memory_search counts hits, not threads: k means k ranked hits, each its own result with its
context de-duplicated, and under a tight budget context goes before a hit does."""

from datetime import timedelta

from django.utils import timezone

from tests import factory

NOW = timezone.now().replace(microsecond=0)


def search(client, **body):
    body.setdefault("agent", "copilot")
    response = client.post("/api/memory/search", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def thread_of_matches(channel, n=14):
    rows = [
        {
            "speaker": "alice" if i % 2 else "bob",
            "text": f"The staging deploy of build {100 + i} failed on the gateway check",
            "thread": "deploys",
            "external_id": f"d-{i}",
            "ts": NOW - timedelta(hours=n - i),
        }
        for i in range(n)
    ]
    return factory.post_messages(channel, rows)


def test_k_results_are_k_distinct_hits_even_inside_one_thread(world):
    conv = factory.make_conversation(world.copilot, world.general)
    ids = thread_of_matches(world.general)
    factory.embed_all()
    result = search(world.client("copilot"), conversation=conv.pk, q="staging deploy gateway check failed")
    hits = [r["id"] for r in result["results"]]
    assert len(hits) == 10 == len(set(hits)) and set(hits) <= set(ids)
    for r in result["results"]:
        assert r["external_id"] == {i: f"d-{n}" for n, i in enumerate(ids)}[r["id"]]
    # context is de-duplicated: no message is shown twice, and no hit appears as another's context
    shown = [m["id"] for r in result["results"] for m in r["messages"]]
    assert len(shown) == len(set(shown))
    assert {m["id"] for r in result["results"] for m in r["messages"] if not m["hit"]}.isdisjoint(hits)
    assert result["used_tokens"] <= 2000


def test_a_tight_budget_trims_context_before_it_drops_a_hit(world):
    conv = factory.make_conversation(world.copilot, world.general)
    thread_of_matches(world.general)
    factory.embed_all()
    # Each hit alone is ≈ 25 tokens: 10 of them fit in 300 tokens, with little room for context.
    result = search(
        world.client("copilot"), conversation=conv.pk, q="staging deploy gateway check", budget_tokens=300
    )
    assert len(result["results"]) == 10
    assert sum(r["tokens"] for r in result["results"]) == result["used_tokens"] <= 300
    assert all(any(m["hit"] for m in r["messages"]) for r in result["results"])


def test_a_query_naming_a_speaker_finds_that_speakers_message(world):
    conv = factory.make_conversation(world.copilot, world.general)
    rows = [("priya", "I think the offsite should be somewhere by the sea", 9)]
    rows += [
        (name, "The offsite should be somewhere in the mountains", d) for name, d in (("bob", 3), ("carl", 2))
    ]
    rows += [
        (name, "Offsite ideas: a city trip, maybe with a museum", d) for name, d in (("dora", 4), ("emil", 1))
    ]
    ids = factory.post_messages(
        world.general,
        [{"speaker": s, "text": t, "ts": NOW - timedelta(days=d)} for s, t, d in rows],
    )
    factory.embed_all()
    result = search(world.client("copilot"), conversation=conv.pk, q="Where did Priya want the offsite?", k=1)
    assert result["results"][0]["id"] == ids[0]
    assert result["results"][0]["routes"].keys() >= {"keyword_messages", "vector_episodes"}


def test_an_old_message_that_is_the_only_match_is_still_found_within_k_10(world):
    conv = factory.make_conversation(world.copilot, world.general)
    (old,) = factory.post_messages(
        world.general,
        [
            {
                "speaker": "alice",
                "text": "Our dog is a greyhound called Biscuit",
                "ts": NOW - timedelta(days=3 * 365),
            }
        ],
    )
    # Thirty recent messages by the same person, near the question in meaning but not answering it.
    factory.post_messages(
        world.general,
        [
            {
                "speaker": "alice",
                "text": f"Took the kids and our pets to the park on day {i}",
                "ts": NOW - timedelta(days=i),
            }
            for i in range(30)
        ],
    )
    factory.embed_all()
    result = search(world.client("copilot"), conversation=conv.pk, q="What is the name of Alice's dog?")
    assert old in [r["id"] for r in result["results"]]
