"""How two memory texts relate: `duplicate`, `contradiction` or neither, with a short reason a
reviewer can check (version "relations/2"), and the finder of the active memories a memory
duplicates or contradicts (`related_for`). The one classifier every place that pairs memories
uses: the write's `related` list and the queue card, a reviewer's approval (a contradiction
needs the same decision as a keyed conflict), the queue's near-duplicate hints, and
consolidation's merge rules.

The rules compare what the claim reader (memory.matching.claims) reads in each text — claims
with their subject, attribute, values, polarity and time — with general resources only
(lemmas, WordNet's synonyms and antonyms), never a word list of a labelled set:

1. **The same subject**: the two texts share content words (Dice of lemmas, a synonym counting
   as the word, at least `SUBJECT`), or neither is said.
2. **Another one, never a relation**: each text names an identifier the other lacks (SUP-2633 /
   SUP-2663, store #14 / #41), or two claims about the same kind of thing differ in what says
   *which* one: another possessor chain (Noor's train / Noor's sister's train), another
   qualifier on each side (car / home insurance), another head (laptop / docking station), or
   another period or condition (this year / last year, term time / the holidays).
3. **One slot differs**, the rest said by both (`CONTRADICTION_TERMS`) — a contradiction, with
   its kind: `number` (each side has a number, time or date the other lacks; 5pm = 17:00),
   `negation` (one side denies what the other states), `antonym` (WordNet gives the two words
   as opposites, and neither text says both), `entity` (each side names someone or something
   the other does not). Two slots differing is another subject, not a contradiction; a negation
   and an opposite cancel ("not allowed" / "forbidden").
4. **A duplicate**: nothing differs and each side says what the other says (`DUPLICATE_TERMS`
   of its lemmas and numbers; a synonym, a derived form and an acronym's words count as said, and
   a verb that is a kind of the other is no other verb: drink / take; a word with a prefix is
   another word: remove / move).
5. Whatever the reader could not read (no claim in a text), or the same subject with nothing
   decided, is `undecided`: no hint from the rules (the model may decide it in the background,
   memory.matching.relation_model).

SUBJECT, DUPLICATE_TERMS and CONTRADICTION_TERMS were chosen by leave-one-domain-out
cross-validation over shared/data/memory-pairs-dev and memory-pairs-dev-2
(`python -m bench.relations_eval --cv`; docs/PERFORMANCE.md, "Relations")."""

from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, Case, Q, Value, When

from knowledge import access
from knowledge.models import Memory
from knowledge.principal import Principal
from memory.matching import claims
from memory.matching.claims import Claim, Reading, opposed
from memory.matching.lexicon import kind_of
from memory.matching.paraphrase import prefix_negates, spelt_out
from memory.matching.said import alike as _alike
from memory.matching.said import dice
from memory.matching.said import has as _has
from memory.matching.said import same as _same
from memory.matching.terms import key_terms, overlap

VERSION = "relations/2"
DUPLICATE = "duplicate"
CONTRADICTION = "contradiction"

SUBJECT = 0.3  # Dice of content lemmas for "the same subject"
DUPLICATE_TERMS = 0.5  # the share of each side's lemmas and numbers the other says, for a duplicate
CONTRADICTION_TERMS = 0.2  # the share of each side's other lemmas the other says, for a contradiction
REWORDED = 1  # words each side of a duplicate may say that the other does not, both sides
NEGATED_UNSAID = 1  # words a denial covers that the other side may leave unsaid
BESIDES = 3  # words each side says that the other does not, beyond the one slot that differs
SHARED_TERMS = 2  # a subject is more than one word ("memory 3" / "queued memory 5")

NEITHER = ""
UNDECIDED = "undecided"  # the kind of a pair no rule decides (a model may: relation_model)


def read(text: str) -> Reading:
    return claims.read(text or "")


def _said(a: Reading, b: Reading, leave=frozenset()) -> float:
    """The share of what `a` says (lemmas and numbers, less `leave`) that `b` says too: a part
    of a name whose other part `b` says, an acronym's words and a synonym count."""
    said = (a.lemmas | a.numbers) - leave
    if not said:
        return 1.0
    return 1 - len(_unsaid(a, b) - leave) / len(said)


@dataclass(frozen=True)
class Relation:
    relation: str  # duplicate | contradiction | "" (neither)
    kind: str  # number | negation | antonym | entity | case | paraphrase | undecided | ""
    score: float  # how much of the subject the two share (0–1)
    why: str


def _corresponding(x: Claim, y: Claim) -> bool:
    """Two claims speak of the same kind of thing: their subjects share a word."""
    return any(_has(w, y.subject.words) for w in x.subject.words)


def _chain(owners: tuple, head: str) -> str:
    return "'s ".join((*owners, head))


def _another_one(a: Reading, b: Reading) -> str:
    """Why the two texts speak of two different ones ("" when nothing says so)."""
    only_a, only_b = a.ids - b.ids, b.ids - a.ids
    if only_a and only_b:
        return f"{min(only_a)} / {min(only_b)}"
    for chain_a, thing_a in a.possessed:  # Laleh's passport / Hamid's passport
        for chain_b, thing_b in b.possessed:
            if _same(thing_a, thing_b) and not _same_chain(chain_a, chain_b):
                return f"{_chain(chain_a, thing_a)} / {_chain(chain_b, thing_b)}"
    for x in a.names - b.names:  # Sam Okoye / Sam Lindqvist, Erik Lund / Erika Lund
        for y in b.names - a.names:
            wx, wy = set(x.split()), set(y.split())
            only_x = [w for w in wx - wy if not any(_abbreviates(w, v) for v in wy - wx)]
            only_y = [w for w in wy - wx if not any(_abbreviates(w, v) for v in wx - wy)]
            if wx & wy and only_x and only_y:  # not Elm Street / Elm St
                return f"{x} / {y}"
    said_a, said_b = a.lemmas | a.numbers, b.lemmas | b.numbers
    if a.claims and b.claims:  # the first claims' subjects, however the rest is worded
        x, y = a.claims[0], b.claims[0]
        sx, sy = x.subject, y.subject
        if (
            sx.head
            and sy.head
            and _same(x.attribute, y.attribute)
            and not _has(sx.head, said_b)
            and not _has(sy.head, said_a)
        ):
            return f"{a.said(sx.head)} / {b.said(sy.head)}"
    for x in a.claims:
        for y in b.claims:
            if not _corresponding(x, y):
                continue
            sx, sy = x.subject, y.subject
            if sx.owners and sy.owners and not _same_chain(sx.owners, sy.owners):
                return f"{_chain(sx.owners, sx.head)} / {_chain(sy.owners, sy.head)}"
            for s1, s2, said in ((sx, sy, said_a), (sy, sx, said_b)):
                # Ifeoma / Ifeoma's team lead, Gaurav's card limit / Gaurav's assistant: someone
                # of theirs is another person (their desk is theirs: Jonas / Jonas's desk)
                if s2.owners and claims.person(s2.head) and not _has(s2.head, said):
                    return f"{_chain(s1.owners, s1.head)} / {_chain(s2.owners, s2.head)}"
                # the one, and something of theirs that does the same ("Pablo joins the rota" /
                # "Pablo's new report joins the rota"; not "Jonas's desk is" / "Jonas sits")
                if (
                    s2.owners
                    and not s1.owners
                    and _one(s2.owners[-1], s1.head)
                    and not _has(s2.head, said)
                    and _same(x.attribute, y.attribute)
                ):
                    return f"{s1.head} / {_chain(s2.owners, s2.head)}"
            extra_x = [w for w in sx.which if not _has(w, said_b)]
            extra_y = [w for w in sy.which if not _has(w, said_a)]
            if extra_x and extra_y:
                return f"{a.said(extra_x[0])} / {b.said(extra_y[0])}"
            if (
                sx.head
                and sy.head
                and _same(x.attribute, y.attribute)
                and not _has(sx.head, said_b)
                and not _has(sy.head, said_a)
            ):
                return f"{a.said(sx.head)} / {b.said(sy.head)}"
    when_a = {w for c in a.claims for w in c.when}
    when_b = {w for c in b.claims for w in c.when}
    if when_a and when_b and not any(x == y or _same(x, y) for x in when_a for y in when_b):
        return f"{min(when_a)} / {min(when_b)}"
    return ""


def _one(p: str, q: str) -> bool:
    """Two names of one: the same word or a synonym, or one name a part of the other ("Nwosu" /
    "Ifeoma Nwosu"; not "Sam Okoye" / "Sam Lindqvist")."""
    x, y = set(p.split()), set(q.split())
    return _same(p, q) or x <= y or y <= x


def _abbreviates(x: str, y: str) -> bool:
    """One word is a short form of the other that no dictionary knows (St / Street)."""
    short, long = sorted((x, y), key=len)
    return 2 <= len(short) <= 3 and len(long) > 4 and long.startswith(short) and claims.unknown(short)


def _same_chain(x: tuple, y: tuple) -> bool:
    return len(x) == len(y) and all(_one(p, q) for p, q in zip(x, y, strict=True))


def _unsaid(a: Reading, b: Reading) -> set[str]:
    """What `a` says (lemmas and numbers) that `b` does not (`_said`'s rules; a name's words are
    said only as they are, and a name is said by a part of it: Jonas Berg / Jonas)."""
    theirs = b.lemmas | b.numbers
    if "day:weekday" in theirs:  # weekdays say Monday to Friday
        theirs = theirs | {f"day:{n}" for n in range(1, 6)}
    if {"day:1", "day:5"} <= theirs:
        theirs = theirs | {"day:weekday"}
    if any(w.lower == "both" for w in b.words):  # "both of Meera's kids" / "her two children"
        theirs = theirs | {"2"}
    named = {w for name in a.names if any(x in theirs for x in name.split()) for w in name.split()}
    derived = set().union(*(claims.forms(w) for w in b.name_words))  # Polish: Poland
    named |= {w for w in a.name_words if w in theirs or w in derived or claims.forms(w) & theirs}
    lemmas_a = [w.lemma for w in a.words if w.kind != "punct"]
    lemmas_b = [w.lemma for w in b.words if w.kind != "punct"]
    spelt = spelt_out(lemmas_a, a.lemmas, b.lemmas) | spelt_out(lemmas_b, b.lemmas, a.lemmas)
    return {
        t
        for t in a.lemmas | a.numbers
        if not (t in named or t in spelt or (t not in a.name_words and _has(t, theirs)))
    }


def _opposite(a: Reading, b: Reading) -> tuple[str, str] | None:
    """A word of `a` whose opposite (WordNet, or a negating prefix) `b` says, in claims about
    the same thing, where neither text says both."""
    found = [
        (x, y)
        for x in sorted(a.lemmas - b.lemmas)
        for y in sorted(b.lemmas - a.lemmas)
        if x.isalpha() and y.isalpha() and (opposed(x, y) or prefix_negates({x}, {y}))
    ]
    for x, y in found:
        if any(opposed(x, z) for z in a.lemmas) or any(opposed(y, z) for z in b.lemmas):
            continue
        if _in_corresponding(a, b, {x}, {y}):
            return x, y
    return None


def _claims_saying(r: Reading, words) -> list[Claim]:
    return [c for c in r.claims if words & (c.values | c.names | c.subject.words | {c.attribute})]


def _in_corresponding(a: Reading, b: Reading, xs, ys) -> bool:
    """Whether claims of `a` saying `xs` and of `b` saying `ys` speak of the same thing (or
    either text is one claim)."""
    ca, cb = _claims_saying(a, xs), _claims_saying(b, ys)
    if len(a.claims) <= 1 or len(b.claims) <= 1:
        return True
    return any(_corresponding(x, y) for x in ca for y in cb)


def _same_role(a: Reading, b: Reading, names_a: list[str], names_b: list[str]) -> bool:
    """The two names stand after predicates that say the same, or one is a copula or a colon
    that can say any ("is kept by Ingrid" / "is kept by Olaf", "owns the service" / "Owner of
    the service: Jonas"; not "speaks English" / "is learning Norwegian")."""
    words_a = {w for n in names_a for w in n.split() if _in_value_role(a, w)}
    words_b = {w for n in names_b for w in n.split() if _in_value_role(b, w)}
    for x in _claims_saying(a, words_a):
        for y in _claims_saying(b, words_b):
            if _same(x.attribute, y.attribute) or {x.attribute, y.attribute} & {"be", ":"}:
                return True
    return False


def _in_value_role(r: Reading, name_word: str) -> bool:
    """A name that says who or what fills a role: the subject, or after a preposition, a verb
    "be" or a colon ("kept by Ingrid", "is in Porto", "venue: Valencia"); not the thing a verb
    acts on ("send Quintara the updated MSA": which document)."""
    ws = [w for w in r.words if w.kind != "quote"]
    for i, w in enumerate(ws):
        if w.lemma != name_word:
            continue
        k = i - 1
        while k >= 0 and ws[k].kind == "name":
            k -= 1  # the start of the name
        before = ws[k] if k >= 0 else None
        if before is not None and before.lower in ("the", "a", "an") and k:
            before = ws[k - 1]  # "led by the Growth squad"
        if before is None or before.kind == "punct" or before.lower in claims.ROLE_WORDS:
            return True
    return False


def _same_unit(a: Reading, b: Reading, only_a, only_b) -> bool:
    """Two numbers that may count the same thing ("38 staff seats" / "45 seats"; not "20
    December" / "two leads"); a number counting nothing said meets any."""
    for x in only_a:
        for y in only_b:
            ux, uy = a.units.get(x, ""), b.units.get(y, "")
            if not ux or not uy or _same(ux, uy) or x.startswith("month:"):
                return True
    return False


def _negations(r: Reading) -> int:
    return sum(1 for w in r.words if w.kind == "neg")


def _negation(a: Reading, b: Reading, unsaid: int = 0) -> frozenset | None:
    """The words `a` denies that `b` states (an odd number of negations against an even)."""
    if _negations(a) % 2 == _negations(b) % 2 or not _negations(a) % 2:
        return None
    negated = {t for c in a.claims for t in c.negated}
    denied = frozenset(t for t in negated if _has(t, b.lemmas))
    if not denied or len(denied) < len(negated) - unsaid:
        return None  # "not available in China" / "available in 14 languages": China is not said
    return denied


def _names(a: Reading, b: Reading) -> tuple[list[str], list[str]]:
    """The names of `a` none of whose words `b` says, and those of `b` that `a` does not."""
    words_a, words_b = a.lemmas | a.name_words, b.lemmas | b.name_words
    only_a = sorted(n for n in a.names if not any(_has(w, words_b) for w in n.split()))
    only_b = sorted(n for n in b.names if not any(_has(w, words_a) for w in n.split()))
    return only_a, only_b


def classify(
    text_a: "str | Reading",
    text_b: "str | Reading",
    *,
    same_subject: bool = False,
    params: dict | None = None,
) -> Relation:
    """How `text_b` relates to `text_a` (see the module's rules); either may be given read
    already (`read`). With `same_subject` the caller knows both speak of one thing (a merge and
    its originals): another identifier or name is then another value (an `entity`
    contradiction), not another one. `params` overrides the thresholds (the evaluation's
    cross-validation)."""
    p = {
        "subject": SUBJECT,
        "duplicate": DUPLICATE_TERMS,
        "contradiction": CONTRADICTION_TERMS,
        "besides": BESIDES,
        "negated": NEGATED_UNSAID,
        "reworded": REWORDED,
        **(params or {}),
    }
    a = text_a if isinstance(text_a, Reading) else read(text_a)
    b = text_b if isinstance(text_b, Reading) else read(text_b)
    plain_a = [w.lower for w in a.words if w.kind != "punct"]
    same_text = " ".join(a.text.split()).casefold() == " ".join(b.text.split()).casefold()
    if plain_a and (same_text or plain_a == [w.lower for w in b.words if w.kind != "punct"]):
        return Relation(DUPLICATE, "case", 1.0, "the same text once case and spacing are set aside")
    terms_a, terms_b = a.lemmas | a.numbers, b.lemmas | b.numbers
    score = round(dice(terms_a, terms_b), 3)
    shared = sum(_has(t, b.lemmas) for t in a.lemmas) + len(a.numbers & b.numbers)
    if score < p["subject"] or shared < SHARED_TERMS:
        return Relation(NEITHER, "", score, "another subject")
    if not same_subject and (other := _another_one(a, b)):
        return Relation(NEITHER, "", score, f"about another one ({other})")
    if not a.claims or not b.claims:
        return Relation(NEITHER, UNDECIDED, score, "the claims could not be read")
    unsaid_a, unsaid_b = _unsaid(a, b), _unsaid(b, a)
    slots, differing = [], set()
    dates_a, dates_b = (
        {n for n in a.numbers if n.startswith("month:")},
        {n for n in b.numbers if n.startswith("month:")},
    )
    for kind, x, y in (("number", a.numbers - dates_a, b.numbers - dates_b), ("date", dates_a, dates_b)):
        only_a, only_b = x - y, y - x
        if only_a and only_b and _same_unit(a, b, only_a, only_b):
            slots.append(("number", f"another {kind}: {_shown(min(only_a))} / {_shown(min(only_b))}"))
            differing |= only_a | only_b
    names_a, names_b = _names(a, b)
    if same_subject:
        names_a, names_b = names_a + sorted(a.ids - b.ids), names_b + sorted(b.ids - a.ids)
    if names_a and names_b and (same_subject or _same_role(a, b, names_a, names_b)):
        slots.append(("entity", f"another one in the same role: {names_a[0]} / {names_b[0]}"))
        differing |= {w for n in names_a + names_b for w in n.split()}
    opposite = _opposite(a, b)
    negation = _negation(a, b, p["negated"]) or _negation(b, a, p["negated"])
    if opposite and _polarity(a) != _polarity(b):
        opposite = negation = None  # "not allowed" / "forbidden" say the same
    if opposite:
        slots.append(("antonym", f"opposite words: {a.said(opposite[0])} / {b.said(opposite[1])}"))
        differing |= set(opposite)
    if negation:
        denied = ", ".join(sorted(a.said(t) if t in a.surface else b.said(t) for t in negation))
        slots.append(("negation", f"one says it is not so: {denied}"))
    if not slots and len(unsaid_a) == len(unsaid_b) == 1 and _exclusive(a) and _exclusive(b):
        (x,), (y,) = unsaid_a, unsaid_b  # "by phone only" / "by e-mail only": one excludes the other
        slots.append(("entity", f"only one holds: {a.said(x)} / {b.said(y)}"))
        differing |= {x, y}
    rest_a, rest_b = unsaid_a - differing, unsaid_b - differing
    if len(slots) == 1:
        if min(len(rest_a), len(rest_b)) > p["besides"]:  # something else differs too
            return Relation(NEITHER, UNDECIDED, score, "differs in more than one place")
        if min(_said(a, b, differing), _said(b, a, differing)) >= p["contradiction"]:
            kind, detail = slots[0]
            return Relation(CONTRADICTION, kind, score, f"the same subject, {detail}")
        return Relation(NEITHER, UNDECIDED, score, "differs, and says more besides")
    if slots:
        return Relation(NEITHER, "", score, "differs in more than one place: another subject")
    if min(len(unsaid_a), len(unsaid_b)) > p["reworded"] or _replaced(a, b, unsaid_a, unsaid_b):
        return Relation(NEITHER, UNDECIDED, score, "each says what the other does not")
    facts = (a.numbers | a.ids | a.name_words | b.numbers | b.ids | b.name_words) & (unsaid_a | unsaid_b)
    if facts:  # a number, id or name only one side says: a detail, not the same claim
        return Relation(NEITHER, UNDECIDED, score, "one says more than the other")
    covered = min(_said(a, b), _said(b, a))
    if covered >= p["duplicate"] and not prefix_negates(a.lemmas, b.lemmas) and _polarity(a) == _polarity(b):
        return Relation(DUPLICATE, "paraphrase", score, "the same claim in other words")
    return Relation(NEITHER, UNDECIDED, score, "the same subject, both can hold")


def _neighbours(r: Reading, unsaid: set) -> dict:
    """For each word of `unsaid`, the content words said on either side of it in `r`."""
    seq = [w.lemma for w in r.words if w.kind != "punct" and (w.kind == "number" or claims.content(w))]
    return {
        t: (seq[i - 1] if i else "", seq[i + 1] if i + 1 < len(seq) else "")
        for i, t in enumerate(seq)
        if t in unsaid
    }


def _replaced(a: Reading, b: Reading, unsaid_a: set, unsaid_b: set) -> str:
    """A word of `a` in the place of a word of `b`, between the same words ("the payments webhook
    handler" / "the refunds webhook handler"): another thing, however little else differs."""
    for x, (before_x, after_x) in _neighbours(a, unsaid_a).items():
        for y, (before_y, after_y) in _neighbours(b, unsaid_b).items():
            if (
                (before_x or after_x)
                and _alike(before_x, before_y)
                and _alike(after_x, after_y)
                and not kind_of(x, y)  # "picks Laleh up" / "collects Laleh"
            ):
                return f"{a.said(x)} / {b.said(y)}"
    # or the verb of the same subject ("Jonas drives to the office" / "Jonas cycles to the office"),
    # or the value of the same attribute ("the trip is compulsory" / "the trip is voluntary")
    for cx in a.claims:
        for cy in b.claims:
            if (
                _corresponding(cx, cy)
                and cx.attribute in unsaid_a
                and cy.attribute in unsaid_b
                and not kind_of(cx.attribute, cy.attribute)  # drinks coffee / takes coffee
            ):
                return f"{a.said(cx.attribute)} / {b.said(cy.attribute)}"
            if _corresponding(cx, cy) and _same(cx.attribute, cy.attribute):
                x, y = cx.values & unsaid_a, cy.values & unsaid_b
                if x and y:
                    return f"{a.said(min(x))} / {b.said(min(y))}"
    return ""


def _exclusive(r: Reading) -> bool:
    """The text says its value is the only one ("only", "solely", "exclusively")."""
    return any(w.lower in ("only", "solely", "exclusively") for w in r.words)


def _shown(n: str) -> str:
    return n.replace("month:", "month ")


def _polarity(r: Reading) -> int:
    return _negations(r) % 2


# --- The finder: which active memories a memory duplicates or contradicts ----------------------

QUICK_OVERLAP = 0.1  # key-term Dice below which a candidate is not read (no dev pair below it relates)
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


def _two_people(a: Memory, b: Memory) -> bool:
    """The two memories are in the private stores of two people."""
    return a.store.startswith("private:") and b.store.startswith("private:") and a.store != b.store


def _named_alike(a: Reading, b: Reading) -> bool:
    """Both texts' claims are about the same named person or thing (a name or an id of their
    subjects in common)."""
    named_a = {w for c in a.claims for w in c.subject.names} | {
        i for c in a.claims for i in c.subject.which if i in a.ids
    }
    named_b = {w for c in b.claims for w in c.subject.names} | {
        i for c in b.claims for i in c.subject.which if i in b.ids
    }
    return bool(named_a & named_b)


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
    keys: dict[int, frozenset] = {}  # and its key terms, for the cheap test before reading
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
            if m.pk not in keys:
                keys[m.pk] = key_terms(m.text)
        if overlap(keys[memory.pk], keys[other.pk]) < QUICK_OVERLAP:
            continue  # a keyword candidate that shares a word or two: not read (the reader costs ms)
        for m in (memory, other):
            if m.pk not in readings:
                readings[m.pk] = read(m.text)
        relation = classify(readings[other.pk], readings[memory.pk])
        if _two_people(memory, other) and not _named_alike(readings[other.pk], readings[memory.pk]):
            continue  # Sam's and Noor's private memories: related only about one named person or thing
        if relation.relation or (undecided and relation.kind == UNDECIDED):
            out[q_id].append(Related(other, relation.relation, relation.kind, relation.score, relation.why))
    for found in out.values():
        found.sort(key=lambda r: (r.relation != CONTRADICTION, not r.relation, -r.score, r.memory.pk))
        del found[RELATED_MOST:]
    return out
