"""Merges and summaries (issue 59.4): memory.matching.kept.claims_kept on a file of candidates in
the merges.jsonl format (`{"id", "originals": [...], "candidate", "label"?, "domain"?}`).

    python -m bench merges --file PATH   one verdict and reason per id (and the figures when
                                         the file has labels)
    python -m bench merges --cv          leave-one-domain-out on the labelled file: INVENTED,
                                         DROPPED, NEW_PART and DISTINCT chosen on the other
                                         domains, scored on the one left out

Labels: `faithful` should be accepted; `drops`, `inverts`, `swaps`, `invents` refused."""

import argparse
import json
import os
import sys
from itertools import product
from pathlib import Path

MERGES = Path("/work/shared/data/memory-pairs-dev-2/merges.jsonl")
BAD = ("drops", "inverts", "swaps", "invents")
GRID = {
    "invented": (3, 4, 5, 6, 7, 8),
    "dropped": (0.4, 0.5, 0.6, 0.7),
    "new_part": (0.75, 0.9, 1.01),
    "distinct": (0.6, 0.75, 0.9, 1.01),
}


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def judge(items: list[dict], params: dict | None = None) -> list[tuple[bool, str]]:
    from memory.matching.kept import claims_kept

    return [claims_kept(item["originals"], item["candidate"], **(params or {})) for item in items]


def figures(items: list[dict], verdicts: list[tuple[bool, str]]) -> dict:
    """Per label: how many there are and how many came out right (faithful accepted, the
    others refused)."""
    out: dict = {}
    for item, (ok, _) in zip(items, verdicts, strict=True):
        label = item.get("label")
        if label is None:
            continue
        right = ok if label == "faithful" else not ok
        total, good = out.get(label, (0, 0))
        out[label] = (total + 1, good + right)
    return out


def score(items: list[dict], verdicts) -> float:
    """Balanced: the share of faithful accepted plus the share of bad ones refused."""
    f = figures(items, verdicts)
    faithful = f.get("faithful", (0, 0))
    bad = [f.get(label, (0, 0)) for label in BAD]
    refused = sum(g for _, g in bad) / max(sum(t for t, _ in bad), 1)
    return faithful[1] / max(faithful[0], 1) + refused


def print_figures(title: str, items: list[dict], verdicts) -> None:
    f = figures(items, verdicts)
    if not f:
        return
    print(f"\n{title}")
    bad = [f.get(label, (0, 0)) for label in BAD]
    total, good = sum(t for t, _ in bad), sum(g for _, g in bad)
    faithful = f.get("faithful", (0, 0))
    print(f"  faithful accepted: {faithful[1]} of {faithful[0]} ({faithful[1] / max(faithful[0], 1):.0%})")
    print(f"  drops/inverts/swaps/invents refused: {good} of {total} ({good / max(total, 1):.0%})")
    for label in BAD:
        t, g = f.get(label, (0, 0))
        print(f"    {label:9} {g} of {t}")
    for domain in sorted({i.get("domain", "") for i in items}):
        keep = [n for n, i in enumerate(items) if i.get("domain", "") == domain]
        d = figures([items[n] for n in keep], [verdicts[n] for n in keep])
        fa = d.get("faithful", (0, 0))
        b = [d.get(label, (0, 0)) for label in BAD]
        print(
            f"  {domain:22} faithful {fa[1]}/{fa[0]}  refused {sum(g for _, g in b)}/{sum(t for t, _ in b)}"
        )


def figure_rows(where: str, items: list[dict], verdicts) -> list[list]:
    """The rows docs/PERFORMANCE.md shows (bench/results.py) for one set of verdicts."""
    f = figures(items, verdicts)
    faithful = f.get("faithful", (0, 0))
    bad = [f.get(label, (0, 0)) for label in BAD]
    total, good = sum(t for t, _ in bad), sum(g for _, g in bad)
    per = ", ".join(f"{label} {f.get(label, (0, 0))[1]}/{f.get(label, (0, 0))[0]}" for label in BAD)
    return [
        [
            f"faithful accepted, {where}",
            100 * faithful[1] / max(faithful[0], 1),
            "%",
            "≥ 90 %",
            f"{faithful[1]} of {faithful[0]}",
        ],
        [f"drops/inverts/swaps/invents refused, {where}", 100 * good / max(total, 1), "%", "≥ 90 %", per],
    ]


def cross_validate(items: list[dict]):
    grid = [dict(zip(GRID, values, strict=True)) for values in product(*GRID.values())]
    table = [judge(items, params) for params in grid]
    domains = sorted({i.get("domain", "") for i in items})

    def best(keep) -> int:
        members = [n for n, i in enumerate(items) if keep(i)]
        chosen = [items[n] for n in members]
        return max(range(len(grid)), key=lambda g: (score(chosen, [table[g][n] for n in members]), -g))

    outside = [None] * len(items)
    chosen = {}
    for domain in domains:
        g = best(lambda i, d=domain: i.get("domain", "") != d)
        chosen[domain] = grid[g]
        for n, i in enumerate(items):
            if i.get("domain", "") == domain:
                outside[n] = table[g][n]
    everything = best(lambda i: True)
    return outside, table[everything], chosen, grid[everything]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench merges", description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=MERGES, help="candidates in the merges.jsonl format")
    parser.add_argument("--cv", action="store_true", help="choose the thresholds leaving one domain out")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench import results

    load_before = results.load()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
    import django

    django.setup()
    items = load(args.file)
    if args.cv:
        outside, inside, chosen, overall = cross_validate(items)
        print_figures(f"leave-one-domain-out, out of domain ({len(items)} candidates)", items, outside)
        print_figures("in domain (thresholds chosen on every domain)", items, inside)
        print("  thresholds chosen with each domain left out:")
        for domain, params in chosen.items():
            print(f"    {domain:22} {params}")
        print("  chosen on all:", overall)
        if args.file == MERGES:
            results.record(
                "merges-cv",
                title="Merges and summaries keep every claim (merges.jsonl), leave one domain out",
                command="python -m bench merges --cv",
                rows=figure_rows("out of domain", items, outside) + figure_rows("in domain", items, inside),
                load_before=load_before,
            )
        return 0
    verdicts = judge(items)
    for item, (ok, why) in zip(items, verdicts, strict=True):
        print(f"{item['id']}\t{'accept' if ok else 'refuse'}\t{why}")
    print_figures(f"the module's thresholds ({args.file})", items, verdicts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
