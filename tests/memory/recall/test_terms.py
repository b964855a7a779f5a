"""Query terms: a term nobody has written yet is dropped from a search, but once a message brings
it, the next search finds it (no stale count stands in the way)."""

from tests import factory


def search(client, conv, q):
    response = client.post(
        "/api/memory/search", {"agent": "copilot", "conversation": conv.pk, "q": q}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_term_searched_before_it_existed_is_found_as_soon_as_it_arrives(world):
    conv = factory.make_conversation(world.copilot, world.general)
    client = world.client("copilot")
    factory.post_messages(
        world.general, [{"speaker": "bob", "text": "Printer on floor three is out of toner"}]
    )
    assert search(client, conv, "error ZQX-9931")["results"] == []
    (message_id,) = factory.post_messages(
        world.general, [{"speaker": "alice", "text": "The gateway logs error ZQX-9931 on every retry"}]
    )
    results = search(client, conv, "error ZQX-9931")["results"]
    assert results and results[0]["id"] == message_id
    assert "keyword_messages" in results[0]["routes"]


def _exact(table: str, column: str) -> tuple[int, int, dict[str, int]]:
    """Documents, summed length and documents per lexeme, counted from the rows themselves."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), coalesce(sum(length({column})), 0) FROM {table}")
        docs, length = cursor.fetchone()
        cursor.execute(f"SELECT u.lexeme, count(*) FROM {table}, unnest({column}) u GROUP BY u.lexeme")
        return docs, length, dict(cursor.fetchall())


def _kept(corpus: str) -> tuple[int, int, dict[str, int]]:
    from django.db.models import Sum

    from knowledge.models import TermStat

    rows = TermStat.objects.filter(corpus=corpus).values("lexeme").annotate(d=Sum("docs"), n=Sum("length"))
    by = {r["lexeme"]: (r["d"], r["n"]) for r in rows}
    docs, length = by.pop("", (0, 0))
    return docs, length, {lx: d for lx, (d, _) in by.items() if d}


def test_keyword_statistics_stay_exact_through_inserts_revisions_renames_and_deletes(world):
    from django.db import transaction

    from knowledge.entries.services import entry_update
    from knowledge.memories.rows import memory_row_revise
    from knowledge.models import Memory, Message
    from knowledge.termstats import term_stats_compact

    ids = factory.post_messages(
        world.general,
        [
            {"speaker": "alice", "text": f"deploy {i} of the gateway, again and again" * (1 + i % 3)}
            for i in range(30)
        ],
    )
    memory = factory.make_memory_row(world.copilot, "Alice prefers email over chat")
    entry = factory.make_entry(world.copilot, name="Office hours", blocks=["Opens at 8"])
    with transaction.atomic():
        memory_row_revise(
            memory=Memory.objects.select_for_update().get(pk=memory.pk),
            text="Alice prefers phone calls",
            author_kind="system",
            author_name="tests",
        )
    entry_update(
        actor=factory.SYSTEM, entry_id=entry.pk, name="Opening hours", summary="When the office opens"
    )
    Message.objects.filter(pk__in=ids[:5]).delete()
    for _ in range(2):  # compaction changes no sum
        assert _kept("message") == _exact("knowledge_message", "search")
        assert _kept("memory") == _exact("knowledge_memory", "search")
        assert _kept("entry") == _exact("knowledge_entry", "head_vector")
        term_stats_compact()


def test_the_same_query_ranks_the_same_across_a_statistics_refresh(world):
    from django.db import connection

    from knowledge.termstats import term_stats_compact
    from memory.recall.seen import forget_stats

    conv = factory.make_conversation(world.copilot, world.general)
    client = world.client("copilot")
    # "deploy" is in 300 documents: more than any capped count or sampled statistic holds exactly.
    factory.post_messages(
        world.general,
        [{"speaker": "bob", "text": f"deploy number {i} went out on schedule {i % 17}"} for i in range(300)]
        + [{"speaker": "alice", "text": f"deploy {i} stuck on the gateway timeout"} for i in range(4)],
    )
    first = search(client, conv, "deploy gateway timeout")["results"]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_message")
    term_stats_compact()
    forget_stats()
    again = search(client, conv, "deploy gateway timeout")["results"]
    assert [(r["id"], r["routes"]) for r in first] == [(r["id"], r["routes"]) for r in again]
    from memory.recall.routes import CORPORA
    from memory.recall.terms import weigh_terms

    (deploy,) = [t for t in weigh_terms(["deploy"], CORPORA)["message"].terms]
    assert deploy.docs == 304


def test_the_statistics_compaction_is_scheduled():
    from django.utils.module_loading import import_string

    from curation.schedules import schedule_table
    from knowledge.termstats import term_stats_compact

    rows = {func: minutes for _, func, minutes in schedule_table()}
    assert rows["knowledge.tasks.term_stats_compact"] == 60
    assert import_string("knowledge.tasks.term_stats_compact").__doc__ and callable(term_stats_compact)


def test_when_even_the_rarest_term_is_common_the_rarest_terms_select_together():
    from memory.recall.terms import CANDIDATE_DOCS, Term, Weighed, candidate_selection

    def term(lexeme, docs, total=100_000):
        return Term(lexeme, 1.0, docs / total, docs)

    # under the bound: the rarest terms, any of them (as before)
    rare = Weighed([term("zqx", 40), term("printer", 900), term("floor", 30_000)], 5.0, 100_000)
    assert [t.lexeme for t in candidate_selection(rare).terms] == ["zqx", "printer"]
    assert not candidate_selection(rare).together
    # the rarest alone is over the bound: it and the next rarest, together, whose rows expected to
    # hold both (25,000 × 5 %) fit
    common = Weighed([term("ticket", 50_000), term("sup", 25_000), term("happen", 5_000)], 5.0, 1_000_000)
    assert [t.lexeme for t in candidate_selection(common).terms] == ["happen", "sup"]
    assert candidate_selection(common).together
    assert candidate_selection(common).tsquery == "'happen' & 'sup'"
    assert CANDIDATE_DOCS < 5_000  # the premise: even "happen" alone is over the bound
    # a one-word query still reads its word's documents; the second hop (strict) never widens
    one = Weighed([term("kenji", 25_000, 1_000_000)], 5.0, 1_000_000)
    assert [t.lexeme for t in candidate_selection(one).terms] == ["kenji"]
    strict = Weighed(common.terms, 5.0, 1_000_000, strict=True)
    assert not candidate_selection(strict)


def test_a_row_holding_several_common_words_of_the_query_is_found_by_them(world):
    """Every query word is in more documents than the candidate scan may read alone (and in half
    the corpus, which once left the keyword route without candidates): the rows holding them
    together are found."""
    from django.test import override_settings

    conv = factory.make_conversation(world.copilot, world.general)
    client = world.client("copilot")
    rows = [{"speaker": "bob", "text": f"Warehouse status is green, check {i}"} for i in range(2_100)]
    rows += [{"speaker": "ann", "text": f"Roof inspection done, round {i}"} for i in range(2_100)]
    for start in range(0, len(rows), 1000):
        factory.post_messages(world.general, rows[start : start + 1000])
    wanted = factory.post_messages(
        world.general, [{"speaker": "cy", "text": f"The warehouse roof leaks again, bay {b}"} for b in "ABC"]
    )
    with override_settings(BRAIN_EMBEDDINGS="none"):
        results = search(client, conv, "warehouse roof")["results"]
    assert {r["id"] for r in results[:3]} == set(wanted)
    assert all("keyword_messages" in r["routes"] for r in results[:3])
