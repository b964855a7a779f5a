"""The full-text expressions of the keyword routes, written once. Memories and messages carry a
stored tsvector column (`search`, kept by PostgreSQL from their text); entries are searched
through an expression index built in migration 0003 on exactly ENTRY_TSV (PostgreSQL only uses
an expression index for a query that repeats its expression), so change both together.

`{t}` is the table alias of the query."""

CONFIG = "english"

MEMORY_TSV = "{t}.search"
ENTRY_TSV = (
    "to_tsvector('english'::regconfig, ({t}.name || ' ' || brain_join_text(({t}.aliases)::text[]) "
    "|| ' ' || {t}.summary))"
)
MESSAGE_TSV = "{t}.search"


def memory_tsv(alias: str) -> str:
    return MEMORY_TSV.format(t=alias)


def entry_tsv(alias: str) -> str:
    return ENTRY_TSV.format(t=alias)


def message_tsv(alias: str) -> str:
    return MESSAGE_TSV.format(t=alias)
