"""The time a query names ("on 7 July, 2023", "in August", "last May", "two weeks ago", "the week
before June 27"), as a window of epoch seconds to hold message times against.

English calendar expressions only, read against the search's `now` (a month or weekday without a
year is its latest occurrence not after `now`). Nothing here knows any conversation: it reads
dates the way a calendar does. `query_window` returns None when the query names no time."""

import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
WEEKDAYS = {
    name: i
    for i, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
}
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "a couple of": 2,
    "a couple": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
UNITS = {"hour": 1 / 24, "day": 1, "week": 7, "month": 30, "year": 365}

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Most specific first: a day with its month (either order), optionally a year; a month with a
# year; an ISO date; a month alone; a year alone.
_DATE_FORMS = [
    rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?\b",
    rf"\b{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?\b",
    rf"\b{_MONTH},?\s+{_YEAR}\b",
    r"\b(?P<iso>(?:19|20)\d\d-[01]\d-[0-3]\d)\b",
    rf"\b{_MONTH}\b",
    rf"\b{_YEAR}\b",
]
_DATES = [re.compile(f, re.IGNORECASE) for f in _DATE_FORMS]
_SPAN = (
    r"(?P<n>\d+|a couple of|a couple|a few|few|several|an?|one|two|three|four|five|six)\s+"
    r"(?P<unit>hour|day|week|month|year)s?"
)
_AGO = re.compile(rf"\b{_SPAN}\s+ago\b", re.IGNORECASE)
_RELATIVE = re.compile(
    r"\b(?P<which>day\s+before\s+yesterday|yesterday|today|tonight|last\s+night|"
    r"this\s+(?:morning|afternoon|evening)|(?:last|this|past)\s+(?:week(?:end)?|month|year))\b",
    re.IGNORECASE,
)
# A weekday, alone or after "last"/"this"/"past" ("on Friday", "last Tuesday"); a plural
# ("on Mondays") names a habit, not a day.
_WEEKDAY = re.compile(
    r"(?:\b(?P<rel>last|this|past)\s+)?\b(?P<weekday>" + "|".join(WEEKDAYS) + r")\b", re.IGNORECASE
)
# A day of the month alone ("on the 6th"), where the words after it do not make it something
# else ("on the 3rd floor"): the end of the question, a stop, or a word that goes on with a time.
_ORDINAL = re.compile(
    r"\bon\s+the\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)\b"
    r"(?=\s*(?:$|[?.!,;:)]|(?:at|in|and|or|when|while|around|morning|afternoon|evening|night)\b))",
    re.IGNORECASE,
)
_WEEK_OF = re.compile(r"\bweek\s+of\s*(?:the\s+)?$", re.IGNORECASE)
# "before"/"after" in front of a date, optionally with a span: "the week before 27 June".
_BOUND = re.compile(
    rf"(?:\b(?:the\s+)?(?:{_SPAN.replace('?P<n>', '?P<bn>').replace('?P<unit>', '?P<bunit>')}|"
    r"(?P<bword>week|weekend|month|day))\s+)?\b(?P<side>before|after|since|until|by)\s*$",
    re.IGNORECASE,
)
_BARE_MONTH_CUE = re.compile(
    r"\b(?:in|of|last|this|next|since|early|late|mid|during|until|by|before|after|from|through)\s*(?:the\s+)?$",
    re.IGNORECASE,
)
_LAST = re.compile(r"\b(?P<rel>last|this|past)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Window:
    """[start, end) in epoch seconds; None is open on that side."""

    start: float | None
    end: float | None

    def holds(self, when: float | None, slack: float = 0.0) -> bool:
        if when is None:
            return False
        if self.start is not None and when < self.start - slack:
            return False
        return self.end is None or when < self.end + slack


def _count(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else NUMBERS.get(text, 1)


def _month_window(year: int, month: int, now: datetime) -> tuple[datetime, datetime]:
    start = now.replace(year=year, month=month, day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=monthrange(year, month)[1])


def _latest_year(month: int, day: int, now: datetime) -> int:
    """The year of the latest `month`/`day` not after `now`."""
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _first_date(q: str) -> re.Match | None:
    """The first date in `q`; where forms overlap, the longest (most specific) match."""
    found = [m for pattern in _DATES for m in pattern.finditer(q)]
    return min(found, key=lambda m: (m.start(), -m.end()), default=None)


def _date_span(match: re.Match, before: str, now: datetime) -> tuple[datetime, datetime] | None:
    g = match.groupdict()
    month_key = "month" if g.get("month") else None
    day_key = "day" if g.get("day") else None
    year_key = "year" if g.get("year") else None
    if g.get("iso"):
        try:
            day = datetime.strptime(g["iso"], "%Y-%m-%d").replace(tzinfo=now.tzinfo)
        except ValueError:
            return None
        return day, day + timedelta(days=1)
    year = int(g[year_key]) if year_key else None
    if month_key is None:
        start = now.replace(year=year, month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
        return start, start.replace(year=year + 1)
    month = MONTHS[g[month_key].lower().rstrip(".")]
    if not day_key and not year_key and not _BARE_MONTH_CUE.search(before):
        # A month name alone is often a word ("may I", "march on", "dec"): it counts as a month
        # only after a word that introduces a time ("in May", "last March", "since June").
        return None
    if day_key:
        day = int(g[day_key])
        if not 1 <= day <= 31:
            return None
        if year is None:
            year = _latest_year(month, day, now)
        try:
            start = now.replace(year=year, month=month, day=day, hour=0, minute=0, second=0, microsecond=0)
        except ValueError:
            return None
        return start, start + timedelta(days=1)
    if year is None:
        year = _latest_year(month, 1, now)
        rel = _LAST.search(before)
        if rel and rel.group("rel").lower() == "last" and (year, month) == (now.year, now.month):
            year -= 1  # "last May" said in May is the May before
    return _month_window(year, month, now)


def _weekday(q: str, now: datetime) -> datetime | None:
    """The midnight of the weekday `q` names: its latest occurrence not after `now` (today
    included), or before today after "last"/"past". "this" with a weekday still to come this
    week names the future, which no message's time is in: None; so does "the Friday after …", a
    day counted from something other than now."""
    match = _WEEKDAY.search(q)
    if match is None or re.search(r"\bthe\s+$", q[: match.start()], re.IGNORECASE):
        return None
    back = (now.weekday() - WEEKDAYS[match.group("weekday").lower()]) % 7
    rel = (match.group("rel") or "").lower()
    if rel in ("last", "past") and back == 0:
        back = 7
    if rel == "this" and back > now.weekday():
        return None
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - timedelta(days=back)


def _day_of_month(q: str, now: datetime) -> datetime | None:
    """The midnight of the day of the month `q` names alone ("on the 6th"): its latest
    occurrence not after `now`, skipping months too short for it."""
    match = _ORDINAL.search(q)
    if match is None:
        return None
    day = int(match.group("day"))
    if not 1 <= day <= 31:
        return None
    year, month = now.year, now.month
    for _ in range(13):
        if day <= monthrange(year, month)[1] and (year, month, day) <= (now.year, now.month, now.day):
            return now.replace(year=year, month=month, day=day, hour=0, minute=0, second=0, microsecond=0)
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
    return None


@lru_cache(maxsize=1024)
def query_window(q: str, now: datetime) -> Window | None:
    """The window of time `q` names, or None. The first calendar date wins; "before"/"after" in
    front of it open the window on one side (narrowed to a span when one is given: "the week
    before"), "the week of" widens it to that week; relative expressions ("three days ago", a
    weekday, "on the 6th", "the day before yesterday", "last week") count from `now`."""
    match = _first_date(q)
    if match:
        before = q[: match.start()]
        span = _date_span(match, before, now)
        if span is not None:
            start, end = span
            bound = _BOUND.search(before)
            if bound is None:
                if _WEEK_OF.search(before) and end - start == timedelta(days=1):
                    start -= timedelta(days=start.weekday())  # "the week of 3 March": its Monday on
                    end = start + timedelta(days=7)
                return Window(start.timestamp(), end.timestamp())
            side = bound.group("side").lower()
            length = None
            if bound.group("bn"):
                length = timedelta(days=_count(bound.group("bn")) * UNITS[bound.group("bunit").lower()])
            elif bound.group("bword"):
                length = timedelta(
                    days={"day": 1, "week": 7, "weekend": 7, "month": 30}[bound.group("bword").lower()]
                )
            if side in ("before", "until", "by"):
                return Window((start - length).timestamp() if length else None, start.timestamp())
            return Window(end.timestamp(), (end + length).timestamp() if length else None)
    ago = _AGO.search(q)
    if ago:
        days = _count(ago.group("n")) * UNITS[ago.group("unit").lower()]
        centre = now - timedelta(days=days)
        half = timedelta(days=max(1.0, days / 4))
        return Window((centre - half).timestamp(), (centre + half).timestamp())
    day = _weekday(q, now) or _day_of_month(q, now)
    if day is not None:
        return Window(day.timestamp(), (day + timedelta(days=1)).timestamp())
    rel = _RELATIVE.search(q)
    if rel:
        which = " ".join(rel.group("which").lower().split())
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        spans = {
            "today": (midnight, now),
            "tonight": (midnight, now),
            "yesterday": (midnight - timedelta(days=1), midnight),
            "day before yesterday": (midnight - timedelta(days=2), midnight - timedelta(days=1)),
            "last night": (midnight - timedelta(hours=12), midnight + timedelta(hours=6)),
            "this morning": (midnight, now),
            "this afternoon": (midnight, now),
            "this evening": (midnight, now),
            "this week": (midnight - timedelta(days=midnight.weekday()), now),
            "last week": (
                midnight - timedelta(days=midnight.weekday() + 7),
                midnight - timedelta(days=midnight.weekday()),
            ),
            "past week": (now - timedelta(days=7), now),
            "this weekend": (now - timedelta(days=3), now),
            "last weekend": (
                midnight - timedelta(days=midnight.weekday() + 2),
                midnight - timedelta(days=midnight.weekday()),
            ),
            "past weekend": (
                midnight - timedelta(days=midnight.weekday() + 2),
                midnight - timedelta(days=midnight.weekday()),
            ),
            "this month": (midnight.replace(day=1), now),
            "past month": (now - timedelta(days=30), now),
            "this year": (midnight.replace(month=1, day=1), now),
            "past year": (now - timedelta(days=365), now),
        }
        if which == "last month":
            first = midnight.replace(day=1)
            prev = (first - timedelta(days=1)).replace(day=1)
            spans[which] = (prev, first)
        if which == "last year":
            spans[which] = (
                midnight.replace(year=now.year - 1, month=1, day=1),
                midnight.replace(month=1, day=1),
            )
        if which in spans:
            start, end = spans[which]
            return Window(start.timestamp(), end.timestamp())
    return None
