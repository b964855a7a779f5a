"""The full-text expressions of the keyword routes, written once. The GIN indexes in migration
0003 are built on exactly these expressions (PostgreSQL only uses an expression index for a query
that repeats its expression), so change both together. Messages carry a stored `search` column
instead (Message.search), because they are the largest table and never change.

`{t}` is the table alias of the query."""

CONFIG = "english"

MEMORY_TSV = "to_tsvector('english'::regconfig, ({t}.key || ' ' || {t}.text))"
ENTRY_TSV = (
    "to_tsvector('english'::regconfig, ({t}.name || ' ' || brain_join_text(({t}.aliases)::text[]) "
    "|| ' ' || {t}.summary))"
)
MESSAGE_TSV = "{t}.search"


def memory_tsv(alias: str) -> str:
    return MEMORY_TSV.format(t=alias)


def entry_tsv(alias: str) -> str:
    return ENTRY_TSV.format(t=alias)
