"""memory_search: four routes inside the conversation's scope and a second hop of the message
keyword route (memory.recall.hop), fused (a weighted sum of normalised ranking scores), decayed
by age, optionally reranked, then k hits expanded and fitted into a token budget.

`recall_candidates` is the ranking half (used by context compilation and the quality bench);
`memory_search` adds expansion and the budget. Both take `now`, so history can be replayed, and
`exclude_memory_ids`, so the eval gate can leave a memory out."""

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import close_old_connections, connection
from django.utils import timezone

from knowledge import metrics
from knowledge.embeddings import embedder as embeddings
from knowledge.models import Channel, Message
from knowledge.replica import read_alias, read_connection, reads_on
from memory.recall import routes as R
from memory.recall.correct import correct_candidates
from memory.recall.expand import Expander, Item, pack
from memory.recall.fuse import Candidate, Fusion, apply_reranker, get_reranker
from memory.recall.hop import second_hop
from memory.recall.load import hydrate
from memory.recall.params import (
    DEFAULT_PARAMS,
    HOP_ROUTES,
    KEYWORD_KNOWLEDGE,
    KEYWORD_MESSAGES,
    ROUTES,
    VECTOR_EPISODES,
    VECTOR_KNOWLEDGE,
    VECTOR_ROUTES,
    RecallParams,
)
from memory.recall.scope import NothingVisible, RecallScope

ROUTE_FUNCTIONS = {
    KEYWORD_KNOWLEDGE: R.keyword_knowledge,
    VECTOR_KNOWLEDGE: R.vector_knowledge,
    KEYWORD_MESSAGES: R.keyword_messages,
    VECTOR_EPISODES: R.vector_episodes,
}
MAX_K = 100
# The vector sides of concurrent searches (a web process serves a few requests at once).
_VECTOR_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-vector")
_helper_connections: set = set()
MAX_BUDGET = 100_000
# Rows loaded with the ranking beyond the 2 × k a search may show: dropping near-identical or
# conflicting memories (correct_candidates) moves later candidates up, and without spares their
# rows took a round trip of their own. On the kept 100k bench world (60 searches each): k=10,
# 36 of 60 searches needed that second round trip with no spare, 24 with 5, 14 with 10, none
# with 20; k=50, 46 with none, 27 with 20. Same run, alternating with the code before (two
# pairs): statements per k=10 search 8.7 → 8.18, k=50 9.03 → 8.8
# (docs/perf-notes/2026-12-02-recall.md, "A third of the time").
HYDRATE_SPARE = 20


@dataclass
class Ranking:
    """The ranking half of a search: every route's own list, and the fused candidates."""

    rankings: dict[str, list[R.RouteHit]]
    candidates: list[Candidate]
    routes: dict[str, dict]  # route -> {"ran", "hits", "ms", "reason"}
    reranker: str = "off"
    embed_ms: float = 0.0
    fusion_ms: float = 0.0


@dataclass
class SearchOutcome:
    scope: RecallScope
    q: str
    now: datetime
    k: int
    budget_tokens: int
    ranking: Ranking
    items: list[Item] = field(default_factory=list)
    # Candidates among the first k left out below the relevance floor (RecallParams).
    left_out: int = 0
    # Where the search's time went, in ms, in the order it was spent (the Server-Timing header).
    stages: dict[str, float] = field(default_factory=dict)

    @property
    def used_tokens(self) -> int:
        return sum(i.tokens for i in self.items)


# Search queries are short: JIT compilation and parallel workers cost more than they save, and
# parallel workers take cores from concurrent requests. Sent with the routes' statements.
ROUTE_SETTINGS = "SET LOCAL jit = off; SET LOCAL max_parallel_workers_per_gather = 0"


@dataclass
class QueryVector:
    """The query vector (None when there is none: `reason` says why) and how long it took; with
    its pgvector literal, made once on the thread that embeds (both vector sides use it)."""

    vector: object
    model: str
    reason: str
    ms: float
    literal: str | None = None


# Query vectors started before a search knows its scope (query_vector_soon). A pool of its own:
# a helper task of _VECTOR_THREADS waits for one, so sharing that pool could leave every worker
# waiting for an embedding queued behind them.
_QUERY_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-query")


def query_vector_soon(q: str, routes=ROUTES) -> Future | None:
    """Start embedding `q` now, on a thread of its own, when a route of `routes` needs the
    vector: the embedding needs only the words, so a caller starts it before it resolves the
    scope and hands the future to memory_search (`query=`). None when no vector route is asked."""
    if not any(r in VECTOR_ROUTES for r in routes):
        return None
    return _QUERY_THREADS.submit(_query_vector, q)


def _query_vector(q: str) -> QueryVector:
    start = time.perf_counter()
    try:
        if not embeddings.enabled():
            return QueryVector(None, "", "off: BRAIN_EMBEDDINGS=none", 0.0)
        vector = embeddings.embed_query(q)
        ms = (time.perf_counter() - start) * 1000
        return QueryVector(vector, embeddings.model_name(), "", ms, R.vector_literal(vector))
    except embeddings.EmbeddingError as exc:
        return QueryVector(None, "", f"unavailable: {exc}", (time.perf_counter() - start) * 1000)


def helper_routes(scope: RecallScope, vector_routes: list[str]) -> list[str]:
    """The vector routes the helper thread runs on its own connection (the others run on the
    search's own connection after its keyword routes). Both, unless the message route searches
    exactly (a small scope such as a channel-only channel: thousands of rows read, the slowest
    statement of such a search): then the memory route runs on the search's connection, so each
    connection does about half the work. On the kept 100k bench, same run, alternating, 150
    channel-only searches: p50 56.3 / 57.2 → 46.9 / 46.9 ms with the memory route moved; for a
    large scope, moving it only lengthened the keyword side
    (docs/perf-notes/2026-12-02-recall.md, "the vector side beside the keyword side"). Decided
    by the planner's estimate (routes.likely_exact): where a route runs never changes what it
    returns."""
    try:
        where, params = scope.where(Message)
    except NothingVisible:
        return vector_routes
    if VECTOR_EPISODES in vector_routes and R.likely_exact("knowledge_message", where, params):
        return [VECTOR_EPISODES]
    return vector_routes


def _vector_side(
    inp: R.RouteInput, routes: list[str], vector_ready: Future, alias: str, started: Future | None
) -> tuple[dict, dict]:
    """On a helper thread: the query vector (the one `started` computes, else embedded here;
    handed over through `vector_ready` as soon as it is known), then `routes` on this thread's
    own connection to `alias`, the database the search reads from (checked first the way a
    request checks its connection: closed when broken or too old)."""
    with reads_on(alias):
        return _vector_side_here(inp, routes, vector_ready, started)


def _vector_side_here(
    inp: R.RouteInput, routes: list[str], vector_ready: Future, started: Future | None
) -> tuple[dict, dict]:
    if started is not None and routes:
        _helper_connection_checked()  # while another thread computes the vector
    try:
        query = started.result() if started is not None else _query_vector(inp.q)
    except BaseException as exc:
        vector_ready.set_exception(exc)
        raise
    vector_ready.set_result(query)
    if not routes or query.vector is None:
        return {}, {}
    if started is None:
        _helper_connection_checked()
    return _run_vector_routes(inp, routes, query)


def _helper_connection_checked() -> None:
    """This thread's connection, checked the way a request checks its own (closed when broken or
    too old; with CONN_HEALTH_CHECKS, a round trip of its own, so it is done ahead where it can
    be)."""
    close_old_connections()
    helper = read_connection()
    _helper_connections.add(helper)
    helper.close_if_health_check_failed()


def _run_vector_routes(inp: R.RouteInput, routes: list[str], query: QueryVector) -> tuple[dict, dict]:
    vinp = replace(inp, vector=query.vector, embedding_model=query.model, _vector_sql=query.literal)
    return R.run_batched(
        {r: ROUTE_FUNCTIONS[r](vinp) for r in routes},
        ROUTE_SETTINGS + "; " + R.search_settings(vinp.ef_search),
    )


def close_helper_connections() -> None:
    """Close the helper threads' database connections (before a test database is dropped)."""
    for wrapper in list(_helper_connections):
        wrapper.inc_thread_sharing()
        try:
            wrapper.close()
        finally:
            wrapper.dec_thread_sharing()
    _helper_connections.clear()


def recall_candidates(
    scope: RecallScope,
    *,
    q: str,
    now: datetime | None = None,
    params: RecallParams = DEFAULT_PARAMS,
    limit: int | None = None,
    exclude_memory_ids=(),
    routes=ROUTES,
    hydrate_top: int = 40,
    query: Future | None = None,
    expander: Expander | None = None,
    expand_top: int = 0,
) -> Ranking:
    """Run the routes in `scope`, fuse and decay; load the rows of the best `hydrate_top`
    candidates (and those a reranker sees). `limit` is each route's list length; `query`, the
    query vector already on its way (query_vector_soon), if any. With an `expander` and no
    reranker, only the rows memory_search's `expand_top` items may need are read, with their
    context (may_show)."""
    now = now or timezone.now()
    limit = max(limit or params.route_limit, 1)
    inp = R.RouteInput(
        q=q,
        now=now,
        limit=limit,
        scope=scope,
        exclude_memory_ids=tuple(exclude_memory_ids),
        ef_search=max(params.ef_search, limit),
    )
    asked = [r for r in ROUTES if r in routes]
    # The query is embedded on a helper thread while the keyword routes run here. Outside a
    # transaction the helper then runs its vector routes (helper_routes) on a connection of its
    # own, so two database processes work at once; inside one (a caller that must see its own
    # writes) every route runs here, the vector routes once the vector is known.
    vector_routes = [r for r in asked if r in VECTOR_ROUTES]
    helper = helper_routes(scope, vector_routes) if vector_routes and not connection.in_atomic_block else []
    vector_ready: Future = Future()
    pending = (
        _VECTOR_THREADS.submit(_vector_side, inp, helper, vector_ready, read_alias(), query)
        if vector_routes
        else None
    )
    vector = QueryVector(None, "", "not asked", 0.0)
    try:
        rankings, spent = R.run_batched(
            {r: ROUTE_FUNCTIONS[r](inp) for r in asked if r not in VECTOR_ROUTES}, ROUTE_SETTINGS
        )
        if pending:
            vector = vector_ready.result()
            here = [r for r in vector_routes if r not in helper]
            if vector.vector is not None and here:
                found, took = _run_vector_routes(inp, here, vector)
                rankings.update(found)
                spent.update(took)
    finally:
        found, took = pending.result() if pending else ({}, {})
    rankings.update(found)
    spent.update(took)
    info: dict[str, dict] = {}
    for route in ROUTES:
        if route in rankings:
            info[route] = {
                "ran": True,
                "hits": len(rankings[route]),
                "ms": round(spent[route], 2),
                "reason": "",
            }
        elif route not in routes:
            info[route] = {"ran": False, "hits": 0, "ms": 0.0, "reason": "not asked"}
        else:
            info[route] = {"ran": False, "hits": 0, "ms": 0.0, "reason": vector.reason}
    fusion_start = time.perf_counter()
    fusion = Fusion(q, now, params)
    fusion.add_all(rankings)
    candidates = fusion.ranked()
    hop_ms = 0.0
    if params.hop_weight > 0 and set(asked) == set(ROUTES):
        hop_start = time.perf_counter()
        hop = second_hop(inp, candidates, params, ROUTE_SETTINGS)
        hop_ms = (time.perf_counter() - hop_start) * 1000
        for route in HOP_ROUTES:
            found = hop.rankings.get(route)
            info[route] = {
                "ran": found is not None,
                "hits": len(found or []),
                "ms": round(hop_ms, 2),
                "reason": hop.reason,
            }
        if hop.rankings:
            # Added to what was fused: the ranking `fuse.rank` gives for all five lists.
            rankings.update(hop.rankings)
            fusion.add_all(hop.rankings)
            candidates = fusion.ranked()
    else:
        reason = "off: hop_weight 0" if params.hop_weight <= 0 else "not asked"
        for route in HOP_ROUTES:
            info[route] = {"ran": False, "hits": 0, "ms": 0.0, "reason": reason}
    if expander is not None and not get_reranker():
        # The rows and the context of what the answer may show, in one round trip.
        window, memories = may_show(candidates, params, k=expand_top)
        expander.prefetch(window, rows_of=memories)
    else:
        hydrate(candidates[: max(hydrate_top, params.rerank_top if get_reranker() else 0)])
    candidates, reranker = apply_reranker(q, candidates, params)
    return Ranking(
        rankings=rankings,
        candidates=candidates,
        routes=info,
        reranker=reranker,
        embed_ms=round(vector.ms, 2),
        fusion_ms=(time.perf_counter() - fusion_start) * 1000 - hop_ms,
    )


def memory_search(
    scope: RecallScope,
    *,
    q: str,
    k: int = 10,
    budget_tokens: int = 2000,
    now: datetime | None = None,
    params: RecallParams = DEFAULT_PARAMS,
    exclude_memory_ids=(),
    routes=ROUTES,
    query: Future | None = None,
) -> SearchOutcome:
    """The results an agent gets for `q`: at most `k` items whose texts together count at most
    `budget_tokens` tokens (knowledge.tokens), best first. `query`: the vector of `q` already on
    its way (query_vector_soon), if the caller started it."""
    started = time.perf_counter()
    now = now or timezone.now()
    k = max(1, min(k, MAX_K))
    expander = Expander(scope, now, params)
    ranking = recall_candidates(
        scope,
        q=q,
        now=now,
        params=params,
        limit=max(params.route_limit, 2 * k),
        exclude_memory_ids=exclude_memory_ids,
        routes=routes,
        hydrate_top=2 * k + HYDRATE_SPARE,
        query=query,
        expander=expander,
        expand_top=k,
    )
    pack_start = time.perf_counter()
    ranking.candidates = correct_candidates(ranking.candidates, scope=scope, upto=2 * k)
    ranking.candidates, left_out = above_floor(ranking.candidates, params, upto=k)
    expander.prefetch(ranking.candidates[:k])  # read with the rows already, unless a reranker ran
    items = pack(ranking.candidates, expander, k=k, budget_tokens=budget_tokens, params=params)
    done = time.perf_counter()
    metrics.recall_observe(
        embed_ms=ranking.embed_ms,
        routes=ranking.routes,
        fusion_ms=ranking.fusion_ms,
        pack_ms=(done - pack_start) * 1000,
        total_ms=(done - started) * 1000,
    )
    return SearchOutcome(
        scope=scope,
        q=q,
        now=now,
        k=k,
        budget_tokens=budget_tokens,
        ranking=ranking,
        items=items,
        left_out=left_out,
        stages=search_stages(ranking, pack_ms=(done - pack_start) * 1000, total_ms=(done - started) * 1000),
    )


def may_show(candidates: list[Candidate], params: RecallParams, *, k: int) -> tuple[list, list]:
    """Before any row is read: the candidates among which memory_search's k items will be, and
    the memories correct_candidates reads. It looks at the first 2k and takes only memories out,
    so the first k left are among the first k + the memories there; the relevance floor
    (above_floor) cuts only a tail, and at least what falls below the floor of the best candidate
    that is not a memory (one never taken out). pack shows the first k (an item is missing only
    when its row is gone or not even its hit fits; Expander.item then reads what it needs)."""
    memories = [c for c in candidates[: 2 * k] if c.kind == R.MEMORY]
    window = candidates[: k + len(memories)]
    kept = [c.score for c in window if c.kind != R.MEMORY]
    if params.relevance_floor > 0 and kept:
        floor = params.relevance_floor * max(kept)
        window = [c for c in window if c.score >= floor]
    return window, memories


def above_floor(candidates: list, params: RecallParams, *, upto: int) -> tuple[list, int]:
    """The candidates scoring at least `params.relevance_floor` × the best one, and how many of
    the first `upto` fell below it."""
    if params.relevance_floor <= 0 or not candidates:
        return candidates, 0
    floor = params.relevance_floor * max(c.score for c in candidates)
    kept = [c for c in candidates if c.score >= floor]
    return kept, sum(c.score < floor for c in candidates[:upto])


def search_stages(ranking: Ranking, *, pack_ms: float, total_ms: float) -> dict[str, float]:
    """Embedding, each route that ran (routes sent together share one round trip's time), fusion
    (with hydration and any reranker), packing, and the whole search."""
    stages = {"embedding": ranking.embed_ms}
    stages.update({f"route-{name}": info["ms"] for name, info in ranking.routes.items() if info["ran"]})
    stages.update(fusion=ranking.fusion_ms, packing=pack_ms, search=total_ms)
    return stages


def channel_names(channel_ids, scope: RecallScope | None = None) -> dict[int, str]:
    """The names of `channel_ids`; the scope's own channel (most results of a search in a
    conversation are in it) is taken from the row the scope already holds, and a statement is
    sent only for other channels."""
    names: dict[int, str] = {}
    if scope is not None and scope.conversation.channel_id:
        names[scope.conversation.channel_id] = scope.channel.name
    missing = set(channel_ids) - names.keys()
    if missing:
        names.update(Channel.objects.filter(pk__in=missing).values_list("pk", "name"))
    return names
