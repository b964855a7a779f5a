"""Loading the rows behind candidates — only for those that may be shown (the routes already
returned what ranking needs).

Memories and messages, the kinds nearly every search shows, are read with plain SQL built from
the models (knowledge.rowsql): compiling the ORM queries and building the related objects cost
more CPU than reading the rows. Columns never shown (vectors, tsvectors, an entry's search
columns) stay deferred."""

from django.db import connection

from knowledge import rowsql
from knowledge.models import Agent, Entry, Episode, Memory, Message
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE

# An entry's search columns (tsvector, trigram codes, block authors) are never shown; reading
# and parsing them for every hydrated row cost more than the rest of the row.
ENTRY_INDEX_FIELDS = ("head_vector", "name_trigrams", "block_authors")
MEMORY_DEFER = ("embedding", "search", "value", "status_reason", "stale_reason")
MESSAGE_DEFER = ("search",)


def _memories(ids: list[int]) -> list[Memory]:
    """Memories with their owner and (for blocks) their entry, as select_related would give."""
    memory_sql = rowsql.columns(Memory, "t", MEMORY_DEFER)
    agent_sql = rowsql.columns(Agent, "a")
    entry_sql = rowsql.columns(Entry, "e", ENTRY_INDEX_FIELDS)
    n_memory, n_agent = rowsql.width(Memory, MEMORY_DEFER), rowsql.width(Agent)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {memory_sql}, {agent_sql}, {entry_sql} FROM knowledge_memory t "
            f"JOIN knowledge_agent a ON a.id = t.owner_id LEFT JOIN knowledge_entry e ON e.id = t.entry_id "
            f"WHERE t.id = ANY(%s)",
            [ids],
        )
        rows = cursor.fetchall()
    out = []
    for row in rows:
        memory = rowsql.from_row(Memory, row[:n_memory], MEMORY_DEFER)
        memory.owner = rowsql.from_row(Agent, row[n_memory : n_memory + n_agent])
        if memory.entry_id is not None:
            memory.entry = rowsql.from_row(Entry, row[n_memory + n_agent :], ENTRY_INDEX_FIELDS)
        out.append(memory)
    return out


def _messages(ids: list[int]) -> list[Message]:
    return rowsql.select(Message, "t.id = ANY(%s)", [ids], defer=MESSAGE_DEFER)


LOADERS = {
    MEMORY: _memories,
    MESSAGE: _messages,
    ENTRY: lambda ids: Entry.objects.select_related("owner").defer(*ENTRY_INDEX_FIELDS).filter(pk__in=ids),
    EPISODE: lambda ids: Episode.objects.defer("embedding").filter(pk__in=ids),
}


def hydrate(candidates) -> None:
    """Attach each candidate's row (one query per kind, only for those not loaded yet). A row
    deleted meanwhile leaves `obj` None; callers skip such candidates."""
    wanted: dict[str, list[int]] = {}
    for c in candidates:
        if c.obj is None:
            wanted.setdefault(c.kind, []).append(c.id)
    rows = {}
    for kind, ids in wanted.items():
        for row in LOADERS[kind](ids):
            rows[(kind, row.pk)] = row
    for c in candidates:
        if c.obj is None:
            c.obj = rows.get(c.key)
