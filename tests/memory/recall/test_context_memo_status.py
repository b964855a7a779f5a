"""The pinned memo, context compilation and GET /api/status."""

from django.test import override_settings

from knowledge.models import AuditEvent, Memory, PinnedMemo
from knowledge.principals import services
from knowledge.tokens import count_tokens
from memory.recall import resolve_scope
from memory.recall.context import context_compile
from memory.recall.memo import memo_update
from tests import factory


def test_an_agent_reads_its_own_memo_with_its_budget(world):
    memo_update(actor=factory.SYSTEM, agent=world.copilot, text="Always answer in English.")
    body = world.client("copilot").get("/api/agents/copilot/memo").json()
    assert body["text"] == "Always answer in English."
    assert body["tokens"] == count_tokens("Always answer in English.")
    assert body["budget_tokens"] == 300 and body["version"] == 1
    assert world.client("scribe").get("/api/agents/copilot/memo").status_code == 403
    assert world.client("integration").get("/api/agents/copilot/memo").status_code == 403
    assert world.client("reviewer").get("/api/agents/copilot/memo").status_code == 200
    assert world.client("reviewer").get("/api/agents/nobody/memo").status_code == 404
    empty = world.client("scribe").get("/api/agents/scribe/memo").json()
    assert empty["text"] == "" and empty["version"] == 0


@override_settings(BRAIN_MEMO_BUDGET_TOKENS=10)
def test_only_admins_edit_the_memo_within_budget_and_versions_conflict(world):
    admin = world.client("admin")
    assert (
        world.client("reviewer").put("/api/agents/copilot/memo", {"text": "x"}, format="json").status_code
        == 403
    )
    assert (
        world.client("copilot").put("/api/agents/copilot/memo", {"text": "x"}, format="json").status_code
        == 403
    )
    over = admin.put("/api/agents/copilot/memo", {"text": "word " * 20}, format="json")
    assert over.status_code == 400 and "budget is 10" in str(over.json())
    assert not PinnedMemo.objects.filter(agent=world.copilot).exists()
    ok = admin.put("/api/agents/copilot/memo", {"text": "Be brief.", "version": 0}, format="json")
    assert ok.status_code == 200 and ok.json()["version"] == 1
    stale = admin.put("/api/agents/copilot/memo", {"text": "Be kind.", "version": 0}, format="json")
    assert stale.status_code == 409
    assert PinnedMemo.objects.get(agent=world.copilot).text == "Be brief."
    event = AuditEvent.objects.get(action="memo.updated")
    assert event.revisions.get().after["text"] == "Be brief."  # restorable
    assert "Be brief" not in str(event.data)


def _context(world, conversation, budget, **kw):
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conversation)
    return context_compile(scope, q="VPN certificate error", budget_tokens=budget, **kw)


def test_context_has_sections_with_token_counts_and_never_exceeds_the_budget(world):
    services.agent_update(
        actor=factory.SYSTEM,
        agent=world.copilot,
        trusted=False,
        instructions="You are the support copilot. " * 5,
    )
    world.copilot.refresh_from_db()
    memo_update(actor=factory.SYSTEM, agent=world.copilot, text="Never share passwords.")
    conv = factory.make_conversation(world.copilot, world.general)
    factory.make_memory_row(world.copilot, "VPN certificate errors are fixed by re-importing the profile.")
    factory.make_memory_row(world.copilot, "The VPN certificate rotates every quarter.", confidence=0.5)
    factory.post_messages(
        world.general, [{"speaker": "bob", "text": f"VPN error {i} again today"} for i in range(8)]
    )
    factory.embed_all()
    for budget in (3, 20, 40, 80, 200, 4000):
        ctx = _context(world, conv, budget)
        names = [s["name"] for s in ctx["sections"]]
        assert names == ["instructions", "pinned_memo", "skills", "recalled_memory"]
        for section in ctx["sections"]:
            assert section["tokens"] == count_tokens(section["text"])
        assert ctx["total_tokens"] == sum(s["tokens"] for s in ctx["sections"]) <= budget
    full = _context(world, conv, 4000)
    assert full["sections"][1]["text"] == "Never share passwords."
    items = full["sections"][-1]["items"]
    assert items and all(
        {"relevance", "recency", "confidence", "density", "score"} <= set(i)
        for i in items
        if not i.get("forced")
    )
    assert any(i["kind"] == "memory" and i["confidence"] == 0.5 for i in items)
    small = _context(world, conv, 20)
    assert "instructions" in small["truncated"]


def test_the_gate_can_force_a_memory_in_or_leave_it_out(world):
    conv = factory.make_conversation(world.copilot, world.general)
    kept = factory.make_memory_row(
        world.copilot, "VPN certificate errors are fixed by re-importing the profile."
    )
    factory.embed_all()
    with_it = _context(world, conv, 2000)
    assert any(i["id"] == kept.pk for i in with_it["sections"][-1]["items"])
    without = _context(world, conv, 2000, exclude_memory_ids=[kept.pk])
    assert not any(i["id"] == kept.pk for i in without["sections"][-1]["items"])
    candidate = Memory(
        owner=world.copilot, store="shared", text="Tell users to reboot twice.", tier="semantic"
    )
    forced = _context(world, conv, 2000, include_memories=[candidate])
    first = forced["sections"][-1]["items"][0]
    assert first["forced"] and "Tell users to reboot twice." in forced["sections"][-1]["text"]


def test_the_context_api_uses_the_same_path(world):
    conv = factory.make_conversation(world.copilot, world.general)
    client = world.client("copilot")
    response = client.post(
        "/api/agents/copilot/context",
        {"conversation": conv.pk, "q": "vpn", "budget_tokens": 50},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["total_tokens"] <= 50
    assert (
        world.client("scribe")
        .post("/api/agents/copilot/context", {"conversation": conv.pk, "q": "vpn"}, format="json")
        .status_code
        == 403
    )
    assert client.post("/api/agents/copilot/context", {"q": "vpn"}, format="json").status_code == 400


def test_status_reports_embedding_configuration_and_backlog_per_kind(world):
    factory.make_memory_row(world.copilot, "one")
    factory.post_messages(world.general, [{"speaker": "alice", "text": "two"}])
    body = world.client("copilot").get("/api/status").json()
    assert body["embeddings"]["backend"] == "local"
    assert body["embeddings"]["model"] == "all-MiniLM-L6-v2-onnx-int8"
    assert body["backlog"] == {"memories": 1, "messages": 1, "episodes": 0}
    factory.embed_all()
    body = world.client("reviewer").get("/api/status").json()
    assert body["backlog"] == {"memories": 0, "messages": 0, "episodes": 0}
    assert body["vector_coverage"]["messages"] == {"total": 1, "embedded": 1}


def test_status_counts_each_backlog_once(world):
    factory.make_memory_row(world.copilot, "one")
    factory.post_messages(
        world.general, [{"speaker": "alice", "text": "two"}, {"speaker": "bob", "text": "three"}]
    )
    body = world.client("reviewer").get("/api/status").json()
    assert body["backlog"] == {"memories": 1, "messages": 2, "episodes": 0}
    # The coverage gives the totals the backlog is drawn from, not a second copy of it.
    for kind, cover in body["vector_coverage"].items():
        assert set(cover) == {"total", "embedded"}
        assert cover["total"] - cover["embedded"] == body["backlog"][kind]
    assert sum(body["backlog"].values()) == 3
    assert world.client(None).get("/api/status").status_code == 401
