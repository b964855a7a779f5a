"""Retrieval quality on the labelled set: recall@k of each route alone and of the fused ranking.

recall@k of a question = the share of its evidence items found among the first k candidates;
the figure is the mean over questions. "fused" is memory_search's ranking (fusion, decay,
reranker) before expansion; "delivered" counts evidence inside what memory_search actually
returns with k=10 and a 2,000-token budget (expansion included).

The route rankings do not depend on the fusion parameters, so they are computed once per
question and re-fused for every parameter set `tune()` tries."""

import itertools
from dataclasses import replace

from memory.recall import memory_search, resolve_scope
from memory.recall.fuse import apply_decay, fuse
from memory.recall.params import DEFAULT_PARAMS, ROUTES, RecallParams
from memory.recall.search import recall_candidates

KS = (1, 5, 10, 50)


def _labels(world, items) -> list[str]:
    return [world.label_of.get((c.kind, c.id), "") for c in items]


def _recall(evidence: list[str], ranked: list[str], k: int) -> float:
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


class Evaluation:
    def __init__(self, world, actor):
        self.world = world
        self.cases = []
        for question in world.data["questions"]:
            conversation = world.conversations[question["channel"]]
            scope = resolve_scope(actor, agent=conversation.agent, conversation=conversation)
            now = world.when(question["day"])
            ranking = recall_candidates(scope, q=question["q"], now=now, limit=50)
            self.cases.append((question, scope, now, ranking))

    def route_recall(self) -> dict[str, dict[int, float]]:
        out = {}
        for route in ROUTES:
            scores = {k: 0.0 for k in KS}
            for question, _, _, ranking in self.cases:
                labels = _labels(self.world, ranking.rankings.get(route, []))
                for k in KS:
                    scores[k] += _recall(question["evidence"], labels, k)
            out[route] = {k: v / len(self.cases) for k, v in scores.items()}
        return out

    def fused_recall(self, params: RecallParams = DEFAULT_PARAMS, by_type: bool = False):
        totals = {k: 0.0 for k in KS}
        types: dict[str, dict] = {}
        for question, _, now, ranking in self.cases:
            candidates = apply_decay(fuse(ranking.rankings, params), now, params)
            labels = _labels(self.world, candidates)
            t = types.setdefault(question["type"], {"n": 0, **{k: 0.0 for k in KS}})
            t["n"] += 1
            for k in KS:
                r = _recall(question["evidence"], labels, k)
                totals[k] += r
                t[k] += r
        result = {k: v / len(self.cases) for k, v in totals.items()}
        if by_type:
            return result, {name: {k: t[k] / t["n"] for k in KS} for name, t in types.items()}
        return result

    def delivered_recall(
        self, params: RecallParams = DEFAULT_PARAMS, k: int = 10, budget: int = 2000
    ) -> float:
        total = 0.0
        for question, scope, now, _ in self.cases:
            outcome = memory_search(scope, q=question["q"], k=k, budget_tokens=budget, now=now, params=params)
            found = set()
            for item in outcome.items:
                found.add(self.world.label_of.get((item.candidate.kind, item.candidate.id), ""))
                found |= {self.world.label_of.get(("message", m["id"]), "") for m in item.messages}
                found |= {self.world.label_of.get((c.kind, c.id), "") for c in item.also_hits}
            total += sum(1 for e in question["evidence"] if e in found) / len(question["evidence"])
        return total / len(self.cases)


def tune(evaluation: Evaluation, k: int = 10) -> list[tuple[float, RecallParams]]:
    """Grid search over fusion and decay parameters; returns (score, params), best first. The
    score is recall@k with recall@1 as a tie-breaker (see docs/RECALL.md)."""
    results = []
    grid = itertools.product(
        (5, 10, 20, 60),  # rrf_k
        (0.5, 1.0, 1.5),  # keyword weight (both keyword routes)
        (0.5, 1.0, 1.5),  # vector weight (both vector routes)
        (90.0, 365.0, 1000.0),  # message half-life (days)
        (0.5, 0.8),  # knowledge floor
        (0.0, 1.0, 2.0),  # quality exponent (0 = plain RRF)
        (0.0, 0.2, 0.3),  # minimum cosine similarity of vector hits
    )
    for rrf_k, kw, vec, half_life, floor, exponent, min_sim in grid:
        params = replace(
            DEFAULT_PARAMS,
            rrf_k=rrf_k,
            message_half_life_days=half_life,
            knowledge_floor=floor,
            quality_exponent=exponent,
            min_similarity=min_sim,
            weights={
                "keyword_knowledge": kw,
                "keyword_messages": kw,
                "vector_knowledge": vec,
                "vector_episodes": vec,
            },
        )
        scores = evaluation.fused_recall(params)
        results.append((scores[k] + 0.01 * scores[1], params, scores))
    results.sort(key=lambda r: -r[0])
    return results
