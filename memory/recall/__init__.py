"""Recall: memory_search over four routes and a second hop, and the pieces context compilation
reuses."""

from memory.recall.params import DEFAULT_PARAMS, ROUTES, RecallParams
from memory.recall.scope import RecallScope, resolve_scope
from memory.recall.search import memory_search, recall_candidates

__all__ = [
    "DEFAULT_PARAMS",
    "ROUTES",
    "RecallParams",
    "RecallScope",
    "memory_search",
    "recall_candidates",
    "resolve_scope",
]
