"""Newest first, when the message route's words are everywhere.

The route's candidate selection (terms.candidate_selection) bounds the rows a search reads by
its words' documents. On a large corpus even the rarest words of a question can be in tens of
thousands of messages, and PostgreSQL visits each matching row to test its scope and time. Then
the selection is narrowed inside the index (whose keys hold each message's channel and day,
migration 0027) to the conversation's own channel, in full, and the newest days of the rest:
as many days as hold at most about WINDOW_DOCS of its rows. (How many rows hold all of a
question's words is not known before reading them; words of one question often come together —
"billing service", "network drive" — so the bound is the rarest word's documents, not the product
of the words' shares.) A rare word is
never narrowed (its documents are within the bound), and neither is a corpus whose newest days
would be most of it — so a search reads about the same rows at a million messages as at a
hundred thousand, and the answers differ only for words common enough that the newest of their
messages are what the route ranks first anyway (ties go to the newest).

The days are counted exactly on every write (knowledge_termstat, corpus 'message_day'): the same
search over the same data reads the same days. A whole week of them is named by its week key
('~w', migration 0031): the same rows, and GIN reads fewer keys for each candidate."""

from datetime import datetime

from memory.recall.terms import CANDIDATE_DOCS, Selection

# About the rows a narrowed selection reads outside the conversation's own channel.
WINDOW_DOCS = CANDIDATE_DOCS
# Newest days holding more than this share of the corpus: narrowing would save too little.
MOST = 0.5
DAY_SECONDS = 86_400
# The index's '~w' key of a day is its day number // 7. Same rows as the week's day keys; the
# message keyword statement on bench-large's kept 1M world, 110 windowed questions, alternating,
# two runs (load 3.6): mean 13.8-13.9 -> 11.5 ms, p90 22.2-22.4 -> 17.0-17.4 ms.
WEEK_DAYS = 7
DAYS_SQL = (
    "SELECT lexeme, sum(docs) FROM knowledge_termstat WHERE corpus = 'message_day' "
    "GROUP BY lexeme HAVING sum(docs) > 0",
    [],
)


def day_number(when: datetime) -> int:
    """Whole days since 1970-01-01 UTC (the index's '~d' key of a message at `when`)."""
    return int(when.timestamp() // DAY_SECONDS)


def needs_window(selection: Selection) -> bool:
    """Whether the selection may read more than WINDOW_DOCS rows (then DAYS_SQL's counts decide
    the window)."""
    return selection.most > WINDOW_DOCS


def window_keys(
    selection: Selection, days: list[tuple], docs: int, channel_id: int | None, now: datetime
) -> str:
    """The index keys the selection is narrowed to, as a tsquery ('~c<own channel>' | '~w<week>'
    | '~d<day>' | …), or "" for no narrowing. `days` are DAYS_SQL's rows, `docs` the corpus's messages."""
    if not needs_window(selection) or docs <= 0:
        return ""
    wanted = docs * WINDOW_DOCS / selection.most
    today = day_number(now)
    newest_first = sorted(((int(day), int(n)) for day, n in days if int(day) <= today), reverse=True)
    chosen, total = [], 0
    for day, count in newest_first:
        chosen.append(day)
        total += count
        if total >= wanted:
            break
    if total >= wanted and total <= MOST * docs:
        keys = day_keys(chosen, today)
        if channel_id is not None:
            keys.insert(0, f"'~c{int(channel_id)}'")
        return " | ".join(keys)
    return ""


def day_keys(chosen: list[int], today: int) -> list[str]:
    """The index keys of the messages of the days `chosen` (the days holding messages from
    `today` back to the oldest of them, newest first): a week key for each week whose seven days
    all lie between the oldest chosen day and `today` (days in between that are not chosen hold
    no message), a day key for every other chosen day."""
    oldest = min(chosen)
    keys, weeks = [], set()
    for day in chosen:
        week = day // WEEK_DAYS
        if week * WEEK_DAYS >= oldest and week * WEEK_DAYS + WEEK_DAYS - 1 <= today:
            if week not in weeks:
                weeks.add(week)
                keys.append(f"'~w{week}'")
        else:
            keys.append(f"'~d{day}'")
    return keys
