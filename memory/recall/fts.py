"""The full-text expressions of the keyword routes, written once. Memories and messages carry a
stored tsvector column (`search`, kept by PostgreSQL from their text); entries carry
`head_vector` (name and aliases weighted A, summary B — the same lexemes as the three texts
joined), kept by the entry trigger of migration 0006 and indexed since migration 0010. Reading
the stored vector means the keyword route never recomputes `to_tsvector` per matching entry.

`{t}` is the table alias of the query."""

CONFIG = "english"

MEMORY_TSV = "{t}.search"
ENTRY_TSV = "{t}.head_vector"
MESSAGE_TSV = "{t}.search"
# What the messages' GIN index holds (migration 0027): the words, the channel ('~c<id>') and the
# day ('~d<n>'). Matching goes through it; scoring reads the words (MESSAGE_TSV).
MESSAGE_KEYS = "brain_message_keys({t}.search, {t}.channel_id, {t}.ts)"


def memory_tsv(alias: str) -> str:
    return MEMORY_TSV.format(t=alias)


def entry_tsv(alias: str) -> str:
    return ENTRY_TSV.format(t=alias)


def message_tsv(alias: str) -> str:
    return MESSAGE_TSV.format(t=alias)


def message_keys(alias: str) -> str:
    return MESSAGE_KEYS.format(t=alias)
