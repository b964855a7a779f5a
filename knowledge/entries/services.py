"""Every write to knowledge entries, their body blocks, their relations and curation guides.

Each service is one transaction that checks write access through `knowledge.access`, changes
the rows and writes its audit event with revisions (before/after snapshots), so every change
can be previewed and restored from the Audit tab. Body blocks are `Memory` rows with `entry` and
`position` set; they are created and corrected with the shared memory row operations, so they
keep versions, authors and content hashes like any memory."""

import datetime

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record, snapshot
from knowledge.embeddings.kick import request_embedding_run

# Callers read the limits as `services.MAX_TEXT` (serializers, material learning).
from knowledge.entries.cleaning import MAX_BLOCKS_PER_WRITE as MAX_BLOCKS_PER_WRITE
from knowledge.entries.cleaning import MAX_TEXT as MAX_TEXT
from knowledge.entries.cleaning import (
    clean_aliases,
    clean_blocks,
    clean_date,
    clean_properties,
    clean_sources,
    clean_text,
    clean_type,
)
from knowledge.errors import Conflict, Invalid, NotFound
from knowledge.memories.activation import (
    ENTRY_BLOCK,
    entry_block_goes_active,
    memory_row_activate,
    memory_row_activate_stored,
)
from knowledge.memories.rows import memory_row_new, memory_row_state, memory_text_revise
from knowledge.models import Agent, Entry, EntryRelation, Memory
from knowledge.principal import Principal

BODY_STATUSES = (Memory.ACTIVE, Memory.QUEUED)
REMOVED_STATUS = Memory.INVALIDATED


# --- snapshots (what restore puts back) ---------------------------------------------------------


def entry_snapshot(entry: Entry) -> dict:
    return snapshot(entry, exclude=Entry.DERIVED_FIELDS)


def block_snapshot(memory: Memory) -> dict:
    data = snapshot(memory)
    data["sources"] = sorted([s.kind, s.ref] for s in memory.sources.all())
    return data


def relation_snapshot(relation: EntryRelation) -> dict:
    return snapshot(relation)


# --- helpers -----------------------------------------------------------------------------------


def _author(actor: Principal) -> dict:
    return {"author_kind": actor.kind_label, "author_name": actor.name}


def _lock_entry(actor: Principal, entry_id: int) -> Entry:
    """The live entry, row-locked, after checking the actor may read and write it."""
    entry = (
        Entry.objects.select_for_update(of=("self",))
        .filter(access.readable_q(actor), pk=entry_id)
        .select_related("owner")
        .first()
    )
    if entry is None:
        raise NotFound("No such entry.")
    access.check_write(actor, owner=entry.owner, store=entry.store)
    return entry


def _lock_block(entry: Entry, block_id: int) -> Memory:
    block = (
        Memory.objects.select_for_update()
        .filter(pk=block_id, entry=entry, status__in=BODY_STATUSES)
        .prefetch_related("sources")
        .first()
    )
    if block is None:
        raise NotFound("No such block in this entry.")
    return block


def _body(entry: Entry, *, lock: bool = False):
    qs = Memory.objects.filter(entry=entry, status__in=BODY_STATUSES).order_by("position", "id")
    if lock:
        qs = qs.select_for_update()
    return list(qs.prefetch_related("sources"))


def _audit(action, *, actor, entry, revisions, reason="", counts=None, data=None):
    """The audit event of an entry change; the objects it names are those its revisions hold."""
    types = {r[0] for r in revisions}
    single = len(types) == 1 and len(revisions) <= 50
    return audit_record(
        action,
        actor=actor,
        store=entry.store,
        owner=entry.owner.name,
        object_type=types.pop() if single else "entry",
        object_ids=[r[1] for r in revisions] if single else [entry.pk],
        reason=reason,
        counts=counts,
        data={"entry": entry.pk, **(data or {})},
        revisions=revisions,
    )


def _touch(entry: Entry, actor: Principal) -> None:
    """Record who last changed the entry; the database trigger refreshes its search columns."""
    entry.author_kind, entry.author_name = actor.kind_label, actor.name
    entry.save(update_fields=["author_kind", "author_name", "updated_at"])


def _new_block(actor, entry, *, text, sources, position) -> Memory:
    """A new body block, through the one activation function (route entry_block): people's and
    trusted agents' blocks go into force unless an activation check holds them; an untrusted
    agent's wait in the review queue, exactly like its memories."""
    block = memory_row_new(
        owner=entry.owner,
        store=entry.store,
        text=text,
        status=Memory.QUEUED,
        entry=entry,
        position=position,
        **_author(actor),
    )
    return memory_row_activate(actor=actor, memory=block, route=ENTRY_BLOCK, sources=sources)


# --- entries ---------------------------------------------------------------------------------------


def entry_create(
    *,
    actor: Principal,
    owner: Agent,
    store: str,
    name: str,
    type: str = "",
    aliases=(),
    summary: str = "",
    properties=None,
    blocks=(),
) -> Entry:
    """Create an entry with its body blocks (in the given order) in one audited transaction."""
    fields = {
        "name": clean_text(name, "name", max_length=300),
        "type": clean_type(type),
        "aliases": clean_aliases(list(aliases or [])),
        "summary": clean_text(summary, "summary", required=False),
        "properties": clean_properties(properties),
    }
    blocks = clean_blocks(list(blocks or []))
    access.check_write(actor, owner=owner, store=store)
    access.check_sources(actor, [s for b in blocks for s in b["sources"]], field="blocks")
    with transaction.atomic():
        entry = Entry.objects.create(owner=owner, store=store, **fields, **_author(actor))
        created = [
            _new_block(actor, entry, text=b["text"], sources=b["sources"], position=i)
            for i, b in enumerate(blocks)
        ]
        revisions = [("entry", entry.pk, None, entry_snapshot(entry))]
        revisions += [("memory", b.pk, None, block_snapshot(b)) for b in created]
        event = _audit(
            "entry.created", actor=actor, entry=entry, revisions=revisions, counts={"blocks": len(created)}
        )
    entry.created_blocks, entry.audit_event = created, event
    return entry


ENTRY_FIELDS = ("name", "type", "aliases", "summary", "properties")


def entry_blocks_reembed(entry: Entry) -> None:
    """A renamed entry's blocks go back to the embedding backlog: they are embedded as "entry
    name: text" (knowledge.embeddings.backlog), so their vectors still name the old entry."""
    Memory.objects.filter(entry=entry).update(embedding=None, embedding_model="")
    transaction.on_commit(request_embedding_run)


def entry_update(*, actor: Principal, entry_id: int, expected_version: int | None = None, **changes) -> Entry:
    """Change an entry's metadata (any of name, type, aliases, summary, properties). With
    `expected_version`, a concurrent edit makes this one fail with 409 instead of overwriting."""
    unknown = set(changes) - set(ENTRY_FIELDS)
    if unknown:
        raise Invalid({f: ["Unknown field."] for f in sorted(unknown)})
    cleaners = {
        "name": lambda v: clean_text(v, "name", max_length=300),
        "type": clean_type,
        "aliases": clean_aliases,
        "summary": lambda v: clean_text(v, "summary", required=False),
        "properties": clean_properties,
    }
    cleaned = {field: cleaners[field](value) for field, value in changes.items()}
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        if expected_version is not None and expected_version != entry.version:
            raise Conflict(
                f"Entry {entry.pk} was changed by {entry.author_name or 'someone'} since you opened it "
                f"(version {entry.version}, you had {expected_version}). Reload and try again."
            )
        before = entry_snapshot(entry)
        changed = [f for f, v in cleaned.items() if getattr(entry, f) != v]
        if not changed:
            return entry
        for field in changed:
            setattr(entry, field, cleaned[field])
        entry.version += 1
        entry.author_kind, entry.author_name = actor.kind_label, actor.name
        entry.save()
        if "name" in changed:
            entry_blocks_reembed(entry)
        event = _audit(
            "entry.updated",
            actor=actor,
            entry=entry,
            revisions=[("entry", entry.pk, before, entry_snapshot(entry))],
            data={"fields": changed, "version": entry.version},
        )
    entry.audit_event = event
    return entry


def entry_delete(*, actor: Principal, entry_id: int, reason: str = "") -> Entry:
    """Delete an entry: the row is kept (marked deleted) and its body blocks are retired, so the
    delete record restores the entry, its blocks and its relations exactly."""
    reason = clean_text(reason, "reason", max_length=2000, required=False)
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        before = entry_snapshot(entry)
        blocks = _body(entry, lock=True)
        block_revisions = []
        for block in blocks:
            block_before = block_snapshot(block)
            memory_row_state(block, status=REMOVED_STATUS, status_reason="entry deleted")
            block_revisions.append(("memory", block.pk, block_before, block_snapshot(block)))
        entry.deleted_at = timezone.now()
        entry.author_kind, entry.author_name = actor.kind_label, actor.name
        entry.save(update_fields=["deleted_at", "author_kind", "author_name", "updated_at"])
        revisions = [("entry", entry.pk, before, entry_snapshot(entry)), *block_revisions]
        relations = (
            EntryRelation.objects.filter(source=entry).count()
            + EntryRelation.objects.filter(target=entry).exclude(source=entry).count()
        )
        event = _audit(
            "entry.deleted",
            actor=actor,
            entry=entry,
            revisions=revisions,
            reason=reason,
            counts={"blocks": len(blocks), "relations": relations},
        )
    entry.audit_event = event
    return entry


# --- blocks ----------------------------------------------------------------------------------------


def block_add(
    *,
    actor: Principal,
    entry_id: int,
    text: str,
    sources=(),
    position: int | None = None,
    route: str = ENTRY_BLOCK,
    fields: dict | None = None,
    audit_data: dict | None = None,
) -> Memory:
    """Add a body block at the end (or at `position`, shifting the blocks after it). A writer
    with its own activation route (Dreaming) names it: the block passes the one activation
    function by that route, gets that writer's memory `fields` (category, validity, author) and
    is audited as that route's `memory.written` (with `audit_data`), the event its other writes
    carry; the entry's own route is audited as `block.added`."""
    text = clean_text(text, "text")
    sources = clean_sources(list(sources or []))
    access.check_sources(actor, sources)
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        body = _body(entry, lock=True)
        revisions = []
        if position is None or position >= len(body):
            top = Memory.objects.filter(entry=entry, status__in=BODY_STATUSES).aggregate(m=Max("position"))[
                "m"
            ]
            position = 0 if top is None else top + 1
        else:
            position = max(0, int(position))
            for i, block in enumerate(body[position:], start=position + 1):
                if block.position != i:
                    before = block_snapshot(block)
                    block.position = i
                    block.save(update_fields=["position", "updated_at"])
                    revisions.append(("memory", block.pk, before, block_snapshot(block)))
        block = memory_row_new(
            owner=entry.owner,
            store=entry.store,
            text=text,
            status=Memory.QUEUED,
            entry=entry,
            position=position,
            **{**_author(actor), **(fields or {})},
        )
        memory_row_activate(actor=actor, memory=block, route=route, sources=sources)
        revisions.insert(0, ("memory", block.pk, None, block_snapshot(block)))
        _touch(entry, actor)
        own = route == ENTRY_BLOCK
        event = _audit(
            "block.added" if own else "memory.written",
            actor=actor,
            entry=entry,
            revisions=revisions,
            data={
                "block": block.pk,
                "status": block.status,
                "content_hash": block.content_hash,
                **({} if own else {"route": route}),
                **(audit_data or {}),
            },
        )
    block.audit_event = event
    return block


def block_correct(
    *,
    actor: Principal,
    entry_id: int,
    block_id: int,
    text: str,
    reason: str,
    sources=None,
    expected_version: int | None = None,
) -> Memory:
    """Correct a block's text (and optionally replace its sources). A reason is required; the
    block gets a new version and the actor as its latest author; the old text stays in its
    history. An untrusted agent's correction goes back to the review queue."""
    reason = (reason or "").strip() if isinstance(reason, str | type(None)) else ""
    if not reason:
        raise Invalid({"reason": ["A reason is required to correct a block."]})
    reason = clean_text(reason, "reason", max_length=2000)
    text = clean_text(text, "text")
    new_sources = None if sources is None else clean_sources(list(sources))
    access.check_sources(actor, new_sources)
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        block = _lock_block(entry, block_id)
        if expected_version is not None and expected_version != block.version:
            raise Conflict(
                f"Block {block.pk} was corrected by {block.author_name} since you opened it "
                f"(version {block.version}, you had {expected_version}). Reload and try again."
            )
        before = block_snapshot(block)
        memory_text_revise(actor=actor, memory=block, text=text, reason=reason, sources=new_sources)
        if entry_block_goes_active(actor):
            if block.status == Memory.QUEUED:
                # a queued block goes into force only through the one activation function
                memory_row_activate_stored(actor=actor, memory=block, route=ENTRY_BLOCK)
        elif block.status != Memory.QUEUED:
            memory_row_state(
                block,
                status=Memory.QUEUED,
                queue_reason="requeued",
                status_reason=f"corrected by {actor.kind_label} {actor.name}; awaiting review",
            )
        block = Memory.objects.prefetch_related("sources").get(pk=block.pk)
        _touch(entry, actor)
        event = _audit(
            "block.corrected",
            actor=actor,
            entry=entry,
            reason=reason,
            revisions=[("memory", block.pk, before, block_snapshot(block))],
            data={"block": block.pk, "version": block.version, "content_hash": block.content_hash},
        )
    block.audit_event = event
    return block


def block_move(*, actor: Principal, entry_id: int, block_id: int, position: int) -> Memory:
    """Move a block to `position` (0-based) in the body; the body is renumbered 0..n-1."""
    try:
        position = int(position)
    except (TypeError, ValueError):
        raise Invalid({"position": ["A whole number."]})
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        body = _body(entry, lock=True)
        moving = next((b for b in body if b.pk == int(block_id)), None)
        if moving is None:
            raise NotFound("No such block in this entry.")
        body.remove(moving)
        body.insert(max(0, min(position, len(body))), moving)
        revisions = []
        for i, block in enumerate(body):
            if block.position != i:
                before = block_snapshot(block)
                block.position = i
                block.save(update_fields=["position", "updated_at"])
                revisions.append(("memory", block.pk, before, block_snapshot(block)))
        if revisions:
            _touch(entry, actor)
            event = _audit(
                "block.moved",
                actor=actor,
                entry=entry,
                revisions=revisions,
                data={"block": moving.pk, "position": moving.position},
            )
            moving.audit_event = event
    return moving


def block_remove(*, actor: Principal, entry_id: int, block_id: int, reason: str = "") -> Memory:
    """Take a block out of the body. The memory row and its history stay (retired), so the
    removal can be restored."""
    reason = clean_text(reason, "reason", max_length=2000, required=False)
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        block = _lock_block(entry, block_id)
        before = block_snapshot(block)
        memory_row_state(
            block,
            status=REMOVED_STATUS,
            status_reason=f"removed from entry {entry.pk} by {actor.kind_label} {actor.name}"
            + (f": {reason}" if reason else ""),
        )
        _touch(entry, actor)
        event = _audit(
            "block.removed",
            actor=actor,
            entry=entry,
            reason=reason,
            revisions=[("memory", block.pk, before, block_snapshot(block))],
            data={"block": block.pk},
        )
    block.audit_event = event
    return block


def block_close(*, actor: Principal, entry_id: int, block_id: int, valid_to, reason: str) -> Memory:
    """End a block's validity at `valid_to` (a fact that changed): the block stays in the body
    with its text, sources and history, and reads as "(until …)" from then on. Time, not
    overwrite: the new fact is written as a block of its own. A reason is required."""
    reason = clean_text(reason, "reason", max_length=2000)
    if not isinstance(valid_to, datetime.datetime):
        raise Invalid({"valid_to": ["A date and time."]})
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        block = _lock_block(entry, block_id)
        if block.valid_to is not None:
            raise Invalid({"valid_to": [f"Block {block.pk} is already closed."]})
        if block.valid_from is not None and valid_to < block.valid_from:
            raise Invalid({"valid_to": ["Must not be before the block's valid_from."]})
        before = block_snapshot(block)
        block.valid_to = valid_to
        block.save(update_fields=["valid_to", "updated_at"])
        _touch(entry, actor)
        event = _audit(
            "block.closed",
            actor=actor,
            entry=entry,
            reason=reason,
            revisions=[("memory", block.pk, before, block_snapshot(block))],
            data={"block": block.pk, "valid_to": valid_to.isoformat()},
        )
    block.audit_event = event
    return block


# --- relations -------------------------------------------------------------------------------------


def relation_target_allowed(source: Entry, target: Entry) -> bool:
    """A relation may not reveal a narrower store to the readers of a wider one: the target is
    in the shared store, or in the source's own store (and, for owner-only stores, owner)."""
    if target.store == access.SHARED:
        return True
    if target.store != source.store:
        return False
    return target.owner_id == source.owner_id or not target.store.startswith(access.OWNER_ONLY_PREFIXES)


def relation_add(
    *,
    actor: Principal,
    entry_id: int,
    predicate: str,
    target_id: int,
    sources,
    valid_from=None,
    valid_to=None,
) -> EntryRelation:
    """Relate an entry to another. Only a relation a source states is stored: without at least
    one evidence source it is refused."""
    predicate = " ".join(clean_text(predicate, "predicate", max_length=100).split()).lower()
    sources = clean_sources(sources, required=True)
    access.check_sources(actor, sources)
    valid_from, valid_to = clean_date(valid_from, "valid_from"), clean_date(valid_to, "valid_to")
    if valid_from and valid_to and valid_to < valid_from:
        raise Invalid({"valid_to": ["Must not be before valid_from."]})
    try:
        target_id = int(target_id)
    except (TypeError, ValueError):
        raise Invalid({"target": ["An entry id."]})
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        target = Entry.objects.filter(access.readable_q(actor), pk=target_id).first()
        if target is None:
            raise Invalid({"target": [f"No entry {target_id} you can read."]})
        if target.pk == entry.pk:
            raise Invalid({"target": ["An entry cannot be related to itself."]})
        if not relation_target_allowed(entry, target):
            raise Invalid(
                {"target": [f"Entry {target.pk} is in store {target.store}, narrower than {entry.store}."]}
            )
        duplicate = EntryRelation.objects.filter(
            source=entry, predicate=predicate, target=target, valid_from=valid_from, valid_to=valid_to
        ).exists()
        if duplicate:
            raise Invalid({"predicate": ["This relation already exists."]})
        relation = EntryRelation.objects.create(
            source=entry,
            predicate=predicate,
            target=target,
            sources=sources,
            valid_from=valid_from,
            valid_to=valid_to,
            **_author(actor),
        )
        _touch(entry, actor)
        event = _audit(
            "relation.added",
            actor=actor,
            entry=entry,
            revisions=[("relation", relation.pk, None, relation_snapshot(relation))],
            data={"relation": relation.pk, "target": target.pk},
        )
    relation.audit_event = event
    return relation


def relation_remove(*, actor: Principal, entry_id: int, relation_id: int, reason: str = ""):
    """Remove one of an entry's outgoing relations (restorable from its audit record)."""
    reason = clean_text(reason, "reason", max_length=2000, required=False)
    with transaction.atomic():
        entry = _lock_entry(actor, entry_id)
        relation = EntryRelation.objects.select_for_update().filter(pk=relation_id, source=entry).first()
        if relation is None:
            raise NotFound("No such relation on this entry.")
        before = relation_snapshot(relation)
        relation.delete()
        _touch(entry, actor)
        event = _audit(
            "relation.removed",
            actor=actor,
            entry=entry,
            reason=reason,
            revisions=[("relation", relation_id, before, None)],
            data={"relation": relation_id, "target": before["target_id"]},
        )
    return event
