"""Loading the rows behind candidates — only for those that may be shown (the routes already
returned what ranking needs).

Memories and messages, the kinds nearly every search shows, are read with plain SQL built from
the models (knowledge.rowsql): compiling the ORM queries and building the related objects cost
more CPU than reading the rows. Columns never shown (vectors, tsvectors, an entry's search
columns) stay deferred."""

from collections.abc import Callable

from knowledge import rowsql
from knowledge.models import Agent, Entry, Episode, Memory, Message
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE, execute_all

# An entry's search columns (tsvector, trigram codes, block authors) are never shown; reading
# and parsing them for every hydrated row cost more than the rest of the row.
ENTRY_INDEX_FIELDS = ("head_vector", "name_trigrams", "block_authors")
MEMORY_DEFER = ("embedding", "search", "value", "status_reason", "stale_reason")
MESSAGE_DEFER = ("search",)


def _memories(ids: list[int]):
    """Memories with their owner and (for blocks) their entry, as select_related would give: the
    statement, and how to build the rows it returns."""
    memory_sql = rowsql.columns(Memory, "t", MEMORY_DEFER)
    agent_sql = rowsql.columns(Agent, "a")
    entry_sql = rowsql.columns(Entry, "e", ENTRY_INDEX_FIELDS)
    n_memory, n_agent = rowsql.width(Memory, MEMORY_DEFER), rowsql.width(Agent)
    sql = (
        f"SELECT {memory_sql}, {agent_sql}, {entry_sql} FROM knowledge_memory t "
        f"JOIN knowledge_agent a ON a.id = t.owner_id LEFT JOIN knowledge_entry e ON e.id = t.entry_id "
        f"WHERE t.id = ANY(%s)"
    )

    def build(row):
        memory = rowsql.from_row(Memory, row[:n_memory], MEMORY_DEFER)
        memory.owner = rowsql.from_row(Agent, row[n_memory : n_memory + n_agent])
        if memory.entry_id is not None:
            memory.entry = rowsql.from_row(Entry, row[n_memory + n_agent :], ENTRY_INDEX_FIELDS)
        return memory

    return (sql, [ids]), build


def _entries(ids: list[int]):
    """Entries with their owner."""
    entry_sql, agent_sql = rowsql.columns(Entry, "t", ENTRY_INDEX_FIELDS), rowsql.columns(Agent, "a")
    n_entry = rowsql.width(Entry, ENTRY_INDEX_FIELDS)
    sql = f"SELECT {entry_sql}, {agent_sql} FROM knowledge_entry t JOIN knowledge_agent a ON a.id = t.owner_id WHERE t.id = ANY(%s)"

    def build(row):
        entry = rowsql.from_row(Entry, row[:n_entry], ENTRY_INDEX_FIELDS)
        entry.owner = rowsql.from_row(Agent, row[n_entry:])
        return entry

    return (sql, [ids]), build


def _plain(model, defer):
    def loader(ids: list[int]):
        sql = f"SELECT {rowsql.columns(model, 't', defer)} FROM {model._meta.db_table} t WHERE t.id = ANY(%s)"
        return (sql, [ids]), lambda row: rowsql.from_row(model, row, defer)

    return loader


LOADERS = {
    MEMORY: _memories,
    MESSAGE: _plain(Message, MESSAGE_DEFER),
    ENTRY: _entries,
    EPISODE: _plain(Episode, ("embedding",)),
}


def hydrate(candidates) -> None:
    """Attach each candidate's row (one statement per kind, all in one round trip, only for
    those not loaded yet). A row deleted meanwhile leaves `obj` None; callers skip such
    candidates."""
    statements, attach = hydration(candidates)
    if statements:
        attach(execute_all(statements))


def hydration(candidates) -> tuple[list, Callable[[list], None]]:
    """The statements `hydrate` sends (one per kind of the candidates not loaded yet), and the
    function attaching the rows they return: a caller may send them with statements of its own."""
    wanted: dict[str, list[int]] = {}
    for c in candidates:
        if c.obj is None:
            wanted.setdefault(c.kind, []).append(c.id)
    loads = [(kind, *LOADERS[kind](ids)) for kind, ids in wanted.items()]

    def attach(results: list) -> None:
        rows = {}
        for (kind, _, build), found in zip(loads, results, strict=True):
            for row in found:
                obj = build(row)
                rows[(kind, obj.pk)] = obj
        for c in candidates:
            if c.obj is None:
                c.obj = rows.get(c.key)

    return [statement for _, statement, _ in loads], attach
