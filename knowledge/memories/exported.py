"""Memory rows put back as they were, deciding nothing: a memory whose creation an audit restore
brings back (`memory_row_recreate`) and a memory an agent import brings in exactly as its export
recorded it (`memory_row_exported`). These are the undo and restore paths beside the one
activation: they return a state the data held, with its recorded history and provenance."""

from knowledge.memories.guard import writes_memory_rows
from knowledge.models import Memory, MemorySource, MemoryVersion
from knowledge.rowsql import insert_with_children


@writes_memory_rows
def memory_row_recreate(*, pk: int, fields: dict, author_kind: str, author_name: str, reason: str) -> Memory:
    """Insert memory `pk` again with exactly `fields` (a restore of its audited snapshot) and a
    version recording who brought it back. The caller restores its sources and audits it."""
    memory = Memory(pk=pk, **fields)
    memory.save(force_insert=True)
    MemoryVersion.objects.create(
        memory=memory,
        version=memory.version,
        text=memory.text,
        key=memory.key,
        value=memory.value,
        content_hash=memory.content_hash,
        author_kind=author_kind,
        author_name=author_name,
        reason=reason,
    )
    return memory


@writes_memory_rows
def memory_row_exported(
    *, fields: dict, versions: list[dict], sources: list[dict], created_at=None
) -> Memory:
    """Insert one exported memory — `fields` as the export recorded them, its whole version
    history (`versions`: MemoryVersion fields) and its sources (MemorySource fields, fingerprints
    and snapshots kept: the provenance check compares against them) — in one statement."""
    memory = Memory(**fields)
    insert_with_children(
        memory,
        ("memory", [MemoryVersion(memory=memory, **v) for v in versions]),
        ("memory", [MemorySource(memory=memory, **s) for s in sources]),
    )
    if created_at is not None:
        Memory.objects.filter(pk=memory.pk).update(created_at=created_at)
        memory.created_at = created_at
    return memory
