"""What a process remembers about the data, forgotten in one call: each test starts from the
database, and a benchmark that moves to a fresh copy of its database forgets the last one's."""

from knowledge.embeddings.embedder import query_cache_clear
from knowledge.settings_store import setting_cache_clear
from memory.gate.services import gate_cache_clear
from memory.recall.routes import forget_estimates


def forget_process_caches() -> None:
    """The run-time settings, the gate's dataset names, the planner's row estimates of recall
    scopes, and remembered query vectors.

    None of these can change a search's ranking (issue 49: same question, same answer, whichever
    process answers): query vectors are a pure function of the text and the model; the scope
    estimates only choose the connection a vector route runs on (the exact-or-HNSW choice is
    counted inside each statement); the settings and the gate's names are not read by a search.
    Recall keeps nothing else: keyword statistics are read with every search, and whether any
    episode exists is read by the episode search itself."""
    setting_cache_clear()
    gate_cache_clear()
    forget_estimates()
    query_cache_clear()
