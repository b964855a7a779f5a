"""Same-run A/B of Brain's half of `make bench-peers` on a kept LoCoMo dev database.

`make bench-peers` rebuilds its world every run and times one version of the code. This tool
seeds the same world (bench/locomo.py, every turn embedded) once into its own database, then
starts one server per checkout (the way bench_peers starts Brain's) and asks every question of
each round to both, in an order shuffled per question, so both versions meet the same load:

    python -m bench.peers_ab seed
    python -m bench.peers_ab ab --old /tmp/main-checkout [--rounds 2]

BRAIN_PEERS_AB_DATABASE and BRAIN_PEERS_AB_CASES point it at another kept world and its questions
(a JSON list of {agent, conversation, q, now}).

Prints p50/p95 over HTTP of each side with the load average around the run, the Server-Timing
p50 of each stage, and whether both sides answered every question with the same results (kind,
id, order). Round r asks each question with r trailing spaces: the same words, but not a query
vector a server remembers from an earlier round.

    python -m bench.peers_ab cpu --old /tmp/main-checkout [--rounds 2]

asks every question in-process instead (Django's test client, a process per side and round, the
sides alternating) and prints the CPU of the request's thread per search (p50, mean), which load
changes less than wall time, with the wall p50 and whether the answers were the same."""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB_NAME = os.environ.get("BRAIN_PEERS_AB_DATABASE", "brain_peers_ab")
CASES = Path(os.environ.get("BRAIN_PEERS_AB_CASES", ROOT / "var" / "peers_ab_cases.json"))
WARMUP = 20


def _setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "brainsite.settings_bench"
    import brainsite.settings_bench as bench_settings

    bench_settings.DATABASES["default"]["NAME"] = DB_NAME
    import django

    django.setup()


def seed() -> None:
    import bench.recall_ab as recall_ab

    recall_ab.DB_NAME = DB_NAME
    recall_ab._create_database()
    _setup()
    from django.core.management import call_command
    from django.test import override_settings

    from bench import locomo
    from bench.recall_seed import analyze
    from knowledge.embeddings.backlog import run_backlog

    call_command("migrate", verbosity=0)
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        cases, _ = locomo.load()
        run_backlog(max_seconds=3600)
        analyze()
    CASES.write_text(
        json.dumps(
            [
                {
                    "agent": c.scope.agent.name,
                    "conversation": c.scope.conversation.pk,
                    "q": c.q,
                    "now": c.now.isoformat(),
                }
                for c in cases
            ]
        )
    )
    print(f"  {len(cases)} questions written to {CASES.relative_to(ROOT)}")


def _server(root: Path, port: int, extra_env: dict | None = None) -> subprocess.Popen:
    """A server as bench_peers starts Brain's, but running the code of checkout `root` (and with
    `extra_env` set)."""
    import httpx

    from bench.bench_memory_write import _database_url

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "brainsite.settings", "DATABASE_URL": _database_url()}
    env["BRAIN_LOG_LEVEL"] = "ERROR"
    env.update(extra_env or {})
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "brainsite.asgi:application", "--worker-class"]
        + ["uvicorn_worker.UvicornWorker", "--bind", f"127.0.0.1:{port}", "--workers", "3"]
        + ["--log-level", "warning"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.3)
    server.terminate()
    raise RuntimeError(f"the server of {root} did not start")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * q) - 1)]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def ab(old: Path, rounds: int, seed: int, limit: int, envs: dict | None = None) -> dict:
    _setup()
    import httpx

    from bench.bench_memory_write import _free_port
    from bench.recall_seed import ACTOR, agent
    from knowledge.principals import services

    cases = json.loads(CASES.read_text())[: limit or None]
    reader = cases[0]["agent"]  # every case asks as the same agent
    raw = services.token_create(actor=ACTOR, agent=agent(reader))
    sides = {"old": old.resolve(), "new": ROOT}
    servers, clients = {}, {}
    try:
        for name, root in sides.items():
            port = _free_port()
            servers[name] = _server(root, port, (envs or {}).get(name))
            clients[name] = httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {raw}"}, timeout=60
            )
        rng = random.Random(seed)
        walls: dict = {name: [] for name in sides}
        stages: dict = {name: defaultdict(list) for name in sides}
        answers: dict = {name: [] for name in sides}
        before = _load()
        work = [(c, f"{c['q']} (warm-up)", True) for c in cases[:WARMUP]]
        for r in range(rounds):
            work += [(c, c["q"] + " " * r, False) for c in cases]
        for case, q, warm in work:
            body = {"agent": reader, "conversation": case["conversation"], "q": q, "k": 10}
            body["now"] = case["now"]
            order = list(sides)
            rng.shuffle(order)
            for name in order:
                t0 = time.perf_counter()
                response = clients[name].post("/api/memory/search", json=body)
                spent = (time.perf_counter() - t0) * 1000
                assert response.status_code == 200, response.content[:300]
                if warm:
                    continue
                walls[name].append(spent)
                for part in response.headers["Server-Timing"].split(", "):
                    stage, dur = part.split(";dur=")
                    stages[name][stage].append(float(dur))
                answers[name].append([(x["kind"], x["id"]) for x in response.json()["results"]])
        after = _load()
    finally:
        for client in clients.values():
            client.close()
        for server in servers.values():
            server.terminate()
            server.wait(timeout=30)
    same = sum(a == b for a, b in zip(answers["old"], answers["new"], strict=True))
    out = {"load_before": before, "load_after": after, "questions": len(answers["new"])}
    out["identical"] = f"{same} of {len(answers['new'])}"
    for name in sides:
        out[name] = {
            "p50": round(statistics.median(walls[name]), 1),
            "p95": round(_p(walls[name], 0.95), 1),
            "stages_p50": {s: round(statistics.median(v), 2) for s, v in stages[name].items()},
        }
    return out


# One side of `cpu`: run in a checkout's own directory (its code), every question asked once through
# Django's test client in this process; prints the request thread's CPU and wall time per search.
_CPU_SIDE = """
import json, os, statistics, sys, time
sys.path.insert(0, os.getcwd())
os.environ["DJANGO_SETTINGS_MODULE"] = "brainsite.settings_bench"
import brainsite.settings_bench as bench_settings
bench_settings.DATABASES["default"]["NAME"] = os.environ["PEERS_AB_DATABASE"]
bench_settings.DATABASES["default"]["CONN_MAX_AGE"] = None
import django
django.setup()
from django.test import Client
cases = json.loads(open(os.environ["PEERS_AB_CASES"]).read())
client = Client(HTTP_AUTHORIZATION="Bearer " + os.environ["PEERS_AB_TOKEN"], HTTP_HOST="127.0.0.1")
cpu, wall, answers = [], [], []
for n, case in enumerate(cases[:20] + cases):
    body = {"agent": case["agent"], "conversation": case["conversation"], "k": 10, "now": case["now"]}
    body["q"] = case["q"] + (" (warm-up)" if n < 20 else "")
    c0, w0 = time.thread_time(), time.perf_counter()
    response = client.post("/api/memory/search", data=json.dumps(body), content_type="application/json")
    c1, w1 = time.thread_time(), time.perf_counter()
    assert response.status_code == 200, response.content[:300]
    if n >= 20:
        cpu.append((c1 - c0) * 1000)
        wall.append((w1 - w0) * 1000)
        answers.append([(x["kind"], x["id"]) for x in response.json()["results"]])
print(json.dumps({"cpu": cpu, "wall": wall, "answers": answers}))
"""


def cpu(old: Path, rounds: int, limit: int) -> dict:
    """The request thread's CPU per search (time.thread_time) of each checkout, in-process: what
    load changes less than wall time. Each round runs every question once per side, the sides'
    order alternating round by round."""
    _setup()
    from bench.bench_memory_write import _database_url
    from bench.recall_seed import ACTOR, agent
    from knowledge.principals import services

    cases = json.loads(CASES.read_text())[: limit or None]
    picked = ROOT / "var" / "peers_ab_cpu_cases.json"
    picked.write_text(json.dumps(cases))
    env = {**os.environ, "DATABASE_URL": _database_url(), "BRAIN_LOG_LEVEL": "ERROR"}
    env.update(PEERS_AB_DATABASE=DB_NAME, PEERS_AB_CASES=str(picked))
    env["PEERS_AB_TOKEN"] = services.token_create(actor=ACTOR, agent=agent(cases[0]["agent"]))
    sides = {"old": old.resolve(), "new": ROOT}
    found: dict = {name: {"cpu": [], "wall": [], "answers": []} for name in sides}
    before = _load()
    for r in range(rounds):
        for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
            ran = subprocess.run(
                [sys.executable, "-c", _CPU_SIDE], cwd=sides[name], env=env, capture_output=True, text=True
            )
            if ran.returncode != 0:
                raise RuntimeError(f"the {name} side failed: {ran.stderr[-2000:]}")
            out = json.loads(ran.stdout.strip().splitlines()[-1])
            for key in found[name]:
                found[name][key] += out[key]
    after = _load()
    same = sum(a == b for a, b in zip(found["old"]["answers"], found["new"]["answers"], strict=True))
    result = {
        "load_before": before,
        "load_after": after,
        "identical": f"{same} of {len(found['new']['answers'])}",
    }
    for name in sides:
        result[name] = {
            "cpu_p50": round(statistics.median(found[name]["cpu"]), 2),
            "cpu_mean": round(statistics.mean(found[name]["cpu"]), 2),
            "wall_p50": round(statistics.median(found[name]["wall"]), 1),
        }
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers_ab")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("seed")
    timing = sub.add_parser("ab")
    timing.add_argument("--old", type=Path, required=True, help="the other checkout (its server's code)")
    timing.add_argument("--rounds", type=int, default=1)
    timing.add_argument("--seed", type=int, default=61)
    timing.add_argument("--limit", type=int, default=0, help="only the first N questions")
    timing.add_argument("--old-env", action="append", default=[], help="KEY=VALUE for the old side's server")
    timing.add_argument("--new-env", action="append", default=[], help="KEY=VALUE for the new side's server")
    in_process = sub.add_parser("cpu")
    in_process.add_argument("--old", type=Path, required=True, help="the other checkout (its code)")
    in_process.add_argument("--rounds", type=int, default=2)
    in_process.add_argument("--limit", type=int, default=0, help="only the first N questions")
    args = parser.parse_args(argv)
    if args.command == "seed":
        seed()
    elif args.command == "cpu":
        print(json.dumps(cpu(args.old, args.rounds, args.limit)), flush=True)
    else:
        envs = {
            side: dict(kv.split("=", 1) for kv in pairs)
            for side, pairs in (("old", args.old_env), ("new", args.new_env))
        }
        print(json.dumps(ab(args.old, args.rounds, args.seed, args.limit, envs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
