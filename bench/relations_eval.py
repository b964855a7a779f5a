"""Relations (issue 51) on labelled pairs of key-less memories (shared/data/memory-pairs-dev):
precision and recall of `duplicate` and `contradiction`, per label and per kind.

- `python -m bench.relations_eval --cv` chooses the thresholds of memory.matching.relations
  (SUBJECT, DUPLICATE_TERMS) by 5-fold cross-validation over the pairs: each fold's thresholds
  are the best on the other four folds, scored on the fold left out; what is printed is the
  out-of-fold figure (what an unseen set of the same kind should see) and the thresholds the
  folds chose. The rules' text (word lists, what a name is) is not fitted: only the thresholds.
- `python -m bench.relations_eval` writes every pair through the API, as the product meets it:
  `a` by a trusted agent with a `kb` source, `b` by an untrusted agent, both in a channel-only
  store of its own; then reads `related` on the queued `b` (GET /api/memory/{id}). `duplicate`
  when the write answered `duplicate_of` a's id or `related` names a as a duplicate,
  `contradiction` when `related` names a as a contradiction. It runs in a throw-away database
  (BRAIN_BENCH_DATABASE, default brain_bench_relations).

`--pairs PATH` reads another file of the same format; `--show` lists the pairs it got wrong.
`world` contradictions (they need knowledge of the world) are reported apart, not in the
contradiction recall."""

import argparse
import json
import os
import random
import sys
from collections import Counter
from itertools import product
from pathlib import Path

PAIRS = Path("/work/shared/data/memory-pairs-dev/pairs.jsonl")
RULE_KINDS = ("number", "negation", "antonym", "entity")
FOLDS = 5
GRID = {
    "subject": (0.3, 0.35, 0.4, 0.45, 0.5),
    "duplicate": (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8),
}


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def scores(pairs: list[dict], predicted: list[str]) -> dict:
    """Precision and recall of each label (contradiction recall over the kinds a rule can see),
    and what was predicted for each kind."""
    out = {"kinds": {}}
    for label in ("contradiction", "duplicate"):
        counted = [
            (p, got)
            for p, got in zip(pairs, predicted, strict=True)
            if not (p["label"] == "contradiction" and p["kind"] == "world")
        ]
        tp = sum(1 for p, got in counted if got == label and p["label"] == label)
        fp = sum(1 for p, got in zip(pairs, predicted, strict=True) if got == label and p["label"] != label)
        fn = sum(1 for p, got in counted if got != label and p["label"] == label)
        out[label] = {
            "precision": tp / (tp + fp) if tp + fp else 1.0,
            "recall": tp / (tp + fn) if tp + fn else 1.0,
            "tp": tp,
            "fp": fp,
            "fn": fn,
        }
    for p, got in zip(pairs, predicted, strict=True):
        out["kinds"].setdefault((p["label"], p["kind"]), Counter())[got] += 1
    return out


def objective(s: dict) -> float:
    """What the cross-validation maximises: F1 of both labels, each only where its precision
    meets its target (a threshold that buys recall with false alarms scores nothing)."""
    total = 0.0
    for label, floor in (("contradiction", 0.85), ("duplicate", 0.9)):
        p, r = s[label]["precision"], s[label]["recall"]
        if p >= floor and p + r:
            total += 2 * p * r / (p + r)
    return total


def predict(pairs: list[dict], params: dict | None = None) -> list[str]:
    from memory.matching.relations import classify

    return [classify(p["a"], p["b"], params=params).relation or "other" for p in pairs]


def cross_validate(pairs: list[dict], seed: int = 7) -> tuple[list[str], list[dict]]:
    """Out-of-fold predictions, and each fold's chosen thresholds. Folds are stratified by
    label and kind, so each holds a share of every kind."""
    rng = random.Random(seed)
    by_kind: dict = {}
    for n, p in enumerate(pairs):
        by_kind.setdefault((p["label"], p["kind"]), []).append(n)
    fold_of = {}
    offset = 0
    for members in by_kind.values():
        rng.shuffle(members)
        for i, n in enumerate(members):
            fold_of[n] = (i + offset) % FOLDS
        offset += len(members)
    predicted = [""] * len(pairs)
    chosen = []
    grid = [dict(zip(GRID, values, strict=True)) for values in product(*GRID.values())]
    for fold in range(FOLDS):
        train = [p for n, p in enumerate(pairs) if fold_of[n] != fold]
        best = max(
            grid, key=lambda params: (objective(scores(train, predict(train, params))), params["subject"])
        )
        chosen.append(best)
        test = [n for n in range(len(pairs)) if fold_of[n] == fold]
        for n, got in zip(test, predict([pairs[n] for n in test], best), strict=True):
            predicted[n] = got
    return predicted, chosen


def through_the_api(pairs: list[dict]) -> list[str]:
    """Write each pair through the API (see the module's docstring); what the product said."""
    from rest_framework.test import APIClient

    from knowledge.conversations import services as conversations
    from knowledge.models import Channel
    from knowledge.principal import Principal
    from knowledge.principals import services

    actor = Principal.system("bench")
    trusted = services.agent_create(actor=actor, name="pairs-trusted", trusted=True)
    untrusted = services.agent_create(actor=actor, name="pairs-untrusted")
    clients = {}
    for agent in (trusted, untrusted):
        clients[agent.name] = APIClient(HTTP_HOST="localhost")
        token = services.token_create(actor=actor, agent=agent)
        clients[agent.name].credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    predicted = []
    for n, pair in enumerate(pairs):
        channel = conversations.channel_create(
            actor=actor, name=f"pairs-{n}", kind=Channel.KIND_SHARED, memory_scope=Channel.SCOPE_CHANNEL
        )
        for agent in (trusted, untrusted):
            conversations.conversation_start(actor=actor, agent=agent, channel=channel)
        scope = f"channel:{channel.name}"
        source = [{"kind": "kb", "ref": f"KB-{n}"}]
        a = clients[trusted.name].post(
            "/api/memory", {"scope": scope, "text": pair["a"], "sources": source}, format="json"
        )
        assert a.status_code == 201 and a.json()["status"] == "active", a.content
        b = clients[untrusted.name].post(
            "/api/memory", {"scope": scope, "text": pair["b"], "sources": source}, format="json"
        )
        assert b.status_code in (200, 201), b.content
        body = b.json()
        a_id = a.json()["id"]
        if body.get("duplicate_of") == a_id:
            predicted.append("duplicate")
            continue
        related = clients[untrusted.name].get(f"/api/memory/{body['id']}").json().get("related", [])
        said = {r["relation"] for r in related if r["memory"] == a_id}
        predicted.append(
            "contradiction" if "contradiction" in said else "duplicate" if "duplicate" in said else "other"
        )
    return predicted


def report(title: str, pairs: list[dict], predicted: list[str], show: bool = False) -> dict:
    s = scores(pairs, predicted)
    print(f"\n{title}")
    for label in ("contradiction", "duplicate"):
        x = s[label]
        print(
            f"  {label}: precision {x['precision']:.2f} recall {x['recall']:.2f} "
            f"(tp {x['tp']}, fp {x['fp']}, fn {x['fn']})"
        )
    for (label, kind), got in sorted(s["kinds"].items()):
        total = sum(got.values())
        print(f"  {label:13} {kind:10} {total:3}  " + ", ".join(f"{k} {v}" for k, v in sorted(got.items())))
    if show:
        for p, got in zip(pairs, predicted, strict=True):
            gold = p["label"] if p["label"] in ("duplicate", "contradiction") else "other"
            if got != gold:
                print(f"  ✗ {p['id']} {p['label']}/{p['kind']} → {got}: {p['a']!r} / {p['b']!r}")
    return s


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--cv", action="store_true", help="choose thresholds by cross-validation")
    parser.add_argument("--show", action="store_true", help="list the pairs it got wrong")
    args = parser.parse_args(argv)
    pairs = load(args.pairs)
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    if args.cv:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
        import django

        django.setup()
        predicted, chosen = cross_validate(pairs)
        report(
            f"{FOLDS}-fold cross-validation, out of fold ({len(pairs)} pairs)", pairs, predicted, args.show
        )
        print("  thresholds chosen by the folds:", chosen)
        from memory.matching.relations import DUPLICATE_TERMS, SUBJECT

        report(
            f"the module's thresholds (SUBJECT {SUBJECT}, DUPLICATE_TERMS {DUPLICATE_TERMS}), on all pairs",
            pairs,
            predict(pairs),
        )
        return
    os.environ.setdefault("BRAIN_BENCH_DATABASE", "brain_bench_relations")
    os.environ["DJANGO_SETTINGS_MODULE"] = "brainsite.settings_bench"
    from bench.__main__ import _disconnect, fresh_database

    fresh_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        predicted = through_the_api(pairs)
        report(f"through the API ({len(pairs)} pairs, {args.pairs})", pairs, predicted, args.show)
        load_avg = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"  load average {load_avg}")
    finally:
        _disconnect()


if __name__ == "__main__":
    main()
