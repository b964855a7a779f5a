"""brain_client.langgraph.BrainStore against a live Brain: the behaviour LangGraph documents for
its stores (the cases its InMemoryStore meets — put/get round trip, update, search with a query
and a filter, delete, namespace listing with prefix, suffix and depth, the async methods), what
Brain adds (review, provenance, the memories in Brain's own API), and a LangGraph graph with a
deterministic node that remembers across two runs."""

import asyncio
import operator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypedDict

import pytest
from brain_client import Brain
from brain_client.langgraph import BrainStore, memory_key
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from knowledge.models import Memory as MemoryRow
from tests import factory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def store(live_server, world):
    """The trusted agent's store: its writes are in force at once."""
    brain = Brain(live_server.url, world.tokens["scribe"])
    yield BrainStore(brain)
    brain.close()


def test_put_then_get_round_trips_the_value(store):
    value = {"name": "Ada", "languages": ["en", "fr"], "nested": {"level": 2}, "score": 0.5}
    store.put(("users", "u1"), "profile", value)
    item = store.get(("users", "u1"), "profile")
    assert item.value == value
    assert (item.namespace, item.key) == (("users", "u1"), "profile")
    assert item.created_at == item.updated_at
    assert store.get(("users", "u1"), "missing") is None
    assert store.get(("users", "u2"), "profile") is None


def test_a_second_put_updates_the_item_and_brain_keeps_the_history(store):
    store.put(("prefs",), "tone", {"tone": "formal"})
    first = store.get(("prefs",), "tone")
    store.put(("prefs",), "tone", {"tone": "casual"})
    item = store.get(("prefs",), "tone")
    assert item.value == {"tone": "casual"}
    assert item.created_at == first.created_at and item.updated_at > first.updated_at
    rows = MemoryRow.objects.filter(key=memory_key(("prefs",), "tone")).order_by("id")
    assert [(r.status, r.value) for r in rows] == [
        ("superseded", {"tone": "formal"}),
        ("active", {"tone": "casual"}),
    ]


def test_search_with_a_filter_and_a_query(store):
    store.put(
        ("docs", "kb"), "vpn", {"text": "Restart the VPN client to fix error E4012", "kind": "howto", "n": 3}
    )
    store.put(
        ("docs", "kb"), "mail", {"text": "Mail quota is raised by the helpdesk", "kind": "howto", "n": 1}
    )
    store.put(
        ("docs", "kb"), "policy", {"text": "VPN access needs a manager's approval", "kind": "policy", "n": 2}
    )
    store.put(("docs", "other"), "vpn2", {"text": "VPN client error E4012 again", "kind": "howto", "n": 5})

    howtos = store.search(("docs", "kb"), filter={"kind": "howto"})
    assert {i.key for i in howtos} == {"vpn", "mail"}
    assert all(i.score is None for i in howtos)
    assert {i.key for i in store.search(("docs",), filter={"n": {"$gte": 2}})} == {"vpn", "policy", "vpn2"}
    assert {i.key for i in store.search(("docs",), filter={"kind": {"$ne": "howto"}})} == {"policy"}

    ranked = store.search(("docs", "kb"), query="VPN client error E4012")
    assert [i.key for i in ranked][0] == "vpn"
    assert ranked[0].score == 1.0 and ranked[-1].key == "mail" and ranked[-1].score == 0.0
    # Equal scores keep the most recently updated first.
    both = store.search(("docs",), query="VPN error", filter={"kind": "howto"}, limit=2)
    assert [i.key for i in both] == ["vpn2", "vpn"]
    assert [i.key for i in store.search(("docs",))] == ["vpn2", "policy", "mail", "vpn"]
    assert [i.key for i in store.search(("docs",), limit=2, offset=3)] == ["vpn"]
    assert store.search(("nothing",)) == []


def test_delete_removes_the_item(store):
    store.put(("tmp",), "k", {"v": 1})
    store.delete(("tmp",), "k")
    assert store.get(("tmp",), "k") is None
    assert store.search(("tmp",)) == []
    assert store.list_namespaces(prefix=("tmp",)) == []
    store.delete(("tmp",), "never-there")  # deleting what is not there is no error
    store.put(("tmp",), "k", {"v": 2})  # and the key can be used again
    assert store.get(("tmp",), "k").value == {"v": 2}


def test_delete_retires_the_memory_and_writes_no_tombstone(store):
    from knowledge.models import AuditEvent, Memory

    store.put(("tmp",), "gone", {"v": 1})
    before = set(Memory.objects.values_list("pk", flat=True))
    memory = store.memory(("tmp",), "gone")

    store.delete(("tmp",), "gone")

    assert set(Memory.objects.values_list("pk", flat=True)) == before  # no tombstone memory
    retired = Memory.objects.get(pk=memory.id)
    assert retired.status == "invalidated" and retired.value == {"v": 1}  # reversible: kept as it was
    assert AuditEvent.objects.filter(action="memory.revoked", object_ids=[str(memory.id)]).exists()


def test_list_namespaces_with_prefix_suffix_and_depth(store):
    for namespace in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "x"),
        ("users", "u1", "v1"),
        ("users", "u2", "v1"),
    ]:
        store.put(namespace, "k", {"v": 1})
    assert store.list_namespaces() == sorted(
        [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "x"), ("users", "u1", "v1"), ("users", "u2", "v1")]
    )
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "x")]
    assert store.list_namespaces(suffix=("v1",)) == [("users", "u1", "v1"), ("users", "u2", "v1")]
    assert store.list_namespaces(prefix=("users", "*", "v1")) == [
        ("users", "u1", "v1"),
        ("users", "u2", "v1"),
    ]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d", "e"), ("a", "x")]


def test_namespaces_are_checked_as_langgraph_checks_them(store):
    with pytest.raises(InvalidNamespaceError):
        store.put(("bad.label",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"v": 1})])
    # Labels and keys that look like Brain's separators stay apart.
    store.put(("a/b",), "c", {"v": "one"})
    store.put(("a",), "b/c", {"v": "two"})
    assert store.get(("a/b",), "c").value == {"v": "one"}
    assert store.get(("a",), "b/c").value == {"v": "two"}


def test_the_async_methods_and_batch(store):
    async def main():
        await store.aput(("async",), "k1", {"v": 1})
        results = await store.abatch(
            [PutOp(("async",), "k2", {"v": 2}), GetOp(("async",), "k1"), SearchOp(("async",), limit=10)]
        )
        assert results[0] is None and results[1].value == {"v": 1}
        assert {i.key for i in results[2]} == {"k1", "k2"}  # ops run in order: the put comes first
        assert (await store.aget(("async",), "k2")).value == {"v": 2}
        assert {i.key for i in await store.asearch(("async",))} == {"k1", "k2"}
        assert await store.alist_namespaces(prefix=("async",)) == [("async",)]
        await store.adelete(("async",), "k1")
        assert await store.aget(("async",), "k1") is None

    # A loop of its own in a thread of its own: the browser tests' Playwright (sync API) may still
    # hold an event loop in this thread, where asyncio.run refuses to start another.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, main()).result()


def test_items_are_brain_memories_with_provenance_and_review(live_server, world, store):
    conversation = store.brain.conversations.open("general")
    cited = BrainStore(store.brain, sources=[{"kind": "conversation", "ref": str(conversation.id)}])
    cited.put(("facts",), "vpn", {"text": "VPN 5.2.1 fixes E4012"}, index=["text"])
    memory = cited.memory(("facts",), "vpn")
    assert memory.status == "active" and memory.agent == "scribe" and memory.text == "VPN 5.2.1 fixes E4012"
    assert {(s["kind"], s["ref"]) for s in memory.sources} == {
        ("record", f"langgraph:{memory_key(('facts',), 'vpn')}"),
        ("conversation", str(conversation.id)),
    }
    assert memory.category == "langgraph" and memory.value == {"text": "VPN 5.2.1 fixes E4012"}

    # An untrusted agent's writes wait for review, and until approved get and search return
    # what was in force before: nothing, then the first value while the second waits.
    copilot = BrainStore(Brain(live_server.url, world.tokens["copilot"]))
    copilot.put(("notes",), "n1", {"text": "pending"})
    assert copilot.memory(("notes",), "n1").status == "queued"
    assert copilot.get(("notes",), "n1") is None
    assert copilot.search(("notes",)) == []
    factory.set_state([copilot.memory(("notes",), "n1").id], status="active")
    assert copilot.get(("notes",), "n1").value == {"text": "pending"}
    copilot.put(("notes",), "n1", {"text": "second"})
    assert copilot.memory(("notes",), "n1").status == "queued"
    assert copilot.get(("notes",), "n1").value == {"text": "pending"}
    assert [i.value for i in copilot.search(("notes",))] == [{"text": "pending"}]
    # Stores stay Brain's: scribe does not see copilot's own items.
    assert store.get(("notes",), "n1") is None
    # A namespace can be routed to another Brain scope.
    shared = BrainStore(store.brain, scopes={"team": "shared"})
    shared.put(("team", "faq"), "q1", {"text": "ask in #support"})
    assert shared.memory(("team", "faq"), "q1").store == "shared"
    assert shared.memory(("facts",), "vpn").store == "self"


class State(TypedDict):
    user: str
    said: str
    log: Annotated[list[str], operator.add]


def remember(state: State, runtime: Runtime) -> dict:
    """Deterministic: greets by what it remembers of the user, then remembers this visit."""
    namespace = ("visits", state["user"])
    seen = runtime.store.get(namespace, "count")
    count = seen.value["count"] if seen else 0
    last = seen.value["last"] if seen else None
    runtime.store.put(namespace, "count", {"count": count + 1, "last": state["said"]})
    if last is None:
        return {"log": [f"first visit of {state['user']}"]}
    return {"log": [f"visit {count + 1} of {state['user']}; last time: {last}"]}


def test_a_langgraph_graph_remembers_across_two_runs(live_server, world):
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)

    # Two runs, each with its own client and compiled graph: only Brain carries the memory.
    for said, expected in (
        ("hello", "first visit of alice"),
        ("my VPN fails", "visit 2 of alice; last time: hello"),
    ):
        with Brain(live_server.url, world.tokens["scribe"]) as brain:
            graph = builder.compile(store=BrainStore(brain))
            out = graph.invoke({"user": "alice", "said": said, "log": []})
        assert out["log"] == [expected]
    assert (
        MemoryRow.objects.filter(key=memory_key(("visits", "alice"), "count"), status="active").count() == 1
    )


def test_an_untrusted_agents_graph_state_never_reaches_the_review_queue(live_server, world):
    """Issue 53: the counter a graph puts on every run is the agent's own working state — active
    at once, in its self store, tier working — while a fact it wants remembered is still reviewed."""
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    for said, expected in (("hi", "first visit of bob"), ("again", "visit 2 of bob; last time: hi")):
        with Brain(live_server.url, world.tokens["copilot"]) as brain:
            graph = builder.compile(store=BrainStore(brain, state=["visits"]))
            assert graph.invoke({"user": "bob", "said": said, "log": []})["log"] == [expected]
    rows = MemoryRow.objects.filter(key=memory_key(("visits", "bob"), "count")).order_by("id")
    assert [(r.status, r.tier, r.store, r.queue_reason) for r in rows] == [
        ("superseded", "working", "self", ""),
        ("active", "working", "self", ""),
    ]
    assert not MemoryRow.objects.filter(status="queued").exists()
    with Brain(live_server.url, world.tokens["copilot"]) as brain:
        store = BrainStore(brain, state=["visits"], state_ttl_hours=2)
        store.put(("facts",), "bob", {"text": "Bob prefers e-mail"})
        assert store.memory(("facts",), "bob").status == "queued"  # a fact: a reviewer decides
        store.put(("visits", "bob"), "count", {"count": 9})
        expires = datetime.fromisoformat(store.memory(("visits", "bob"), "count").expires_at)
        assert datetime.now(UTC) + timedelta(hours=1) < expires < datetime.now(UTC) + timedelta(hours=3)
        # State is scratch: it lives no longer than Brain's working TTL.
        with pytest.raises(Exception, match="working TTL"):
            BrainStore(brain, state=["visits"], state_ttl_hours=24 * 30).put(
                ("visits", "bob"), "count", {"n": 1}
            )
        # State is the agent's own: it cannot be written into a shared store.
        with pytest.raises(Exception, match="scope agent"):
            brain.memory.write("x", scope="shared", state=True)
    assert MemoryRow.objects.filter(status="queued").count() == 1
