"""Mem0 → Brain: the JSON of Mem0's `Memory.get_all()` (open source: `{"results": [...]}`, or the
bare list older versions return) or of its platform's REST export (`MemoryClient.get_all()`: a
list, or `{"results": [...]}`), or the same items one per line (JSON Lines).

Each item is one Mem0 memory: `id`, `memory` (the text), the `user_id` / `agent_id` / `run_id`
(and `actor_id`, `role`) it belongs to, `metadata`, `categories`, `hash`, `created_at`,
`updated_at`. It becomes one Brain memory of the named agent through the normal write path,
batched (`memory_write_many` as the agent: an untrusted agent's imports wait for review), citing
`{"kind": "record", "ref": "mem0:<id>"}`, in category `mem0`, with Mem0's fields kept in its
`value` and `valid_from` set to Mem0's `created_at`.

`mem0_parse` checks the whole file first and names the first bad line or item (nothing is
written then); `mem0_import` checks every memory before it writes the first, then writes them a
chunk (one transaction) at a time, and skips items the agent already has (by that record
source), so a re-run imports nothing twice and an interrupted one carries on."""

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils.dateparse import parse_datetime

from knowledge import access
from knowledge.errors import Invalid
from knowledge.models import Agent, Memory, MemorySource
from knowledge.principal import Principal
from knowledge.web import error_text
from memory.lifecycle.bulk import CHUNK, ItemRefused, memory_write_many

SOURCE_PREFIX = "mem0:"
CATEGORY = "mem0"
IDS = ("user_id", "agent_id", "run_id", "actor_id", "role")
KEPT = (*IDS, "metadata", "categories", "hash", "app_id", "created_at", "updated_at")
MAX_ID = 300 - len(SOURCE_PREFIX)  # a source ref holds at most 300 characters


class BadFile(ValueError):
    """The file is not a Mem0 export: the message names the line or item."""


@dataclass(frozen=True)
class Mem0Memory:
    id: str
    text: str
    created_at: datetime.datetime | None
    value: dict


@dataclass
class ImportResult:
    imported: int = 0
    queued: int = 0  # of the imported, waiting for review
    skipped: int = 0  # already in Brain from an earlier run
    duplicates: int = 0  # said exactly what a live memory of the agent says: answered with it
    ids: list[int] = field(default_factory=list)


def _items(raw: str) -> list[tuple[str, object]]:
    """(where, item) pairs: "item N" in a JSON document, "line N" in JSON Lines."""
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(raw.splitlines(), 1) if line.strip()]
        if len(lines) < 2 or not _is_object(lines[0][1]):  # one broken document, not JSON Lines
            raise BadFile(f"line {whole.lineno}: not JSON ({whole.msg}).") from None
        items = []
        for n, line in lines:
            try:
                items.append((f"line {n}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise BadFile(f"line {n}: not JSON ({exc.msg}).") from None
        return items
    if isinstance(doc, dict):
        found = next((doc[k] for k in ("results", "memories") if isinstance(doc.get(k), list)), None)
        if found is None:
            raise BadFile('item 0: expected a list of memories or {"results": [...]}.')
        doc = found
    if not isinstance(doc, list):
        raise BadFile('item 0: expected a list of memories or {"results": [...]}.')
    return [(f"item {i}", item) for i, item in enumerate(doc, 1)]


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _time(where: str, item: dict, name: str) -> datetime.datetime | None:
    value = item.get(name)
    if value in (None, ""):
        return None
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise BadFile(f"{where}: {name} is not a date and time ({value!r}).")
    if parsed.tzinfo is None:  # Mem0 writes local ISO times with an offset; a bare one is UTC
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed


def _one(where: str, item: object) -> Mem0Memory:
    if not isinstance(item, dict):
        raise BadFile(f"{where}: expected an object, got {type(item).__name__}.")
    mem0_id = item.get("id")
    if not isinstance(mem0_id, str | int) or isinstance(mem0_id, bool) or not str(mem0_id).strip():
        raise BadFile(f"{where}: no id.")
    mem0_id = str(mem0_id).strip()
    if len(mem0_id) > MAX_ID:
        raise BadFile(f"{where}: the id is longer than {MAX_ID} characters.")
    text = item.get("memory")
    if not isinstance(text, str) or not text.strip():
        raise BadFile(f"{where} ({mem0_id}): no memory text.")
    for name in IDS:
        if item.get(name) is not None and not isinstance(item[name], str):
            raise BadFile(f"{where} ({mem0_id}): {name} must be a string.")
    if item.get("metadata") is not None and not isinstance(item["metadata"], dict):
        raise BadFile(f"{where} ({mem0_id}): metadata must be an object.")
    if item.get("categories") is not None and not isinstance(item["categories"], list):
        raise BadFile(f"{where} ({mem0_id}): categories must be a list.")
    created = _time(f"{where} ({mem0_id})", item, "created_at")
    _time(f"{where} ({mem0_id})", item, "updated_at")
    kept = {k: item[k] for k in KEPT if item.get(k) is not None}
    return Mem0Memory(
        id=mem0_id, text=text.strip(), created_at=created, value={"mem0": {"id": mem0_id, **kept}}
    )


def mem0_parse(raw: str) -> list[Mem0Memory]:
    """Every memory of a Mem0 export, checked; BadFile naming the first bad line or item."""
    memories, seen = [], {}
    for where, item in _items(raw):
        memory = _one(where, item)
        if memory.id in seen:
            raise BadFile(f"{where}: id {memory.id} again (first at {seen[memory.id]}).")
        seen[memory.id] = where
        memories.append(memory)
    return memories


def already_imported(agent: Agent, ids: list[str]) -> set[str]:
    # Two lookups by index, not one join: planned with statistics from before the agent had
    # memories, the join read all of them once per source (1.5 s for a re-run of 1,000).
    cited = list(
        MemorySource.objects.filter(kind="record", ref__in=[SOURCE_PREFIX + i for i in ids]).values_list(
            "memory_id", "ref"
        )
    )
    own = set(
        Memory.objects.filter(pk__in={memory for memory, _ in cited}, owner=agent).values_list(
            "pk", flat=True
        )
    )
    return {ref[len(SOURCE_PREFIX) :] for memory, ref in cited if memory in own}


def mem0_import(
    *,
    agent: Agent,
    memories: list[Mem0Memory],
    scope: str = "agent",
    progress: Callable[[int, int], None] | None = None,
    chunk: int = CHUNK,
) -> ImportResult:
    """Write each memory the agent does not have yet, as the agent, through the normal write
    path batched (memory_write_many: the same checks, duplicate rule, activation and audit event
    per memory), `chunk` memories per transaction. Every memory is checked before the first is
    written: a refused one (the store, a text too long) raises Invalid naming its Mem0 id and
    nothing is written."""
    actor = Principal.for_agent(agent)
    owner, store, _, _ = access.write_target(actor, scope=scope)
    result = ImportResult()
    done = already_imported(agent, [m.id for m in memories])
    todo = [m for m in memories if m.id not in done]
    result.skipped = len(memories) - len(todo)
    try:
        rows = memory_write_many(
            actor=actor,
            owner=owner,
            store=store,
            items=[_item(m) for m in todo],
            chunk=chunk,
            progress=progress and (lambda n, _: progress(result.skipped + n, len(memories))),
        )
    except ItemRefused as exc:
        bad = todo[exc.index]
        raise Invalid({f"{SOURCE_PREFIX}{bad.id}": [error_text(exc.error, fields=True)]}) from None
    if progress and not todo:
        progress(len(memories), len(memories))
    for row in rows:
        if getattr(row, "duplicate_of", None):
            result.duplicates += 1
            continue
        result.imported += 1
        result.queued += row.status == Memory.QUEUED
        result.ids.append(row.pk)
    return result


def _item(memory: Mem0Memory) -> dict:
    return {
        "text": memory.text,
        "value": memory.value,
        "category": CATEGORY,
        "valid_from": memory.created_at,
        "sources": [{"kind": "record", "ref": SOURCE_PREFIX + memory.id}],
    }
