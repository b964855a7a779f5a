"""Recall stops where relevance ends: a context for one question is not padded with whatever
else the budget could hold, and it says how many it left out."""

from memory.recall import memory_search, resolve_scope
from memory.recall.context import context_compile
from memory.recall.params import DEFAULT_PARAMS
from tests import factory

CAUSES = [
    "a full disk",
    "an expired certificate",
    "a DNS outage",
    "a bad deploy",
    "a power cut",
    "a typo in a config",
]


def _padded(world):
    for i in range(60):
        factory.make_memory_row(
            world.copilot,
            f"Ticket SUP-{100 + i} was caused by {CAUSES[i % len(CAUSES)]} on server {i}",
            store="shared",
        )
    related = factory.make_memory_row(
        world.copilot, "VPN error E4012 is fixed by installing client 5.2.1", store="shared"
    )
    factory.embed_all()
    conversation = factory.make_conversation(world.copilot, world.general)
    return resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conversation), related


def test_the_padded_context_holds_only_the_related_memory_and_says_how_many_it_left_out(world):
    assert DEFAULT_PARAMS.relevance_floor > 0
    scope, related = _padded(world)
    section = next(
        s
        for s in context_compile(scope, q="VPN error E4012", budget_tokens=2000)["sections"]
        if s["name"] == "recalled_memory"
    )
    assert [item["id"] for item in section["items"]] == [related.pk]
    assert section["left_out"] >= 20  # the unrelated tickets the budget would have taken

    outcome = memory_search(scope, q="VPN error E4012", k=10)
    assert [item.candidate.id for item in outcome.items] == [related.pk]
    assert outcome.left_out == 9


def test_without_a_floor_the_budget_is_filled(world):
    from dataclasses import replace

    scope, related = _padded(world)
    outcome = memory_search(
        scope, q="VPN error E4012", k=10, params=replace(DEFAULT_PARAMS, relevance_floor=0.0)
    )
    assert outcome.items[0].candidate.id == related.pk and len(outcome.items) == 10
    assert outcome.left_out == 0
