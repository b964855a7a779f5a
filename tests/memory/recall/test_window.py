"""Newest first when a question's words are everywhere (memory.recall.window): the message route
narrows such a selection inside the index to the conversation's own channel, in full, and the
newest days of the rest; rare words are never narrowed; the day counts it reads stay exact."""

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from knowledge.models import Message
from memory.recall import routes, window
from memory.recall.terms import Selection, Term, Weighed
from tests import factory

NOW = timezone.now().replace(microsecond=0)
# Noon of yesterday (UTC): messages a few minutes apart before it fall on one day whatever the
# hour the suite runs at (the window takes whole days).
NEWEST_DAY = NOW.replace(hour=12, minute=0, second=0) - timedelta(days=1)


def search(client, conv, q, k=50):
    response = client.post(
        "/api/memory/search", {"agent": "copilot", "conversation": conv.pk, "q": q, "k": k}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()["results"]


def keyword_ids(results) -> set[int]:
    return {r["id"] for r in results if r["kind"] == "message" and "keyword_messages" in r["routes"]}


def _days_counted() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(*window.DAYS_SQL)
        return {int(day): int(n) for day, n in cursor.fetchall()}


def _days_exact() -> dict[int, int]:
    counts: dict[int, int] = {}
    for ts in Message.objects.values_list("ts", flat=True):
        counts[window.day_number(ts)] = counts.get(window.day_number(ts), 0) + 1
    return counts


def test_the_day_counts_stay_exact_through_inserts_and_deletes(world):
    factory.post_messages(
        world.general,
        [
            {"speaker": "bob", "text": f"note {i}", "ts": NOW - timedelta(days=i % 4, hours=i)}
            for i in range(12)
        ],
    )
    factory.post_messages(
        world.support, [{"speaker": "alice", "text": "late", "ts": NOW - timedelta(days=40)}]
    )
    assert _days_counted() == _days_exact() and sum(_days_exact().values()) == 13
    Message.objects.filter(channel=world.general, ts__lt=NOW - timedelta(days=2)).delete()
    assert _days_counted() == _days_exact()


def _term(lexeme, docs, corpus_docs):
    return Term(lexeme=lexeme, idf=1.0, share=docs / corpus_docs, docs=docs)


def test_the_window_holds_the_own_channel_and_enough_newest_days():
    today = window.day_number(NOW)
    days = [(str(today - d), 100) for d in range(100)]  # 10,000 messages, 100 a day
    rare = Selection([_term("e4012", 40, 10_000)])
    assert window.window_keys(rare, days, 10_000, 7, NOW) == ""  # within the bound: every day
    common = Selection([_term("billing", 8_000, 10_000)])  # 8,000 expected: a quarter suffices
    keys = window.window_keys(common, days, 10_000, 7, NOW).split(" | ")
    assert keys[0] == "'~c7'"
    assert _days_of(keys[1:]) == [today - d for d in range(25)]  # 2,500 × 8,000 / 10,000 = 2,000
    # Whole weeks by their week key: 25 days hold at least two whole weeks.
    weeks = len([k for k in keys if k.startswith("'~w")])
    assert weeks >= 2 and len(keys) == 1 + weeks + 25 - 7 * weeks
    assert window.window_keys(common, days, 10_000, None, NOW).split(" | ") == keys[1:]
    # Newest days that would be most of the corpus save too little: no narrowing.
    assert window.window_keys(Selection([_term("billing", 3_000, 10_000)]), days, 10_000, 7, NOW) == ""
    # Days after `now` (a search as of an earlier time) are not counted.
    later = [(str(today + 1), 5_000), *days]
    assert max(_days_of(window.window_keys(common, later, 15_000, 7, NOW).split(" | ")[1:])) == today


def _days_of(keys: list[str]) -> list[int]:
    """The days the day and week keys of a window name, newest first."""
    days = []
    for key in keys:
        number = int(key.strip("'")[2:])
        if key.startswith("'~w"):
            days += range(number * 7 + 6, number * 7 - 1, -1)
        else:
            assert key.startswith("'~d"), key
            days.append(number)
    return sorted(days, reverse=True)


def test_a_week_key_is_used_only_for_a_week_the_window_holds_whole():
    today = window.day_number(NOW)
    sparse = [(str(today - d), 100) for d in range(0, 60, 2)]  # a day without messages between each
    keys = window.window_keys(Selection([_term("billing", 8_000, 3_000)]), sparse, 3_000, None, NOW)
    days = _days_of(keys.split(" | "))
    oldest = min(days)
    # Every day named lies in the window; every chosen day is named; days between hold nothing.
    assert set(days) >= {today - d for d in range(0, 60, 2) if today - d >= oldest}
    assert all(oldest <= day <= today for day in days)


def test_week_keys_select_the_same_messages_as_the_day_keys(world):
    """The index's week key of a message is its day's // 7 (migration 0031): a window written
    with week keys reads exactly the rows its days' keys read."""
    times = [NOW - timedelta(days=d, hours=h) for d in range(30) for h in (0, 7, 15)]
    factory.post_messages(
        world.general, [{"speaker": "bob", "text": "billing run", "ts": ts} for ts in times]
    )
    today = window.day_number(NOW)
    chosen = list(range(today, today - 20, -1))
    by_days = " | ".join(f"'~d{day}'" for day in chosen)
    by_weeks = " | ".join(window.day_keys(chosen, today))
    assert "~w" in by_weeks

    def selected(keys: str) -> set[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM knowledge_message WHERE brain_message_keys(search, channel_id, ts) @@ %s::tsquery",
                [keys],
            )
            return {row[0] for row in cursor.fetchall()}

    expected = {m.pk for m in Message.objects.all() if window.day_number(m.ts) in set(chosen)}
    assert selected(by_days) == expected == selected(by_weeks) and 0 < len(expected) < len(times)


def _message_plan(words, keys="") -> str:
    """EXPLAIN of the message route's keyword statement for `words`, in a scope no other index
    answers, sequential scans off."""
    sql, params = routes._keyword_rows(
        routes.MESSAGE,
        Weighed(words, avg_length=4.0, docs=10),
        "knowledge_message.store <> %s",
        [""],
        "knowledge_message.ts",
        10,
        keys,
    )
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_keyword_statement_selects_through_the_keys_index(world):
    keys = f"'~c{world.general.pk}' | '~d{window.day_number(NOW)}'"
    plan = _message_plan([_term("billing", 5, 10)], keys)
    assert "message_keys_gin" in plan, plan


def test_the_candidates_are_read_through_the_index_once_however_many_words(world):
    words = [_term(w, 3, 10) for w in ("billing", "servic", "export", "report", "outag")]
    plan = _message_plan(words)
    assert plan.count("Bitmap Index Scan on message_keys_gin") == 1, plan


def test_common_words_read_the_own_channel_in_full_and_the_newest_days_of_the_rest(world, monkeypatch):
    conv = factory.make_conversation(world.copilot, world.general)
    other = factory.make_channel("billing-ops")
    factory.make_conversation(world.copilot, other)  # copilot takes part there: its shared store is read
    old_other = factory.post_messages(
        other,
        [
            {
                "speaker": "bob",
                "text": f"billing service outage report {i}",
                "ts": NOW - timedelta(days=90, hours=i),
            }
            for i in range(10)
        ],
    )
    new_other = factory.post_messages(
        other,
        [
            {
                "speaker": "bob",
                "text": f"billing service outage report {20 + i}",
                "ts": NEWEST_DAY - timedelta(minutes=i),
            }
            for i in range(10)
        ],
    )
    (old_own,) = factory.post_messages(
        world.general,
        [
            {
                "speaker": "alice",
                "text": "billing service outage in our channel",
                "ts": NOW - timedelta(days=120),
            }
        ],
    )
    (rare_old,) = factory.post_messages(
        other,
        [{"speaker": "bob", "text": "error ZQX-7781 on the billing service", "ts": NOW - timedelta(days=95)}],
    )
    client = world.client("copilot")
    before = keyword_ids(search(client, conv, "billing service outage"))
    assert set(old_other) <= before and set(new_other) <= before and old_own in before

    monkeypatch.setattr(window, "WINDOW_DOCS", 4)  # as if these words were in a million messages
    narrowed = keyword_ids(search(client, conv, "billing service outage"))
    assert set(new_other) <= narrowed and old_own in narrowed  # the newest days; the own channel in full
    assert not set(old_other) & narrowed and rare_old not in narrowed
    assert rare_old in keyword_ids(search(client, conv, "ZQX-7781"))  # a rare word reads every day
