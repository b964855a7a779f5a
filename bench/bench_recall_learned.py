"""A ranking learned across routes, tried against the hand-set fusion (`python -m bench
recall_learned`, opt-in): a logistic model over a few features of each of the fused ranking's
first 50 candidates (its fused score against the best, its place, each route's score against
that route's best and its rank there, its kind, its decay), trained leave one dialogue out over
the three sources together — the LoCoMo dev split's conversations, the chat set's chats and the
own set — and scored on the dialogue it never saw. Prints any@1 / any@10 / session@5 of the
fused ranking per source, hand-set against learned, and per question category."""

import numpy as np

from bench import locomo
from bench.bench_recall_quality import load_chat, load_locomo, load_own
from bench.recall_eval import mean, metrics
from memory.recall.fuse import rank
from memory.recall.params import DEFAULT_PARAMS, HOP_ROUTES, ROUTES
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE

TOP = 50
KINDS = (MESSAGE, EPISODE, MEMORY, ENTRY)
STEPS, RATE, L2 = 400, 0.5, 1e-3


def features(candidates) -> np.ndarray:
    """One row per candidate: what the hand-set fusion already knows, nothing from the words."""
    routes = (*ROUTES, *HOP_ROUTES)
    best = {r: max((c.routes[r]["score"] for c in candidates if r in c.routes), default=0.0) for r in routes}
    top = candidates[0].score or 1.0
    rows = []
    for place, c in enumerate(candidates, start=1):
        row = [c.score / top, 1.0 / place, c.decay]
        for r in routes:
            hit = c.routes.get(r)
            row += [hit["score"] / best[r] if hit and best[r] else 0.0, 1.0 / hit["rank"] if hit else 0.0]
        row += [float(c.kind == k) for k in KINDS]
        rows.append(row)
    return np.array(rows, dtype=float)


def dataset(evaluation, source: str):
    """(source, group, case, labels, X, y) per question, from the hand-set ranking's top 50."""
    out = []
    for case, ranking in zip(evaluation.cases, evaluation.rankings, strict=True):
        ranked = rank(ranking.rankings, case.q, case.now, DEFAULT_PARAMS)[:TOP]
        if not ranked:
            continue
        labels = [evaluation.label_of.get((c.kind, c.id), "") for c in ranked]
        y = np.array([float(label in case.evidence) for label in labels])
        group = f"{source}:{case.group or 'all'}"
        out.append((source, group, case, labels, features(ranked), y, evaluation.session_of))
    return out


def train(rows) -> np.ndarray:
    """Logistic regression by gradient descent on standardised features (numpy only)."""
    X = np.vstack([r[4] for r in rows])
    y = np.concatenate([r[5] for r in rows])
    mu, sd = X.mean(axis=0), X.std(axis=0) + 1e-9
    Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
    w = np.zeros(Z.shape[1])
    positive = max(y.mean(), 1e-6)
    weight = np.where(y > 0, 0.5 / positive, 0.5 / (1 - positive))  # balanced classes
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-Z @ w))
        w -= RATE * (Z.T @ (weight * (p - y)) / len(y) + L2 * w)
    return mu, sd, w


def rerank(model, row) -> list[str]:
    mu, sd, w = model
    Z = np.hstack([(row[4] - mu) / sd, np.ones((len(row[4]), 1))])
    order = np.argsort(-(Z @ w), kind="stable")
    return [row[3][i] for i in order]


def run(report):
    rows = dataset(load_own(), "own")
    rows += dataset(load_chat(), "chat")
    if locomo.available():
        rows += dataset(load_locomo(), "locomo")
    groups = sorted({r[1] for r in rows})
    scored = {}  # source -> {"hand": [...], "learned": [...]} with (type, metrics)
    for held in groups:
        model = train([r for r in rows if r[1] != held])
        for r in (r for r in rows if r[1] == held):
            case, session_of = r[2], r[6]
            by = scored.setdefault(r[0], {"hand": [], "learned": []})
            by["hand"].append((case.type, metrics(case.evidence, r[3], session_of)))
            by["learned"].append((case.type, metrics(case.evidence, rerank(model, r), session_of)))
    print(f"\n   leave one dialogue out over {len(groups)} dialogues: {', '.join(groups)}")
    for source, by in sorted(scored.items()):
        for how in ("hand", "learned"):
            m = mean([x for _, x in by[how]])
            print(
                f"   {source:7s} {how:8s} "
                + "  ".join(f"{k} {m[k]:.3f}" for k in ("any@1", "any@10", "session@5"))
            )
        hand, learned = mean([x for _, x in by["hand"]]), mean([x for _, x in by["learned"]])
        report(
            f"{source}: fused any@10, learned out of fold",
            learned["any@10"] * 100,
            "%",
            note=f"hand-set {hand['any@10']:.3f}; any@1 {hand['any@1']:.3f} → {learned['any@1']:.3f}; "
            f"session@5 {hand['session@5']:.3f} → {learned['session@5']:.3f}; {len(by['hand'])} questions",
        )
        for kind in sorted({t for t, _ in by["hand"]}):
            hand = mean([x for t, x in by["hand"] if t == kind])
            learned = mean([x for t, x in by["learned"] if t == kind])
            n = sum(1 for t, _ in by["hand"] if t == kind)
            print(
                f"     {kind or '-'} ({n}): any@10 {hand['any@10']:.3f} -> {learned['any@10']:.3f}, "
                f"any@1 {hand['any@1']:.3f} -> {learned['any@1']:.3f}"
            )
