"""Retrieval quality of memory_search on labelled questions: the team's own set
(bench/data/recall_eval.json, with generated distractors), the chat set and the group chat
(bench/data/chat_eval.json, group_chat_eval.json) and, when present beside the repository, the
public LoCoMo development split (bench/locomo.py). For each route alone, the fused ranking before
packing and the result items memory_search returns: any@1/5/10/50, all@10 and session@5
(bench/recall_eval.py)."""

import json
import time
from pathlib import Path

from django.test import override_settings

from bench import locomo
from bench.recall_eval import (
    FUSED,
    ITEMS,
    METRICS,
    Case,
    Evaluation,
    cross_validate,
    metrics,
    params_for,
    table,
)
from bench.recall_seed import ACTOR, analyze, load_eval, reset_recall_tables
from knowledge.embeddings.backlog import run_backlog
from memory.recall import resolve_scope

CHAT_PATH = Path(__file__).resolve().parent / "data" / "chat_eval.json"
GROUP_PATH = Path(__file__).resolve().parent / "data" / "group_chat_eval.json"
# LoCoMo's question categories (the chat sets use them too).
CATEGORIES = {
    "category 1": "multi-hop",
    "category 2": "temporal",
    "category 3": "open-domain",
    "category 4": "single-hop",
}
# Each ranking method of memory_search turned off alone (RecallParams; "keyword" / "vector" are
# both keyword / both vector route weights), re-fused from the stored route rankings.
METHODS_OFF = {
    "speaker_boost 0 (a speaker the question names)": {"speaker_boost": 0.0},
    "when_boost 0 (the time the question names)": {"when_boost": 0.0},
    "neighbour support 0 (neighbour_weight, neighbour_after_weight)": {
        "neighbour_weight": 0.0,
        "neighbour_after_weight": 0.0,
    },
    "burst support 0 (burst_weight)": {"burst_weight": 0.0},
    "all support 0 (neighbour, after, burst)": {
        "neighbour_weight": 0.0,
        "neighbour_after_weight": 0.0,
        "burst_weight": 0.0,
    },
    "hop_weight 0 (no second hop)": {"hop_weight": 0.0},
    "keyword weights 0 (vector routes only)": {"keyword": 0.0},
    "vector weights 0 (keyword routes only)": {"vector": 0.0},
}


def own_cases(world) -> tuple[list[Case], object]:
    """The own set's questions as cases, and a label -> session map (a message's session is the
    dialogue it belongs to; a memory or block is its own session)."""
    session = {}
    for s in world.data["sessions"]:
        for m in s["messages"]:
            session[m["external_id"]] = s["id"]
    cases = []
    for question in world.data["questions"]:
        conversation = world.conversations[question["channel"]]
        scope = resolve_scope(ACTOR, agent=conversation.agent, conversation=conversation)
        cases.append(
            Case(
                q=question["q"],
                evidence=question["evidence"],
                scope=scope,
                now=world.when(question["day"]),
                type=question["type"],
            )
        )
    return cases, lambda label: session.get(label, label)


def nothing_to_find(ranking: str, m: dict) -> bool:
    """A knowledge route alone in a set of messages only (the chat sets, LoCoMo): it finds
    nothing; the printed table shows its zeros, the report leaves its rows out."""
    return ranking.startswith(("keyword_knowledge", "vector_knowledge")) and not any(m.values())


def evaluate(name: str, evaluation: Evaluation, report) -> dict:
    rows = {f"{route} alone": m for route, m in evaluation.route_metrics().items()}
    rows[FUSED] = evaluation.fused_metrics()
    rows[ITEMS] = evaluation.item_metrics()
    n = len(evaluation.cases)
    for ranking, m in rows.items():
        if nothing_to_find(ranking, m):
            continue
        for metric in ("any@1", "any@10", "session@5"):
            target = ""
            if ranking == FUSED and metric == "any@10":
                target = "≥ every route"
            report(f"{name} {metric} {ranking}", m[metric] * 100, "%", target=target, note=f"{n} questions")
    print(f"\n   {name}, {n} questions\n" + table(rows) + "\n", flush=True)
    for kind, m in evaluation.by_type().items():
        print(
            f"   fused, {kind} ({m['n']}): "
            + "  ".join(f"{x} {m[x]:.3f}" for x in ("any@1", "any@10", "session@5"))
        )
    return rows


def evaluate_compact(name: str, evaluation: Evaluation, report) -> dict:
    """As `evaluate` (the same table printed), but one report row per ranking and per question
    category (fused) — any@10 as the figure, any@1 and session@5 in the note — so that a set's
    rows stay few in docs/PERFORMANCE.md."""
    rows = {f"{route} alone": m for route, m in evaluation.route_metrics().items()}
    rows[FUSED] = evaluation.fused_metrics()
    rows[ITEMS] = evaluation.item_metrics()
    n = len(evaluation.cases)
    print(f"\n   {name}, {n} questions\n" + table(rows) + "\n", flush=True)

    def note(m, count):
        return f"any@1 {m['any@1'] * 100:.1f} %, session@5 {m['session@5'] * 100:.1f} %; {count} questions"

    for ranking, m in rows.items():
        if nothing_to_find(ranking, m):
            continue
        target = "≥ every route" if ranking == FUSED else ""
        report(f"{name} any@10 {ranking}", m["any@10"] * 100, "%", target=target, note=note(m, n))
    for kind, m in evaluation.by_type().items():
        print(
            f"   fused, {kind} ({m['n']}): "
            + "  ".join(f"{x} {m[x]:.3f}" for x in ("any@1", "any@10", "session@5"))
        )
        label = f"{kind} {CATEGORIES[kind]}" if kind in CATEGORIES else kind
        report(f"{name} any@10 fused, {label}", m["any@10"] * 100, "%", note=note(m, m["n"]))
    return rows


def methods_off(name: str, evaluation: Evaluation) -> None:
    """Fused any@1 / any@10 / session@5 with each ranking method turned off alone (METHODS_OFF);
    per question, against the defaults, how many it wins and loses at 10 and at 1, and for how
    many the first evidence item moves up or down the first 50 (a move within or beyond the
    first 10 counts too). Printed only: the stored route rankings are re-fused, nothing is
    searched again."""

    def per_question(params):
        rows = []
        for c, ranked in zip(evaluation.cases, evaluation.fused_lists(params), strict=True):
            row = metrics(c.evidence, ranked, evaluation.session_of)
            places = [i for i, label in enumerate(ranked[:50]) if label in c.evidence]
            row["place"] = places[0] if places else 50
            rows.append(row)
        return rows

    base = per_question(params_for({}))
    lines = [
        f"| {name}, fused | any@1 | any@10 | session@5 | @10 wins / losses | @1 wins / losses | up / down |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, overrides in {"defaults": {}, **METHODS_OFF}.items():
        rows = per_question(params_for(overrides))
        pairs = list(zip(rows, base, strict=True))
        cells = [f"{sum(r[x] for r in rows) / len(rows):.3f}" for x in ("any@1", "any@10", "session@5")]
        for k in ("any@10", "any@1", "place"):
            better = sum(r[k] > b[k] if k != "place" else r[k] < b[k] for r, b in pairs)
            worse = sum(r[k] < b[k] if k != "place" else r[k] > b[k] for r, b in pairs)
            cells.append(f"{better} / {worse}" if overrides else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    print(
        "\n   each ranking method off alone (RecallParams), against the defaults\n" + "\n".join(lines) + "\n"
    )


def load_own():
    reset_recall_tables()
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        start = time.perf_counter()
        world = load_eval()
        run_backlog(max_seconds=3600)
        analyze()
        print(f"   loaded and embedded the own set in {time.perf_counter() - start:.0f} s", flush=True)
    cases, session_of = own_cases(world)
    return Evaluation(cases, world.label_of, session_of)


def load_locomo():
    reset_recall_tables()
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        start = time.perf_counter()
        cases, labels = locomo.load()
        run_backlog(max_seconds=3600)
        analyze()
        print(f"   loaded and embedded locomo-dev in {time.perf_counter() - start:.0f} s", flush=True)
    return Evaluation(cases, labels, locomo.session_of)


def load_chat(path: Path = CHAT_PATH):
    """The chat set (bench/data/chat_eval.json, written for Brain, in LoCoMo's format): three
    short informal chats between two people over two to four weeks — several messages in a row,
    typos, photos as captions, each message at its own time. With GROUP_PATH, the group chat
    (bench/data/group_chat_eval.json, written the same way): nine friends over three weeks, 14
    days, 456 messages, 70 questions — nicknames, bursts that split a fact, side conversations,
    replies to a question asked messages before, plans that change (the newest statement is the
    answer), questions about people who are mentioned rather than speaking."""
    reset_recall_tables()
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        cases, labels = locomo.load(json.loads(path.read_text()))
        run_backlog(max_seconds=3600)
        analyze()
    return Evaluation(cases, labels, locomo.session_of)


def run(report):
    evaluate("own set", load_own(), report)
    evaluate("chat set", load_chat(), report)
    group = load_chat(GROUP_PATH)
    evaluate_compact("group chat", group, report)
    methods_off("group chat", group)
    if not locomo.available():
        print(f"   locomo-dev skipped: {locomo.PATH} is not there (evaluation data, never shipped)")
        return
    evaluation = load_locomo()
    evaluate("locomo-dev", evaluation, report)
    cross_validated(evaluation, report)


def cross_validated(evaluation: Evaluation, report) -> None:
    """The figure that predicts unseen dialogues: weights chosen on two dev conversations, the
    third scored, rotated. A change to recall counts only if this moves."""
    start = time.perf_counter()
    folds, means, spread = cross_validate(evaluation)
    lines = [
        "| held out | questions | chosen | " + " | ".join(METRICS) + " |",
        "|---|---|---|" + "---|" * len(METRICS),
    ]
    for held, n, chosen, m in folds:
        picked = ", ".join(f"{k}={v}" for k, v in chosen.items())
        lines.append(f"| {held} | {n} | {picked} | " + " | ".join(f"{m[x]:.3f}" for x in METRICS) + " |")
    lines.append("| mean | | | " + " | ".join(f"{means[x]:.3f}" for x in METRICS) + " |")
    lines.append("| spread (max - min) | | | " + " | ".join(f"{spread[x]:.3f}" for x in METRICS) + " |")
    print("\n   locomo-dev cross-validated (leave one conversation out), returned items\n" + "\n".join(lines))
    print(f"   ({time.perf_counter() - start:.0f} s)\n", flush=True)
    targets = {"any@1": "≥ 50", "any@10": "≥ 86", "session@5": "≥ 92"}
    for metric, target in targets.items():
        report(
            f"locomo-dev cross-validated {metric} returned items",
            means[metric] * 100,
            "%",
            target=target,
            note=f"3 folds, spread {spread[metric] * 100:.1f}",
        )
