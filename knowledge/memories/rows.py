"""Memory row operations shared by every writer of memories — the memory write service, entry
blocks, skill lessons, consolidation, Dreaming, the distiller (through the write service). They
keep the version history and the content hash right, and they are the only code that builds a
memory row or assigns its `status` (tests/test_architecture.py checks it); callers decide the
state (activation decides whether a new row goes into force) and write the audit event in the
same transaction."""

import datetime

from django.db import connection
from django.utils import timezone

from knowledge.errors import Invalid
from knowledge.limits import MAX_MEMORY_TEXT, json_scan, json_size_error
from knowledge.memories.fingerprints import source_rows, source_states
from knowledge.memories.guard import memory_rows_guard, writes_memory_rows
from knowledge.models import Memory, MemorySource, MemoryVersion
from knowledge.rowsql import insert_many, insert_with_children, update_fields


def memory_content_errors(*, text: str, key: str = "", value=None) -> dict:
    """The one limit on what a memory holds, on every route (API, MCP, imports, the distiller,
    Dreaming, merges, blocks): text at most MAX_MEMORY_TEXT characters, a value at most
    MAX_JSON_VALUE_BYTES as JSON and MAX_JSON_DEPTH deep, and no NUL character anywhere
    (PostgreSQL cannot store one). So no single row can take a worker's memory with it. Field
    errors, empty when it holds."""
    errors = {}
    if len(text or "") > MAX_MEMORY_TEXT:
        errors["text"] = [f"Is {len(text):,} characters; at most {MAX_MEMORY_TEXT:,} are stored."]
    elif "\x00" in (text or ""):
        errors["text"] = ["Holds a NUL character, which cannot be stored."]
    if "\x00" in (key or ""):
        errors["key"] = ["Holds a NUL character, which cannot be stored."]
    if value is not None:
        problem = json_size_error(value)
        if problem is None and json_scan(value)[1]:
            problem = "Holds a NUL character, which cannot be stored."
        if problem:
            errors["value"] = [problem]
    return errors


def memory_row_new(
    *,
    owner,
    store: str,
    text: str,
    author_kind: str,
    author_name: str,
    status: str = Memory.QUEUED,
    **fields,
) -> Memory:
    """An unsaved memory at version 1 with its content hash, the entrance
    (`activation.memory_rows_activate`) stores it. Content past the one limit is Invalid."""
    key, value = fields.get("key", ""), fields.get("value")
    errors = memory_content_errors(text=text, key=key, value=value)
    if errors:
        raise Invalid(errors)
    return Memory(
        owner=owner,
        store=store,
        text=text,
        status=status,
        author_kind=author_kind,
        author_name=author_name,
        content_hash=Memory.hash_content(text, key, value),
        version=1,
        **fields,
    )


@writes_memory_rows
def memory_rows_insert(rows: list[tuple[Memory, list[dict], str]]) -> None:
    """Insert new (unsaved) memories — (memory, sources, first version's reason) triples — with
    their first MemoryVersions and their source rows, in three statements (the rows, their
    versions, their sources) with the sources' states looked up once for all. Sets each
    memory's pk, in order. Called by the one entrance, `activation.memory_rows_activate`."""
    assert connection.in_atomic_block, "memory_rows_insert must run inside transaction.atomic()"
    if not rows:
        return
    if len(rows) == 1:  # one write, the common case: one statement (rows, version, sources)
        memory, sources, reason = rows[0]
        version = _first_version(memory, reason)
        insert_with_children(memory, ("memory", [version]), ("memory", source_rows(memory, sources)))
        return
    memories = [memory for memory, _, _ in rows]
    insert_many(memories)
    insert_many([_first_version(memory, reason) for memory, _, reason in rows])
    states = source_states([source for _, sources, _ in rows for source in sources])
    insert_many([row for memory, sources, _ in rows for row in source_rows(memory, sources, states)])


def _first_version(memory: Memory, reason: str) -> MemoryVersion:
    return MemoryVersion(
        memory=memory,
        version=1,
        text=memory.text,
        key=memory.key,
        value=memory.value,
        content_hash=memory.content_hash,
        author_kind=memory.author_kind,
        author_name=memory.author_name,
        reason=reason,
    )


@writes_memory_rows
def memory_row_revise(
    *, memory: Memory, text: str, author_kind: str, author_name: str, reason: str = "", key=None, value=...
) -> Memory:
    """Give a (row-locked) memory a new text: version + 1, new content hash, a new
    MemoryVersion. The old text stays in the history. Returns the memory, saved."""
    assert connection.in_atomic_block, "memory_row_revise must run inside transaction.atomic()"
    errors = memory_content_errors(
        text=text, key=memory.key if key is None else key, value=memory.value if value is ... else value
    )
    if errors:
        raise Invalid(errors)
    if key is not None:
        memory.key = key
    if value is not ...:
        memory.value = value
    memory.text = text
    memory.version += 1
    memory.content_hash = Memory.hash_content(text, memory.key, memory.value)
    memory.author_kind, memory.author_name = author_kind, author_name
    # A new text needs a new vector; the embedding backlog picks it up.
    memory.embedding, memory.embedding_model = None, ""
    memory.save(
        update_fields=[
            "text",
            "key",
            "value",
            "version",
            "content_hash",
            "author_kind",
            "author_name",
            "embedding",
            "embedding_model",
            "updated_at",
        ]
    )
    MemoryVersion.objects.create(
        memory=memory,
        version=memory.version,
        text=text,
        key=memory.key,
        value=memory.value,
        content_hash=memory.content_hash,
        author_kind=author_kind,
        author_name=author_name,
        reason=reason,
    )
    return memory


def memory_text_revise(
    *, actor, memory: Memory, text: str, reason: str, sources: list[dict] | None = None
) -> int:
    """THE revision of a memory's text, for every route that revises one (a person's
    `memory_revise`, an admin's `lesson_edit`, an entry's `block_correct`): a new version with
    `actor` as its author (memory_row_revise) and, given `sources`, its sources replaced. One
    "nothing changed" rule: a revision that leaves the text (and the sources, when given) as they
    are is refused (Invalid) and writes nothing. The caller has locked the row, checked its state
    and writes its audit event. Returns the version the memory had before."""
    wanted = None if sources is None else sorted([s["kind"], s["ref"]] for s in sources)
    have = None if sources is None else sorted([s.kind, s.ref] for s in memory.sources.all())
    if text == memory.text and wanted == have:
        what = "the text is" if sources is None else "the text and sources are"
        raise Invalid({"text": [f"Nothing changed: {what} the same."]})
    from_version = memory.version
    memory_row_revise(
        memory=memory, text=text, author_kind=actor.kind_label, author_name=actor.name, reason=reason
    )
    if wanted != have:
        _sources_replace(memory, sources)
    return from_version


def memory_sources_add(memory: Memory, sources) -> list[MemorySource]:
    """Add to a stored (row-locked) memory the sources it does not cite yet, each fingerprinted
    as its source is now (source_rows): a duplicate write's corroboration. Returns the rows
    added (none when it already cites them all). The caller audits them."""
    assert connection.in_atomic_block, "memory_sources_add must run inside transaction.atomic()"
    have = {(s.kind, s.ref) for s in MemorySource.objects.filter(memory=memory)}
    new = [s for s in sources if (s["kind"], str(s["ref"])) not in have]
    rows = source_rows(memory, new) if new else []
    MemorySource.objects.bulk_create(rows)
    return rows


def _sources_replace(memory: Memory, sources: list[dict]) -> None:
    wanted = {(s["kind"], s["ref"]) for s in sources}
    have = {(s.kind, s.ref): s.pk for s in MemorySource.objects.filter(memory=memory)}
    MemorySource.objects.filter(pk__in=[pk for pair, pk in have.items() if pair not in wanted]).delete()
    MemorySource.objects.bulk_create(
        [MemorySource(memory=memory, kind=k, ref=r) for k, r in sorted(wanted - set(have))]
    )


# --- state ---------------------------------------------------------------------------------


def memory_row_state(memory: Memory, *, save: bool = True, **fields) -> Memory:
    """Set a memory row's state — `status` and the fields that move with it (`queue_reason`,
    `status_reason`, `superseded_by`, validity, expiry, `stale`…) — and save exactly those
    fields (and `updated_at`) in one UPDATE. With `save=False` the fields are only set: the row
    is inserted afterwards (activation of a new row) or saved in a batch (`memory_rows_save`)."""
    for name, value in fields.items():
        setattr(memory, name, value)
    if save:
        with memory_rows_guard():
            update_fields(memory, *fields, "updated_at")
    return memory


@writes_memory_rows
def memory_rows_save(memories: list[Memory], *fields: str) -> None:
    """Save the named fields (and `updated_at`) of many rows whose state `memory_row_state(save=False)`
    set, in batched UPDATEs."""
    now = timezone.now()
    for memory in memories:
        memory.updated_at = now  # bulk_update, unlike save(), does not set it
    Memory.objects.bulk_update(memories, [*fields, "updated_at"], batch_size=500)


@writes_memory_rows
def memory_rows_state(ids, *, now: datetime.datetime, **fields) -> int:
    """The set-wise form of memory_row_state: one UPDATE of the rows `ids`. Returns the count."""
    return Memory.objects.filter(pk__in=ids).update(**fields, updated_at=now)


def memory_rows_move(ids, *, store: str, now: datetime.datetime) -> int:
    """Move the rows `ids` to `store` as they are (an import's earlier memories, rescoped to the
    stores a new mapping names): one UPDATE. The caller checks the store and audits the move."""
    return Memory.objects.filter(pk__in=ids).update(store=store, updated_at=now)
