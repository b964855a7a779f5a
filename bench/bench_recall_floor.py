"""The relevance floor (RecallParams.relevance_floor), chosen by cross-validation.

A result item is left out when its score is below `floor` × the best candidate's score. The
floor only cuts the tail of memory_search's answer, so each question is searched once with no
floor and every floor is scored from the answer's items and their scores. On each source (the
LoCoMo dev split, the own set, the chat set) and leave one conversation out over all sources together: the
largest floor whose any@10 on the training conversations is within TOLERANCE of no floor's; the
held-out conversation is scored with it. Prints, per floor, any@10 and the items a k=10 answer keeps."""

from dataclasses import replace

from bench import locomo
from bench.bench_recall_quality import load_chat, load_locomo, load_own
from memory.recall import memory_search
from memory.recall.params import DEFAULT_PARAMS

FLOORS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
TOLERANCE = 0.002
NO_FLOOR = replace(DEFAULT_PARAMS, relevance_floor=0.0)


def answers(evaluation) -> list[tuple[str, set, list[tuple[str, float]]]]:
    """(group, evidence, [(label, score relative to the best candidate)]) per question."""
    out = []
    for case in evaluation.cases:
        outcome = memory_search(case.scope, q=case.q, k=10, budget_tokens=2000, now=case.now, params=NO_FLOOR)
        best = max((c.score for c in outcome.ranking.candidates), default=0.0) or 1.0
        items = [
            (evaluation.label_of.get((i.candidate.kind, i.candidate.id), ""), i.candidate.score / best)
            for i in outcome.items
        ]
        out.append((case.group, set(case.evidence), items))
    return out


def scored(rows, floor: float) -> tuple[float, float]:
    """any@10 and the mean number of items kept, at `floor`."""
    if not rows:
        return 0.0, 0.0
    hit = kept = 0
    for _, evidence, items in rows:
        shown = [label for label, rel in items if rel >= floor]
        hit += bool(evidence & set(shown))
        kept += len(shown)
    return hit / len(rows), kept / len(rows)


def choose(rows) -> float:
    base = scored(rows, 0.0)[0]
    return max(f for f in FLOORS if scored(rows, f)[0] >= base - TOLERANCE)


def table(name: str, rows) -> None:
    print(f"\n   {name}, {len(rows)} questions: floor, any@10, items kept of a k=10 answer")
    for floor in FLOORS:
        at10, kept = scored(rows, floor)
        print(f"     {floor:4.2f}  {at10:.3f}  {kept:5.2f}")


def cross_validate(sources: dict, report) -> None:
    """Leave one conversation out over every source together (nothing is chosen on one source
    alone); each source's held-out conversations are then scored with their fold's floor."""
    rows = [
        (f"{name}/{group}", evidence, items)
        for name, part in sources.items()
        for group, evidence, items in part
    ]
    chosen = {}
    for group in sorted({g for g, _, _ in rows}):
        chosen[group] = choose([r for r in rows if r[0] != group])
    for name in sources:
        mine = [r for r in rows if r[0].startswith(name + "/")]
        hits = kept = 0
        for group in sorted({g for g, _, _ in mine}):
            test = [r for r in mine if r[0] == group]
            at10, shown = scored(test, chosen[group])
            hits, kept = hits + at10 * len(test), kept + shown * len(test)
        n = len(mine)
        floors = sorted({chosen[g] for g, _, _ in mine})
        print(
            f"   {name} held out: any@10 {hits / n:.3f} (no floor {scored(mine, 0.0)[0]:.3f}), {kept / n:.2f} items kept"
        )
        report(
            f"{name} any@10 with the floor chosen out of fold",
            hits / n * 100,
            "%",
            target="within 0.5 of no floor",
            note=f"no floor {scored(mine, 0.0)[0] * 100:.1f} %, {kept / n:.2f} items kept of 10; floors chosen {floors}",
        )


def run(report):
    own = load_own()
    for case in own.cases:
        case.group = case.group or case.scope.conversation.channel.name
    sources = {"own set": answers(own), "chat set": answers(load_chat())}
    if locomo.available():
        sources["locomo-dev"] = answers(load_locomo())
    for name, rows in sources.items():
        table(name, rows)
    cross_validate(sources, report)
