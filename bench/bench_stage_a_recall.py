"""Does recall get worse once stage A has cut the channels into episodes? The labelled set
(bench/data/recall_eval.json with its 6,000 distractor messages) is measured twice: before stage A
(route 4 = vector search over the messages themselves) and after stage A ran over every channel
with the extractive stub model (bench/stage_a_stub.py) and the episodes were embedded (route 4 =
episode summaries, plus messages no episode covers). A winning episode counts for the labelled
messages it covers. The fused ranking is measured for each way of counting an episode's message
hits (RecallParams.episode_hits), and what memory_search returns at k=10 within 2,000 tokens
twice: on the results' primary hits, and on every message shown (expansion included).

The stub's episodes are extractive (the messages' own words, grouped by time and thread), not a
language model's summaries: this checks that episodes do not break recall's plumbing, not how
much good summaries would add."""

import time
from dataclasses import replace

from django.test import override_settings

from bench import stage_a_stub
from bench.bench_recall_quality import load_own
from bench.recall_eval import KS, Evaluation
from knowledge.embeddings.backlog import run_backlog
from memory.recall import memory_search
from memory.recall.fuse import rank
from memory.recall.params import DEFAULT_PARAMS, KEYWORD_MESSAGES, VECTOR_EPISODES

# How an episode's message hits count in fusion (RecallParams.episode_hits); "apart" is fusion
# before episodes and messages were counted together.
VARIANTS = ("best", "sum", "apart")


def _found(evaluation: Evaluation, cands, episode_labels: dict[int, set[str]]) -> set[str]:
    found = set()
    for c in cands:
        found.add(evaluation.label_of.get((c.kind, c.id), ""))
        if c.kind == "episode":
            found |= episode_labels.get(c.id, set())
    return found


def _share(evidence, found) -> float:
    return sum(1 for e in evidence if e in found) / len(evidence)


def fused_recall(evaluation: Evaluation, episode_labels, params=DEFAULT_PARAMS, route=None) -> dict:
    """Share of each question's evidence among the first k candidates, averaged; an episode
    counts for the labelled messages it covers."""
    totals = {k: 0.0 for k in KS}
    for case, ranking in zip(evaluation.cases, evaluation.rankings, strict=True):
        if route is None:
            cands = rank(ranking.rankings, case.q, case.now, params)
        else:
            cands = ranking.rankings.get(route, [])
        for k in KS:
            totals[k] += _share(case.evidence, _found(evaluation, cands[:k], episode_labels))
    return {k: v / len(evaluation.cases) for k, v in totals.items()}


def delivered_recall(evaluation: Evaluation, episode_labels, params=DEFAULT_PARAMS) -> tuple[float, float]:
    """What memory_search returns at k=10 within 2,000 tokens: (share of evidence among the
    items' primary hits — an episode counting for the messages it covers —, share among every
    message shown, expansion included)."""
    items_total = shown_total = 0.0
    for case in evaluation.cases:
        outcome = memory_search(case.scope, q=case.q, k=10, budget_tokens=2000, now=case.now, params=params)
        cands = [i.candidate for i in outcome.items]
        items_total += _share(case.evidence, _found(evaluation, cands, episode_labels))
        shown = _found(evaluation, cands, {})
        for item in outcome.items:
            shown |= {evaluation.label_of.get(("message", m["id"]), "") for m in item.messages}
        shown_total += _share(case.evidence, shown)
    n = len(evaluation.cases)
    return items_total / n, shown_total / n


def run(report):
    from curation.dreaming.stage_a.services import stage_a_run
    from curation.models import DreamingRun
    from knowledge.models import Channel, Episode, Message
    from memory.recall.seen import forget_stats

    before = load_own()
    without = fused_recall(before, {})
    items_without, delivered_without = delivered_recall(before, {})

    stub, model_settings = stage_a_stub.start()
    try:
        with override_settings(BRAIN_EMBEDDING_KICK=False, **model_settings):
            start = time.perf_counter()
            runs = [
                stage_a_run(channel=c, trigger=DreamingRun.MANUAL, max_seconds=3600)
                for c in Channel.objects.all()
            ]
            assert all(r.state == DreamingRun.DONE for r in runs), [r.reason for r in runs]
            run_backlog(max_seconds=3600)
            from bench.recall_seed import analyze

            analyze()
            forget_stats()
            print(
                f"   stage A ({Episode.objects.count():,} episodes) and their vectors in "
                f"{time.perf_counter() - start:.0f} s",
                flush=True,
            )
    finally:
        stub.close()
    labels: dict[int, set[str]] = {}
    for mid, episode_id in Message.objects.filter(episode__isnull=False).values_list("pk", "episode_id"):
        labels.setdefault(episode_id, set()).add(before.label_of.get(("message", mid), ""))
    after = Evaluation(before.cases, before.label_of, before.session_of)
    n = len(after.cases)
    for route in (KEYWORD_MESSAGES, VECTOR_EPISODES):
        b, a = fused_recall(before, {}, route=route), fused_recall(after, labels, route=route)
        print(
            f"   {route} alone @1/@10: {b[1] * 100:.1f}/{b[10] * 100:.1f} without, "
            f"{a[1] * 100:.1f}/{a[10] * 100:.1f} with episodes",
            flush=True,
        )
    print("   | ranking | " + " | ".join(f"@{k}" for k in KS) + " |", flush=True)
    print("   | fused, no episodes | " + " | ".join(f"{without[k] * 100:.1f}" for k in KS) + " |")
    variants = {}
    for variant in VARIANTS:
        params = replace(DEFAULT_PARAMS, episode_hits=variant)
        variants[variant] = fused_recall(after, labels, params)
        print(
            f"   | fused, stub episodes, episode_hits={variant} | "
            + " | ".join(f"{variants[variant][k] * 100:.1f}" for k in KS)
            + " |",
            flush=True,
        )
    with_episodes = variants[DEFAULT_PARAMS.episode_hits]
    items_with, delivered_with = delivered_recall(after, labels)
    items_apart, delivered_apart = delivered_recall(
        after, labels, replace(DEFAULT_PARAMS, episode_hits="apart")
    )
    print(
        f"   k=10 items / every message shown: no episodes {items_without * 100:.1f} / "
        f"{delivered_without * 100:.1f}, episodes apart {items_apart * 100:.1f} / {delivered_apart * 100:.1f}, "
        f"episodes (default) {items_with * 100:.1f} / {delivered_with * 100:.1f}",
        flush=True,
    )
    for k in KS:
        report(f"recall@{k} fused, no episodes", without[k] * 100, "%", note=f"{n} questions")
        report(
            f"recall@{k} fused, stub-model episodes",
            with_episodes[k] * 100,
            "%",
            target="≥ no episodes" if k == 10 else "",
            note="an episode counts for the messages it covers",
        )
    report("recall@10 of the k=10 items, no episodes", items_without * 100, "%")
    report("recall@10 of the k=10 items, stub-model episodes", items_with * 100, "%", target="≥ no episodes")
    report("delivered recall@10 (every message shown), no episodes", delivered_without * 100, "%")
    report(
        "delivered recall@10 (every message shown), stub-model episodes",
        delivered_with * 100,
        "%",
        target="≥ no episodes",
    )
