"""The four retrieval routes of memory_search. Each returns its own ranking of candidates (kind,
id, route score), best first, inside the scope it is given; fusion happens elsewhere.

All SQL here filters with the visibility conditions compiled from `knowledge.access` (never a
hand-written store test), and repeats the full-text expressions of `memory.recall.fts` exactly so
PostgreSQL uses their GIN indexes."""

import json
import time
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from knowledge.embeddings.embedder import message_model_name
from knowledge.models import Entry, Episode, Memory, Message
from knowledge.replica import read_connection
from memory.recall import fts, window
from memory.recall.scope import NothingVisible, RecallScope
from memory.recall.terms import (
    BM25_B,
    BM25_K1,
    Corpus,
    Weighed,
    candidate_selection,
    weigh_query,
)

CORPORA = [
    Corpus("memory", "knowledge_memory", fts.memory_tsv("knowledge_memory")),
    Corpus("entry", "knowledge_entry", fts.entry_tsv("knowledge_entry")),
    Corpus("message", "knowledge_message", fts.message_tsv("knowledge_message")),
]

MEMORY, ENTRY, MESSAGE, EPISODE = "memory", "entry", "message", "episode"
TABLE = {
    MEMORY: "knowledge_memory",
    ENTRY: "knowledge_entry",
    MESSAGE: "knowledge_message",
    EPISODE: "knowledge_episode",
}


@dataclass
class RouteHit:
    kind: str
    id: int
    score: float  # the route's own score: BM25, or cosine similarity
    quality: float = 1.0  # how well the hit matches, 0..1: matched share of the query's idf, or cosine
    # What decay needs, read in the route's own query so non-winners are never loaded:
    # (time, tier, valid_to, confidence, held) — time is updated_at, ts or end_ts; held is when a
    # memory held (valid_from, else created_at); times are epoch seconds (hundreds per search:
    # cheaper to read than timestamps).
    stamp: tuple = (None, None, None, None, None)
    # A message's covering episode (Message.episode), read with it: fusion counts the message
    # and its episode as one candidate.
    episode: int | None = None
    # A message's speaker as it was said (Message.speaker_name; empty for other kinds): fusion
    # weighs a message by a question naming its speaker (fuse.speaker_factor).
    speaker: str = ""


def _epoch_sql(column: str) -> str:
    return f"date_part('epoch', {column})"


# The stamp columns of each kind, for a table referenced by its bare name.
STAMP = {
    MEMORY: f"{_epoch_sql('knowledge_memory.updated_at')}, knowledge_memory.tier, "
    f"{_epoch_sql('knowledge_memory.valid_to')}, knowledge_memory.confidence, "
    f"{_epoch_sql('COALESCE(knowledge_memory.valid_from, knowledge_memory.created_at)')}",
    ENTRY: f"{_epoch_sql('knowledge_entry.updated_at')}, NULL, NULL, NULL, NULL",
    MESSAGE: f"{_epoch_sql('knowledge_message.ts')}, NULL, NULL, NULL, NULL",
    EPISODE: f"{_epoch_sql('knowledge_episode.end_ts')}, NULL, NULL, NULL, NULL",
}
# After the stamp: the covering episode of a message (NULL for other kinds).
COVER = {MEMORY: "NULL", ENTRY: "NULL", MESSAGE: "knowledge_message.episode_id", EPISODE: "NULL"}
# After the covering episode: a message's speaker (NULL for other kinds).
SPEAKER = {MEMORY: "NULL", ENTRY: "NULL", MESSAGE: "knowledge_message.speaker_name", EPISODE: "NULL"}


def _keyword_hits(kind: str, rows, total_idf: float) -> list[RouteHit]:
    """Rows of (id, BM25 score, matched idf, *stamp, covering episode, speaker)."""
    return [
        RouteHit(kind, r[0], float(r[1]), float(r[2]) / total_idf, tuple(r[3:8]), r[8], r[9] or "")
        for r in rows
    ]


@dataclass
class RouteInput:
    q: str
    now: datetime
    limit: int
    scope: RecallScope
    exclude_memory_ids: tuple = ()
    vector: np.ndarray | None = None
    embedding_model: str = ""
    ef_search: int = 100
    _lexemes: list | None = None
    _terms: dict | None = None
    _vector_sql: str | None = None

    @property
    def lexemes(self) -> list[str]:
        if self._lexemes is None:
            self._lexemes, self._terms = weigh_query(self.q, CORPORA)
        return self._lexemes

    @property
    def vector_sql(self) -> str:
        """The query vector as a pgvector literal (made once per search)."""
        if self._vector_sql is None:
            self._vector_sql = vector_literal(self.vector)
        return self._vector_sql

    def terms(self, corpus: str) -> Weighed:
        """The query's weighted terms in one corpus (all corpora are weighed in one go)."""
        if self._terms is None:
            self._lexemes, self._terms = weigh_query(self.q, CORPORA)
        return self._terms[corpus]


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def _bm25_sql(weighed: Weighed, tsv: str) -> tuple[str, list]:
    """A LATERAL subquery giving each row its BM25 `score` over the query's terms and the idf it
    `matched`: idf × tf (k1 + 1) / (tf + k1 (1 − b + b · length / average length)), with tf a
    lexeme's positions in the row and length its distinct lexemes."""
    norm = f"{BM25_K1} * (1 - {BM25_B} + {BM25_B} * length({tsv}) / %s::float8)"
    terms = weighed.terms
    lexemes = [t.lexeme for t in terms]
    # Only the query's lexemes are unnested: the row's tsvector is first cut to them (every
    # weight set to D, the query's lexemes to A, only A kept: three C calls) instead of building
    # the positions and weights arrays of each of its lexemes. Same scores; per statement, on
    # 100,000 messages under shared load (same run, alternating, 35 statements × 2): median
    # 5.3 → 3.4 ms.
    source = f"unnest(ts_filter(setweight(setweight({tsv}, 'D'), 'A', %s::text[]), '{{a}}'))"
    source_params = [lexemes]
    sql = (
        f"CROSS JOIN LATERAL (SELECT coalesce(sum(q.idf * u.tf * {BM25_K1 + 1} / (u.tf + {norm})), 0) "
        f"AS score, coalesce(sum(q.idf), 0) AS matched FROM (SELECT lexeme, "
        f"greatest(cardinality(positions), 1) AS tf FROM {source}) u "
        f"JOIN unnest(%s::text[], %s::float8[]) AS q(lexeme, idf) ON q.lexeme = u.lexeme) s"
    )
    return sql, [max(weighed.avg_length, 1e-9), *source_params, lexemes, [t.idf for t in terms]]


def _live_memory_sql(table: str, inp: RouteInput) -> tuple[str, list]:
    """Only active memories, not expired at `now`, already written at `now`, not excluded, and
    not a skill overlay's lesson: lessons reach an agent only through its enabled skills (context
    compilation's skills section), so a disabled skill's experience stays out of every prompt."""
    sql = (
        f"{table}.status = 'active' AND ({table}.expires_at IS NULL OR {table}.expires_at > %s) "
        f"AND {table}.created_at <= %s AND {table}.skill_id IS NULL"
    )
    params: list = [inp.now, inp.now]
    if inp.exclude_memory_ids:
        sql += f" AND NOT ({table}.id = ANY(%s))"
        params.append(list(inp.exclude_memory_ids))
    return sql, params


def run_batched(routes: dict, settings_sql: str) -> tuple[dict, dict]:
    """Run route generators together: each yields the statements it needs next (a list of
    (sql, params)) and is sent their rows (a list of row lists). The statements every pending
    route asks for are sent in one round trip, `settings_sql` first (the simple query protocol
    runs one message's statements in one implicit transaction, so SET LOCAL holds for the rest),
    until every route has returned its hits. Returns (hits per route, milliseconds of the round
    trips each route took part in).

    One round trip instead of one per statement: on a loaded machine each round trip waits for
    the database process to be scheduled (measured: see
    docs/perf-notes/2026-12-02-recall.md, "fewer round trips")."""
    hits: dict = {}
    spent: dict = {name: 0.0 for name in routes}
    pending: dict = {}
    for name, gen in routes.items():
        try:
            pending[name] = (gen, next(gen))
        except StopIteration as done:
            hits[name] = done.value
    while pending:
        statements = [st for _, asked in pending.values() for st in asked]
        start = time.perf_counter()
        results = execute_all(statements, settings_sql)
        ms = (time.perf_counter() - start) * 1000
        at, following = 0, {}
        for name, (gen, asked) in pending.items():
            spent[name] += ms
            rows, at = results[at : at + len(asked)], at + len(asked)
            try:
                following[name] = (gen, gen.send(rows))
            except StopIteration as done:
                hits[name] = done.value
        pending = following
    return hits, spent


def gather(gens: dict):
    """A generator running several generators' steps side by side: each step yields what all
    pending ones ask for at once. Returns {name: what each returned}."""
    found: dict = {}
    pending: dict = {}
    for name, gen in gens.items():
        try:
            pending[name] = (gen, next(gen))
        except StopIteration as done:
            found[name] = done.value
    while pending:
        results = yield [st for _, asked in pending.values() for st in asked]
        at, following = 0, {}
        for name, (gen, asked) in pending.items():
            rows, at = results[at : at + len(asked)], at + len(asked)
            try:
                following[name] = (gen, gen.send(rows))
            except StopIteration as done:
                found[name] = done.value
        pending = following
    return found


def execute_all(statements: list[tuple[str, list]], settings_sql: str = "") -> list[list[tuple]]:
    """Rows of each statement, all sent as one message (client-side parameter binding)."""
    if not statements:
        return []
    prefix = [s for s in settings_sql.split(";") if s.strip()]
    out = []
    with read_connection().cursor() as cursor:
        # Each statement is bound on its own (psycopg caches the parsing of short statements;
        # the joined text is too long for its cache and would be parsed again every search).
        bound = [cursor.mogrify(sql, params) for sql, params in statements]
        cursor.execute("; ".join([*prefix, *bound]))
        for _ in prefix:
            cursor.nextset()
        for index in range(len(statements)):
            out.append(cursor.fetchall())
            if index + 1 < len(statements):
                cursor.nextset()
    return out


def run_one(gen):
    """Run one route generator on its own (one round trip per step)."""
    hits, _ = run_batched({"route": gen}, "")
    return hits["route"]


# BM25 needs each row's term counts (unnesting its tsvector), which costs far more per row than
# an index match. So the rows selected through the index are first ranked by the sum of the idf
# of the query terms they hold (matched through the index, no tsvector read), and only the best
# PRESELECT_FACTOR × limit (at least PRESELECT_MIN) are scored by BM25 — with b 0.25 and tf mostly 1 in chat, BM25's top rows
# are among them.
PRESELECT_FACTOR = 2
PRESELECT_MIN = 100


def _keyword_rows(
    kind: str, weighed: Weighed, where: str, params: list, newest: str, limit: int, narrow_to: str = ""
) -> tuple[str, list]:
    """The statement giving (id, BM25 score, matched idf, *stamp, episode, speaker) of the best
    `limit` rows of `kind` that the query's candidate selection admits (terms.candidate_selection)
    under `where`, narrowed to the index keys of `narrow_to` when given (messages only: see
    memory.recall.window); ties go to `newest` (a column, larger first)."""
    table = TABLE[kind]
    tsv = {MEMORY: fts.memory_tsv, ENTRY: fts.entry_tsv, MESSAGE: fts.message_tsv}[kind](table)
    # What the GIN index holds: for messages the words with their channel and day keys.
    match = fts.message_keys(table) if kind == MESSAGE else tsv
    terms = weighed.terms
    selection = candidate_selection(weighed)
    preselect = max(PRESELECT_FACTOR * limit, PRESELECT_MIN)
    bm25, bm25_params = _bm25_sql(weighed, tsv)
    # The candidates are read once through the GIN index, then ranked by the idf of the query
    # terms each holds (`@@` on the row's tsvector, no index). One UNION ALL arm per term, each
    # matched through the index, scanned the index once per term: with the keys of the window
    # that cost more than it saved. Same rankings; per statement, 40-80 questions on the kept
    # worlds, alternated, idle (load 0.7-0.8): messages p50 / p90 at 100k 10.1-11.2 / 20.7-22.0
    # -> 7.5-7.9 / 10.2 ms, at 1M 24.2-27.3 / 51.7-53.5 -> 15.0-16.4 / 25.0-25.3 ms; memories
    # and entries at 100k 9.5-9.8 / 24.2-25.8 -> 8.8 / 11.5-12.5 ms, at 1M 17.0-19.7 / 40.3-47.2
    # -> 14.4-15.5 / 27.3-29.7 ms.
    narrow = f" AND {match} @@ %s::tsquery" if narrow_to else ""
    picked = (
        f"SELECT {table}.id, {newest} AS newest, {tsv} AS tsv FROM {table} "
        f"WHERE {match} @@ %s::tsquery{narrow} AND ({where})"
    )
    summed = " + ".join("CASE WHEN c.tsv @@ %s::tsquery THEN %s::float8 ELSE 0 END" for _ in terms)
    select = (
        f"WITH c AS MATERIALIZED ({picked}) SELECT c.id, c.newest FROM c "
        f"ORDER BY {summed} DESC, c.newest DESC, c.id DESC LIMIT %s"
    )
    select_params = [selection.tsquery, *([narrow_to] if narrow_to else []), *params]
    for term in terms:
        select_params += [term.tsquery, term.idf]
    select_params.append(preselect)
    sql = (
        f"SELECT {table}.id, s.score, s.matched, {STAMP[kind]}, {COVER[kind]}, {SPEAKER[kind]} "
        f"FROM ({select}) c "
        f"JOIN {table} ON {table}.id = c.id {bm25} "
        f"ORDER BY s.score DESC, c.newest DESC, {table}.id DESC LIMIT %s"
    )
    args = [*select_params, *bm25_params, limit]
    return sql, args


def keyword_knowledge(inp: RouteInput):
    """Full text over memory text (loose memories and entry blocks) and entry fields (name,
    aliases, summary), BM25, one ranking for both. A route generator (run_batched)."""
    asked: list[tuple[str, tuple]] = []
    weighed = {"memory": inp.terms("memory"), "entry": inp.terms("entry")}
    if candidate_selection(weighed["memory"]):
        try:
            where, wparams = inp.scope.where(Memory)
            live, lparams = _live_memory_sql("knowledge_memory", inp)
            asked.append(
                (
                    MEMORY,
                    _keyword_rows(
                        MEMORY,
                        weighed["memory"],
                        f"({where}) AND {live}",
                        [*wparams, *lparams],
                        "knowledge_memory.id",
                        inp.limit,
                    ),
                )
            )
        except NothingVisible:
            pass
    if candidate_selection(weighed["entry"]):
        try:
            where, wparams = inp.scope.where(Entry)
            asked.append(
                (
                    ENTRY,
                    _keyword_rows(
                        ENTRY,
                        weighed["entry"],
                        f"({where}) AND knowledge_entry.created_at <= %s",
                        [*wparams, inp.now],
                        "knowledge_entry.id",
                        inp.limit,
                    ),
                )
            )
        except NothingVisible:
            pass
    if not asked:
        return []
    results = yield [statement for _, statement in asked]
    hits: list[RouteHit] = []
    for (kind, _), rows in zip(asked, results, strict=True):
        corpus = weighed["memory" if kind == MEMORY else "entry"]
        hits += _keyword_hits(kind, rows, sum(t.idf for t in corpus.terms))
    # Memories and entries are scored against different statistics: rank by matched share first.
    hits.sort(key=lambda h: (-h.quality, -h.score))
    return hits[: inp.limit]


def keyword_messages(inp: RouteInput):
    """Full text over the messages (speaker and text) of the scope said before `now`, BM25. A
    route generator (run_batched)."""
    weighed = inp.terms("message")
    selection = candidate_selection(weighed)
    if not selection:
        return []
    try:
        where, wparams = inp.scope.where(Message)
    except NothingVisible:
        return []
    keys = ""
    if window.needs_window(selection):  # words in many messages: the newest days (window)
        (days,) = yield [window.DAYS_SQL]
        keys = window.window_keys(selection, days, weighed.docs, inp.scope.conversation.channel_id, inp.now)
    (rows,) = yield [
        _keyword_rows(
            MESSAGE,
            weighed,
            f"({where}) AND knowledge_message.ts <= %s",
            [*wparams, inp.now],
            "knowledge_message.ts",
            inp.limit,
            keys,
        )
    ]
    return _keyword_hits(MESSAGE, rows, sum(t.idf for t in weighed.terms))


MAX_SCAN_TUPLES = 10_000
# A scope admitting at most this many rows is searched exactly: PostgreSQL filters first and
# computes every distance, and the answer is complete. Measured on 100,000 messages: a
# channel-only scope (≈ 4,000 messages) took 12–19 ms exactly against 24–27 ms (p90 34–41) through
# HNSW with iterative scans, while a scope of all shared channels took 3–4 ms through HNSW and
# 130–160 ms exactly. A small scope that is most of a small table goes exact too (4,000 of 6,000
# memories: 8 ms exactly, ≈ 3 ms through HNSW): HNSW is approximate, and on a small table of
# near-identical rows (a thousand short "Support note …" messages beside a DM's eight) its graph
# left the DM's messages out of the 50 nearest — found exactly, missed through the index (issue 49).
EXACT_MAX_ROWS = 8_000
# Beside the HNSW part, the table's newest rows are searched exactly (the last ids of the primary
# key, as a LIMIT so the planner knows they are few; filtered by the scope). HNSW links a new row
# to its neighbours but may prune their links back to it, so a row unlike its neighbours can stay
# outside every search's path: in bench-large's world at 50,000 messages (vectors copied with
# noise from 500 real ones) a new message 0.11 from its query was missed through the index, every
# other row 0.6 or farther. The next search finds it here (read your writes, issue 61) while
# fewer than NEWEST_ROWS rows have been written to its table since. At 1,000,000 messages the
# newest 2,000 cost 22 ms (messages) and 14 ms (memories) beside 8–10 ms for the rest: so 500.
NEWEST_ROWS = 500


def search_settings(ef_search: int) -> str:
    """Transaction-local settings of every vector route: a search width of at least the number
    of rows asked for, and iterative scans, so a filtered search keeps scanning until it has them
    — but not forever: past MAX_SCAN_TUPLES a filter is selective enough for the exact query."""
    return (
        f"SET LOCAL hnsw.ef_search = {int(ef_search)}; SET LOCAL hnsw.iterative_scan = relaxed_order; "
        f"SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}"
    )


# The planner's row estimates of scopes, per process, for one purpose only: which connection a
# search's message vector route runs on (search.helper_routes). They never decide what a route
# returns — that is decided in each statement from the scope's counted rows — so a stale
# estimate, or two processes holding different ones, moves work between connections but never
# changes a ranking.
ESTIMATE_TTL_SECONDS = 60.0
_estimates: dict[tuple, tuple[float, float]] = {}


def estimated_rows(source: str, where: str, params: list) -> float:
    """The planner's estimate of the rows `where` admits in `source` (no rows are read), kept
    per process for a minute: a conversation's scope repeats from search to search. For
    placing work only (see above)."""
    key = (source, where, tuple(map(str, params)))
    now = time.monotonic()
    cached = _estimates.get(key)
    if cached and now - cached[0] < ESTIMATE_TTL_SECONDS:
        return cached[1]
    with read_connection().cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {source} WHERE {where}", params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    rows = float(plan[0]["Plan"]["Plan Rows"])
    if len(_estimates) > 10_000:
        _estimates.clear()
    _estimates[key] = (now, rows)
    return rows


def forget_estimates() -> None:
    """Forget the remembered row estimates (tests, and a benchmark moving to a fresh database)."""
    _estimates.clear()


def likely_exact(table: str, where: str, params: list) -> bool:
    """Whether a vector search of `table` under the visibility filter `where` will probably be
    exact, by the planner's estimate (placement only: _nearest decides by counting)."""
    return estimated_rows(table, where, params) <= EXACT_MAX_ROWS


def _nearest(kind: str, where: str, params: list, inp: RouteInput, *, scope: tuple[str, list]):
    """The rows nearest the query vector (cosine) under a filter; `scope` is the visibility part
    of the filter, whose size decides the plan. A generator: yields its one statement, returns
    the hits.

    The plan is chosen inside the statement, by counting the scope's rows (at most
    EXACT_MAX_ROWS + 1 are read) in the statement's own snapshot: nothing remembered from an
    earlier search and no planner statistic decides it, so every process answers the same and a
    row committed before the search is in its scope's count. A small scope (≤ EXACT_MAX_ROWS) is
    searched exactly: the ordering is written so no vector index can serve it (`+ 0`), so
    PostgreSQL filters first (through the ordinary indexes) and computes every distance. A
    larger one goes through HNSW with iterative scans (relaxed order): the scan continues until
    the filter has its rows, up to `hnsw.max_scan_tuples`; if it still returns fewer than asked
    (vectors of the current model still missing, a filter more selective than it looks), the
    exact query runs instead, in the same statement. Each part runs only when its one-time
    condition holds (PostgreSQL evaluates such a condition once and skips the part otherwise)."""
    vec = inp.vector_sql
    table = TABLE[kind]
    model = inp.embedding_model
    if kind == MESSAGE:  # message vectors live in their own table (knowledge.MessageVector)
        model = message_model_name(model)  # and are made with the turn before them
        source, vector_col, model_col = (
            "knowledge_messagevector v JOIN knowledge_message ON knowledge_message.id = v.message_id",
            "v.embedding",
            "v.model",
        )
    else:
        source, vector_col, model_col = table, f"{table}.embedding", f"{table}.embedding_model"
    scope_where, scope_params = scope
    base = (
        f"SELECT {table}.id, {vector_col} <=> %s::vector AS distance, {STAMP[kind]}, {COVER[kind]}, "
        f"{SPEAKER[kind]} "
        f"FROM {source} "
        f"WHERE {model_col} = %s AND ({where}) "
    )
    base_args = [vec, model, *params]
    sql = (
        f"WITH size AS MATERIALIZED (SELECT count(*) AS n FROM "
        f"(SELECT 1 FROM {table} WHERE {scope_where} LIMIT %s) s), "
        f"ann AS MATERIALIZED ({base}AND (SELECT n FROM size) > %s "
        f"ORDER BY {vector_col} <=> %s::vector LIMIT %s), "
        f"newest AS MATERIALIZED ({base}AND (SELECT n FROM size) > %s "
        f"AND {table}.id IN (SELECT id FROM {table} ORDER BY id DESC LIMIT %s) "
        f"ORDER BY ({vector_col} <=> %s::vector) + 0 LIMIT %s) "
        f"SELECT * FROM ann WHERE (SELECT count(*) FROM ann) >= %s "
        f"UNION ALL SELECT * FROM newest WHERE (SELECT count(*) FROM ann) >= %s "
        f"UNION ALL "
        f"({base}AND ((SELECT n FROM size) <= %s OR (SELECT count(*) FROM ann) < %s) "
        f"ORDER BY ({vector_col} <=> %s::vector) + 0 LIMIT %s)"
    )
    limit = inp.limit
    args = [
        *scope_params,
        EXACT_MAX_ROWS + 1,
        *base_args,
        EXACT_MAX_ROWS,
        vec,
        limit,
        *base_args,
        EXACT_MAX_ROWS,
        NEWEST_ROWS,
        vec,
        limit,
        limit,
        limit,
        *base_args,
        EXACT_MAX_ROWS,
        limit,
        vec,
        limit,
    ]
    # hnsw.ef_search and iterative scans: see search_settings
    (rows,) = yield [(sql, args)]
    rows = list({r[0]: r for r in rows}.values())  # a newest row the index part also found: once
    rows.sort(key=lambda r: (r[1], r[0]))  # relaxed order: re-sort by distance (ties by id)
    return [
        RouteHit(kind, r[0], 1.0 - float(r[1]), max(0.0, 1.0 - float(r[1])), tuple(r[2:7]), r[7], r[8] or "")
        for r in rows[:limit]
    ]


def vector_knowledge(inp: RouteInput):
    """Nearest memories (loose and entry blocks) to the query vector. A route generator."""
    try:
        where, wparams = inp.scope.where(Memory)
    except NothingVisible:
        return []
    live, lparams = _live_memory_sql("knowledge_memory", inp)
    return (
        yield from _nearest(
            MEMORY, f"({where}) AND {live}", [*wparams, *lparams], inp, scope=memory_count_scope(inp.scope)
        )
    )


def memory_count_scope(scope: RecallScope) -> tuple[str, list]:
    """The memory visibility filter the vector route counts, naming the conversation's read
    stores first (visibility chooses among exactly those, access.readable_q): the same rows, but
    PostgreSQL skips through the (owner, store, status) index to them instead of filtering the
    stores before them. At 1M, same run, alternating: the statement's mean 15.1-16.6 -> 10.4-11.8
    ms (docs/perf-notes/2026-12-08-bench-large-stages.md)."""
    where, params = scope.where(Memory)
    return f"knowledge_memory.store = ANY(%s) AND ({where})", [list(scope.conversation.read_stores), *params]


def vector_episodes(inp: RouteInput):
    """Nearest episode summaries — and, while stage A has not covered them yet, nearest
    messages (a message no episode covers is its own summary). One ranking by similarity. A
    route generator: both searches go out in the same round trip."""
    try:
        # Episodes carry the same channel and store fields as messages, so one filter serves both.
        where, wparams = inp.scope.where(Episode)
    except NothingVisible:
        return []
    # Episodes are always searched (an empty table costs nothing): whether any exists yet is
    # read in the statement, never remembered, so a process that looked before stage A's first
    # episode does not leave it out of its rankings (issue 49).
    searches = {
        EPISODE: _nearest(
            EPISODE,
            f"({where}) AND knowledge_episode.start_ts <= %s",
            [*wparams, inp.now],
            inp,
            scope=(where, wparams),
        )
    }
    try:
        mwhere, mparams = inp.scope.where(Message)
        searches[MESSAGE] = _nearest(
            MESSAGE,
            f"({mwhere}) AND knowledge_message.episode_id IS NULL AND knowledge_message.ts <= %s",
            [*mparams, inp.now],
            inp,
            scope=(mwhere, mparams),
        )
    except NothingVisible:
        pass
    found = yield from gather(searches)
    merged = sorted([h for hits in found.values() for h in hits], key=lambda h: -h.score)
    return merged[: inp.limit]
