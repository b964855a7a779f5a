"""Vector deduplication and restatement: when two memories say the same thing.

Two texts say the same thing when the cosine similarity of their vectors is at least θ
(BRAIN_RECONCILER_DEDUP_COSINE) *and* they pass three code guards, because on the labelled pair
set (bench/data/dedup_pairs.json) near misses — one fact changed, most words kept — score as
high as paraphrases (often above 0.95):
- the numbers in them are the same;
- both or neither are negated;
- it is not one word swapped for another: when each side keeps one or two key terms (first five
  letters, so 'rebuilt' meets 'rebuild') the other lacks, and half or more of the terms are
  shared, it is a different fact ('peanuts' / 'shellfish');
- the relation finder (memory.matching.relations) does not call them a contradiction.

The same test decides restatement for promotion (a memory or message that restates a memory)."""

import re

import numpy as np

from memory.matching.relations import CONTRADICTION, classify
from memory.matching.terms import key_terms, overlap

NEGATION = re.compile(r"\b(?:not|no|never|none|nobody|nothing|without|cannot)\b|n't\b", re.IGNORECASE)
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
SWAP_OVERLAP = 0.5
SWAP_TERMS = 2
CHUNK = 1024  # rows of one similarity block (CHUNK × n float32)


def _stems(text: str) -> frozenset[str]:
    return frozenset(t[:5] for t in key_terms(text))


def same_statement_guard(a: str, b: str) -> bool:
    """The code rules two texts of close vectors must also pass to count as the same statement."""
    if sorted(NUMBER.findall(a)) != sorted(NUMBER.findall(b)):
        return False
    if bool(NEGATION.search(a)) != bool(NEGATION.search(b)):
        return False
    sa, sb = _stems(a), _stems(b)
    only_a, only_b = sa - sb, sb - sa
    swapped = only_a and only_b and len(only_a) <= SWAP_TERMS and len(only_b) <= SWAP_TERMS
    if swapped and overlap(sa, sb) >= SWAP_OVERLAP:
        return False
    return classify(a, b).relation != CONTRADICTION  # the relation finder's rules


def unit_rows(vectors) -> np.ndarray:
    """Unit rows from vectors (arrays, or pgvector's text form '[x,y,…]')."""
    vectors = list(vectors)
    if vectors and isinstance(vectors[0], str):
        flat = ",".join(v[1:-1] for v in vectors)
        m = np.fromstring(flat, dtype=np.float32, sep=",").reshape(len(vectors), -1)
    else:
        m = np.asarray(vectors, dtype=np.float32)
    if m.ndim != 2 or not len(m):
        return np.zeros((0, 0), dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def close_pairs(m: np.ndarray, theta: float, rows=None):
    """(i, j, cosine) with i < j for every pair of rows of unit matrix `m` at cosine ≥ θ, in
    blocks of CHUNK rows so memory stays bounded. With `rows` (indices), only pairs that
    involve one of those rows: a pass after the first compares what is new against everything."""
    targets = np.arange(len(m)) if rows is None else np.asarray(sorted(rows), dtype=np.int64)
    is_target = np.zeros(len(m), dtype=bool)
    is_target[targets] = True
    for start in range(0, len(targets), CHUNK):
        chunk = targets[start : start + CHUNK]
        block = m[chunk] @ m.T
        hits_r, hits_c = np.nonzero(block >= theta)
        for r, c in zip(hits_r.tolist(), hits_c.tolist(), strict=True):
            i = int(chunk[r])
            # each pair once: both targets → i < c; a target with an older row → always
            if c != i and (not is_target[c] or c > i):
                yield min(i, c), max(i, c), float(block[r, c])


def is_same(text_a: str, text_b: str, cosine: float, theta: float) -> bool:
    return cosine >= theta and same_statement_guard(text_a, text_b)
