"""Retrieval quality of memory_search on the labelled set (bench/data/recall_eval.json):
recall@1/5/10/50 of each route alone and of the fused ranking, plus what memory_search delivers
(expansion included) at k=10 within 2,000 tokens."""

import time

from django.test import override_settings

from bench.recall_eval import KS, Evaluation
from bench.recall_seed import ACTOR, analyze, load_eval, reset_recall_tables
from knowledge.vectors import run_backlog


def run(report):
    reset_recall_tables()
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        start = time.perf_counter()
        world = load_eval()
        run_backlog(max_seconds=3600)
        analyze()
        print(f"   loaded and embedded the labelled set in {time.perf_counter() - start:.0f} s", flush=True)
    evaluation = Evaluation(world, ACTOR)
    n = len(evaluation.cases)
    for route, scores in evaluation.route_recall().items():
        for k in KS:
            report(f"recall@{k} {route}", scores[k] * 100, "%", note=f"{n} questions, route alone")
    fused, by_type = evaluation.fused_recall(by_type=True)
    for k in KS:
        report(f"recall@{k} fused", fused[k] * 100, "%", target="> every route @10" if k == 10 else "")
    for name, scores in sorted(by_type.items()):
        print(
            f"   fused by type {name:10s} " + "  ".join(f"@{k} {scores[k] * 100:5.1f}" for k in KS),
            flush=True,
        )
    report("delivered recall@10 (expanded, 2,000 tokens)", evaluation.delivered_recall() * 100, "%")
