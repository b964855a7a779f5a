"""Retrieval quality of memory_search on labelled questions: the team's own set
(bench/data/recall_eval.json, with generated distractors) and, when present beside the
repository, the public LoCoMo development split (bench/locomo.py). For each route alone, the
fused ranking before packing and the result items memory_search returns: any@1/5/10/50, all@10
and session@5 (bench/recall_eval.py)."""

import json
import time
from pathlib import Path

from django.test import override_settings

from bench import locomo
from bench.recall_eval import FUSED, ITEMS, METRICS, Case, Evaluation, cross_validate, table
from bench.recall_seed import ACTOR, analyze, load_eval, reset_recall_tables
from knowledge.embeddings.backlog import run_backlog
from memory.recall import resolve_scope

CHAT_PATH = Path(__file__).resolve().parent / "data" / "chat_eval.json"


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


def evaluate(name: str, evaluation: Evaluation, report) -> dict:
    rows = {f"{route} alone": m for route, m in evaluation.route_metrics().items()}
    rows[FUSED] = evaluation.fused_metrics()
    rows[ITEMS] = evaluation.item_metrics()
    n = len(evaluation.cases)
    for ranking, m in rows.items():
        for metric in ("any@1", "any@10", "session@5"):
            target = ""
            if ranking == FUSED and metric == "any@10":
                target = "≥ every route"
            report(f"{name} {metric} {ranking}", m[metric] * 100, "%", target=target, note=f"{n} questions")
    print(f"\n   {name}, {n} questions\n" + table(rows) + "\n", flush=True)
    for kind, m in evaluation.by_type().items():
        print(f"   fused, {kind} ({m['n']}): " + "  ".join(f"{x} {m[x]:.3f}" for x in ("any@1", "any@10")))
    return rows


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


def load_chat():
    """The chat set (bench/data/chat_eval.json, written for Brain, in LoCoMo's format): three
    short informal chats between two people over two to four weeks — several messages in a row,
    typos, photos as captions, each message at its own time."""
    reset_recall_tables()
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        cases, labels = locomo.load(json.loads(CHAT_PATH.read_text()))
        run_backlog(max_seconds=3600)
        analyze()
    return Evaluation(cases, labels, locomo.session_of)


def run(report):
    evaluate("own set", load_own(), report)
    evaluate("chat set", load_chat(), report)
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
