"""Round trips of memory_search that do not depend on the results: counted, never timed."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.recall import memory_search, resolve_scope
from tests import factory


def _hydrations(queries) -> int:
    """Statements that load memory rows for the answer (memory.recall.load)."""
    return sum("FROM knowledge_memory t JOIN knowledge_agent a" in q["sql"] for q in queries.captured_queries)


def test_dropped_copies_do_not_cost_a_second_load_of_rows(world, monkeypatch):
    """Copies of one fact (the same text in other spacing and case) rank side by side; the
    answer keeps one of each (correct_candidates), so later candidates move up. Their rows were
    loaded with the ranking (HYDRATE_SPARE): the search loads rows in one statement, where
    without spares it took two."""
    from memory.recall import search as search_module

    conv = factory.make_conversation(world.copilot, world.general)
    facts = [f"Printer {i} on floor three jams: reset tray {i} first" for i in range(8)]
    for text in facts:
        factory.make_memory_row(world.copilot, text, store="shared")
        factory.make_memory_row(world.copilot, "  " + text.upper() + "  ", store="shared")
    factory.embed_all()
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conv)
    q = "printer floor three jams reset tray"
    memory_search(scope, q=q, k=3)  # the per-process estimates and episode check

    def loads() -> tuple[int, list]:
        with CaptureQueriesContext(connection) as queries:
            outcome = memory_search(scope, q=q, k=3)
        return _hydrations(queries), [i.candidate.key for i in outcome.items]

    with_spares, shown = loads()
    monkeypatch.setattr(search_module, "HYDRATE_SPARE", 0)
    without, shown_without = loads()
    assert (with_spares, without) == (1, 2)
    assert shown == shown_without and len(shown) == 3  # the same answer either way
