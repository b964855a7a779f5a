"""Dedup on the labelled pair set (bench/data/dedup_pairs.json): the cosine of each pair's
vectors from the real embedder, and precision/recall of "merge when cosine ≥ θ" at several θ.
A false merge (a near miss merged) loses a fact; a missed paraphrase only keeps a duplicate, so
θ is chosen for precision first."""

import json
from pathlib import Path

import numpy as np

PAIRS = Path(__file__).resolve().parent / "data" / "dedup_pairs.json"
THETAS = (0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.96)


def load_pairs() -> list[dict]:
    return json.loads(PAIRS.read_text())["pairs"]


def pair_cosines(pairs=None) -> list[tuple[float, bool]]:
    from knowledge.embeddings.embedder import embed_texts

    pairs = pairs or load_pairs()
    a = np.asarray(embed_texts([p["a"] for p in pairs]))
    b = np.asarray(embed_texts([p["b"] for p in pairs]))
    cos = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return [(float(c), bool(p["same"])) for c, p in zip(cos, pairs, strict=True)]


def precision_recall(scored, theta: float) -> tuple[float, float, int]:
    """(precision, recall, false merges) of merging every pair with cosine ≥ θ."""
    tp = sum(1 for c, same in scored if c >= theta and same)
    fp = sum(1 for c, same in scored if c >= theta and not same)
    fn = sum(1 for c, same in scored if c < theta and same)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, fp
