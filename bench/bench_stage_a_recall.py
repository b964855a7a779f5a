"""Does recall get worse once stage A has cut the channels into episodes? The labelled set
(bench/data/recall_eval.json with its 6,000 distractor messages) is measured twice: before stage A
(route 4 = vector search over the messages themselves) and after stage A ran over every channel
with the extractive stub model (bench/stage_a_stub.py) and the episodes were embedded (route 4 =
episode summaries, plus messages no episode covers). A winning episode counts for the labelled
messages it covers; "delivered" counts what memory_search returns at k=10 within 2,000 tokens,
expansion included.

The stub's episodes are extractive (the messages' own words, grouped by time and thread), not a
language model's summaries: this checks that episodes do not break recall's plumbing, not how
much good summaries would add."""

import time

from django.test import override_settings

from bench import stage_a_stub
from bench.recall_eval import KS, Evaluation
from bench.recall_seed import ACTOR, analyze, load_eval, reset_recall_tables
from knowledge.embeddings.backlog import run_backlog
from memory.recall.fuse import apply_decay, fuse
from memory.recall.params import DEFAULT_PARAMS


def _merged(candidates, episode_of: dict[int, int]):
    """What fusion would rank if a message and the episode covering it were one candidate: the
    message's score joins its episode's (a diagnostic; memory_search does not do this)."""
    by_key, out = {}, []
    for c in candidates:
        key = ("episode", episode_of[c.id]) if c.kind == "message" and c.id in episode_of else (c.kind, c.id)
        if key in by_key:
            by_key[key].score += c.score
        else:
            by_key[key] = c
            if key != (c.kind, c.id):
                c.kind, c.id = key
            out.append(c)
    return sorted(out, key=lambda c: -c.score)


def ranked(evaluation: Evaluation, route: str | None, merge: dict[int, int] | None):
    for question, _, now, ranking in evaluation.cases:
        if route is None:
            candidates = apply_decay(fuse(ranking.rankings, DEFAULT_PARAMS), now, DEFAULT_PARAMS)
            if merge is not None:
                candidates = _merged(candidates, merge)
        else:
            candidates = ranking.rankings.get(route, [])
        yield question, candidates


def fused_recall(
    evaluation: Evaluation,
    episode_labels: dict[int, set[str]],
    *,
    route: str | None = None,
    merge: dict[int, int] | None = None,
) -> dict[int, float]:
    world = evaluation.world
    totals = {k: 0.0 for k in KS}
    for question, candidates in ranked(evaluation, route, merge):
        for k in KS:
            found = set()
            for c in candidates[:k]:
                found.add(world.label_of.get((c.kind, c.id), ""))
                if c.kind == "episode":
                    found |= episode_labels.get(c.id, set())
            totals[k] += sum(1 for e in question["evidence"] if e in found) / len(question["evidence"])
    return {k: v / len(evaluation.cases) for k, v in totals.items()}


def run(report):
    from curation.dreaming.services import stage_a_run
    from curation.models import DreamingRun
    from knowledge.models import Channel, Episode, Message
    from memory.recall.terms import forget_stats

    reset_recall_tables()
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        start = time.perf_counter()
        world = load_eval()
        run_backlog(max_seconds=3600)
        analyze()
        print(f"   loaded and embedded the labelled set in {time.perf_counter() - start:.0f} s", flush=True)
    before = Evaluation(world, ACTOR)
    without = fused_recall(before, {})
    delivered_without = before.delivered_recall()

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
    episode_of: dict[int, int] = {}
    for mid, episode_id in Message.objects.filter(episode__isnull=False).values_list("pk", "episode_id"):
        labels.setdefault(episode_id, set()).add(world.label_of.get(("message", mid), ""))
        episode_of[mid] = episode_id
    after = Evaluation(world, ACTOR)
    with_episodes = fused_recall(after, labels)
    delivered_with = after.delivered_recall()
    n = len(after.cases)
    for route in ("keyword_messages", "vector_episodes"):
        b, a = fused_recall(before, {}, route=route), fused_recall(after, labels, route=route)
        print(
            f"   {route} alone @1/@10: {b[1] * 100:.1f}/{b[10] * 100:.1f} without, "
            f"{a[1] * 100:.1f}/{a[10] * 100:.1f} with episodes",
            flush=True,
        )
    merged = fused_recall(after, labels, merge=episode_of)
    print(
        "   diagnostic, a message and its episode as one candidate: "
        + "  ".join(f"@{k} {merged[k] * 100:.1f}" for k in KS),
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
    report("delivered recall@10, no episodes", delivered_without * 100, "%")
    report("delivered recall@10, stub-model episodes", delivered_with * 100, "%", target="≥ no episodes")
