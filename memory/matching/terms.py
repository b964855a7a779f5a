"""Key terms of a memory's text, and its folded text: what near-duplicate finding, the merge rules
and recall's one-copy-of-each-fact rule compare."""

import re

_STOP = """a an and are as at be been but by can could did do does for from had has have he her his how i
    if in into is it its just me my no not of on or our she so than that the their them then there
    these they this to too up us was we were what when where which who why will with would you your
    also about after again all any because before being both each few more most other over own same
    should some such only very"""
STOPWORDS = frozenset(_STOP.split())
TOKEN = re.compile(r"[\w][\w.\-/]*")
# Inside one recall answer (no vectors loaded) two memories are copies from this Dice overlap.
ANSWER_TERM_OVERLAP = 0.85


def key_terms(text: str) -> frozenset[str]:
    """Lower-cased words that carry meaning: no stop words, no one- or two-letter words unless
    they hold a digit; a plural 's' is dropped so 'tickets' meets 'ticket'."""
    terms = set()
    for token in TOKEN.findall(text.lower()):
        token = token.strip(".-/")
        if not token or token in STOPWORDS:
            continue
        if len(token) < 3 and not any(ch.isdigit() for ch in token):
            continue
        if len(token) > 4 and token.endswith("s") and not token.endswith("ss"):
            token = token[:-1]
        terms.add(token)
    return frozenset(terms)


def overlap(a: frozenset, b: frozenset) -> float:
    if not a or not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


def normalised(text: str) -> str:
    """The text as the exact-duplicate rule compares it (what NORM in memory.lifecycle.duplicates
    computes in SQL, before md5)."""
    return " ".join((text or "").split()).lower()


def near_identical(a: frozenset, b: frozenset) -> bool:
    """Whether two sets of key terms make the same statement inside one answer."""
    return bool(a and b) and overlap(a, b) >= ANSWER_TERM_OVERLAP
