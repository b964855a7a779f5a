"""How two memory texts relate: `duplicate`, `contradiction` or neither, with a short reason a
reviewer can check (version "relations/1"), and the finder of the active memories a memory
duplicates or contradicts (`related_for`). The one classifier every place that pairs memories
uses: the write's `related` list and the queue card, a reviewer's approval (a contradiction
needs the same decision as a keyed conflict), the queue's near-duplicate hints, and
consolidation's merge rules.

The rules read the two texts only, so the write, a later read and the queue say the same (on
the dev pairs a cosine added nothing the terms did not: bench.relations_eval):

1. **The same subject** — the share of content terms the texts have in common (Dice of key terms
   without numbers or negation words, `SUBJECT`) — or neither is said.
2. **Another subject, not another value**: each text names an identifier the other lacks
   (SUP-2633 / SUP-2663, db-prod-1 / db-dev-3), or each names a different name among its first
   terms, where the subject of a sentence stands ("Sam Okoye's …" / "Sam Lindqvist's …").
3. **One slot differs** — a contradiction, with its kind:
   - `number`: each side has a number, version, price, date or time the other lacks
     ("5pm" = "17:00", "twelve" = "12", "3rd" = "3" before comparing);
   - `negation`: one side negates (not, no, never, n't, no longer …) and the terms it negates
     are the other's claim;
   - `antonym`: each side says one side of a pair of opposites (`OPPOSITE_SIDES`) and not the
     other ("prefers e-mail over phone calls" names both sides: no side);
   - `entity`: each side names someone or something the other does not (a person, team,
     place, address) in the same role.
   Two slots differing (another name *and* another number) make another subject, not a
   contradiction ("Growth standup at 9:15" / "Platform standup at 9:45"); a negation *and* an
   opposite word cancel ("not allowed" / "forbidden").
4. **A duplicate**: nothing differs (no number or name on one side only against another on the
   other) and each side says most of what the other says (`DUPLICATE_TERMS`; an acronym says
   the words it stands for, and a word with a short prefix that does not negate it says the word).

SUBJECT and DUPLICATE_TERMS were chosen by 5-fold cross-validation on
shared/data/memory-pairs-dev (`python -m bench.relations_eval --cv`; docs/PERFORMANCE.md,
"Relations"); four folds of five chose each (the fifth SUBJECT 0.35, another DUPLICATE_TERMS 0.75)."""

import re
import unicodedata
from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, Case, Q, Value, When

from knowledge import access
from knowledge.models import Memory
from knowledge.principal import Principal
from memory.matching.paraphrase import prefix_negates, prefixed, spelt_out

VERSION = "relations/1"
DUPLICATE = "duplicate"
CONTRADICTION = "contradiction"

SUBJECT = 0.4  # Dice of content terms for "the same subject"
DUPLICATE_TERMS = 0.7  # the share of each side's terms and numbers the other says, for a duplicate
SHARED_TERMS = 2  # a subject is more than one word ("memory 3" / "queued memory 5")
HEAD = 3  # the first content terms of a text, where its subject stands

# Opposite words (after folding and the plural/verb stem `_stem`): a small curated list of
# states, permissions, preferences and channels, not of any data set's wording.
_OPPOSITE_GROUPS = [
    (
        "allowed permitted allow permit",
        "forbidden prohibited banned forbid prohibit disallowed frozen freeze",
    ),
    ("open opened", "closed close blocked shut"),
    ("on enabled enable", "off disabled disable"),
    ("required mandatory compulsory", "optional voluntary"),
    ("like love prefer enjoy", "dislike hate avoid"),
    ("early earlier morning", "late later afternoon evening"),
    ("remote home", "on-site onsite office"),
    ("approved accepted granted", "rejected declined denied refused"),
    ("kept retained stored", "deleted removed purged erased"),
    ("include included", "exclude excluded"),
    ("phone call", "e-mail email mail"),
    ("available", "unavailable"),
    ("public", "private"),
    ("internal", "external"),
    ("always", "never"),
    ("before", "after"),
    ("increase increased raise", "decrease decreased cut lowered"),
    ("active", "inactive"),
    ("valid", "invalid expired"),
    ("true yes", "false"),
    ("start started", "stop stopped"),
    ("paid", "free unpaid"),
    ("upstairs", "downstairs"),
    ("weekday", "weekend"),
    ("win won", "lose lost"),
    ("pass passed", "fail failed"),
    ("supported", "unsupported deprecated"),
    ("encrypted", "unencrypted plaintext"),
]

_NEGATIONS = frozenset("not no never none nobody nothing without cannot nor neither".split())  # noqa: SIM905
_CARDINALS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
)
_NUMBER_WORDS = {w: str(n) for n, w in enumerate(_CARDINALS.split())}
_NUMBER_WORDS.update(
    {
        w: str(n)
        for n, w in enumerate("_ first second third fourth fifth sixth seventh eighth ninth tenth".split())  # noqa: SIM905
        if n
    }
)
_NUMBER_WORDS.update(
    {"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "once": "1", "twice": "2"}
)
_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her his how i
    if in into is it its just me my of on or our she so than that the their them then there these
    they this to too up us was we were what when where which who why will with would you your also
    about again all any because being both each few more most other over own same should some such
    only very per via get gets got will shall must may might now yet still fyi please new current
    currently every each our we're it's is'nt""".split()  # noqa: SIM905
)
# Capitalised words that are no names when they open a sentence or follow a colon.
_COMMON_CAPS = frozenset(
    """the a an this that these those it its he she they we you i my our their his her if when then
    so but and or on in at by for from to of with as is are was were be been there every each all
    both no yes also however after before since during while until now today please note update
    monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december fyi ok""".split()  # noqa: SIM905
)
_TOKEN = re.compile(r"[\w@$€£+][\w.@'’:\-+%]*")
_TIME = re.compile(r"^(\d{1,2})(?::(\d{2}))?(am|pm)$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
_ORDINAL = re.compile(r"^(\d+)(st|nd|rd|th)$")
_NUMERIC = re.compile(r"^[$€£+]?\d+(?:[.,]\d+)*(?:k|m|%|gb|mb|tb|h|min|s)?$")
# Phrases with a negation word that negate nothing ("no later than the 5th" sets a deadline).
_NOT_NEGATING = re.compile(r"\b(?:no|not) (?:later|earlier|more|less|fewer|sooner) than\b|\bnot only\b", re.I)
# Verbs that deny what follows or precedes them ("the reset fails" / "can't reset").


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def _stem(word: str) -> str:
    """A crude stem, the same for a word's forms: plural and third-person 's', '-ed', '-ing' and
    a final 'e' dropped, so 'closes', 'closed' and 'close' meet, and 'likes' and 'like'."""
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]  # stopped -> stop
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


_DENIALS = frozenset(_stem(w) for w in ("fail", "unable", "lack", "missing"))
OPPOSITE_SIDES = [
    (frozenset(_stem(w) for w in _left.split()), frozenset(_stem(w) for w in _right.split()))
    for _left, _right in _OPPOSITE_GROUPS
]
OPPOSITES: dict[str, frozenset[str]] = {}
for _left, _right in _OPPOSITE_GROUPS:
    for _side, _other in ((_left, _right), (_right, _left)):
        for _w in _side.split():
            OPPOSITES[_stem(_w)] = OPPOSITES.get(_stem(_w), frozenset()) | {_stem(o) for o in _other.split()}


def _number(part: str) -> str | None:
    """The number a piece of a token states, normalised ('5pm' -> '17:00', '08:00' -> '8:00',
    '3rd' -> '3', 'twelve' -> '12', '$49' -> '49', '020' -> '20'), or None."""
    part = part.strip("$€£+").lower()
    if part in _NUMBER_WORDS:
        return _NUMBER_WORDS[part]
    if m := _TIME.match(part):
        return f"{int(m.group(1)) % 12 + (12 if m.group(3) == 'pm' else 0)}:{m.group(2) or '00'}"
    if m := _CLOCK.match(part):
        return f"{int(m.group(1))}:{m.group(2)}"
    if m := _ORDINAL.match(part):
        return str(int(m.group(1)))
    if _NUMERIC.match(part):
        digits = re.sub(r"[a-z%]+$", "", part).replace(",", "")
        return (digits.lstrip("0") or "0") if digits.isdigit() else digits
    return None


def _pieces(token: str) -> list[tuple[str, str]]:
    """(kind, value) of one token: ('number', '17:00') for each number it states (a range
    '8-20' states two), ('id', 'sup-2291') for an identifier (letters and digits: SUP-2291,
    gw-east-2, H5, v2.4), else ('word', token)."""
    bare = token.strip(".,;:!?()'\"’-").lower()
    bare = re.sub(r"['’]s$", "", bare)
    if not bare:
        return []
    if not any(c.isdigit() for c in bare):
        return [("word", bare)] if bare not in _NUMBER_WORDS else [("number", _NUMBER_WORDS[bare])]
    if (n := _number(bare)) is not None:
        return [("number", n)]
    parts = [p for p in re.split(r"[-–]", bare) if p]
    numbers = [_number(p) for p in parts]
    if parts and all(n is not None for n in numbers):
        return [("number", n) for n in numbers]
    return [("id", bare)]


@dataclass(frozen=True)
class Reading:
    """What the rules read in one text."""

    words: tuple[str, ...]  # folded, stemmed words in order (numbers normalised)
    terms: frozenset[str]  # content terms and identifiers: no stop words, numbers or negations
    numbers: frozenset[str]
    identifiers: frozenset[str]
    names: tuple[tuple[str, ...], ...]  # runs of capitalised words and e-mail addresses, folded
    openers: tuple[str, ...]  # one capitalised word opening a sentence (a name or not)
    head: frozenset[str]  # the first HEAD content terms and names
    negated: tuple[frozenset[str], ...]  # for each negation, the content terms it negates
    surface: dict  # stem -> the word as written, for reasons

    def said(self, stem: str) -> str:
        return self.surface.get(stem, stem)


def read(text: str) -> Reading:
    text = _NOT_NEGATING.sub(" by ", _fold(text or "")).replace("/", " ")
    words, terms, numbers, identifiers, names, order, negated = [], set(), set(), set(), [], [], []
    openers, surface = [], {}
    run: list[tuple[str, bool]] = []  # the capitalised words read in a row: (word, opens a sentence)
    pending: list[set] = []
    sentence_start, last_term = True, None

    def close():
        # a run of capitalised words is a name, unless it is one word opening a sentence
        if run and not (len(run) == 1 and run[0][1]):
            names.append(tuple(w for w, _ in run))
        elif run:
            openers.append(run[0][0])
        run.clear()

    for token in _TOKEN.findall(text):
        for kind, value in _pieces(token):
            if kind == "number":
                numbers.add(value)
                words.append(value)
                close()
            elif kind == "id":
                identifiers.add(value)
                terms.add(value)
                words.append(value)
                order.append(value)
                close()
            elif value.endswith(("n't", "n’t")) or value in _NEGATIONS or _stem(value) in _DENIALS:
                denial = _stem(value) in _DENIALS
                pending.append({last_term} if denial and last_term else set())
                negated.append(pending[-1])
                words.append("not")
                close()
            else:
                bare = token.strip(".,;:!?()'\"’-")
                if "@" in value or (bare[:1].isupper() and value not in _COMMON_CAPS and value not in _STOP):
                    run.append((value, sentence_start))
                else:
                    close()
                stem = _stem(value)
                surface.setdefault(stem, value)
                words.append(stem)
                if value not in _STOP and value != "longer" and (len(value) > 2 or value in OPPOSITES):
                    terms.add(stem)
                    order.append(stem)
                    last_term = stem
                    for negation in pending:
                        if len(negation) < 2:
                            negation.add(stem)
        if token[-1] in ".,;:!?)" or token[0] == "(" or re.search(r"['’]s\W*$", token):
            close()
        sentence_start = token[-1] in ".;!?"
    close()
    return Reading(
        words=tuple(words),
        terms=frozenset(terms),
        numbers=frozenset(numbers),
        identifiers=frozenset(identifiers),
        names=tuple(names),
        openers=tuple(openers),
        head=frozenset(order[:HEAD]),
        negated=tuple(frozenset(n) for n in negated),
        surface=surface,
    )


def _alike(x: str, y: str) -> bool:
    """Two terms are the same word: equal, one a prefix of the other (St / Street, deploy /
    deployment), or, from five letters, one letter apart (a typo: penicilin / penicillin,
    tunneling / tunnelling, licence / license)."""
    if x == y:
        return True
    if min(len(x), len(y)) >= 2 and x[0].isalpha() and (x.startswith(y) or y.startswith(x)):
        return True
    return min(len(x), len(y)) >= 5 and abs(len(x) - len(y)) <= 1 and _one_edit(x, y)


def _one_edit(x: str, y: str) -> bool:
    if len(x) > len(y):
        x, y = y, x
    i = 0
    while i < len(x) and x[i] == y[i]:
        i += 1
    return x[i + (len(x) == len(y)) :] == y[i + 1 :]


def _has(term: str, terms) -> bool:
    return any(_alike(term, t) for t in terms)


def dice(a: frozenset, b: frozenset) -> float:
    """The share of terms the two sets have in common, a term counted when the other set has a
    word alike (`_alike`)."""
    if not a or not b:
        return 0.0
    return (sum(_has(t, b) for t in a) + sum(_has(t, a) for t in b)) / (len(a) + len(b))


def _coverage(a: Reading, b: Reading) -> float:
    """The share of what `a` says (terms and numbers) that `b` says too. A part of a name whose
    other part `b` says counts as said ("Jonas Berg" / "Jonas"); so do words an acronym of the
    other spells out ("out of office" / "OOO") and a word the other says with a prefix of a
    letter or two that does not negate it (mail / email, try / retry; not lock / unlock)."""
    said = a.terms | a.numbers
    if not said:
        return 1.0
    theirs = b.terms | b.numbers
    named = {_stem(w) for name in a.names if any(_has(_stem(x), theirs) for x in name) for w in name}
    spelt = spelt_out(a.words, a.terms, b.terms) | spelt_out(b.words, b.terms, a.terms)
    return sum(t in named or t in spelt or _has(t, theirs) or prefixed(t, theirs) for t in said) / len(said)


@dataclass(frozen=True)
class Relation:
    relation: str  # duplicate | contradiction | "" (neither)
    kind: str  # number | negation | antonym | entity | case | paraphrase | "" — what made it so
    score: float  # how much of the subject the two share (0–1)
    why: str


NEITHER = ""
UNDECIDED = "undecided"  # the kind of a same-subject pair no rule decides (a model may: relation_model)


def _opposite(a: Reading, b: Reading) -> tuple[str, str] | None:
    """A word of `a` whose opposite `b` says, where neither text says both sides ("prefers
    e-mail over phone calls" names both: it is no side)."""
    words_a, words_b = set(a.words), set(b.words)
    for left, right in OPPOSITE_SIDES:
        for mine, theirs in ((left, right), (right, left)):
            said_a, said_b = words_a & mine, words_b & theirs
            if said_a and said_b and not (words_a & theirs) and not (words_b & mine):
                return min(said_a), min(said_b)
    return None


def _negation(a: Reading, b: Reading) -> frozenset | None:
    """The terms `a` negates that `b` states (an odd number of negations against an even)."""
    if len(a.negated) % 2 == len(b.negated) % 2:
        return None
    for terms in a.negated:
        said = frozenset(t for t in terms if _has(t, b.terms))
        if said:
            return said
    return None


def _names(a: Reading, b: Reading) -> tuple[list[str], list[str], tuple | None]:
    """The names of `a` that `b` does not say and those of `b` that `a` does not say, and a
    pair of names that share a word but not the rest ("Sam Okoye" / "Sam Lindqvist"): another
    one of the same first name, so another subject."""
    words_a, words_b = set(a.words) | a.terms, set(b.words) | b.terms
    for x in a.names:
        for y in b.names:
            shared = [w for w in x if _has(w, y)]
            if shared and any(not _has(w, y) for w in x) and any(not _has(w, x) for w in y):
                return [], [], (" ".join(x), " ".join(y))
    only_a = [" ".join(x) for x in a.names if not any(_has(w, words_b) for w in x)]
    only_b = [" ".join(y) for y in b.names if not any(_has(w, words_a) for w in y)]
    # a word opening a sentence counts as a name when the other side names another one
    if only_a and not only_b:
        only_b = [w for w in b.openers if not _has(w, words_a)]
    elif only_b and not only_a:
        only_a = [w for w in a.openers if not _has(w, words_b)]
    return only_a, only_b, None


def _in_head(names: list[str], reading: Reading) -> bool:
    """Whether one of `names` is among the first terms of the text, where its subject stands."""
    return any(_stem(w) in reading.head for name in names for w in name.split())


def classify(
    text_a: "str | Reading",
    text_b: "str | Reading",
    *,
    same_subject: bool = False,
    params: dict | None = None,
) -> Relation:
    """How `text_b` relates to `text_a` (see the module's rules); either may be given read
    already (`read`), when one text is paired with many. With `same_subject` the
    caller knows both speak of one thing (a merge and its originals): another identifier or
    name where the subject stands is then another value (an `entity` contradiction), not
    another subject. `params` overrides the thresholds (the evaluation's cross-validation)."""
    p = {"subject": SUBJECT, "duplicate": DUPLICATE_TERMS, **(params or {})}
    a = text_a if isinstance(text_a, Reading) else read(text_a)
    b = text_b if isinstance(text_b, Reading) else read(text_b)
    if a.words == b.words:
        return Relation(DUPLICATE, "case", 1.0, "the same text once case and spacing are set aside")
    score = round(dice(a.terms, b.terms), 3)
    shared = sum(_has(t, b.terms) for t in a.terms)
    if score < p["subject"] or shared < SHARED_TERMS:
        return Relation(NEITHER, "", score, "another subject")
    only_id_a, only_id_b = a.identifiers - b.identifiers, b.identifiers - a.identifiers
    names_a, names_b, other_one = _names(a, b)
    if same_subject:
        names_a, names_b = names_a + sorted(only_id_a), names_b + sorted(only_id_b)
        if other_one:
            names_a, names_b = [other_one[0], *names_a], [other_one[1], *names_b]
    elif only_id_a and only_id_b:
        return Relation(NEITHER, "", score, f"about another one ({min(only_id_a)} / {min(only_id_b)})")
    elif other_one:
        return Relation(NEITHER, "", score, f"about another one ({other_one[0]} / {other_one[1]})")
    elif _in_head(names_a, a) and _in_head(names_b, b):
        return Relation(NEITHER, "", score, f"about another one ({names_a[0]} / {names_b[0]})")
    slots = []
    only_a, only_b = a.numbers - b.numbers, b.numbers - a.numbers
    if only_a and only_b:
        slots.append(("number", f"another number: {min(only_a)} / {min(only_b)}"))
    if names_a and names_b:
        slots.append(("entity", f"another one in the same role: {names_a[0]} / {names_b[0]}"))
    opposite = _opposite(a, b)
    negation = _negation(a, b) or _negation(b, a)
    if opposite and negation:
        opposite = negation = None  # "not allowed" / "forbidden" say the same
    if opposite:
        slots.append(("antonym", f"opposite words: {a.said(opposite[0])} / {b.said(opposite[1])}"))
    if negation:
        denied = ", ".join(sorted(a.said(t) if t in a.surface else b.said(t) for t in negation))
        slots.append(("negation", f"one says it is not so: {denied}"))
    if len(slots) == 1:
        kind, detail = slots[0]
        return Relation(CONTRADICTION, kind, score, f"the same subject, {detail}")
    if slots:
        return Relation(NEITHER, "", score, "differs in more than one place: another subject")
    if (only_a and only_b) or (names_a and names_b):
        return Relation(NEITHER, UNDECIDED, score, "each says what the other does not")
    covered = min(_coverage(a, b), _coverage(b, a))
    if covered >= p["duplicate"] and not prefix_negates(a.terms, b.terms):
        return Relation(DUPLICATE, "paraphrase", score, "the same claim in other words")
    return Relation(NEITHER, UNDECIDED, score, "the same subject, both can hold")


# --- The finder: which active memories a memory duplicates or contradicts ----------------------

KEYWORD_CANDIDATES = 8  # the active memories sharing the most terms, per memory
VECTOR_CANDIDATES = 5  # and the nearest by vector (when the memory has one)
CANDIDATE_COSINE = 0.7  # below it a vector neighbour is not about the same subject
RELATED_MOST = 5


@dataclass(frozen=True)
class Related:
    memory: Memory
    relation: str  # duplicate | contradiction
    kind: str
    score: float
    why: str

    def as_dict(self) -> dict:
        return {"memory": self.memory.pk, "relation": self.relation, "score": self.score, "why": self.why}


# Candidates of each memory in one statement: those sharing any lexeme of its stored `search`
# vector (an OR query on the GIN index), ranked among at most MATCHED of the matches, so a common
# word never makes a write rank thousands of rows; and its nearest vectors. (Choosing its rarest
# lexemes by knowledge_termstat cost 30-40 ms a write once the statistics' change rows grew.)
# Readability is applied after, by the access rules, to these few rows.
MATCHED = 200
_CANDIDATES_SQL = """
SELECT q.id, c.id FROM {t} q
CROSS JOIN LATERAL (SELECT to_tsquery('simple', string_agg(quote_literal(l), ' | ')) AS tq
                    FROM unnest(tsvector_to_array(q.search)) l) kw
CROSS JOIN LATERAL (
    SELECT h.id FROM (
        SELECT m.id, m.search FROM {t} m
        WHERE kw.tq IS NOT NULL AND m.search @@ kw.tq AND m.status = 'active' AND m.id <> q.id
        LIMIT {matched}) h
    ORDER BY ts_rank(h.search, kw.tq) DESC, h.id LIMIT {k}) c
WHERE q.id = ANY(%s)
UNION
SELECT q.id, c.id FROM {t} q
CROSS JOIN LATERAL (
    SELECT m.id, 1 - (m.embedding <=> q.embedding) AS sim FROM {t} m
    WHERE m.status = 'active' AND m.id <> q.id AND m.embedding IS NOT NULL
    ORDER BY m.embedding <=> q.embedding LIMIT {v}) c
WHERE q.id = ANY(%s) AND q.embedding IS NOT NULL AND c.sim >= {cosine}"""


def _reader_q(memory: Memory, reader: Principal | None) -> Q:
    """What the memory's writer may read (its owner agent's stores), and the one asking too."""
    q = access.readable_q(Principal.for_agent(memory.owner))
    if reader is not None and access.own_agent(reader) != memory.owner:
        q &= access.readable_q(reader)
    return q


def _readable(q: Q):
    """`q` as a true/false column of the fetched rows."""
    if not q:  # Q(): everything
        return Value(True, output_field=BooleanField())
    return Case(When(q, then=Value(True)), default=Value(False), output_field=BooleanField())


def related_for(
    memories: list[Memory], reader: Principal | None = None, *, undecided: bool = False
) -> dict[int, list[Related]]:
    """For each memory: the active memories it duplicates or contradicts among those its owner
    (and `reader`, when given) may read — contradictions first, then by shared subject; at
    most RELATED_MOST. A contradiction is never listed as a duplicate. The memory it names in
    `supersedes` is left out (its writer already said it replaces it). With `undecided`, the
    same-subject pairs no rule decides come too (relation "", kind UNDECIDED)."""
    if not memories:
        return {}
    ids = [m.pk for m in memories]
    sql = _CANDIDATES_SQL.format(
        t=Memory._meta.db_table,
        k=KEYWORD_CANDIDATES,
        v=VECTOR_CANDIDATES,
        matched=MATCHED,
        cosine=CANDIDATE_COSINE,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [ids, ids])
        pairs = cursor.fetchall()
    out: dict[int, list[Related]] = {m.pk: [] for m in memories}
    if not pairs:
        return out
    readers: dict[int, Q] = {}
    for memory in memories:
        if memory.owner_id not in readers:
            readers[memory.owner_id] = _reader_q(memory, reader)
    # The candidates in one fetch, with whether each owner on the page may read each (a fetch
    # per owner read the same rows again for each); not their vectors, which no rule reads.
    rows = (
        Memory.objects.filter(pk__in={c for _, c in pairs}, status=Memory.ACTIVE)
        .select_related("owner", "entry", "skill")
        .defer("embedding")
        .annotate(**{f"readable_{o}": _readable(q) for o, q in readers.items()})
    )
    candidates = {m.pk: m for m in rows}
    by_id = {m.pk: m for m in memories}
    readings: dict[int, Reading] = {}  # each text read once, however many pairs it is in
    for q_id, c_id in sorted(pairs):
        memory = by_id[q_id]
        other = candidates.get(c_id)
        if (
            other is None
            or other.pk == memory.supersedes_id
            or not getattr(other, f"readable_{memory.owner_id}")
        ):
            continue
        for m in (memory, other):
            if m.pk not in readings:
                readings[m.pk] = read(m.text)
        relation = classify(readings[other.pk], readings[memory.pk])
        if relation.relation or (undecided and relation.kind == UNDECIDED):
            out[q_id].append(Related(other, relation.relation, relation.kind, relation.score, relation.why))
    for found in out.values():
        found.sort(key=lambda r: (r.relation != CONTRADICTION, not r.relation, -r.score, r.memory.pk))
        del found[RELATED_MOST:]
    return out
