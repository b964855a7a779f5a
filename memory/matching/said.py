"""When one word says another, for the relation finder and the merge check: the same word, a
longer form of it, a typo, an abbreviation no dictionary knows, a synonym (WordNet's most
frequent senses) or a form derived from it (day / daily). `has(word, words)` looks a word up among many by set intersection of each
word's keys (cached per word and per set), not pair by pair."""

from functools import lru_cache

from memory.matching import claims


def alike(x: str, y: str) -> bool:
    """Two lemmas are the same word: equal, one of four letters or more a prefix of the other by
    letters only (deploy / deployment; not brother / brother-in-law, app / appointment), or, from
    five letters, one letter apart after the same first one (a typo: penicilin / penicillin,
    licence / license; not maternity / paternity)."""
    if x == y:
        return True
    short, long = sorted((x, y), key=len)
    if len(short) >= 4 and short.isalpha() and long.startswith(short) and long[len(short) :].isalpha():
        return True
    return (
        len(short) >= 5
        and short.isalpha()
        and long.isalpha()
        and short[0] == long[0]  # a typo seldom hits the first letter: maternity / paternity
        and len(long) - len(short) <= 1
        and _one_edit(short, long)
    )


def _one_edit(x: str, y: str) -> bool:
    i = 0
    while i < len(x) and x[i] == y[i]:
        i += 1
    return x[i + (len(x) == len(y)) :] == y[i + 1 :]


@lru_cache(maxsize=200_000)
def same(x: str, y: str) -> bool:
    """The same word, an abbreviation of it (a short word no dictionary here knows that starts
    the other: St / Street, prio / priority), or a synonym (WordNet: one of their most frequent
    senses shared)."""
    if alike(x, y):
        return True
    if not (x.isalpha() and y.isalpha()):
        return False
    short, long = sorted((x, y), key=len)
    if 2 <= len(short) <= 4 and long.startswith(short) and claims.unknown(short):
        return True
    return claims.synonymous(x, y)


@lru_cache(maxsize=50_000)
def _keys(word: str) -> tuple[frozenset, ...]:
    """What `_same` compares of one word, as sets, so a word is looked up among many by set
        intersection, not pair by pair: itself; its prefixes of four letters or more that leave
        letters (deploy in deployment); its prefixes of two to four letters, and itself when it is
        an abbreviation no dictionary knows (St / Street); itself and its one-letter deletions after
        the first letter from five letters (a typo); its most frequent senses (a synonym); the words
    WordNet derives from it (day / daily)."""
    alpha = word.isalpha()
    prefixes = frozenset(word[:k] for k in range(4, len(word)) if alpha) if len(word) > 4 else frozenset()
    starts = frozenset(word[:k] for k in range(2, 5) if k < len(word)) if alpha else frozenset()
    abbreviation = (
        frozenset([word]) if alpha and 2 <= len(word) <= 4 and claims.unknown(word) else frozenset()
    )
    typos = frozenset([word, *(word[:i] + word[i + 1 :] for i in range(1, len(word)))])
    typos = typos if alpha and len(word) >= 5 else frozenset()
    senses = claims.top_senses(word) if alpha else frozenset()
    return frozenset([word]), prefixes, starts, abbreviation, typos, senses, claims.forms(word)


@lru_cache(maxsize=8192)
def _index(terms: frozenset) -> tuple[frozenset, ...]:
    """The union of each of `_keys` over `terms`."""
    parts = [_keys(t) for t in terms]
    return tuple(frozenset().union(*(p[i] for p in parts)) for i in range(7))


def has(term: str, terms) -> bool:
    """`terms` say `term` (each word of it, for a name of several words): `_same` against any."""
    if " " in term:
        return all(has(w, terms) for w in term.split())
    words, prefixes, starts, abbreviation, typos, senses, derived = _keys(term)
    i_words, i_prefixes, i_starts, i_abbreviation, i_typos, i_senses, i_derived = _index(frozenset(terms))
    return bool(
        term in i_words
        or words & i_prefixes  # a longer word of theirs starts with it
        or prefixes & i_words  # it starts with a word of theirs
        or abbreviation & i_starts
        or starts & i_abbreviation
        or typos & i_typos
        or senses & i_senses
        or derived & i_words  # a word derived from it (day / daily, Poland / Polish)
        or words & i_derived
    )


def dice(a: frozenset, b: frozenset) -> float:
    """The share of terms the two sets have in common, a term counted when the other set has
    the same word or a synonym."""
    if not a or not b:
        return 0.0
    return (sum(has(t, b) for t in a) + sum(has(t, a) for t in b)) / (len(a) + len(b))
