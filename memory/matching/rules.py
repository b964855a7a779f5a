"""Code rules a model's merge or summary must pass before it may replace what it reads (version
"consolidation-rules/1"; the near-duplicate merge, the summary over a full category, the
reconciler's session digest and the history fold use them). A model that fails them is not
trusted with the originals: the group is left alone and the run's notes say why.

- **Not the prompt's example**: a reply that is a placeholder of the prompt ("The merged
  statement") says nothing.
- **Nothing new**: every number, date or identifier with a digit, and every name (a capitalised
  word; one opening a sentence too, unless it is a common sentence opener), must appear in the
  originals (case folded), unless the claims' check below finds each said in another notation
  (2pm for 14:00). A merge reading
  "2023-17-07 7:59:48.643+CALCARRE_SANTAYADORA…" or a summary naming a person no source names
  is refused.
- **A merge keeps each original** (`merge_breach` only): with vectors, cosine ≥ MERGE_COSINE to
  every original, or at least MERGE_TERMS of each original's key terms in the merge. The floor
  was measured on bench/data/dedup_pairs.json: its 56 paraphrase pairs (one fact told two ways)
  have cosines from 0.693 (5th percentile 0.718, median 0.869) with the local embedder, while
  unrelated statements stayed at or below 0.51; 0.6 keeps every paraphrase and refuses the
  unrelated. Key-term containment of paraphrases is low (median 0.57, minimum 0.11), so terms
  alone only confirm, never refuse, where vectors exist.
- **Every claim kept** (merges, and summaries that replace memories: `every_claim`): each claim
  of each original is in the text with its role — the version that fixes stays the one that
  fixes, the date, person, negation and condition stay with what they were said of — and it adds
  none (memory.matching.kept.claims_kept). The history fold is held to it for the new turns; the
  summary so far may be cut to its budget, never inverted or added to.
- **A merge keeps each original's meaning** (`merge_breach`): originals the relation finder
  (memory.matching.relations) calls contradicting are never merged, and a merge the finder
  calls contradicting any original — a negation dropped, a number, version or date swapped,
  a preference turned to its opposite, another owner in the same role — is refused."""

import re

from knowledge.llm import echoes_example
from memory.matching.kept import claims_kept
from memory.matching.relations import CONTRADICTION, classify
from memory.matching.terms import key_terms

VERSION = "consolidation-rules/1"
MERGE_COSINE = 0.6
MERGE_TERMS = 0.5

_DIGITS = re.compile(r"[\w.:/+\-]*\d[\w.:/+\-]*")
_WORD = re.compile(r"[A-Za-zÀ-ÿ][\w'’\-]*")
# Capitalised words that are no names (and may open a clause after a comma).
_COMMON = frozenset(
    "i a an the this that these those it its he she they we you my our their his her if when then so but and or on in at by for from to of with as is are was were be been monday tuesday wednesday thursday friday saturday sunday january february march april may june july august september october november december utc there every each all both no yes also however after before since during while until now today yesterday tomorrow please note summary merged memory memories someone everyone nobody nothing".split()  # noqa: SIM905
)


def _digit_tokens(text: str) -> set[str]:
    return {t.strip(".:/+-").lower() for t in _DIGITS.findall(text) if t.strip(".:/+-")}


def _names(text: str) -> set[str]:
    names = set()
    for match in _WORD.finditer(text):
        word = match.group()
        if not word[0].isupper() or word.lower() in _COMMON:
            continue
        names.add(re.sub(r"['’]s?$", "", word.lower()))  # Ana's → ana
    return names


def new_specifics(text: str, sources: list[str]) -> list[str]:
    """Numbers, dates, identifiers and names in `text` that no source contains."""
    pool = " ".join(sources).lower()
    pool_digits = set().union(*(_digit_tokens(s) for s in sources)) if sources else set()
    new = sorted(t for t in _digit_tokens(text) if t not in pool_digits and t not in pool)
    new += sorted(n for n in _names(text) if n not in pool)
    return new


def _unusable(text: str, examples) -> str:
    if not text.strip():
        return "it is blank"
    if echoes_example(text, examples):
        return f"it is the prompt's example ({text.strip()[:80]!r}), not a summary"
    return ""


def summary_breach(
    text: str, sources: list[str], *, examples=(), every_claim: bool = False, may_drop=frozenset()
) -> str:
    """Why a summary of `sources` may not be used ("" when it may). With `every_claim` it must
    also keep each claim of each source in its role and add none (memory.matching.kept); the
    sources numbered in `may_drop` may be left out in part, never inverted or swapped."""
    if why := _unusable(text, examples):
        return why
    kept, why = claims_kept(sources, text, may_drop=frozenset(may_drop)) if every_claim else (True, "")
    if why_new := _new(text, sources, kept=every_claim and kept):
        return why_new
    if not kept:
        return f"it does not keep every claim of the originals ({why})"
    return ""


def _new(text: str, sources: list[str], *, kept: bool) -> str:
    """The numbers and names no source has, unless the claims' check (which reads 2pm as 14:00,
    0.30 EUR as 30 cents) found every one said: `kept`."""
    new = new_specifics(text, sources)
    return f"it names what no original says: {', '.join(new[:5])}" if new and not kept else ""


def contradicting_originals(originals: list[str]) -> str:
    """Why `originals` may not be merged into one statement: two of them contradict each other
    (memory.matching.relations), "" when none do."""
    for i, a in enumerate(originals):
        for j in range(i + 1, len(originals)):
            relation = classify(a, originals[j])
            if relation.relation == CONTRADICTION:
                return f"memories {i + 1} and {j + 1} contradict each other ({relation.why})"
    return ""


def merge_breach(text: str, originals: list[str], *, examples=(), vectors=None) -> str:
    """Why a merge may not replace `originals` ("" when it may). `vectors` embeds a list of
    texts (None: no vectors, key terms decide)."""
    why = _unusable(text, examples) or _new(text, originals, kept=claims_kept(originals, text)[0])
    if why:
        return why.replace("a summary", "a merge")
    why = contradicting_originals(originals)
    if why:
        return f"the originals disagree: {why}"
    for n, original in enumerate(originals):
        relation = classify(original, text, same_subject=True)
        if relation.relation == CONTRADICTION:
            return f"it changes what memory {n + 1} says ({relation.why})"
    merged_terms = key_terms(text)
    cosines = None
    if vectors is not None:
        embedded = vectors([text, *originals])
        cosines = [float(embedded[0] @ v) for v in embedded[1:]]
    for n, original in enumerate(originals):
        terms = key_terms(original)
        kept = len(terms & merged_terms) / len(terms) if terms else 1.0
        if kept >= MERGE_TERMS:
            continue
        if cosines is not None and cosines[n] >= MERGE_COSINE:
            continue
        detail = f"cosine {cosines[n]:.2f}, " if cosines is not None else ""
        return f"it does not keep memory {n + 1} ({detail}{kept:.0%} of its key terms)"
    kept_all, why = claims_kept(originals, text)
    if not kept_all:
        return f"it does not keep every claim of the originals ({why})"
    return ""
