"""The rolling-summary job, version 1: the prompt, the JSON schema of the reply, the code rules a
reply must pass, and the extractive fold used when no model is available (or its reply fails).
Change any of them together and bump VERSION; it is stored with every summary.

A fold takes the summary so far and the turns that just left the verbatim window (oldest first)
and returns the new summary. Code rules for a model's reply (`check`):
- the summary is not blank and counts at most `limit` tokens (knowledge.tokens.count_tokens);
- every speaker of the new turns is named in it unless the previous summary already names them
  (a reply that drops a participant has dropped what they said);
- it keeps every claim of the new turns in its role and adds none; the summary so far it may
  cut, never invert, and a turn in which no claim can be read ("thanks!") it may leave out
  (memory.matching.kept).

The extractive fold keeps one line per turn, `speaker: first sentence` cut to LINE_TOKENS, and
rolls: when the lines pass `limit`, the first line (how the conversation began) stays and the
oldest lines after it go, with a count of what went."""

import re

from knowledge.tokens import count_tokens, truncate_to_tokens
from memory.matching.claims import read
from memory.matching.rules import summary_breach

VERSION = "history/3"
LINE_TOKENS = 40
TURN_CHARS = 1500  # one very long turn is cut in the prompt (never in the database)
DROPPED_RE = re.compile(r"^\(… (\d+) earlier turns? left out\)$")

SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": 8000, "pattern": r"\S"}},
    "required": ["summary"],
    "additionalProperties": False,
}

SYSTEM = """You keep the running summary of a conversation between people and an AI agent. You \
get the summary so far (it may be empty) and the turns that came after it, oldest first, each as \
"speaker: text". Return the updated summary: what was asked, decided, promised and left open, \
with the names, numbers, dates and identifiers exactly as said. Keep what still matters from the \
summary so far; drop small talk. Never add anything the turns do not say. Write at most {words} \
words, plain sentences, no headings. Reply with JSON: {{"summary": "<the updated summary>"}}."""
EXAMPLES = ("...", "<the updated summary>", "the updated summary")


def turn_line(speaker: str, text: str, tokens: int = LINE_TOKENS) -> str:
    """One turn in a summary: the speaker and the first sentence (or the start) of what was said."""
    flat = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", flat, maxsplit=1)[0]
    return truncate_to_tokens(f"{speaker}: {first}", tokens)


def prompt(*, previous: str, turns: list[tuple[str, str]], limit: int) -> list[dict]:
    body = "\n".join(f"{speaker}: {' '.join(text.split())[:TURN_CHARS]}" for speaker, text in turns)
    return [
        {"role": "system", "content": SYSTEM.format(words=max(limit * 3 // 4, 20))},
        {"role": "user", "content": f"Summary so far:\n{previous or '(none)'}\n\nNew turns:\n{body}"},
    ]


def check(data: dict, *, previous: str, turns: list[tuple[str, str]], limit: int, sources=None) -> str:
    """Why a model's reply may not be stored ("" when it may). With `sources` (the summary so far,
    then each new turn), the summary keeps every claim of each turn in its role and adds none;
    the summary so far it may cut, never invert (memory.matching.rules)."""

    summary = data["summary"].strip()
    if not summary:
        return "the summary is blank"
    if sources is not None and (why := summary_breach(summary, sources, examples=EXAMPLES)):
        return f"the summary {why.removeprefix('it ')}"
    tokens = count_tokens(summary)
    if tokens > limit:
        return f"the summary counts {tokens} tokens, over the limit of {limit}"
    lowered = summary.lower()
    missing = sorted({s for s, _ in turns if s.lower() not in previous.lower() and s.lower() not in lowered})
    if missing:
        return f"the summary leaves out who spoke: {', '.join(missing)}"
    # the summary so far may be cut to fit, and a turn that states nothing ("thanks!") left out
    idle = {n for n, (_, text) in enumerate(turns, 1) if not read(text).claims}
    if sources is not None and (
        why := summary_breach(summary, sources, every_claim=True, may_drop={0, *idle})
    ):
        return f"the summary {why.removeprefix('it ')}"
    return ""


def extractive_fold(previous: str, turns: list[tuple[str, str]], *, limit: int) -> str:
    """The summary so far with one line per new turn, rolled to at most `limit` tokens."""
    lines = [line for line in previous.split("\n") if line.strip()]
    dropped = 0
    if len(lines) > 1 and (match := DROPPED_RE.match(lines[1])):
        dropped = int(match[1])
        del lines[1]
    lines += [turn_line(speaker, text) for speaker, text in turns]
    while len(lines) > 2 and _cost(lines, dropped) > limit:
        del lines[1]
        dropped += 1
    text = _join(lines, dropped)
    return text if count_tokens(text) <= limit else truncate_to_tokens(text, limit)


def _join(lines: list[str], dropped: int) -> str:
    if not dropped:
        return "\n".join(lines)
    note = f"(… {dropped} earlier turn{'s' if dropped != 1 else ''} left out)"
    return "\n".join([lines[0], note, *lines[1:]])


def _cost(lines: list[str], dropped: int) -> int:
    return count_tokens(_join(lines, dropped))
