"""Relations (issues 51, 59) on labelled pairs of key-less memories: precision and recall of
`duplicate` and `contradiction`, per label, kind and domain, and the share of look-alikes flagged.
It reads both dev sets, shared/data/memory-pairs-dev (120 pairs, no domain field: held out as one
domain of its own, "dev-1") and shared/data/memory-pairs-dev-2 (360 pairs, 12 domains).

- `python -m bench.relations_eval --cv` chooses the thresholds of memory.matching.relations
  (SUBJECT, DUPLICATE_TERMS, CONTRADICTION_TERMS, BESIDES) by leave-one-domain-out
  cross-validation: for each of the 13 domains, the thresholds that score best on the other 12
  are used on the one left out. "Out of domain" is those held-out predictions; "in domain" is
  every pair scored with the thresholds chosen on all 13 (its own domain seen). The rules' text
  (what a claim, a name, an opposite is) is not fitted: only the thresholds.
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
import sys
from collections import Counter
from itertools import product
from pathlib import Path

PAIRS = (
    Path("/work/shared/data/memory-pairs-dev/pairs.jsonl"),
    Path("/work/shared/data/memory-pairs-dev-2/pairs.jsonl"),
)
RULE_KINDS = ("number", "negation", "antonym", "entity")
GRID = {
    "subject": (0.3, 0.4),
    "duplicate": (0.4, 0.5, 0.6, 0.7),
    "contradiction": (0.2, 0.3, 0.4, 0.5),
    "besides": (1, 2, 3),
    "negated": (0, 1),
    "reworded": (0, 1, 2),
}


def load(path: Path) -> list[dict]:
    """The pairs of one file; a pair without a domain takes the file's folder name as its domain."""
    pairs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for p in pairs:
        p.setdefault("domain", "dev-1" if path.parent.name == "memory-pairs-dev" else path.parent.name)
    return pairs


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
    """What the cross-validation maximises: F0.5 of both labels (precision weighs four times
    recall: a threshold that buys recall with false alarms scores less)."""
    total = 0.0
    for label in ("contradiction", "duplicate"):
        p, r = s[label]["precision"], s[label]["recall"]
        if p + r:
            total += 1.25 * p * r / (0.25 * p + r)
    return total


def predict(pairs: list[dict], params: dict | None = None) -> list[str]:
    from memory.matching.relations import classify

    return [classify(p["a"], p["b"], params=params).relation or "other" for p in pairs]


def cross_validate(pairs: list[dict]) -> tuple[list[str], list[str], dict, dict]:
    """Leave-one-domain-out: out-of-domain predictions (each domain with the thresholds chosen on
    the others), in-domain ones (the thresholds chosen on all), and the choices."""
    grid = [dict(zip(GRID, values, strict=True)) for values in product(*GRID.values())]
    table = [predict(pairs, params) for params in grid]  # every pair under every choice, once
    domains = sorted({p["domain"] for p in pairs})

    def best(keep) -> int:
        members = [n for n, p in enumerate(pairs) if keep(p)]
        chosen = [pairs[n] for n in members]
        return max(
            range(len(grid)),
            key=lambda g: (objective(scores(chosen, [table[g][n] for n in members])), -g),
        )

    out = [""] * len(pairs)
    chosen = {}
    for domain in domains:
        g = best(lambda p, d=domain: p["domain"] != d)
        chosen[domain] = grid[g]
        for n, p in enumerate(pairs):
            if p["domain"] == domain:
                out[n] = table[g][n]
    everything = best(lambda p: True)
    return out, table[everything], chosen, grid[everything]


def markdown(pairs: list[dict], outside: list[str], inside: list[str]) -> str:
    """The figures as docs/PERFORMANCE.md shows them: per domain and in all, out of domain and
    in domain (contradiction P / R over the rule kinds, duplicate P / R, look-alikes flagged),
    then contradiction recall per kind."""
    rows = [
        "| domain | out of domain: contradiction P / R | duplicate P / R | look-alikes | in domain: contradiction P / R | duplicate P / R | look-alikes |",
        "|---|---|---|---|---|---|---|",
    ]  # noqa: E501
    for domain in [*sorted({p["domain"] for p in pairs}), "all"]:
        keep = [n for n, p in enumerate(pairs) if domain in ("all", p["domain"])]
        cells = [f"**{domain}**" if domain == "all" else domain]
        for predicted in (outside, inside):
            chosen, got = [pairs[n] for n in keep], [predicted[n] for n in keep]
            s = scores(chosen, got)
            f, t = lookalikes(chosen, got)
            cells += [
                f"{s['contradiction']['precision']:.2f} / {s['contradiction']['recall']:.2f}",
                f"{s['duplicate']['precision']:.2f} / {s['duplicate']['recall']:.2f}",
                f"{f} / {t}",
            ]
        rows.append("| " + " | ".join(cells) + " |")
    kinds = []
    for kind in (*RULE_KINDS, "world"):
        members = [n for n, p in enumerate(pairs) if p["label"] == "contradiction" and p["kind"] == kind]
        hits = [sum(1 for n in members if predicted[n] == "contradiction") for predicted in (outside, inside)]
        kinds.append(f"{kind} {hits[0]}/{len(members)} ({hits[1]} in domain)")
    return "\n".join(rows) + "\n\nContradiction recall by kind, out of domain: " + ", ".join(kinds) + "."


def lookalikes(pairs: list[dict], predicted: list[str]) -> tuple[int, int]:
    flagged = sum(
        1 for p, got in zip(pairs, predicted, strict=True) if p["kind"] == "lookalike" and got != "other"
    )
    return flagged, sum(1 for p in pairs if p["kind"] == "lookalike")


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


def report(
    title: str, pairs: list[dict], predicted: list[str], show: bool = False, domains: bool = False
) -> dict:
    s = scores(pairs, predicted)
    print(f"\n{title}")
    for label in ("contradiction", "duplicate"):
        x = s[label]
        print(
            f"  {label}: precision {x['precision']:.2f} recall {x['recall']:.2f} "
            f"(tp {x['tp']}, fp {x['fp']}, fn {x['fn']})"
        )
    flagged, total = lookalikes(pairs, predicted)
    print(f"  look-alikes flagged: {flagged} of {total} ({flagged / max(total, 1):.0%})")
    if domains:
        for domain in sorted({p["domain"] for p in pairs}):
            keep = [n for n, p in enumerate(pairs) if p["domain"] == domain]
            d = scores([pairs[n] for n in keep], [predicted[n] for n in keep])
            f, t = lookalikes([pairs[n] for n in keep], [predicted[n] for n in keep])
            print(
                f"  {domain:22} contradiction {d['contradiction']['precision']:.2f} / "
                f"{d['contradiction']['recall']:.2f}  duplicate {d['duplicate']['precision']:.2f} / "
                f"{d['duplicate']['recall']:.2f}  look-alikes {f}/{t}"
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


def figures(where: str, pairs: list[dict], predicted: list[str]) -> list[list]:
    """The rows docs/PERFORMANCE.md shows (bench/results.py) for one set of predictions."""
    s = scores(pairs, predicted)
    flagged, total = lookalikes(pairs, predicted)
    rows = []
    for label, target in (("contradiction", "P ≥ .90, R ≥ .60"), ("duplicate", "P ≥ .90, R ≥ .70")):
        x = s[label]
        rows.append(
            [
                f"{label}, {where}",
                f"P {x['precision']:.2f} / R {x['recall']:.2f}",
                "",
                target,
                f"tp {x['tp']}, fp {x['fp']}, fn {x['fn']}",
            ]
        )
    rows.append([f"look-alikes flagged, {where}", f"{flagged} of {total}", "", "≤ 5 %", ""])
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, action="append", help="a pairs file (default: both dev sets)")
    parser.add_argument("--cv", action="store_true", help="choose thresholds leaving one domain out")
    parser.add_argument("--show", action="store_true", help="list the pairs it got wrong")
    args = parser.parse_args(argv)
    args.pairs = args.pairs or list(PAIRS)
    pairs = [p for path in args.pairs for p in load(path)]
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    from bench import results

    load_before = results.load()
    if args.cv:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
        import django

        django.setup()
        outside, inside, chosen, overall = cross_validate(pairs)
        report(f"leave-one-domain-out, out of domain ({len(pairs)} pairs)", pairs, outside, args.show, True)
        report("in domain (thresholds chosen on every domain)", pairs, inside, domains=True)
        print("  thresholds chosen with each domain left out:")
        for domain, params in chosen.items():
            print(f"    {domain:22} {params}")
        print("  chosen on all:", overall)
        print("\n" + markdown(pairs, outside, inside))
        from memory.matching import relations

        module = {
            k: getattr(relations, n)
            for k, n in (
                ("subject", "SUBJECT"),
                ("duplicate", "DUPLICATE_TERMS"),
                ("contradiction", "CONTRADICTION_TERMS"),
                ("besides", "BESIDES"),
                ("negated", "NEGATED_UNSAID"),
                ("reworded", "REWORDED"),
            )
        }
        report(f"the module's thresholds {module}, on all pairs", pairs, predict(pairs))
        if args.pairs == list(PAIRS):
            results.record(
                "relations-cv",
                title="Relations on the labelled pairs, leave one domain out",
                command="python -m bench.relations_eval --cv",
                rows=figures("out of domain", pairs, outside) + figures("in domain", pairs, inside),
                load_before=load_before,
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
        report(f"through the API ({len(pairs)} pairs)", pairs, predicted, args.show, domains=True)
        load_avg = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"  load average {load_avg}")
        if args.pairs == list(PAIRS):
            results.record(
                "relations-api",
                title="Relations through the API (a trusted agent writes a, an untrusted one b)",
                command="python -m bench.relations_eval",
                rows=figures("through the API", pairs, predicted),
                load_before=load_before,
            )
    finally:
        _disconnect()


if __name__ == "__main__":
    main()
