"""LangGraph's long-term memory store over Brain: `BrainStore` implements LangGraph's `BaseStore`
(put, get, search, delete, list_namespaces, and the sync and async `batch` they go through), so a
graph compiled with `store=BrainStore(brain)` keeps what it remembers in Brain, reviewed,
audited and visible in Brain's console like every other memory.

Install with `pip install "brain-client[langgraph]"`.

How LangGraph's items map onto Brain's memories:

- A namespace and key become one Brain memory key, `langgraph/<label>/…/<key>` with each part
  percent-encoded (so no label or key can run into another), in category `langgraph`. The memory
  lives in one Brain scope: `scope` (default `agent`, the agent's own store), or for a namespace
  whose first label is in `scopes`, the scope it names (`scopes={"team": "shared"}`).
- The item's value is the memory's `value`, exactly; the memory's text (what Brain's recall and
  console read) is the value's fields named by `index` (LangGraph's field paths), or the whole
  value as JSON.
- A new put of the same key writes a new memory that supersedes the last one (Brain keeps the
  history); a delete retires the item's live memories (`DELETE /api/memory/{id}`): they leave
  recall at once, no tombstone memory is written, and an admin can still restore or erase them. An untrusted agent's
  writes wait for review in Brain: until approved, `get` and `search` return what was in force
  before (or nothing), as Brain's recall does; a new put of the key replaces the pending write.
- Machine state: items of a namespace whose first label is in `state` (or every namespace, with
  `state=True`) are the graph's own working state — counters, cursors, scratch values it reads
  back itself. They are written with Brain's `state` flag: the agent's own working memory in its
  own store, active at once with no review (so an untrusted agent's loop does not fill the
  review queue), recalled only for that agent, never into a shared store, expiring like any
  working memory (`state_ttl_hours`, default and longest Brain's BRAIN_SHORT_TERM_TTL). Facts the graph wants
  remembered belong in the other namespaces, which an untrusted agent's review still decides.
- Provenance: every write cites `{"kind": "record", "ref": "langgraph:<memory key>"}` plus the
  store's own `sources` (a conversation, a task outcome…); `memory(namespace, key)` gives the
  Brain memory behind an item (id, status, sources, author, versions).

Search: `filter` matches value fields exactly or with `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`
(LangGraph's operators); `query` ranks by how many of its words the item's text holds (score in
[0, 1], best first), a keyword match done here rather than Brain's recall, which needs a
conversation's scope.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote, unquote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    validate_op_namespace,
)

from brain_client.client import Brain
from brain_client.models import Memory

PREFIX = "langgraph"
CATEGORY = "langgraph"
LIVE = ("active", "queued")  # what a new put supersedes and a delete retires
SHOWN = ("active",)  # what get and search return: a write waiting for review is not there yet
WORD = re.compile(r"\w+", re.UNICODE)


def memory_key(namespace: tuple[str, ...], key: str) -> str:
    """The Brain memory key of a LangGraph item: each part percent-encoded, joined by '/'."""
    return "/".join([PREFIX, *(quote(part, safe="") for part in (*namespace, key))])


def item_path(brain_key: str) -> tuple[tuple[str, ...], str] | None:
    """(namespace, key) back from a Brain memory key (None for a key this store did not write)."""
    parts = brain_key.split("/")
    if len(parts) < 3 or parts[0] != PREFIX:
        return None
    decoded = [unquote(p) for p in parts[1:]]
    return tuple(decoded[:-1]), decoded[-1]


def _prefix(namespace: tuple[str, ...]) -> str:
    return "/".join([PREFIX, *(quote(part, safe="") for part in namespace)]) + "/"


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _matches(value: Any, condition: Any) -> bool:
    if isinstance(condition, Mapping) and condition and all(str(k).startswith("$") for k in condition):
        return all(_compare(value, op, expected) for op, expected in condition.items())
    return value == condition


def _compare(value: Any, op: str, expected: Any) -> bool:
    try:
        if op == "$eq":
            return value == expected
        if op == "$ne":
            return value != expected
        if op == "$gt":
            return value > expected
        if op == "$gte":
            return value >= expected
        if op == "$lt":
            return value < expected
        if op == "$lte":
            return value <= expected
    except TypeError:  # None, or values of different kinds: not comparable, no match
        return False
    raise ValueError(f"Unsupported filter operator: {op}")


class BrainStore(BaseStore):
    """LangGraph's `BaseStore` over a `Brain` client (see the module's docstring for the mapping).

    `scope`: the Brain scope items are written to (agent, shared, private:<person>,
    channel:<channel>); `scopes`: first namespace labels that go to another scope; `sources`:
    cited by every write besides the item's own record; `index`: the value's fields that make a
    memory's text (default: the whole value); `write`: other fields for every write (tier,
    conversation, run_id…); `state`: first namespace labels (or True: all) whose items are the
    graph's own working state, never reviewed; `state_ttl_hours`: how long a state item lives
    unless put again (default and longest: Brain's short-term TTL)."""

    supports_ttl = False

    def __init__(
        self,
        brain: Brain,
        *,
        scope: str = "agent",
        scopes: Mapping[str, str] | None = None,
        sources: list[dict[str, str]] | None = None,
        index: list[str] | None = None,
        write: Mapping[str, Any] | None = None,
        state: Iterable[str] | bool = (),
        state_ttl_hours: float | None = None,
    ):
        self.brain = brain
        self.scope = scope
        self.scopes = dict(scopes or {})
        self.state = state if isinstance(state, bool) else frozenset(state)
        self.state_ttl_hours = state_ttl_hours
        if not isinstance(self.state, bool) and self.state & set(self.scopes):
            raise ValueError(
                "A state namespace lives in the agent's own store; it cannot also be in `scopes`."
            )
        self.sources = list(sources or [])
        self.index = index
        self.write_fields = dict(write or {})

    # --- BaseStore ----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            else:
                raise ValueError(f"Unknown operation {op!r}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The client is synchronous (httpx.Client): the batch runs in a worker thread.
        return await asyncio.to_thread(self.batch, list(ops))

    # --- Brain's side -------------------------------------------------------------------------

    def is_state(self, namespace: tuple[str, ...]) -> bool:
        """Whether the namespace holds the graph's own working state (see `state`)."""
        if isinstance(self.state, bool):
            return self.state and not (namespace and namespace[0] in self.scopes)
        return bool(namespace) and namespace[0] in self.state

    def scope_for(self, namespace: tuple[str, ...]) -> str:
        if self.is_state(namespace):
            return "agent"
        return self.scopes.get(namespace[0], self.scope) if namespace else self.scope

    def memory(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        """The Brain memory behind an item now (its current version), or None."""
        chain = self._chain(namespace, key)
        return chain[0] if chain else None

    def _versions(self, **filters: Any) -> list[Memory]:
        return list(
            self.brain.memory.iter(page_size=200, category=CATEGORY, agent=self.brain.agent, **filters)
        )

    def _chain(self, namespace: tuple[str, ...], key: str) -> list[Memory]:
        """The item's live memories, newest first (the first is the item now)."""
        rows = self._versions(key=memory_key(namespace, key), store=self.scope_for(namespace))
        return [m for m in rows if m.status in LIVE]

    def _current(self, **filters: Any) -> dict[str, tuple[Memory, str]]:
        """Every item's current memory by Brain key, with the creation time of its first version."""
        newest: dict[str, Memory] = {}
        first: dict[str, str] = {}
        for m in self._versions(**filters):  # newest first
            if m.status in SHOWN:
                newest.setdefault(m.key, m)
            if m.status in LIVE or m.status == "superseded":
                first[m.key] = m.created_at
        return {k: (m, first.get(k, m.created_at)) for k, m in newest.items()}

    def _item(self, memory: Memory, created_at: str, cls=Item, **extra: Any):
        path = item_path(memory.key)
        assert path is not None
        namespace, key = path
        return cls(
            namespace=namespace,
            key=key,
            value=memory.value,
            created_at=_time(created_at),
            updated_at=_time(memory.created_at),
            **extra,
        )

    def _get(self, op: GetOp) -> Item | None:
        rows = self._versions(key=memory_key(op.namespace, op.key), store=self.scope_for(op.namespace))
        shown = [m for m in rows if m.status in SHOWN]
        if not shown or shown[0].value is None:
            return None
        kept = [m for m in rows if m.status in LIVE or m.status == "superseded"]
        return self._item(shown[0], kept[-1].created_at)

    def _text(self, value: Mapping[str, Any], index: list[str] | None) -> str:
        paths = index if index is not None else self.index
        if paths:
            texts = [t for path in paths for t in get_text_at_path(value, path)]
            if texts:
                return "\n".join(texts)
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

    def _put(self, op: PutOp) -> None:
        if op.ttl is not None:
            raise NotImplementedError("BrainStore keeps items until they are deleted (no TTL).")
        brain_key = memory_key(op.namespace, op.key)
        if op.value is None:
            for memory in self._chain(op.namespace, op.key):  # nothing live: nothing to delete
                self.brain.memory.delete(memory.id, reason="deleted through the LangGraph store")
            return
        current = self.memory(op.namespace, op.key)
        index = op.index if isinstance(op.index, list) else None
        text, value = self._text(op.value, index), dict(op.value)
        fields: dict[str, Any] = {
            **self.write_fields,
            "key": brain_key,
            "value": value,
            "category": CATEGORY,
        }
        if current is not None:
            fields["supersedes"] = current.id
        if self.is_state(op.namespace):
            fields.update(state=True, tier="working")
            if self.state_ttl_hours is not None:
                # timezone.utc, not datetime.UTC: the client supports Python 3.10
                expires = datetime.now(timezone.utc) + timedelta(hours=self.state_ttl_hours)  # noqa: UP017
                fields["expires_at"] = expires.isoformat()
        self.brain.memory.write(
            text,
            scope=self.scope_for(op.namespace),
            sources=[{"kind": "record", "ref": f"langgraph:{brain_key}"[:300]}, *self.sources],
            **fields,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        # The list API's `q` (words in the text or key, at most 200 characters) narrows the
        # listing to the prefix's keys; the exact prefix is checked here.
        filters: dict[str, Any] = {"q": _prefix(op.namespace_prefix)[:200]}
        if op.namespace_prefix and op.namespace_prefix[0] in self.scopes:
            filters["store"] = self.scopes[op.namespace_prefix[0]]
        found = []
        for brain_key, (memory, created_at) in self._current(**filters).items():
            path = item_path(brain_key)
            if path is None or memory.value is None:
                continue
            namespace, _key = path
            if namespace[: len(op.namespace_prefix)] != tuple(op.namespace_prefix):
                continue
            value = memory.value
            if op.filter and not all(_matches(value.get(k), c) for k, c in op.filter.items()):
                continue
            score = None
            if op.query:
                words = {w.lower() for w in WORD.findall(op.query)}
                have = {w.lower() for w in WORD.findall(memory.text)}
                score = len(words & have) / len(words) if words else 0.0
            found.append((score, memory, created_at))
        # The most recently updated first; for a query, best first (the sort is stable).
        found.sort(key=lambda f: f[1].created_at, reverse=True)
        if op.query:
            found.sort(key=lambda f: f[0], reverse=True)
        page = found[op.offset : op.offset + op.limit]
        return [self._item(m, created, SearchItem, score=score) for score, m, created in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = set()
        for brain_key, (memory, _created) in self._current(q=f"{PREFIX}/").items():
            path = item_path(brain_key)
            if path is None or memory.value is None:
                continue
            namespace = path[0]
            if all(_condition(namespace, c.match_type, tuple(c.path)) for c in op.match_conditions or ()):
                namespaces.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(namespaces)[op.offset : op.offset + op.limit]


def _condition(namespace: tuple[str, ...], match_type: str, path: tuple[str, ...]) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))
