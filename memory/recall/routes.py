"""The four retrieval routes of memory_search. Each returns its own ranking of candidates (kind,
id, route score), best first, inside the scope it is given; fusion happens elsewhere.

All SQL here filters with the visibility conditions compiled from `knowledge.access` (never a
hand-written store test), and repeats the full-text expressions of `knowledge.fts` exactly so
PostgreSQL uses their GIN indexes."""

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection
from django.db.models import Q

from knowledge import fts
from knowledge.models import Entry, Episode, Memory, Message
from memory.recall.terms import Term, candidate_terms, query_lexemes, weigh_terms

MEMORY, ENTRY, MESSAGE, EPISODE = "memory", "entry", "message", "episode"


@dataclass
class RouteHit:
    kind: str
    id: int
    score: float  # the route's own score: summed idf of matched terms, or cosine similarity
    quality: float = 1.0  # how well the hit matches, 0..1: matched share of the query's idf, or cosine


@dataclass
class RouteInput:
    q: str
    now: datetime
    limit: int
    knowledge_q: Q
    message_q: Q
    exclude_memory_ids: tuple = ()
    vector: np.ndarray | None = None
    embedding_model: str = ""
    ef_search: int = 100
    _lexemes: list | None = None

    @property
    def lexemes(self) -> list[str]:
        if self._lexemes is None:
            self._lexemes = query_lexemes(self.q)
        return self._lexemes


class NothingVisible(Exception):
    """The visibility filter admits nothing: the route has no candidates."""


def where_sql(model, q: Q) -> tuple[str, list]:
    """The WHERE clause (on the bare table name) of `model.objects.filter(q)`."""
    query = model.objects.filter(q).query
    try:
        sql, params = query.get_compiler(connection=connection).compile(query.where)
    except FullResultSet:
        return "TRUE", []
    except EmptyResultSet:
        raise NothingVisible from None
    return sql, list(params)


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def _score_sql(terms: list[Term], tsv: str) -> tuple[str, list]:
    parts, params = [], []
    for term in terms:
        parts.append(f"({tsv} @@ %s::tsquery)::int * %s")
        params += [term.tsquery, term.idf]
    return " + ".join(parts), params


def _or_query(terms: list[Term]) -> str:
    return " | ".join(t.tsquery for t in terms)


def _live_memory_sql(table: str, inp: RouteInput) -> tuple[str, list]:
    """Only active memories, not expired at `now`, already written at `now`, not excluded."""
    sql = (
        f"{table}.status = 'active' AND ({table}.expires_at IS NULL OR {table}.expires_at > %s) "
        f"AND {table}.created_at <= %s"
    )
    params: list = [inp.now, inp.now]
    if inp.exclude_memory_ids:
        sql += f" AND NOT ({table}.id = ANY(%s))"
        params.append(list(inp.exclude_memory_ids))
    return sql, params


def _fetch(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def keyword_knowledge(inp: RouteInput) -> list[RouteHit]:
    """Full text over memory text (loose memories and entry blocks) and entry fields (name,
    aliases, summary), idf-weighted, one ranking for both."""
    hits: list[RouteHit] = []
    memory_tsv = fts.memory_tsv("knowledge_memory")
    terms = weigh_terms(
        inp.lexemes,
        stats_table="memory_text_fts",
        stats_column="to_tsvector",
        rows_table="knowledge_memory",
        tsv_sql=memory_tsv,
    )
    if terms:
        try:
            where, wparams = where_sql(Memory, inp.knowledge_q)
            live, lparams = _live_memory_sql("knowledge_memory", inp)
            score, sparams = _score_sql(terms, "t.v")
            rows = _fetch(
                f"SELECT knowledge_memory.id, {score} AS score FROM knowledge_memory, "
                f"LATERAL (SELECT {memory_tsv} AS v) t "
                f"WHERE {memory_tsv} @@ %s::tsquery AND ({where}) AND {live} "
                f"ORDER BY score DESC, knowledge_memory.id DESC LIMIT %s",
                [*sparams, _or_query(candidate_terms(terms)), *wparams, *lparams, inp.limit],
            )
            total = sum(t.idf for t in terms)
            hits += [RouteHit(MEMORY, r[0], float(r[1]), float(r[1]) / total) for r in rows]
        except NothingVisible:
            pass
    entry_tsv = fts.entry_tsv("knowledge_entry")
    terms = weigh_terms(
        inp.lexemes,
        stats_table="entry_text_fts",
        stats_column="to_tsvector",
        rows_table="knowledge_entry",
        tsv_sql=entry_tsv,
    )
    if terms:
        try:
            where, wparams = where_sql(Entry, inp.knowledge_q)
            score, sparams = _score_sql(terms, "t.v")
            rows = _fetch(
                f"SELECT knowledge_entry.id, {score} AS score FROM knowledge_entry, "
                f"LATERAL (SELECT {entry_tsv} AS v) t "
                f"WHERE {entry_tsv} @@ %s::tsquery AND ({where}) AND knowledge_entry.created_at <= %s "
                f"ORDER BY score DESC, knowledge_entry.id DESC LIMIT %s",
                [*sparams, _or_query(candidate_terms(terms)), *wparams, inp.now, inp.limit],
            )
            total = sum(t.idf for t in terms)
            hits += [RouteHit(ENTRY, r[0], float(r[1]), float(r[1]) / total) for r in rows]
        except NothingVisible:
            pass
    hits.sort(key=lambda h: -h.quality)  # memories and entries are scored against different statistics
    return hits[: inp.limit]


def keyword_messages(inp: RouteInput) -> list[RouteHit]:
    """Full text over the messages of the scope said before `now`, idf-weighted."""
    terms = weigh_terms(
        inp.lexemes,
        stats_table="knowledge_message",
        stats_column="search",
        rows_table="knowledge_message",
        tsv_sql="knowledge_message.search",
    )
    if not terms:
        return []
    try:
        where, wparams = where_sql(Message, inp.message_q)
    except NothingVisible:
        return []
    score, sparams = _score_sql(terms, "knowledge_message.search")
    rows = _fetch(
        f"SELECT knowledge_message.id, {score} AS score FROM knowledge_message "
        f"WHERE knowledge_message.search @@ %s::tsquery AND ({where}) AND knowledge_message.ts <= %s "
        f"ORDER BY score DESC, knowledge_message.ts DESC LIMIT %s",
        [*sparams, _or_query(candidate_terms(terms)), *wparams, inp.now, inp.limit],
    )
    total = sum(t.idf for t in terms)
    return [RouteHit(MESSAGE, r[0], float(r[1]), float(r[1]) / total) for r in rows]


def _nearest(table: str, kind: str, where: str, params: list, inp: RouteInput) -> list[RouteHit]:
    """The rows nearest the query vector (cosine) under a filter. HNSW with iterative scans
    (relaxed order) keeps scanning until the filter has its rows; if the index still returns
    fewer than asked (a very selective filter, or vectors of the current model still missing),
    the same query runs exactly without the index."""
    vec = vector_literal(inp.vector)
    sql = (
        f"SELECT {table}.id, {table}.embedding <=> %s::vector AS distance FROM {table} "
        f"WHERE {table}.embedding_model = %s AND ({where}) "
        f"ORDER BY distance LIMIT %s"
    )
    args = [vec, inp.embedding_model, *params, inp.limit]
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(inp.ef_search)}")
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(sql, args)
        rows = cursor.fetchall()
        if len(rows) < inp.limit:
            cursor.execute("SET LOCAL enable_indexscan = off")
            cursor.execute(sql, args)
            rows = cursor.fetchall()
            cursor.execute("SET LOCAL enable_indexscan = on")
    rows.sort(key=lambda r: r[1])  # relaxed order: re-sort by distance
    return [RouteHit(kind, r[0], 1.0 - float(r[1]), max(0.0, 1.0 - float(r[1]))) for r in rows]


def vector_knowledge(inp: RouteInput) -> list[RouteHit]:
    """Nearest memories (loose and entry blocks) to the query vector."""
    try:
        where, wparams = where_sql(Memory, inp.knowledge_q)
    except NothingVisible:
        return []
    live, lparams = _live_memory_sql("knowledge_memory", inp)
    return _nearest("knowledge_memory", MEMORY, f"({where}) AND {live}", [*wparams, *lparams], inp)


def vector_episodes(inp: RouteInput) -> list[RouteHit]:
    """Nearest episode summaries — and, while stage A has not covered them yet, nearest
    messages (a message no episode covers is its own summary). One ranking by similarity."""
    try:
        # Episodes carry the same channel and store fields as messages, so one filter serves both.
        where, wparams = where_sql(Episode, inp.message_q)
    except NothingVisible:
        return []
    episodes = _nearest(
        "knowledge_episode",
        EPISODE,
        f"({where}) AND knowledge_episode.start_ts <= %s",
        [*wparams, inp.now],
        inp,
    )
    try:
        mwhere, mparams = where_sql(Message, inp.message_q)
    except NothingVisible:
        return episodes
    messages = _nearest(
        "knowledge_message",
        MESSAGE,
        f"({mwhere}) AND knowledge_message.episode_id IS NULL AND knowledge_message.ts <= %s",
        [*mparams, inp.now],
        inp,
    )
    merged = sorted(episodes + messages, key=lambda h: -h.score)
    return merged[: inp.limit]
