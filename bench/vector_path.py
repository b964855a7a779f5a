"""Which part of a vector route's statement answered a search: the HNSW part or the exact one.

memory.recall.routes._nearest decides inside its statement (by counting the scope's rows), so
the only honest witness is the statement's own plan run for real: EXPLAIN ANALYZE of the very
statement the route yields, under the settings the search runs it with. Used by the
read-your-writes probe of `make bench-large` and by tests/memory/recall/test_read_your_writes.py."""

import json

from django.db import connection, transaction
from django.utils import timezone

from knowledge.embeddings import embedder as embeddings
from memory.recall import routes as R
from memory.recall.params import VECTOR_EPISODES
from memory.recall.search import ROUTE_FUNCTIONS, ROUTE_SETTINGS

HNSW_INDEXES = ("message_embedding_hnsw", "memory_embedding_hnsw")


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def vector_path(scope, route: str, q: str, limit: int = 10) -> tuple[str, list[int]]:
    """('hnsw', ids) when the index part of `route`'s statement returned its rows and an HNSW
    index scan in it read rows, ('exact', ids) when the exact part answered, ('none', []) when
    neither did; `ids` are the rows the statement returned. For vector_episodes, the message
    statement is the one judged."""
    inp = R.RouteInput(
        q=q,
        now=timezone.now(),
        limit=limit,
        scope=scope,
        vector=embeddings.embed_query(q),
        embedding_model=embeddings.model_name(),
        ef_search=max(100, limit),
    )
    statements = next(ROUTE_FUNCTIONS[route](inp))
    if route == VECTOR_EPISODES:
        statements = [s for s in statements if "v.embedding <=>" in s[0]]
    ((sql, args),) = statements
    with transaction.atomic(), connection.cursor() as cursor:  # SET LOCAL needs a transaction
        cursor.execute(ROUTE_SETTINGS + "; " + R.search_settings(inp.ef_search))
        cursor.execute(sql, args)
        ids = [row[0] for row in cursor.fetchall()]
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, args)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    top = plan[0]["Plan"]
    members = [p["Actual Rows"] for p in top["Plans"] if p["Parent Relationship"] == "Member"]
    index_part, exact_part = members[0], members[-1]  # between them, the newest rows (routes.NEWEST_ROWS)
    hnsw_read = any(n.get("Index Name") in HNSW_INDEXES and n.get("Actual Rows", 0) > 0 for n in _nodes(top))
    if index_part and hnsw_read:
        return "hnsw", ids
    return ("exact", ids) if exact_part else ("none", [])
