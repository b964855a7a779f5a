"""Low-level memory row operations shared by every writer of memories — the memory API
(memory.lifecycle.services), entry blocks (knowledge entries), the distiller and Dreaming. They keep the
version history and the content hash right; callers decide status and write the audit event
in the same transaction.

Activation: every new memory row goes into force (or waits in the review queue) through the
one activation function, which the memory app registers here at start-up
(`activation_register`), so base-layer writers such as entry blocks reach it without importing
upwards. The base layer owns the entry-block route rule (`entry_block_goes_active`); the
activation function extends it with strict anti-drift, the rule on retiring another agent's
memory and the eval gate."""

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from knowledge.fingerprints import source_rows, source_states
from knowledge.models import Memory, MemoryVersion
from knowledge.rowsql import insert_many, insert_with_children


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
    """An unsaved memory at version 1 with its content hash; `memory_row_insert` stores it."""
    key, value = fields.get("key", ""), fields.get("value")
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


def memory_row_insert(memory: Memory, *, sources=(), reason: str = "") -> Memory:
    """Insert a new (unsaved) memory with its first MemoryVersion and its source rows, in one
    statement (every writer of memories passes here). `sources` is an iterable of {"kind",
    "ref", optional "state"} dicts; each is recorded with its fingerprint (knowledge.fingerprints)."""
    assert connection.in_atomic_block, "memory_row_insert must run inside transaction.atomic()"
    version = _first_version(memory, reason)
    insert_with_children(memory, ("memory", [version]), ("memory", source_rows(memory, sources)))
    return memory


def memory_rows_insert(rows: list[tuple[Memory, list[dict]]], *, reason: str = "") -> None:
    """memory_row_insert for many new memories at once — (memory, sources) pairs — in three
    statements (the rows, their first versions, their source rows) with the sources' states
    looked up once for all. Sets each memory's pk, in order."""
    assert connection.in_atomic_block, "memory_rows_insert must run inside transaction.atomic()"
    if not rows:
        return
    memories = [memory for memory, _ in rows]
    insert_many(memories)
    insert_many([_first_version(memory, reason) for memory in memories])
    states = source_states([source for _, sources in rows for source in sources])
    insert_many([row for memory, sources in rows for row in source_rows(memory, sources, states)])


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


def memory_row_create(*, sources=(), reason: str = "", **fields) -> Memory:
    """Build and insert a memory (memory_row_new + memory_row_insert)."""
    return memory_row_insert(memory_row_new(**fields), sources=sources, reason=reason)


def memory_row_revise(
    *, memory: Memory, text: str, author_kind: str, author_name: str, reason: str = "", key=None, value=...
) -> Memory:
    """Give a (row-locked) memory a new text: version + 1, new content hash, a new
    MemoryVersion. The old text stays in the history. Returns the memory, saved."""
    assert connection.in_atomic_block, "memory_row_revise must run inside transaction.atomic()"
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


# --- activation --------------------------------------------------------------------------------

ENTRY_BLOCK = "entry_block"  # the activation route of an entry's body block

_activate: Callable[..., str] | None = None


def entry_block_goes_active(actor) -> bool:
    """The route rule for entry blocks: people (console users, person tokens) and trusted agents
    write blocks that go into force; an untrusted agent's blocks wait in the review queue."""
    return not (actor.kind == "agent" and not actor.agent.trusted)


def activation_register(activate: Callable[..., str]) -> None:
    """Set the one activation function (called once by the memory app when it is ready)."""
    global _activate
    _activate = activate


def memory_row_activate(*, actor, memory: Memory, route: str, sources=()) -> Memory:
    """Store a new, queued memory row (with its first version and sources) through the one
    activation function: it comes back active or queued, as the route and the activation checks
    decide. Runs inside the caller's transaction."""
    if _activate is None:
        raise ImproperlyConfigured("No activation function is registered (is the memory app installed?).")
    _activate(
        actor=actor, memory=memory, route=route, insert=lambda new: memory_row_insert(new, sources=sources)
    )
    return memory


def memory_row_activate_stored(*, actor, memory: Memory, route: str) -> Memory:
    """Pass a stored, queued, row-locked memory through the one activation function (a queued
    entry block that a person or trusted agent corrects goes into force this way, with every
    activation check). Runs inside the caller's transaction."""
    if _activate is None:
        raise ImproperlyConfigured("No activation function is registered (is the memory app installed?).")
    _activate(actor=actor, memory=memory, route=route)
    return memory
