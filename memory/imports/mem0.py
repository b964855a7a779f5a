"""Mem0 → Brain: the JSON of Mem0's `Memory.get_all()` (open source: `{"results": [...]}`, or the
bare list older versions return) or of its platform's REST export (`MemoryClient.get_all()`: a
list, or `{"results": [...]}`), or the same items one per line (JSON Lines).

Each item is one Mem0 memory: `id`, `memory` (the text), the `user_id` / `agent_id` / `run_id`
(and `actor_id`, `role`) it belongs to, `metadata`, `categories`, `hash`, `created_at`,
`updated_at`. It becomes one Brain memory through the normal write path, batched
(`memory_write_many`, route `import`: an untrusted agent's imports wait for review), citing
`{"kind": "record", "ref": "mem0:<id>"}`, in category `mem0`, with Mem0's fields kept in its
`value` and `valid_from` set to Mem0's `created_at`.

Whose memory it is stays apart: a memory with a `user_id` lands in the private store of that
person (`private:<person>`, the person matched by name or created; `mapping` renames Mem0 user
ids that are not person names), one with an `agent_id` naming a Brain agent is that agent's, and
the rest land in the import's scope (the agent's own store by default). `mem0_plan` says where
each memory would land before anything is written (the command's `--dry-run`).

`mem0_parse` checks the whole file first and names the first bad line or item (nothing is
written then); `mem0_import` checks every memory before it writes the first, then writes them all
in one transaction (200 memories to a statement batch), and skips items the agent already has
(by that record source), so a re-run imports nothing twice."""

import datetime
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from knowledge import access, names
from knowledge.audit.services import audit_record
from knowledge.errors import Invalid
from knowledge.memories.rows import memory_rows_move
from knowledge.models import Agent, Memory, MemorySource, Person
from knowledge.principal import Principal
from knowledge.principals.services import people_get_or_create
from knowledge.web import error_text
from memory.lifecycle.activation_hooks import IMPORT
from memory.lifecycle.bulk import CHUNK, ItemRefused, memory_write_many

SOURCE_PREFIX = "mem0:"
TIER = "semantic"  # what a Mem0 memory is: a fact about its person, kept until retired
CATEGORY = "mem0"
IDS = ("user_id", "agent_id", "run_id", "actor_id", "role")
KEPT = (*IDS, "metadata", "categories", "hash", "app_id", "created_at", "updated_at")
MAX_ID = 300 - len(SOURCE_PREFIX)  # a source ref holds at most 300 characters
PERSON_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")  # what a Person's name may be (a slug)


class BadFile(ValueError):
    """The file is not a Mem0 export: the message names the line or item."""


@dataclass(frozen=True)
class Mem0Memory:
    id: str
    text: str
    created_at: datetime.datetime | None
    value: dict

    @property
    def user_id(self) -> str | None:
        return self.value.get("mem0", {}).get("user_id")

    @property
    def agent_id(self) -> str | None:
        return self.value.get("mem0", {}).get("agent_id")


@dataclass
class Landing:
    """Where some memories of an import land: an owner agent's store (and the person of a
    private store, `new` when the import creates it)."""

    owner: Agent
    store: str
    person: str = ""
    new: bool = False
    memories: list = field(default_factory=list)
    already: int = 0  # imported here by an earlier run
    kept: set[int] = field(default_factory=set)  # their memories
    # Imported by an earlier run into another store of the owner (another mapping or scope):
    # store -> [(Mem0 id, memory id)], left there unless the import rescopes them here.
    elsewhere: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    @property
    def earlier(self) -> int:
        return self.already + sum(len(found) for found in self.elsewhere.values())


@dataclass
class ImportResult:
    imported: int = 0
    queued: int = 0  # of the imported, waiting for review
    skipped: int = 0  # already in Brain from an earlier run
    duplicates: int = 0  # said exactly what a live memory of the agent says: answered with it
    moved: int = 0  # memories an earlier run imported, moved to the store this mapping names
    ids: list[int] = field(default_factory=list)
    landings: list[Landing] = field(default_factory=list)


def _items(raw: str) -> list[tuple[str, object]]:
    """(where, item) pairs: "item N" in a JSON document, "line N" in JSON Lines."""
    try:
        doc = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:  # nesting past what the parser itself can follow: not an export
        raise BadFile("item 0: nests too deeply to be a Mem0 export.") from None
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(raw.splitlines(), 1) if line.strip()]
        if len(lines) < 2 or not _is_object(lines[0][1]):  # one broken document, not JSON Lines
            raise BadFile(f"line {whole.lineno}: not JSON ({whole.msg}).") from None
        items = []
        for n, line in lines:
            try:
                items.append((f"line {n}", json.loads(line, parse_constant=_no_constant)))
            except json.JSONDecodeError as exc:
                raise BadFile(f"line {n}: not JSON ({exc.msg}).") from None
            except BadFile as exc:
                raise BadFile(f"line {n}: {exc}") from None
            except RecursionError:
                raise BadFile(f"line {n}: nests too deeply to be a Mem0 memory.") from None
        return items
    if isinstance(doc, dict):
        found = next((doc[k] for k in ("results", "memories") if isinstance(doc.get(k), list)), None)
        if found is None:
            raise BadFile('item 0: expected a list of memories or {"results": [...]}.')
        doc = found
    if not isinstance(doc, list):
        raise BadFile('item 0: expected a list of memories or {"results": [...]}.')
    return [(f"item {i}", item) for i, item in enumerate(doc, 1)]


def _no_constant(name: str):
    """Python's json reads NaN and Infinity; PostgreSQL's jsonb refuses them (a 500 mid-import)."""
    raise BadFile(f"{name} is not a JSON value and cannot be stored.")


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line, parse_constant=_no_constant), dict)
    except (json.JSONDecodeError, BadFile, RecursionError):
        return False


def _time(where: str, item: dict, name: str) -> datetime.datetime | None:
    value = item.get(name)
    if value in (None, ""):
        return None
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # well formed, but no such day or hour (2025-02-30)
        parsed = None
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


def imported_where(agent: Agent, ids: list[str]) -> dict[str, tuple[int, str]]:
    """The memory and store each of these Mem0 ids already landed in, among `agent`'s memories."""
    # Two lookups by index, not one join: planned with statistics from before the agent had
    # memories, the join read all of them once per source (1.5 s for a re-run of 1,000).
    cited = list(
        MemorySource.objects.filter(kind="record", ref__in=[SOURCE_PREFIX + i for i in ids]).values_list(
            "memory_id", "ref"
        )
    )
    own = dict(
        Memory.objects.filter(pk__in={memory for memory, _ in cited}, owner=agent).values_list("pk", "store")
    )
    return {ref[len(SOURCE_PREFIX) :]: (memory, own[memory]) for memory, ref in cited if memory in own}


def mem0_plan(
    *, agent: Agent, memories: list[Mem0Memory], scope: str = "agent", mapping: dict | None = None
) -> list[Landing]:
    """Where each memory lands (nothing is written): by its `user_id` the person's private store
    of its agent (`mapping` renames user ids; a name that cannot be a person's is Invalid, saying
    to map it), by its `agent_id` that Brain agent where one exists, else `scope`. Memories an
    earlier run imported are counted where they are: `already` in the planned store, `elsewhere`
    in another (what `mem0_rescope_plan` would move)."""
    mapping = mapping or {}
    default_owner, default_store, _, _ = names.write_target(
        Principal.system("import_mem0"), scope=scope, agent=agent.name
    )
    agents = {a.name: a for a in Agent.objects.filter(name__in={m.agent_id for m in memories if m.agent_id})}
    people = set(
        Person.objects.filter(
            name__in={mapping.get(m.user_id, m.user_id) for m in memories if m.user_id}
        ).values_list("name", flat=True)
    )
    # A user id that is a staff member's sign-in name would put a customer's memories in the
    # private store named after that colleague: only an explicit --map says it is meant.
    unmapped = {m.user_id.lower() for m in memories if m.user_id and m.user_id not in mapping}
    staff = {
        name.lower()
        for name in get_user_model()._default_manager.values_list("username", flat=True)
        if name.lower() in unmapped
    }
    landings: dict[tuple, Landing] = {}
    errors = {}  # one per user id, however many memories it has
    for memory in memories:
        owner = agents.get(memory.agent_id, default_owner)
        store, person = (default_store if owner == default_owner else access.SELF), ""
        if memory.user_id:
            person = mapping.get(memory.user_id, memory.user_id)
            if not PERSON_NAME.match(person):
                errors[f"user_id {memory.user_id}"] = [
                    f"{memory.user_id!r} is not a person's name; map it with --map {memory.user_id}=<person>."
                ]
                continue
            if memory.user_id not in mapping and memory.user_id.lower() in staff:
                errors[f"user_id {memory.user_id}"] = [
                    f"{memory.user_id!r} is also a staff member's sign-in name; say whose memories these "
                    f"are with --map {memory.user_id}=<person> (--map {memory.user_id}={memory.user_id} "
                    "if that person is meant)."
                ]
                continue
            store = f"private:{person}"
        landing = landings.setdefault(
            (owner.pk, store), Landing(owner, store, person, bool(person) and person not in people)
        )
        landing.memories.append(memory)
    if errors:
        raise Invalid(errors)
    # What earlier runs imported, one lookup per owner (not per store: a file of many people
    # lands in as many stores).
    owners = {landing.owner.pk: landing.owner for landing in landings.values()}
    where = {}
    for owner in owners.values():
        ids = [m.id for landing in landings.values() if landing.owner == owner for m in landing.memories]
        where[owner.pk] = imported_where(owner, ids)
    for landing in landings.values():
        done = where[landing.owner.pk]
        for memory in landing.memories:
            if memory.id not in done:
                continue
            pk, store = done[memory.id]
            if store == landing.store:
                landing.already += 1
                landing.kept.add(pk)
            else:
                landing.elsewhere.setdefault(store, []).append((memory.id, pk))
        landing.memories = [m for m in landing.memories if m.id not in done]
    return list(landings.values())


@dataclass(frozen=True)
class Move:
    owner: Agent
    source: str  # the store an earlier run put them in
    target: str  # the store this plan names
    ids: tuple[int, ...]  # the memories (and what superseded them there)
    mem0_ids: tuple[str, ...]


def mem0_rescope_plan(landings: list[Landing]) -> list[Move]:
    """What `--rescope` moves: each memory an earlier run imported into another store than the
    plan names, with the memories that superseded it in that store (so the live version moves
    too). A memory two Mem0 ids share (a repeat that added its source) that the plan would split
    between two stores is Invalid: nothing can move half of a memory."""
    targets: dict[int, set[str]] = {}
    for landing in landings:
        for pk in landing.kept:
            targets.setdefault(pk, set()).add(landing.store)
        for found in landing.elsewhere.values():
            for _, pk in found:
                targets.setdefault(pk, set()).add(landing.store)
    errors = {
        f"memory {pk}": [
            f"Mem0 ids that share this memory would land in {' and '.join(sorted(stores))}; "
            "map them to one store."
        ]
        for pk, stores in targets.items()
        if len(stores) > 1
    }
    if errors:
        raise Invalid(errors)
    moves = []
    for landing in landings:
        for store, found in sorted(landing.elsewhere.items()):
            ids = _with_successors(landing.owner, store, {pk for _, pk in found})
            moves.append(
                Move(landing.owner, store, landing.store, tuple(sorted(ids)), tuple(m for m, _ in found))
            )
    return moves


def mem0_import(
    *,
    agent: Agent,
    memories: list[Mem0Memory],
    scope: str = "agent",
    mapping: dict | None = None,
    rescope: bool = False,
    actor: Principal | None = None,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = CHUNK,
) -> ImportResult:
    """Write each memory not imported yet where mem0_plan lands it, through the normal write path
    batched (memory_write_many, route `import`: the same checks, duplicate rule, activation and
    audit event per memory; an untrusted agent's memories wait for review), `chunk` memories per
    batch. `actor` is who imports (an admin; the command's system principal): the memories are
    authored by it, their Mem0 origin kept as their record source. The whole file is one
    transaction: a memory refused in any store raises Invalid naming its Mem0 id, and nothing is
    written, the people the plan creates included. With `rescope`, what earlier runs imported
    into other stores moves to the stores this plan names (mem0_rescope), in the same
    transaction; without it, it stays where it is (the landings say where)."""
    actor = actor or Principal.system("import_mem0")
    landings = mem0_plan(agent=agent, memories=memories, scope=scope, mapping=mapping)
    moves = mem0_rescope_plan(landings) if rescope else []
    result = ImportResult(landings=landings, skipped=sum(landing.earlier for landing in landings))
    total, done = len(memories), result.skipped
    # One transaction for the whole file, and one batch per owner across all its stores: a file
    # of many people lands in as many stores, and a commit, or a batch of statements, per store
    # cost more than the writes (docs/PERFORMANCE.md); it also makes the import all or nothing.
    with transaction.atomic():
        people_get_or_create(
            actor=actor,
            names=[
                landing.person
                for landing in landings
                if landing.new and (landing.memories or (rescope and landing.elsewhere))
            ],
        )
        result.moved = mem0_rescope(actor=actor, moves=moves)
        by_owner: dict[int, list[tuple[Landing, Mem0Memory]]] = {}
        for landing in landings:
            by_owner.setdefault(landing.owner.pk, []).extend((landing, m) for m in landing.memories)
        for batch in filter(None, by_owner.values()):
            start = done
            try:
                rows = memory_write_many(
                    actor=actor,
                    owner=batch[0][0].owner,
                    store=access.SELF,  # every item names its own store
                    items=[{**_item(m), "store": landing.store} for landing, m in batch],
                    route=IMPORT,
                    chunk=chunk,
                    progress=progress and (lambda n, _, start=start: progress(start + n, total)),
                )
            except ItemRefused as exc:
                bad = batch[exc.index][1]
                raise Invalid({f"{SOURCE_PREFIX}{bad.id}": [error_text(exc.error, fields=True)]}) from None
            done += len(batch)
            for row in rows:
                if getattr(row, "duplicate_of", None):
                    result.duplicates += 1
                    continue
                result.imported += 1
                result.queued += row.status == Memory.QUEUED
                result.ids.append(row.pk)
    if progress and done == result.skipped:
        progress(total, total)
    return result


def _with_successors(owner: Agent, store: str, ids: set[int]) -> set[int]:
    """`ids` and, in `store`, the memories that superseded them, and theirs (the live version of
    an imported memory the agent revised later)."""
    found, frontier = set(ids), set(ids)
    while frontier:
        frontier = (
            set(
                Memory.objects.filter(
                    pk__in=Memory.objects.filter(pk__in=frontier).values("superseded_by"),
                    owner=owner,
                    store=store,
                ).values_list("pk", flat=True)
            )
            - found
        )
        found |= frontier
    return found


def mem0_rescope(*, actor: Principal, moves: list[Move]) -> int:
    """Carry out `moves` (mem0_rescope_plan's), inside the caller's transaction: each group of
    memories goes to its new store as it is (status, versions, sources unchanged) if `actor` may
    write there, with one
    `memory.rescoped` event naming the memories, both stores and the Mem0 ids. Returns how many
    memories moved."""
    now = timezone.now()
    moved = 0
    for move in moves:
        access.check_write(actor, owner=move.owner, store=move.target)
        moved += memory_rows_move(move.ids, store=move.target, now=now)
        audit_record(
            "memory.rescoped",
            actor=actor,
            store=move.target,
            owner=move.owner.name,
            object_type="memory",
            object_ids=move.ids,
            reason=f"import_mem0 --rescope: from {move.source} to {move.target}",
            data={"from": move.source, "to": move.target, "mem0_ids": list(move.mem0_ids)},
        )
    return moved


def _item(memory: Mem0Memory) -> dict:
    return {
        "text": memory.text,
        "value": memory.value,
        "category": CATEGORY,
        "tier": TIER,
        "valid_from": memory.created_at,
        "sources": [{"kind": "record", "ref": SOURCE_PREFIX + memory.id}],
    }
