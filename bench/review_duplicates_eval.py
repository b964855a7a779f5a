"""The review queue's near-duplicate hint on its labelled pairs (bench/data/review_duplicate_pairs.json):
the cosine of each pair from the real embedder, and precision/recall of "hint when cosine ≥ θ".
Two rules are measured: the vector alone, and the vector with the reconciler's code guards
(memory.reconciler.dedup.same_statement_guard: same numbers, same negation, not one word
swapped). A hint only asks a reviewer to look (the reviewer decides), so θ is the one with the
best F1 whose precision is at least 0.85. Run: `python -m bench.review_duplicates_eval`."""

import json
from pathlib import Path

from bench.dedup_eval import pair_cosines, precision_recall

PAIRS = Path(__file__).resolve().parent / "data" / "review_duplicate_pairs.json"
THETAS = tuple(round(0.70 + 0.02 * i, 2) for i in range(14))


def main() -> None:
    import django

    django.setup()
    pairs = json.loads(PAIRS.read_text())["pairs"]
    scored = pair_cosines(pairs)
    print(f"{len(pairs)} pairs ({sum(p['same'] for p in pairs)} duplicates)")
    from memory.lifecycle.duplicates import same_facts
    from memory.reconciler.dedup import same_statement_guard

    guarded = [
        (c if same_statement_guard(p["a"], p["b"]) else -1.0, same)
        for (c, same), p in zip(scored, pairs, strict=True)
    ]
    facts = [
        (c if same_facts(p["a"], p["b"]) else -1.0, same) for (c, same), p in zip(scored, pairs, strict=True)
    ]
    rules = (("vector only", scored), ("vector + all guards", guarded), ("vector + numbers/negation", facts))
    for name, rows in rules:
        best = None
        print(name)
        for theta in THETAS:
            precision, recall, false_hints = precision_recall(rows, theta)
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            print(
                f"  θ={theta:.2f} precision={precision:.2f} recall={recall:.2f} F1={f1:.2f} false hints={false_hints}"
            )
            if precision >= 0.85 and (best is None or f1 > best[1]):
                best = (theta, round(f1, 2))
        print("  chosen θ:", best)
    for (c, same), p in sorted(zip(scored, pairs, strict=True), key=lambda x: -x[0][0]):
        print(f"{c:.3f} {'DUP ' if same else 'diff'} {p['a'][:50]!r} ~ {p['b'][:50]!r}")


if __name__ == "__main__":
    main()
