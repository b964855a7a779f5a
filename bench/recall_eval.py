"""Retrieval quality of memory_search on labelled questions.

Each question has evidence items (message external ids, memory or block ids). For a ranked list
of candidates (one route alone, the fused ranking before packing, or the result items that
memory_search returns, one primary hit per item — context messages attached to a result do not
count) we report:

- any@k: at least one evidence item among the first k;
- all@k: every evidence item among the first k;
- session@k: the list mapped to sessions (de-duplicated, in order) has an evidence session among
  its first k.

The route rankings do not depend on the fusion parameters, so they are computed once per
question and re-fused for every parameter set `tune()` tries."""

import itertools
from dataclasses import dataclass, replace
from datetime import datetime

from memory.recall import memory_search
from memory.recall.fuse import rank
from memory.recall.params import (
    DEFAULT_PARAMS,
    HOP_ROUTES,
    KEYWORD_MESSAGES,
    ROUTES,
    VECTOR_EPISODES,
    RecallParams,
)
from memory.recall.search import recall_candidates

KS = (1, 5, 10, 50)
METRICS = ("any@1", "any@5", "any@10", "any@50", "all@10", "session@5")
FUSED, ITEMS = "fused (before packing)", "returned items"


@dataclass
class Case:
    q: str
    evidence: list[str]
    scope: object
    now: datetime
    type: str = ""
    # The dialogue the question belongs to: cross-validation holds out whole groups.
    group: str = ""


def metrics(evidence: list[str], ranked: list[str], session_of) -> dict[str, float]:
    wanted = set(evidence)
    out = {}
    for k in KS:
        out[f"any@{k}"] = float(bool(wanted & set(ranked[:k])))
    out["all@10"] = float(wanted <= set(ranked[:10]))
    sessions: list[str] = []
    for label in ranked:
        s = session_of(label) if label else ""
        if s not in sessions:
            sessions.append(s)
    out["session@5"] = float(bool({session_of(e) for e in wanted} & set(sessions[:5])))
    return out


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {m: sum(r[m] for r in rows) / len(rows) for m in METRICS} if rows else {}


class Evaluation:
    """`label_of[(kind, id)]` names a candidate's evidence label; `session_of(label)` its session."""

    def __init__(self, cases: list[Case], label_of: dict, session_of, *, limit: int = 50):
        self.cases, self.label_of, self.session_of = cases, label_of, session_of
        self.rankings = [recall_candidates(c.scope, q=c.q, now=c.now, limit=limit) for c in cases]

    def subset(self, keep) -> "Evaluation":
        """The cases for which `keep(case)` holds, sharing this evaluation's rankings (nothing is
        searched again)."""
        part = object.__new__(Evaluation)
        part.label_of, part.session_of = self.label_of, self.session_of
        pairs = [(c, r) for c, r in zip(self.cases, self.rankings, strict=True) if keep(c)]
        part.cases, part.rankings = [c for c, _ in pairs], [r for _, r in pairs]
        return part

    def _labels(self, items) -> list[str]:
        return [self.label_of.get((c.kind, c.id), "") for c in items]

    def _score(self, lists: list[list[str]]) -> dict[str, float]:
        return mean(
            [
                metrics(c.evidence, ranked, self.session_of)
                for c, ranked in zip(self.cases, lists, strict=True)
            ]
        )

    def route_metrics(self) -> dict[str, dict[str, float]]:
        return {
            route: self._score([self._labels(r.rankings.get(route, [])) for r in self.rankings])
            for route in (*ROUTES, *HOP_ROUTES)
            if any(route in r.rankings for r in self.rankings)
        }

    def fused_lists(self, params: RecallParams = DEFAULT_PARAMS) -> list[list[str]]:
        return [
            self._labels(rank(r.rankings, c.q, c.now, params))
            for c, r in zip(self.cases, self.rankings, strict=True)
        ]

    def fused_metrics(self, params: RecallParams = DEFAULT_PARAMS) -> dict[str, float]:
        return self._score(self.fused_lists(params))

    def item_lists(self, params: RecallParams = DEFAULT_PARAMS, k: int = 50, budget: int = 2000):
        out = []
        for c in self.cases:
            outcome = memory_search(c.scope, q=c.q, k=k, budget_tokens=budget, now=c.now, params=params)
            out.append(self._labels([item.candidate for item in outcome.items]))
        return out

    def item_metrics(self, params: RecallParams = DEFAULT_PARAMS, *, budget: int = 2000) -> dict[str, float]:
        """memory_search's result items: k=10 within `budget` for @1/5/10 and all@10 and
        session@5 (what an agent gets by default), k=50 within 25× the budget for @50."""
        at10 = self.item_lists(params, k=10, budget=budget)
        at50 = self.item_lists(params, k=50, budget=budget * 25)
        rows = []
        for c, short, long in zip(self.cases, at10, at50, strict=True):
            row = metrics(c.evidence, short, self.session_of)
            row["any@50"] = metrics(c.evidence, long, self.session_of)["any@50"]
            rows.append(row)
        return mean(rows)

    def by_type(self, params: RecallParams = DEFAULT_PARAMS) -> dict[str, dict[str, float]]:
        groups: dict[str, list] = {}
        for c, ranked in zip(self.cases, self.fused_lists(params), strict=True):
            groups.setdefault(c.type, []).append(metrics(c.evidence, ranked, self.session_of))
        return {t: {**mean(rows), "n": len(rows)} for t, rows in sorted(groups.items())}


def table(rows: dict[str, dict[str, float]]) -> str:
    lines = ["| ranking | " + " | ".join(METRICS) + " |", "|---|" + "---|" * len(METRICS)]
    for name, m in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{m[x]:.3f}" for x in METRICS) + " |")
    return "\n".join(lines)


def params_for(overrides: dict, base: RecallParams = DEFAULT_PARAMS) -> RecallParams:
    """`base` with `overrides` ({field: value}; "keyword" / "vector" set both keyword / both vector
    route weights)."""
    fields = {n: v for n, v in overrides.items() if n not in ("keyword", "vector")}
    params = replace(base, **fields)
    weights = {}
    if "keyword" in overrides:
        weights.update(keyword_knowledge=overrides["keyword"], keyword_messages=overrides["keyword"])
    if "vector" in overrides:
        weights.update(vector_knowledge=overrides["vector"], vector_episodes=overrides["vector"])
    return params.with_weights(**weights) if weights else params


def tune(evaluation: Evaluation, grid: dict, base: RecallParams = DEFAULT_PARAMS, key: str = "any@10"):
    """Fused metrics for every combination of `grid` ({field: values}; the field "keyword" /
    "vector" sets both keyword / both vector route weights). Returns [(metrics, overrides)], best
    `key` first (any@1 breaks ties)."""
    names = list(grid)
    results = []
    for values in itertools.product(*(grid[n] for n in names)):
        overrides = dict(zip(names, values, strict=True))
        results.append((evaluation.fused_metrics(params_for(overrides, base)), overrides))
    results.sort(key=lambda r: (-r[0][key], -r[0]["any@1"]))
    return results


def coordinate_search(
    evaluation: Evaluation,
    grid: dict,
    base: RecallParams = DEFAULT_PARAMS,
    key: str = "any@10",
    passes: int = 2,
):
    """The best overrides of `grid` ({field: values}, as in `tune`) found one field at a time:
    starting from `base`'s values, each field in turn takes the value that scores best (fused
    `key`, any@1 breaking ties, the current value kept on a tie) with the others held; `passes`
    rounds. An exhaustive product of a dozen fields would be tens of thousands of fusions.
    Returns (metrics, overrides)."""

    def current(name):
        if name in ("keyword", "vector"):
            return base.weights[KEYWORD_MESSAGES if name == "keyword" else VECTOR_EPISODES]
        return getattr(base, name)

    chosen = {name: current(name) for name in grid}
    memo: dict[tuple, dict] = {}

    def score(overrides: dict) -> dict:
        token = tuple(sorted(overrides.items()))
        if token not in memo:
            memo[token] = evaluation.fused_metrics(params_for(overrides, base))
        return memo[token]

    best = score(chosen)
    for _ in range(passes):
        moved = False
        for name, values in grid.items():
            for value in values:
                trial = {**chosen, name: value}
                m = score(trial)
                if (m[key], m["any@1"]) > (best[key], best["any@1"]):
                    best, chosen, moved = m, trial, True
        if not moved:
            break
    return best, chosen


# What cross-validation may choose: every fusion weight and threshold memory_search has, found
# field by field on the training dialogues (coordinate_search, re-fusing stored route rankings,
# so nothing is searched per trial). The half-life is not fitted: it keeps the promise that the
# newer of two statements of a fact wins (tests/memory/recall/test_recall.py), which a longer
# one fitted to these dialogues broke.
CV_GRID = {
    "fusion": ["wsum", "rrf"],
    "keyword": [1.0, 1.5, 2.0, 3.0],
    "vector": [0.5, 1.0, 1.5],
    "quality_exponent": [0.5, 1.0, 1.5],
    "min_similarity": [0.1, 0.2, 0.3],
    "neighbour_seconds": [60.0, 120.0, 180.0, 300.0],
    "neighbour_weight": [0.0, 0.1, 0.2, 0.3, 0.5],
    "neighbour_after_weight": [0.0, 0.1, 0.2, 0.3],
    "burst_seconds": [600.0, 1800.0, 3600.0],
    "burst_weight": [0.0, 0.1, 0.2, 0.35],
    "when_boost": [0.0, 0.5, 1.0, 2.0],
    "when_slack_days": [0.0, 1.0, 3.0],
    "speaker_boost": [0.0, 0.25, 0.5, 1.0, 2.0],
    # The second hop's rankings are kept from the search (made with the default first ranking);
    # its weight is re-chosen like the others (0 leaves it out).
    "hop_weight": [0.0, 0.25, 0.5, 1.0],
}


def cross_validate(evaluation: Evaluation, grid: dict = CV_GRID, key: str = "any@10"):
    """Leave one dialogue out: for each group, choose the best values of `grid` on the other
    groups' questions (fused ranking, by `key`, coordinate_search) and score the held-out group's
    returned items with them. Returns (per-fold rows, mean, spread) where a fold row is (group,
    n, overrides, metrics) and spread is max - min per metric."""
    groups = sorted({c.group for c in evaluation.cases})
    folds = []
    for held in groups:
        train = evaluation.subset(lambda c, held=held: c.group != held)
        test = evaluation.subset(lambda c, held=held: c.group == held)
        best = coordinate_search(train, grid, key=key)[1]
        folds.append((held, len(test.cases), best, test.item_metrics(params_for(best))))
    means = {m: sum(f[3][m] for f in folds) / len(folds) for m in METRICS}
    spread = {m: max(f[3][m] for f in folds) - min(f[3][m] for f in folds) for m in METRICS}
    return folds, means, spread
