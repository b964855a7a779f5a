"""What a process remembers about the data, forgotten in one call: each test starts from the
database, and a benchmark that moves to a fresh copy of its database forgets the last one's."""

from knowledge.embeddings.embedder import query_cache_clear
from knowledge.settings_store import setting_cache_clear
from memory.gate.services import gate_cache_clear
from memory.recall.routes import forget_estimates
from memory.recall.seen import forget_stats


def forget_process_caches() -> None:
    """The run-time settings, the gate's dataset names, whether any episode exists, the
    planner's row estimates of recall scopes, and remembered query vectors."""
    setting_cache_clear()
    gate_cache_clear()
    forget_stats()
    forget_estimates()
    query_cache_clear()
