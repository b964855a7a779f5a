"""Same-run A/B of memory_search latency on a kept 100,000-message database.

`make bench` rebuilds its database for every run (≈ 15 minutes for the recall world), which makes
comparing two versions of the code on a shared machine hopeless: the load changes between runs.
This tool seeds the recall benchmark's world once into its own database and then times searches
against it, so two checkouts can be run alternately (A, B, A, B, …) on the same data:

    python -m bench.recall_ab seed                    # once: the world of bench_recall
    python -m bench.recall_ab fill                    # if the seed's backlog was cut short
    python -m bench.recall_ab time --label new        # prints one JSON line of figures
    python -m bench.recall_ab time --label new --http # also over HTTP, against make run's server
    python -m bench.recall_ab floor -n 150            # a search-less request beside 1…5 routes, HTTP
    (cd /tmp/old-checkout && BRAIN_PGDATA=$PWD_OF_THIS/var/pgdata python -m bench.recall_ab time --label old)

Besides wall-clock percentiles (noisy under load) it reports what load does not change much:
CPU seconds of this process per search (Python's share: serialising, packing, tokenising) and
SQL statements per search."""

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB_NAME = os.environ.get("BRAIN_AB_DATABASE", "brain_recall_ab")


def _setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "brainsite.settings_bench"
    import brainsite.settings_bench as bench_settings

    bench_settings.DATABASES["default"]["NAME"] = DB_NAME
    bench_settings.DATABASES["default"]["CONN_MAX_AGE"] = None
    import django

    django.setup()


def _create_database() -> None:
    from urllib.parse import urlparse

    import psycopg

    from brainsite.embedded_db import embedded_url

    url = os.environ.get("DATABASE_URL") or embedded_url()
    admin_url = urlparse(url)._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def seed() -> None:
    _create_database()
    _setup()
    from django.core.management import call_command
    from django.test import override_settings

    from bench import bench_recall as B
    from bench.recall_seed import analyze, reset_recall_tables
    from bench.textgen import TextGen

    call_command("migrate", verbosity=0)

    def report(name, value, unit, target="", note=""):
        print(f"  {name}: {value:,.1f} {unit} {note}", flush=True)

    rng = random.Random(2026)
    gen = TextGen(2026)
    reset_recall_tables()
    copilot, integration, channels = B._world(rng)
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        B._ingest(report, B._client(B._token(integration=integration)), channels, gen, rng)
    B._knowledge(copilot, channels, gen, rng)
    B._embed(report)
    analyze()


def fill() -> None:
    """The vectors the backlog did not reach (a loaded machine embeds a few texts a second): every
    text without one gets a noisy copy of an embedded text's vector and the HNSW indexes are
    rebuilt (bench_recall_large._fill_vectors). Fine for timing two versions, not for quality."""
    _setup()
    from bench.bench_recall_large import _fill_vectors
    from bench.recall_seed import analyze

    print(f"  {_fill_vectors():,} vectors written", flush=True)
    analyze()


def _statements():
    """A counter of SQL statements run on the default connection."""
    from django.db import connection

    count = [0]

    def wrapper(execute, sql, params, many, context):
        count[0] += 1
        return execute(sql, params, many, context)

    return connection.execute_wrapper(wrapper), count


def _backend_cpu_ms(pid: int) -> float:
    """CPU time (user + system) of the database backend serving this process, when it runs on
    this machine (the embedded server); 0 otherwise."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def time_searches(label: str, n: int, seed: int, http: bool = False) -> dict:
    _setup()
    if os.environ.get("BRAIN_AB_QUERY_CACHE") == "0":
        # The questions repeat (warm-up, k=50): without this a remembered query vector
        # (knowledge.embeddings.embedder.embed_query) would count for the code that has one.
        from knowledge.embeddings import embedder

        embedder.QUERY_CACHE_SIZE = 0
    from bench import bench_recall as B
    from bench.textgen import TextGen, question
    from knowledge.models import Agent, Conversation
    from knowledge.principal import Principal
    from memory.recall import memory_search, resolve_scope

    rng = random.Random(seed)
    gen = TextGen(seed)
    copilot = Agent.objects.get(name="copilot")
    client = B._client(B._token(agent=copilot))
    conversations = list(Conversation.objects.filter(agent=copilot).select_related("channel"))
    questions = [question(gen) for _ in range(n)]
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    out: dict = {"label": label}
    for k in (10, 50):
        picks = [(rng.choice(conversations), questions[i % n]) for i in range(n + 20)]
        walls, cpus, sizes, routes = [], [], [], {}
        wrapper, count = _statements()
        with wrapper:
            for i, (conv, q) in enumerate(picks):
                if i == 20:
                    count[0] = 0
                    db0 = _backend_cpu_ms(backend)
                body = {"agent": "copilot", "conversation": conv.pk, "q": q, "k": k}
                w0, c0 = time.perf_counter(), time.process_time()
                response = client.post("/api/memory/search", body, format="json")
                wall, cpu = (time.perf_counter() - w0) * 1000, (time.process_time() - c0) * 1000
                assert response.status_code == 200, response.content[:300]
                if i < 20:
                    continue
                walls.append(wall)
                cpus.append(cpu)
                sizes.append(len(response.content))
                payload = response.json()
                for name, info in payload["routes"].items():
                    routes.setdefault(name, []).append(info["ms"])
                routes.setdefault("embedding", []).append(payload["embedding_ms"])
        db_cpu = (_backend_cpu_ms(backend) - db0) / len(walls)
        walls.sort()
        out[f"k{k}"] = {
            "db_cpu_ms": round(db_cpu, 2),
            "p50": round(statistics.median(walls), 1),
            "p95": round(B._pct(walls, 0.95), 1),
            "cpu_ms": round(statistics.mean(cpus), 2),
            "statements": round(count[0] / len(walls), 2),
            "kB": round(statistics.mean(sizes) / 1000, 2),
            "routes_ms": {name: round(statistics.mean(v), 2) for name, v in routes.items()},
        }
    if http:
        # Questions not asked before in the server's process (its own remembered query vectors).
        asked_once = [question(gen) for _ in range(n + 20)]
        for k in (10, 50):
            raw = B._token(agent=copilot)
            walls, sizes = B._http_timings(raw, conversations, asked_once, rng, k, n)
            out[f"http_k{k}"] = {
                "p50": round(statistics.median(walls), 1),
                "p95": round(B._pct(walls, 0.95), 1),
                "kB": round(statistics.mean(sizes) / 1000, 2),
            }
    principal = Principal.for_agent(copilot)
    walls, cpus = [], []
    for i in range(n):
        conv = rng.choice(conversations)
        w0, c0 = time.perf_counter(), time.process_time()
        scope = resolve_scope(principal, agent=copilot, conversation=conv)
        memory_search(scope, q=questions[i], k=10, budget_tokens=2000)
        walls.append((time.perf_counter() - w0) * 1000)
        cpus.append((time.process_time() - c0) * 1000)
    walls.sort()
    out["service_k10"] = {
        "p50": round(statistics.median(walls), 1),
        "p95": round(B._pct(walls, 0.95), 1),
        "cpu_ms": round(statistics.mean(cpus), 2),
    }
    return out


# What `floor` times over HTTP: a request that runs no search, then memory_search with fewer and
# more routes (None: the pinned memo, auth and three statements; []: every route, the hop on).
FLOOR_VARIANTS = {
    "GET the pinned memo (no search)": None,
    "keyword_messages only": ["keyword_messages"],
    "vector_episodes only": ["vector_episodes"],
    "the two keyword routes": ["keyword_knowledge", "keyword_messages"],
    "the two vector routes": ["vector_knowledge", "vector_episodes"],
    "every route (the second hop on)": [],
}


def floor(n: int, seed: int) -> dict:
    """The floor of a search on this stack: p50 / p95 over HTTP (the server `make run` starts) of
    a request that runs no search and of k=10 searches with one route up to all of them. Each
    question is asked in every variant, in a shuffled order, its text made distinct per variant
    (no remembered query vector counts); 20 questions of warm-up."""
    _setup()
    import httpx

    from bench import bench_recall as B
    from bench.bench_load import _start_server
    from bench.bench_memory_write import _free_port
    from bench.textgen import TextGen, question
    from knowledge.models import Agent, Conversation

    copilot = Agent.objects.get(name="copilot")
    conversations = list(Conversation.objects.filter(agent=copilot).values_list("pk", flat=True))
    rng, gen = random.Random(seed), TextGen(seed)
    walls: dict[str, list[float]] = {name: [] for name in FLOOR_VARIANTS}
    port = _free_port()
    server = _start_server(port)
    try:
        headers = {"Authorization": f"Bearer {B._token(agent=copilot)}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as http:
            for i in range(n + 20):
                q, conversation = question(gen), rng.choice(conversations)
                names = list(FLOOR_VARIANTS)
                rng.shuffle(names)
                for at, name in enumerate(names):
                    routes = FLOOR_VARIANTS[name]
                    body = {"agent": "copilot", "conversation": conversation, "q": q + " " * at, "k": 10}
                    if routes:
                        body["routes"] = routes
                    start = time.perf_counter()
                    if routes is None:
                        response = http.get("/api/agents/copilot/memo")
                    else:
                        response = http.post("/api/memory/search", json=body)
                    spent = (time.perf_counter() - start) * 1000
                    assert response.status_code == 200, response.content[:300]
                    if i >= 20:
                        walls[name].append(spent)
    finally:
        server.terminate()
        server.wait(timeout=30)
    out = {}
    for name, values in walls.items():
        values.sort()
        out[name] = {"p50": round(statistics.median(values), 1), "p95": round(B._pct(values, 0.95), 1)}
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_ab")
    parser.add_argument("command", choices=["seed", "fill", "time", "floor"])
    parser.add_argument("--label", default=str(ROOT))
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--http", action="store_true", help="also time searches over HTTP (make run's server)"
    )
    args = parser.parse_args(argv)
    if args.command == "seed":
        seed()
    elif args.command == "fill":
        fill()
    elif args.command == "floor":
        for name, figures in floor(args.n, args.seed).items():
            print(f"| {name} | {figures['p50']} ms | {figures['p95']} ms |", flush=True)
    else:
        print(json.dumps(time_searches(args.label, args.n, args.seed, args.http)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
