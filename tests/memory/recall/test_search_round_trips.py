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
    answer keeps one of each (correct_candidates), so later candidates move up. The rows read
    with the ranking are those the answer may need (search.may_show: the first k, and past them
    as many as there are memories that may be dropped), so the search loads rows in one
    statement, without the spares (HYDRATE_SPARE) a reranker's order still needs."""
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
    assert (with_spares, without) == (1, 1)
    assert shown == shown_without and len(shown) == 3  # the same answer either way


def test_rows_and_context_of_the_answer_come_in_one_round_trip(world):
    """The rows of the messages a search may show and their threads are read together: one
    round trip after the ranking, and only for the first k (the answer shows k)."""
    conv = factory.make_conversation(world.copilot, world.general)
    rows = []
    for t in range(6):
        rows += [
            {"speaker": "ana", "text": f"Badge reader {t} at the north door beeps twice", "thread": f"t{t}"},
            {"speaker": "bo", "text": f"Swap the battery of reader {t}", "thread": f"t{t}"},
        ]
    factory.post_messages(world.general, rows)
    factory.embed_all()
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conv)
    q = "badge reader north door beeps"
    memory_search(scope, q=q, k=2)
    with CaptureQueriesContext(connection) as queries:
        outcome = memory_search(scope, q=q, k=2)
    rows_read = [
        q["sql"] for q in queries.captured_queries if "FROM knowledge_message t WHERE t.id = ANY" in q["sql"]
    ]
    threads_read = [q["sql"] for q in queries.captured_queries if "h.thread <> ''" in q["sql"]]
    assert len(rows_read) == 1 and rows_read == threads_read  # one round trip, both statements
    hydrated = rows_read[0].split("FROM knowledge_message t WHERE t.id = ANY('{")[1].split("}")[0]
    assert len(hydrated.split(",")) == 2  # the rows of the k shown, no more
    assert len(outcome.items) == 2
    assert all(len(i.messages) == 2 for i in outcome.items)  # each hit with its thread


def _read_in_full(scope, *, q: str, k: int, now) -> list:
    """What memory_search answered before it read only what the answer may show: the rows of
    the first 2k + HYDRATE_SPARE, then the context of the first 2k, each in its own round trip."""
    from memory.recall.correct import correct_candidates
    from memory.recall.expand import Expander, pack
    from memory.recall.params import DEFAULT_PARAMS as P
    from memory.recall.search import HYDRATE_SPARE, above_floor, recall_candidates

    ranking = recall_candidates(
        scope, q=q, now=now, limit=max(P.route_limit, 2 * k), hydrate_top=2 * k + HYDRATE_SPARE
    )
    candidates = correct_candidates(ranking.candidates, scope=scope, upto=2 * k)
    candidates, _ = above_floor(candidates, P, upto=k)
    expander = Expander(scope, now, P)
    expander.prefetch(candidates[: 2 * k])
    return [(i.candidate.key, i.text) for i in pack(candidates, expander, k=k, budget_tokens=2000, params=P)]


def test_reading_only_what_may_be_shown_answers_the_same(world):
    """Memories with copies that correct_candidates drops, beside messages in threads and lone
    ones: the search that reads only what its answer may show returns what reading everything
    returned, for every k."""
    from django.utils import timezone

    conv = factory.make_conversation(world.copilot, world.general)
    for i in range(6):
        factory.make_memory_row(
            world.copilot, f"Printer {i} on floor three jams: reset tray {i}", store="shared"
        )
        factory.make_memory_row(
            world.copilot, f"  PRINTER {i} ON FLOOR THREE JAMS: RESET TRAY {i}  ", store="shared"
        )
    rows = []
    for t in range(5):
        rows += [
            {"speaker": "ana", "text": f"Printer {t} on floor three jams again", "thread": f"t{t}"},
            {"speaker": "bo", "text": f"Reset tray {t} and it prints", "thread": f"t{t}"},
            {"speaker": "cy", "text": f"Floor three printer {t} is fine now"},
        ]
    factory.post_messages(world.general, rows)
    factory.embed_all()
    scope = resolve_scope(factory.SYSTEM, agent=world.copilot, conversation=conv)
    now = timezone.now()
    for q in ("printer floor three jams reset tray", "which printer is fine now", "reset tray 4"):
        for k in (1, 3, 5, 10):
            lean = memory_search(scope, q=q, k=k, now=now)
            assert [(i.candidate.key, i.text) for i in lean.items] == _read_in_full(scope, q=q, k=k, now=now)
