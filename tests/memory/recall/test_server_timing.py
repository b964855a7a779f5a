"""Every search over the API says where its time went (the Server-Timing header)."""

import re

from memory.recall.timing import server_timing
from tests import factory


def test_a_search_names_each_stage_with_its_duration(world):
    factory.make_memory_row(world.copilot, "The VPN drops every night at two", store="shared")
    factory.embed_all()
    conversation = factory.make_conversation(world.copilot, world.general)
    response = world.client("copilot").post(
        "/api/memory/search",
        {"agent": "copilot", "conversation": conversation.pk, "q": "vpn drops", "k": 5},
        format="json",
    )
    assert response.status_code == 200, response.content
    stages = dict(
        re.fullmatch(r"([a-z-]+);dur=(\d+\.\d\d)", part).groups()
        for part in response["Server-Timing"].split(", ")
    )
    ran = [name for name, info in response.json()["routes"].items() if info["ran"]]
    assert ran and {f"route-{name.replace('_', '-')}" for name in ran} <= set(stages)
    for name in ("scope", "embedding", "fusion", "packing", "search", "serialisation", "total"):
        assert name in stages, name
    assert list(stages)[0] == "scope"  # names and scope resolved first (the query embedded meanwhile)
    assert float(stages["total"]) >= float(stages["search"]) + float(stages["scope"]) - 0.02
    assert float(stages["search"]) >= float(stages["packing"])
    assert list(stages)[-2:] == ["serialisation", "total"]


def test_stage_names_are_header_tokens():
    assert server_timing({"route-keyword_messages": 1.234, "fusion": 0.5}) == (
        "route-keyword-messages;dur=1.23, fusion;dur=0.50"
    )
