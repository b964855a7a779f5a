"""Whether a merged or summarised text keeps every claim of its originals (issue 59.4, version
"kept/1"): `claims_kept(originals, candidate) -> (ok, reason)`.

Read with the claim reader (memory.matching.claims) and the relation finder's word matching
(a synonym, an abbreviation, a number in another notation count as said), a candidate is
refused when:

1. **it inverts** a claim: a word an original denies is stated without the denial, or a word an
   original states is denied ("cannot turn off" / "can turn off"), or it says the opposite word
   (WordNet) of one an original says and does not say the original's word;
2. **it swaps** values between roles: a number, identifier or name stands among words that went
   with another value in the originals and with none of its own ("VLAN 210 is for the printers,
   VLAN 201 for the phones" / "the printers sit on VLAN 201"), two values each stand in a clause
   with the other's words, or a value goes with a verb that went with another;
3. **it invents**: a number, identifier or name no original has, more than `INVENTED` words no
   original says, or a part (between clause punctuation and conjunctions) `NEW_PART` of whose
   words no original says;
4. **it drops**: a number, identifier or name of an original it does not say (in any notation:
   4pm / 16:00, 48 hours / two days, 0.30 EUR / 30 cents, 100 % / all), more than `DROPPED` of
   an original's words, or `DISTINCT` of the words only that original says.

An inversion is not one when another original states the word ("receipts under 25 EUR don't
need …" / "alcohol always needs a receipt") and the candidate keeps the denial's own words apart.

The thresholds were chosen by leave-one-domain-out cross-validation on
shared/data/memory-pairs-dev-2/merges.jsonl (`python -m bench merges --cv`; docs/PERFORMANCE.md,
"Merges and summaries")."""

import re

from memory.matching import claims
from memory.matching.claims import Reading, noun_kind, opposites
from memory.matching.relations import DUPLICATE, _has, _same, _unsaid, classify

VERSION = "kept/1"
INVENTED = 7  # words of the candidate no original says, beyond which it invents a claim
DROPPED = 0.6  # the share of an original's words the candidate may leave unsaid (rewording)
DISTINCT = 0.9  # the share of the words only one original says, gone, from which it is dropped
NEW_PART = 0.75  # the share of one part's words no original says, from which the part is a new claim


_CONTRASTS = (("rather", "than"), ("instead", "of"), ("except",), ("apart", "from"), ("other", "than"))
_DENYING = frozenset(["refuse", "fail", "lack", "unable", "decline"])  # verbs that deny what they govern


def _facts(r: Reading) -> set[str]:
    """The words that are facts by themselves: numbers (not "1": "a single", "the first"),
    identifiers, name words."""
    return (set(r.numbers) - {"1"}) | set(r.ids) | set(r.name_words)


def _duration(r: Reading, number: str) -> str:
    unit = r.units.get(number, "")
    return "hour" if unit in ("hour", "hr", "h") else "day" if unit == "day" else ""


def _digits(value: str) -> str:
    return "".join(ch for ch in value if ch.isdigit())


def _hours(r: Reading) -> set[int]:
    """The durations `r` gives in hours or days, as hours: "48 hours", "two days", and "a day",
    "an hour", "per day" (the article or preposition counting one)."""
    out = {
        int(g) * (24 if _duration(r, g) == "day" else 1)
        for g in r.numbers
        if g.isdigit() and _duration(r, g) in ("hour", "day")
    }
    for before, w in zip(r.words, r.words[1:], strict=False):
        if before.lower in ("a", "an", "one", "per", "each", "every") and w.lemma in ("hour", "day"):
            out.add(24 if w.lemma == "day" else 1)
    return out


def _whole(r: Reading, number: str) -> bool:
    """`number` is written as a hundred per cent ("100% cotton")."""
    return number == "100" and any(w.lemma == "100" and w.lower.endswith("%") for w in r.words)


def _next_to(r: Reading, x: str, y: str) -> bool:
    """`x` is written right before or after `y` ("0.30 EUR", "EUR 0.30")."""
    return any({p.lemma, q.lemma} == {x, y} for p, q in zip(r.words, r.words[1:], strict=False))


def _facts_unsaid(a: Reading, b: Reading, unsaid: set) -> list[str]:
    """The facts of `a` in `unsaid` whose digits `b` does not say either (INV-20417 / invoice
    20417), nor as the same hour on the other half of the clock (4 / 16:00), the same duration
    (48 hours / two days), the same amount in hundredths (0.30 / 30 cents) or a hundred per cent
    as "all" ("100% cotton" / "all-cotton")."""
    theirs = {_digits(f) for f in _facts(b)} - {""}
    hundredths = {
        f
        for f in a.numbers
        if re.fullmatch(r"0\.\d\d", f)
        and noun_kind(b.units.get(g := str(int(f[2:])), "")) == "noun.quantity"
        and g in b.numbers
    }

    def said(f: str) -> bool:
        if f.isdigit() and int(f) <= 12 and str(int(f) + 12) in b.numbers:
            return True
        if (
            f.isdigit()
            and _duration(a, f) in ("hour", "day")
            and int(f) * (24 if _duration(a, f) == "day" else 1) in _hours(b)
        ):
            return True  # 48 hours / two days
        if f in hundredths or any(_next_to(a, f, g) for g in hundredths):  # 0.30 EUR / 30 cents
            return True
        if _whole(a, f) and {"all", "entirely", "fully", "completely", "wholly"} & {w.lower for w in b.words}:
            return True
        if f.isdigit() and 13 <= int(f) <= 24 and str(int(f) - 12) in b.numbers:
            return True
        return bool(_digits(f)) and _digits(f) in theirs

    return sorted(f for f in unsaid & _facts(a) if not said(f))


def _denials(r: Reading) -> tuple[set[str], set[str], set[str]]:
    """The first content word each denial applies to, every content word in the rest of a
    denied clause, and those with the words after a contrast ("rather than an email", "except
    alcohol")."""
    core, broad, contrasted = set(), set(), set()
    scope, waiting, last, contrast = False, False, "", False
    ws = r.words
    for i, w in enumerate(ws):
        if w.kind == "punct" and w.text in ".;:!?()—–,":
            scope = waiting = contrast = False
            last = ""
            continue
        marker = any(tuple(x.lower for x in ws[i : i + len(c)]) == c for c in _CONTRASTS)
        following = ws[i + 1] if i + 1 < len(ws) else None
        denying = w.lemma in _DENYING and not (  # "failed pushes": a participle before a noun
            w.lower.endswith("ed") and following is not None and claims.content(following)
        )
        if denying and last:  # "passwords are refused", "the invoice lacks HS codes"
            broad.add(last)
            core.add(last)
        if w.kind == "neg" or marker or denying:
            scope = waiting = True
            contrast = marker
            continue
        if claims.content(w):
            last = w.lemma
        if scope and (w.kind == "number" or claims.content(w)):
            contrasted.add(w.lemma)
            if not contrast:
                broad.add(w.lemma)
            if waiting and not contrast:
                core.add(w.lemma)
            waiting = False
    return core, broad, contrasted


def _inverted(originals: list[Reading], candidate: Reading) -> str:
    core_c, broad_c, contrasted_c = _denials(candidate)
    pieces, sentences = _pieces(candidate), _pieces(candidate, ".;!?")
    denying = any(d for _, d in pieces)
    for n, o in enumerate(originals):
        core_o, broad_o, _ = _denials(o)
        # what another original states is no inversion ("receipts under 25 EUR don't need …" /
        # "alcohol always needs a receipt")
        stating = [r for m, r in enumerate(originals) if m != n]
        for t in core_o:  # the denial may move within its clause ("don't call on Fridays")
            said_by = [r.lemmas for r in stating if t in r.lemmas - _denials(r)[1]]
            only = broad_o - set().union(*said_by)  # the denial's words the stating ones lack
            if (
                _has(t, candidate.lemmas)
                and (not said_by or not denying or any(t in p and p & only for p, _ in pieces))
                and not _has(t, contrasted_c)
                and not any(_has(x, broad_c) for x in broad_o)
            ):
                return f"an original says it is not so: {o.said(t)}"
    for n, o in enumerate(originals):  # what an original denies, said with no denial at all
        others = set().union(*(r.lemmas for m, r in enumerate(originals) if m != n))
        denied = _denials(o)[1] - others
        if any(_has(t, p) and not denies for t in denied for p, denies in sentences):
            return f"an original says it is not so: {', '.join(sorted(o.said(t) for t in denied)[:2])}"
    broad_o = set().union(*(_denials(o)[2] for o in originals))
    stated_o = set().union(*(o.lemmas for o in originals))
    for t in core_c:
        if not _has(t, broad_o) and _has(t, stated_o) and t not in {"be", "have", "do"}:
            return f"the originals do not deny it: {candidate.said(t)}"
    whole = claims.read(" . ".join(o.text for o in originals))
    for x in sorted(_unsaid(candidate, whole)):
        for y in sorted(_unsaid(whole, candidate)):
            if (
                x.isalpha()
                and y.isalpha()
                and x not in _DENYING
                and (y in opposites(x, strict=True) or x in opposites(y, strict=True))
            ):
                return f"the opposite of the originals: {candidate.said(x)} / {y}"
    return ""


def _pieces(r: Reading, marks: str = ".;:!?()—–,") -> list[tuple[set[str], bool]]:
    """The text's pieces between the punctuation `marks`: the words of each, and whether it
    denies (a negator, a contrast, a verb that denies)."""
    out, current, denies = [], set(), False
    for i, w in enumerate(r.words):
        if w.kind == "punct" and w.text in marks:
            out.append((current, denies))
            current, denies = set(), False
            continue
        marker = any(tuple(x.lower for x in r.words[i : i + len(c)]) == c for c in _CONTRASTS)
        denies = denies or w.kind == "neg" or marker or w.lemma in _DENYING
        if w.kind == "number" or claims.content(w):
            current.add(w.lemma)
    return [*out, (current, denies)]


def _segments(r: Reading) -> list[set[str]]:
    """The candidate's parts between clause punctuation and "and"/"but": the words of each."""
    out, current = [], set()
    for w in r.words:
        if (
            w.kind == "punct"
            and w.text in ".;:!?()—–,"
            or w.lower in ("and", "but", "or", "while", "whereas", "which")
        ):
            if current:
                out.append(current)
            current = set()
        elif w.kind == "number" or claims.content(w):
            current.add(w.lemma)
    if current:
        out.append(current)
    return out


def _swapped(originals: list[Reading], candidate: Reading) -> str:
    """A value among words that went with another value in the originals and not with its own."""
    every = set().union(*(_facts(o) for o in originals))
    values = sorted(every & _facts(candidate))
    around = {v: set().union(*(o.lemmas | o.numbers for o in originals if v in _facts(o))) for v in values}
    names = [set(n.split()) for o in originals for n in o.names]
    kin = {v: set().union({v}, *(n for n in names if v in n)) for v in values}  # Zofia: Dabrowska
    clauses = [{w.lemma for w in clause} for clause in claims.clauses(list(candidate.words))]
    parts = _segments(candidate)
    for u in values:
        for v in values:
            if v == u:
                continue
            theirs = around[v] - around[u] - kin[u] - kin[v]  # words only v's originals have
            own = around[u] - around[v] - kin[u] - kin[v]  # words only u's originals have
            if own and any(u in p and v not in p and theirs & p and not p & own for p in parts):
                return f"{_shown(u)} now stands with what went with {_shown(v)}"
            # each with the other's: "Halima … has Dr. Amaka Chukwu …, while Gunnar Eriksen's is
            # Dr. Leila Nazari" (Amaka was Gunnar's, Leila Halima's)
            if any(u in c and v not in c and c & theirs for c in clauses) and any(
                v in c and u not in c and c & own for c in clauses
            ):
                return f"{_shown(u)} and {_shown(v)} changed places"
    return _rebound(originals, candidate, values)


def _rebound(originals: list[Reading], candidate: Reading, values: list[str]) -> str:
    """A value in a claim whose verb went with another value in the originals and never with
    its own ("5.4.3 fixes it; 5.4.2 still shows it" / "fixed in 5.4.2")."""

    def verbs(r: Reading, value: str) -> set[str]:
        found = set()
        for c in r.claims:
            if value in c.numbers | c.values | c.names | c.subject.words | set(c.subject.which):
                found.add(c.attribute)
        return found - {"be", "have", ":", "do"}

    def kind(value: str) -> str:
        return "number" if any(ch.isdigit() for ch in value) else "name"

    # a value every original has (of several) is what they are about, not one of their values
    if len(originals) > 1:
        values = [v for v in values if not all(v in _facts(o) for o in originals)]
    for u in values:
        had = set().union(*(verbs(o, u) for o in originals))
        for verb in verbs(candidate, u) if had else ():
            if any(_same(verb, h) for h in had):
                continue
            for v in values:
                if v == u or kind(v) != kind(u) or verb in verbs(candidate, v):
                    continue
                if any(_same(verb, h) for o in originals for h in verbs(o, v)):
                    return f"{_shown(u)} now goes with '{candidate.said(verb)}', which went with {_shown(v)}"
    return ""


def _shown(value: str) -> str:
    return value.replace("month:", "month ")


def claims_kept(
    originals: list[str],
    candidate: str,
    *,
    invented: int | None = None,
    dropped: float | None = None,
    new_part: float | None = None,
    distinct: float | None = None,
    may_drop: frozenset[int] = frozenset(),
) -> tuple[bool, str]:
    """Whether `candidate` keeps every claim of `originals` with its role and adds none: (True,
    "") or (False, a short reason). The originals numbered in `may_drop` may be left out in part
    (a rolling summary's previous text, cut to its budget), never inverted, swapped or added to.
    `invented`, `dropped`, `new_part` and `distinct` override the thresholds (the evaluation's
    cross-validation)."""
    invented = INVENTED if invented is None else invented
    dropped = DROPPED if dropped is None else dropped
    new_part = NEW_PART if new_part is None else new_part
    distinct = DISTINCT if distinct is None else distinct
    if not (candidate or "").strip():
        return False, "the text is blank"
    given = [n for n, o in enumerate(originals) if (o or "").strip()]
    read = [claims.read(originals[n]) for n in given]
    may_drop = frozenset(i for i, n in enumerate(given) if n in may_drop)
    c = claims.read(candidate)
    whole = claims.read(" . ".join(originals))
    if why := _inverted(read, c):
        return False, f"inverts: {why}"
    if why := _swapped(read, c):
        return False, f"swaps: {why}"
    new = _unsaid(c, whole)
    if new_facts := _facts_unsaid(c, whole, new):
        return False, f"invents: {_shown(new_facts[0])} is in no original"
    if len(new) > invented:
        return False, f"invents: {', '.join(sorted(c.said(t) for t in new)[:3])} in no original"
    for part in _segments(c):  # a part of the text most of whose words no original says: a new claim
        unsaid = part & new
        if len(part) >= 2 and len(unsaid) >= 2 and len(unsaid) / len(part) >= new_part:
            return False, f"invents: {', '.join(sorted(c.said(t) for t in unsaid)[:3])} in no original"
    for n, o in enumerate(read):
        if n in may_drop:
            continue
        gone = _unsaid(o, c)
        gone -= _facts(o) - set(_facts_unsaid(o, c, gone))  # 0.30 EUR said as 30 cents
        own = (o.lemmas | o.numbers) - set().union(
            *(r.lemmas | r.numbers for m, r in enumerate(read) if m != n)
        )
        if len(own) >= 2 and len(own & gone) / len(own) >= distinct and not _said_by_another(read, n, c):
            # what only this original says is gone ("pro-rated for unused full months")
            return False, f"drops: {', '.join(sorted(o.said(t) for t in own & gone)[:3])} ({_short(o.text)})"
        if gone_facts := _facts_unsaid(o, c, gone):
            return False, f"drops: {_shown(gone_facts[0])} ({_short(o.text)})"
        said = o.lemmas | o.numbers
        if said and len(gone) / len(said) > dropped and not _said_by_another(read, n, c):
            return False, f"drops: {', '.join(sorted(o.said(t) for t in gone)[:3])} ({_short(o.text)})"
    return True, ""


def _said_by_another(read: list[Reading], n: int, candidate: Reading) -> bool:
    """Original `n` duplicates another original that the candidate keeps: its claim is kept."""
    for m, other in enumerate(read):
        if (
            m != n
            and classify(other, read[n]).relation == DUPLICATE
            and not _unsaid(other, candidate) & _facts(other)
        ):
            return True
    return False


def _short(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= 60 else text[:57] + "…"
