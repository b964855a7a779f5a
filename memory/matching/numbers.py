"""Numbers, times, dates and days as text writes them, normalised for comparison: "5pm" and
"17:00" are "17", "twelve" is "12", "March" is "month:3", "Tuesdays" is "day:2", "50k" is
"50000" (memory.matching.claims reads them; nothing here knows a data set's wording)."""

# ruff: noqa: SIM905 (the calendar's words read best as one string each)
import re

MONTHS = {
    m: f"month:{n}"
    for n, m in enumerate(
        "january february march april may june july august september october november december".split(),
        1,
    )
}
MONTHS.update({m[:3]: n for m, n in list(MONTHS.items())} | {"sept": "month:9"})
_CARDINALS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
)
NUMBER_WORDS = {w: str(n) for n, w in enumerate(_CARDINALS.split())}
_ORDINALS = "_ first second third fourth fifth sixth seventh eighth ninth tenth"
NUMBER_WORDS.update({w: str(n) for n, w in enumerate(_ORDINALS.split()) if n})
NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "twice": "2"})
NUMBER_WORDS.pop("one")  # "one" is a pronoun as often as a number ("the late one")

_TIME = re.compile(r"^(\d{1,2})(?:[:.](\d{2}))?(am|pm)$")
CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
_ORDINAL = re.compile(r"^(\d+)(st|nd|rd|th)$")
DATE = re.compile(r"^(\d{1,2})/(\d{1,2})(?:/(\d{2,4}))?$")
_NUMERIC = re.compile(r"^[$€£+]?\d+(?:[.,]\d+)*(?:k|m|%|gb|mb|tb|h|min|s|x)?$")
_THOUSANDS = re.compile(r"^[$€£]?(\d+)k$")
WEEKDAYS = {
    d: f"day:{n}" for n, d in enumerate("monday tuesday wednesday thursday friday saturday sunday".split(), 1)
}
WEEKDAYS.update({d + "s": n for d, n in list(WEEKDAYS.items())})
WEEKDAYS.update({"mon": "day:1", "tue": "day:2", "tues": "day:2", "thu": "day:4", "thur": "day:4"})
WEEKDAYS.update({"thurs": "day:4", "fri": "day:5"})
WEEKDAY_ABBREVIATIONS = {"wed": "day:3", "sat": "day:6", "sun": "day:7"}  # words too: only capitalised
WEEKDAYS.update(
    {"weekday": "day:weekday", "weekdays": "day:weekday", "weekend": "day:weekend", "weekends": "day:weekend"}
)


def _clock(hour: int, minutes: str) -> str:
    """A time of day: "17" on the hour (so "5pm", "17:00" and "at 17" meet), else "17:30"."""
    return str(hour) if minutes == "00" else f"{hour}:{minutes}"


def number(part: str) -> str | None:
    """The number a piece of a token states, normalised ('5pm' -> '17:00', '08:00' -> '8:00',
    '3rd' -> '3', 'twelve' -> '12', '$49' -> '49', 'March' -> 'month:3'), or None."""
    part = part.strip("#$€£+").lower()
    if part in NUMBER_WORDS:
        return NUMBER_WORDS[part]
    if part in MONTHS:
        return MONTHS[part]
    if m := _TIME.match(part):
        return _clock(int(m.group(1)) % 12 + (12 if m.group(3) == "pm" else 0), m.group(2) or "00")
    if m := CLOCK.match(part):
        return _clock(int(m.group(1)), m.group(2))
    if m := _ORDINAL.match(part):
        return str(int(m.group(1)))
    if m := _THOUSANDS.match(part):
        return str(int(m.group(1)) * 1000)
    if _NUMERIC.match(part):
        digits = re.sub(r"[a-z%]+$", "", part).replace(",", "")
        return (digits.lstrip("0") or "0") if digits.isdigit() else digits
    return None
