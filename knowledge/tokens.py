"""The one token counter. Every budget in Brain — memory_search's `budget_tokens`, the pinned
memo's `BRAIN_MEMO_BUDGET_TOKENS`, context compilation — is counted with `count_tokens`.

Agents run on many different models, each with its own tokenizer, so Brain does not pretend to
know the exact count. It uses a fast, deterministic approximation of GPT-style BPE tokenizers that
errs on the high side (so a budget counted here is not exceeded by a real tokenizer in the usual
case):

- a run of ASCII letters counts one token per 4 letters, rounded up ("the" 1, "password" 2,
  "internationalisation" 5) — about 1.3–1.5 tokens per English word;
- a run of digits counts one token per 3 digits ("2026" 2, "E1234" 1 + 2);
- every other visible character (punctuation, symbols, each non-ASCII letter, CJK, emoji) is one
  token; whitespace is free.

Because no piece spans whitespace, counts add up: `count_tokens(a + "\\n" + b) ==
count_tokens(a) + count_tokens(b)`, which is how sections and results are summed.
"""

import re

_PIECE = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")
# What counts as one token: at most 4 letters, at most 3 digits, or one other visible character.
# Matched greedily, a run of n letters is ceil(n / 4) matches (and of n digits ceil(n / 3)), so
# the count is the number of matches: one findall instead of a sum over every run (the same
# counts, tested against the pieces). Recall counts about a hundred lines per search; on 3,000
# LoCoMo lines, 25.2 → 12.9 µs a line. Same run against main over HTTP (`python -m bench.peers_ab
# ab --rounds 2`, 764 searches, load 3.8), the packing stage, which nothing else here changed:
# p50 2.44 → 2.04 ms.
_TOKEN = re.compile(r"[A-Za-z]{1,4}|[0-9]{1,3}|[^\sA-Za-z0-9]")
ELLIPSIS = "…"


def _piece_tokens(piece: str) -> int:
    first = piece[0]
    if first.isascii() and first.isalpha():
        return (len(piece) + 3) // 4
    if first.isascii() and first.isdigit():
        return (len(piece) + 2) // 3
    return 1


def count_tokens(text: str | None) -> int:
    """The number of tokens `text` is counted as in every Brain budget."""
    if not text:
        return 0
    return len(_TOKEN.findall(text))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """`text` cut at a piece boundary so that it counts at most `max_tokens`, with "…" appended
    (inside the limit) when anything was cut. Returns "" when not even one token fits."""
    if max_tokens <= 0:
        return ""
    if count_tokens(text) <= max_tokens:
        return text
    limit = max_tokens - 1  # room for the ellipsis
    used, end = 0, 0
    for match in _PIECE.finditer(text):
        cost = _piece_tokens(match.group())
        if used + cost > limit:
            break
        used += cost
        end = match.end()
    head = text[:end].rstrip()
    return f"{head} {ELLIPSIS}" if head else ELLIPSIS
