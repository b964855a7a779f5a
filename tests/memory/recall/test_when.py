"""The time a query names, read as a calendar reads it (memory.recall.when)."""

from datetime import UTC, datetime

import pytest

from memory.recall.when import query_window

NOW = datetime(2023, 10, 20, 15, 30, tzinfo=UTC)


def days(q: str, now: datetime = NOW):
    window = query_window(q, now)
    if window is None:
        return None
    show = lambda x: None if x is None else datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%d")  # noqa: E731
    return show(window.start), show(window.end)


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("what did we ship on 7 July, 2023?", ("2023-07-07", "2023-07-08")),
        ("who was at dinner on May 3, 2023", ("2023-05-03", "2023-05-04")),
        ("the outage of 2023-05-07", ("2023-05-07", "2023-05-08")),
        ("Sept 3rd release notes", ("2023-09-03", "2023-09-04")),
        ("the budget in December 2022", ("2022-12-01", "2023-01-01")),
        ("what happened in 2021", ("2021-01-01", "2022-01-01")),
        # a month without a year is its latest occurrence not after now
        ("when did they go camping in June?", ("2023-06-01", "2023-07-01")),
        ("the offsite in November", ("2022-11-01", "2022-12-01")),
        ("what did we decide last May", ("2023-05-01", "2023-06-01")),
        # before / after a date open the window on one side, or span what was said
        ("what broke the week before August 3, 2023", ("2023-07-27", "2023-08-03")),
        ("the puppy she got two weeks before August 11, 2023", ("2023-07-28", "2023-08-11")),
        ("what changed after 5 June", ("2023-06-06", None)),
        ("anything before 1 March 2023", (None, "2023-03-01")),
        # relative to now
        ("what failed yesterday", ("2023-10-19", "2023-10-20")),
        ("last month's invoices", ("2023-09-01", "2023-10-01")),
        ("the call two weeks ago", ("2023-10-03", "2023-10-10")),
        ("the leak a few days ago", ("2023-10-16", "2023-10-18")),
        ("what did she say the day before yesterday", ("2023-10-18", "2023-10-19")),
        ("what did jonas say last night", ("2023-10-19", "2023-10-20")),
        # a weekday is its latest occurrence not after now (today, a Friday, included)
        ("what did Tom say last Tuesday?", ("2023-10-17", "2023-10-18")),
        ("what happened on friday", ("2023-10-20", "2023-10-21")),
        ("what did we decide last Friday", ("2023-10-13", "2023-10-14")),
        ("what did we say at monday's standup", ("2023-10-16", "2023-10-17")),
        ("what broke this Wednesday", ("2023-10-18", "2023-10-19")),
        # a day of the month alone: the latest such day, skipping months too short for it
        ("what did Leo say on the 6th?", ("2023-10-06", "2023-10-07")),
        ("who called on the 25th", ("2023-09-25", "2023-09-26")),
        ("what was paid on the 31st", ("2023-08-31", "2023-09-01")),
        # the week of a date: Monday to Monday
        ("what shipped in the week of July 5, 2023", ("2023-07-03", "2023-07-10")),
    ],
)
def test_a_named_time_is_read_as_a_window(q, expected):
    assert days(q) == expected


@pytest.mark.parametrize(
    "q",
    [
        "how may I help with the deploy",
        "what did they march for",
        "what did Melanie realize after the charity race?",
        "when is the standup",
        "error E4012 on host db-2023x",
        "who lives on the 3rd floor",
        "she got it on the 2nd attempt",
        "on Mondays we do the standup",
        # a weekday still to come this week is the future: no message is in it
        "what are we doing this Sunday",
        # a weekday counted from something else
        "what are they doing on the Friday after she got the job",
    ],
)
def test_words_that_only_look_like_times_name_none(q):
    assert query_window(q, NOW) is None


def test_last_may_said_in_may_is_the_year_before():
    assert days("what did we decide last May", datetime(2023, 5, 20, tzinfo=UTC)) == (
        "2022-05-01",
        "2022-06-01",
    )
    assert days("what did we decide in May", datetime(2023, 5, 20, tzinfo=UTC)) == (
        "2023-05-01",
        "2023-06-01",
    )
