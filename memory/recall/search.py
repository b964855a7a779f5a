"""memory_search: four routes inside the conversation's scope, fused by reciprocal rank, decayed
by age, optionally reranked, then expanded and fitted into a token budget.

`recall_candidates` is the ranking half (used by context compilation and the quality bench);
`memory_search` adds expansion and the budget. Both take `now`, so history can be replayed, and
`exclude_memory_ids`, so the eval gate can leave a memory out."""

import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from django.db import connection, transaction
from django.utils import timezone

from knowledge import embeddings
from knowledge.models import Channel
from memory.recall import lanes
from memory.recall import routes as R
from memory.recall.expand import Expander, Item, pack
from memory.recall.fuse import Candidate, apply_decay, apply_reranker, fuse, get_reranker
from memory.recall.load import hydrate
from memory.recall.params import (
    DEFAULT_PARAMS,
    KEYWORD_KNOWLEDGE,
    KEYWORD_MESSAGES,
    ROUTES,
    VECTOR_EPISODES,
    VECTOR_KNOWLEDGE,
    VECTOR_ROUTES,
    RecallParams,
)
from memory.recall.scope import RecallScope

ROUTE_FUNCTIONS = {
    KEYWORD_KNOWLEDGE: R.keyword_knowledge,
    VECTOR_KNOWLEDGE: R.vector_knowledge,
    KEYWORD_MESSAGES: R.keyword_messages,
    VECTOR_EPISODES: R.vector_episodes,
}
MAX_K = 100
MAX_BUDGET = 100_000


@dataclass
class Ranking:
    """The ranking half of a search: every route's own list, and the fused candidates."""

    rankings: dict[str, list[R.RouteHit]]
    candidates: list[Candidate]
    routes: dict[str, dict]  # route -> {"ran", "hits", "ms", "reason"}
    reranker: str = "off"
    embed_ms: float = 0.0


@dataclass
class SearchOutcome:
    scope: RecallScope
    q: str
    now: datetime
    k: int
    budget_tokens: int
    ranking: Ranking
    items: list[Item] = field(default_factory=list)

    @property
    def used_tokens(self) -> int:
        return sum(i.tokens for i in self.items)


def _query_vector(q: str) -> tuple[object, str, str, float]:
    """(vector or None, model name, reason when None, milliseconds)."""
    start = time.perf_counter()
    try:
        if not embeddings.enabled():
            return None, "", "off: BRAIN_EMBEDDINGS=none", 0.0
        vector = embeddings.embed_texts([q])[0]
        return vector, embeddings.model_name(), "", (time.perf_counter() - start) * 1000
    except embeddings.EmbeddingError as exc:
        return None, "", f"unavailable: {exc}", (time.perf_counter() - start) * 1000


# Search queries are short: JIT compilation and parallel workers cost more than they save, and
# parallel workers take cores from concurrent requests.
SESSION_SQL = "SET LOCAL jit = off; SET LOCAL max_parallel_workers_per_gather = 0"


def _embed_query(inp: R.RouteInput, asked) -> str:
    """Set the query vector on `inp` when a vector route is asked; '' or why it is missing."""
    if not any(r in VECTOR_ROUTES for r in asked):
        return "not asked"
    inp.vector, inp.embedding_model, reason, inp.embed_ms = _query_vector(inp.q)
    return reason


def _timed(route: str, inp: R.RouteInput) -> tuple[list, dict]:
    start = time.perf_counter()
    hits = ROUTE_FUNCTIONS[route](inp)
    ms = round((time.perf_counter() - start) * 1000, 2)
    return hits, {"ran": True, "hits": len(hits), "ms": ms, "reason": ""}


def _skipped(reason: str) -> dict:
    return {"ran": False, "hits": 0, "ms": 0.0, "reason": reason}


def _run_in_order(inp: R.RouteInput, asked) -> tuple[dict, dict, float]:
    """Every route on this thread's connection, one after another (inside a caller's
    transaction, or with lanes off)."""
    vector_reason = _embed_query(inp, asked)
    rankings, info = {}, {}
    with transaction.atomic():  # SET LOCAL needs a transaction
        with connection.cursor() as cursor:
            cursor.execute(SESSION_SQL)
            if inp.vector is not None:
                cursor.execute(R.search_settings(inp.ef_search))
        for route in asked:
            if route in VECTOR_ROUTES and inp.vector is None:
                info[route] = _skipped(vector_reason)
            else:
                rankings[route], info[route] = _timed(route, inp)
    return rankings, info, inp.embed_ms


def _run_side_by_side(inp: R.RouteInput, asked) -> tuple[dict, dict, float]:
    """The keyword routes start on the lanes at once; meanwhile this thread embeds the query,
    then hands all vector routes but one to the lanes and runs the last itself."""
    inp.prepare(keyword=any(r not in VECTOR_ROUTES for r in asked))
    futures = {r: lanes.submit(SESSION_SQL, partial(_timed, r, inp)) for r in asked if r not in VECTOR_ROUTES}
    vector_reason = _embed_query(inp, asked)
    rankings, info = {}, {}
    vector_routes = [r for r in asked if r in VECTOR_ROUTES]
    if inp.vector is None:
        info.update({r: _skipped(vector_reason) for r in vector_routes})
        vector_routes = []
    setup = f"{SESSION_SQL}; {R.search_settings(inp.ef_search)}"
    for route in vector_routes[1:]:
        futures[route] = lanes.submit(setup, partial(_timed, route, inp))
    if vector_routes:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(setup)
            rankings[vector_routes[0]], info[vector_routes[0]] = _timed(vector_routes[0], inp)
    for route, future in futures.items():
        rankings[route], info[route] = future.result()
    return rankings, info, inp.embed_ms


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
) -> Ranking:
    """Run the routes in `scope`, fuse and decay; load the rows of the best `hydrate_top`
    candidates (and those a reranker sees). `limit` is each route's list length."""
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
    if lanes.available() and len(asked) > 1:
        rankings, info, embed_ms = _run_side_by_side(inp, asked)
    else:
        rankings, info, embed_ms = _run_in_order(inp, asked)
    for route in ROUTES:
        info.setdefault(route, {"ran": False, "hits": 0, "ms": 0.0, "reason": "not asked"})
    info = {route: info[route] for route in ROUTES}
    candidates = apply_decay(fuse(rankings, params), now, params)
    hydrate(candidates[: max(hydrate_top, params.rerank_top if get_reranker() else 0)])
    candidates, reranker = apply_reranker(q, candidates, params)
    rankings = {route: rankings[route] for route in ROUTES if route in rankings}
    return Ranking(
        rankings=rankings, candidates=candidates, routes=info, reranker=reranker, embed_ms=round(embed_ms, 2)
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
) -> SearchOutcome:
    """The results an agent gets for `q`: at most `k` items whose texts together count at most
    `budget_tokens` tokens (knowledge.tokens), best first."""
    now = now or timezone.now()
    k = max(1, min(k, MAX_K))
    ranking = recall_candidates(
        scope,
        q=q,
        now=now,
        params=params,
        limit=max(params.route_limit, 2 * k),
        exclude_memory_ids=exclude_memory_ids,
        routes=routes,
        hydrate_top=2 * k,
    )
    expander = Expander(scope, now, params)
    expander.prefetch(ranking.candidates[: 2 * k])
    items = pack(ranking.candidates, expander, k=k, budget_tokens=budget_tokens, params=params)
    return SearchOutcome(
        scope=scope, q=q, now=now, k=k, budget_tokens=budget_tokens, ranking=ranking, items=items
    )


def channel_names(channel_ids) -> dict[int, str]:
    return dict(Channel.objects.filter(pk__in=set(channel_ids)).values_list("pk", "name"))
