"""Word forms the relation finder reads (memory.matching.relations): an acronym and the words it
stands for ("OOO" / "out of office"), which its duplicate rule counts as said, and a word against
itself with a negating prefix (lock / unlock, active / inactive), an opposite. A word with any
other prefix is another word (remove / move)."""

NEGATING_PREFIXES = ("a", "de", "di", "il", "im", "in", "ir", "no", "un")


def spelt_out(words, terms, acronyms) -> set[str]:
    """The `terms` of a text (its `words` in order) that an acronym among `acronyms` spells out
    — three to five letters, the initials of as many words in a row — and those acronyms."""
    found: set[str] = set()
    words = [w for w in words if w[:1].isalpha()]
    for acronym in acronyms:
        if not (3 <= len(acronym) <= 5 and acronym.isalpha()) or acronym in terms:
            continue
        n = len(acronym)
        for i in range(len(words) - n + 1):
            if "".join(w[0] for w in words[i : i + n]) == acronym:
                found |= {w for w in words[i : i + n] if w in terms} | {acronym}
    return found


def prefix_negates(terms_a, terms_b) -> tuple[str, str] | None:
    """A word of one side that is a word of the other with a negating prefix (lock / unlock,
    active / inactive), or None: two such texts say opposite things, whatever else they share."""
    for x in terms_a:
        for y in terms_b:
            short, long = sorted((x, y), key=len)
            extra = long[: len(long) - len(short)]
            if len(short) >= 4 and extra in NEGATING_PREFIXES and long.endswith(short):
                return x, y
    return None
