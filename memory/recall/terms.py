"""Keyword scoring: which terms of a query matter, and how much.

PostgreSQL's ts_rank knows nothing about how rare a word is, so "how do I fix E4012 on the VPN"
would rank a hundred VPN messages above the one naming E4012. We weight each query lexeme by its
inverse document frequency instead (BM25's idf, with binary term frequency). Frequencies come
from the planner's statistics (`pg_stats.most_common_elems` of the tsvector column or expression
index, kept fresh by autovacuum's ANALYZE); a lexeme the statistics do not list as common is
counted exactly with a capped index lookup (it is rare, so that is cheap)."""

import math
import threading
import time
from dataclasses import dataclass

from django.db import connection

STATS_TTL_SECONDS = 300
# A lexeme missing from the most-common list is counted exactly up to this many documents (a
# bounded index lookup); above it, it is assumed to be as common as the least common listed one.
COUNT_CAP = 200
# The index scan that selects candidates uses the rarest lexemes whose documents add up to at most
# CANDIDATE_DOCS (always at least the rarest one); commoner lexemes only score. A document that
# matches nothing but common words would rank low anyway, and this bounds the rows a search reads.
CANDIDATE_DOCS = 2000
# A lexeme in more than this share of a corpus (and in more than CANDIDATE_DOCS documents) does
# not select candidates at all: it tells too little. A query made only of such words finds nothing by keyword there (the vector routes
# still answer it).
MAX_CANDIDATE_SHARE = 0.05


@dataclass
class Term:
    lexeme: str
    idf: float
    share: float  # estimated share of documents containing it
    docs: float = 0.0  # estimated number of documents containing it

    @property
    def tsquery(self) -> str:
        return quote_lexeme(self.lexeme)


def quote_lexeme(lexeme: str) -> str:
    """A tsquery literal matching exactly this (already normalised) lexeme."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def query_lexemes(q: str) -> list[str]:
    """The normalised lexemes of a query, in the english configuration the indexes use (stop
    words dropped, words stemmed; "ERR-4012" gives err-4012, err and 4012)."""
    if not q.strip():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(array_agg(lexeme), '{}') FROM unnest(to_tsvector('english'::regconfig, %s))",
            [q[:2000]],
        )
        return list(cursor.fetchone()[0])


_lock = threading.Lock()
_stats: dict[tuple[str, str], tuple[float, float, dict[str, float], float]] = {}


def _table_stats(
    stats_table: str, stats_column: str, rows_table: str
) -> tuple[float, dict[str, float], float]:
    """(document count, {common lexeme: share}, smallest listed share) — cached per process."""
    key = (stats_table, stats_column)
    now = time.monotonic()
    cached = _stats.get(key)
    if cached and now - cached[0] < STATS_TTL_SECONDS:
        return cached[1], cached[2], cached[3]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
            "WHERE tablename = %s AND attname = %s",
            [stats_table, stats_column],
        )
        row = cursor.fetchone()
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [rows_table])
        reltuples = (cursor.fetchone() or [0])[0] or 0
        if reltuples <= 0:
            cursor.execute(f"SELECT count(*) FROM {rows_table}")  # never analysed: small
            reltuples = cursor.fetchone()[0]
    common: dict[str, float] = {}
    floor = 0.0
    if row and row[0]:
        elems, freqs = row
        common = {e: float(f) for e, f in zip(elems, freqs, strict=False)}
        # most_common_elem_freqs ends with min, max and null share: the first is the floor.
        floor = float(freqs[len(elems)]) if len(freqs) > len(elems) else min(common.values())
    with _lock:
        _stats[key] = (now, float(reltuples), common, floor)
    return float(reltuples), common, floor


def forget_stats() -> None:
    """Drop cached statistics (tests, and after a bulk load)."""
    with _lock:
        _stats.clear()
    from memory.recall.routes import forget_episode_check

    forget_episode_check()


def bm25_idf(docs: float, containing: float) -> float:
    containing = min(max(containing, 0.0), docs)
    return math.log(1 + (docs - containing + 0.5) / (containing + 0.5))


@dataclass(frozen=True)
class Corpus:
    """A keyword-searchable table: where its statistics live and its tsvector expression (on the
    bare table name)."""

    name: str
    rows_table: str
    tsv_sql: str
    stats_table: str
    stats_column: str


def weigh_terms(lexemes: list[str], corpora: list[Corpus]) -> dict[str, list[Term]]:
    """Each lexeme with its idf in each corpus (lexemes that occur nowhere in a corpus are
    dropped from it). Rare lexemes of all corpora are counted in one round trip."""
    out: dict[str, list[Term]] = {c.name: [] for c in corpora}
    if not lexemes:
        return out
    stats = {c.name: _table_stats(c.stats_table, c.stats_column, c.rows_table) for c in corpora}
    parts, params, keys = [], [], []
    for c in corpora:
        common = stats[c.name][1]
        for lx in lexemes:
            if lx not in common:
                parts.append(
                    f"(SELECT count(*) FROM (SELECT 1 FROM {c.rows_table} WHERE {c.tsv_sql} @@ %s::tsquery "
                    f"LIMIT {COUNT_CAP}) s)"
                )
                params.append(quote_lexeme(lx))
                keys.append((c.name, lx))
    counted: dict[tuple[str, str], int] = {}
    if parts:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {', '.join(parts)}", params)
            counted = dict(zip(keys, cursor.fetchone(), strict=True))
    for c in corpora:
        docs, common, floor = stats[c.name]
        docs = max(docs, 1.0)
        for lx in lexemes:
            if lx in common:
                containing = common[lx] * docs
            else:
                containing = float(counted.get((c.name, lx), 0))
                if containing == 0:
                    continue
                if containing >= COUNT_CAP:
                    containing = max(containing, floor * docs)
            out[c.name].append(
                Term(lexeme=lx, idf=bm25_idf(docs, containing), share=containing / docs, docs=containing)
            )
    return out


def candidate_terms(terms: list[Term]) -> list[Term]:
    """The terms whose index entries select candidates: the rarest ones, while their documents
    add up to at most CANDIDATE_DOCS (at least the rarest term), never one found in more than
    MAX_CANDIDATE_SHARE of a large corpus. Empty: the corpus has no useful candidates for the query."""
    chosen, total = [], 0.0
    for term in sorted(terms, key=lambda t: t.docs):
        if term.share > MAX_CANDIDATE_SHARE and term.docs > CANDIDATE_DOCS:
            break
        if chosen and total + term.docs > CANDIDATE_DOCS:
            break
        chosen.append(term)
        total += term.docs
    return chosen
