"""memory_search: four routes inside the conversation's scope, fused (a weighted sum of normalised
route scores), decayed by age, optionally reranked, then k hits expanded and fitted into a token
budget.

`recall_candidates` is the ranking half (used by context compilation and the quality bench);
`memory_search` adds expansion and the budget. Both take `now`, so history can be replayed, and
`exclude_memory_ids`, so the eval gate can leave a memory out."""

import time
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from knowledge.embeddings import embedder as embeddings
from knowledge.models import Channel
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
    vector, model, vector_reason, embed_ms = (None, "", "not asked", 0.0)
    if any(r in VECTOR_ROUTES for r in routes):
        vector, model, vector_reason, embed_ms = _query_vector(q)
    inp = R.RouteInput(
        q=q,
        now=now,
        limit=limit,
        scope=scope,
        exclude_memory_ids=tuple(exclude_memory_ids),
        vector=vector,
        embedding_model=model,
        ef_search=max(params.ef_search, limit),
    )
    info: dict[str, dict] = {}
    asked = {}
    for route in ROUTES:
        if route not in routes:
            info[route] = {"ran": False, "hits": 0, "ms": 0.0, "reason": "not asked"}
        elif route in VECTOR_ROUTES and vector is None:
            info[route] = {"ran": False, "hits": 0, "ms": 0.0, "reason": vector_reason}
        else:
            asked[route] = ROUTE_FUNCTIONS[route](inp)
    # Search queries are short: JIT compilation and parallel workers cost more than they save,
    # and parallel workers take cores from concurrent requests. Sent with the routes' statements.
    settings_sql = "SET LOCAL jit = off; SET LOCAL max_parallel_workers_per_gather = 0"
    if vector is not None:
        settings_sql += "; " + R.search_settings(inp.ef_search)
    rankings, spent = R.run_batched(asked, settings_sql)
    for route in asked:
        info[route] = {"ran": True, "hits": len(rankings[route]), "ms": round(spent[route], 2), "reason": ""}
    info = {route: info[route] for route in ROUTES}
    candidates = apply_decay(fuse(rankings, params), now, params)
    hydrate(candidates[: max(hydrate_top, params.rerank_top if get_reranker() else 0)])
    candidates, reranker = apply_reranker(q, candidates, params)
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
