"""Loading the rows behind candidates — only for those that may be shown (the routes already
returned what ranking needs)."""

from knowledge.models import Entry, Episode, Memory, Message
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE

# An entry's search columns (tsvector, trigram codes, block authors) are never shown; reading
# and parsing them for every hydrated row cost more than the rest of the row.
ENTRY_INDEX_FIELDS = ("head_vector", "name_trigrams", "block_authors")

QUERYSETS = {
    MEMORY: lambda: Memory.objects.select_related("entry", "owner").defer(
        "embedding",
        "search",
        "value",
        "status_reason",
        "stale_reason",
        *(f"entry__{name}" for name in ENTRY_INDEX_FIELDS),
    ),
    ENTRY: lambda: Entry.objects.select_related("owner").defer(*ENTRY_INDEX_FIELDS),
    MESSAGE: lambda: Message.objects.defer("search"),
    EPISODE: lambda: Episode.objects.defer("embedding"),
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
        for row in QUERYSETS[kind]().filter(pk__in=ids):
            rows[(kind, row.pk)] = row
    for c in candidates:
        if c.obj is None:
            c.obj = rows.get(c.key)
