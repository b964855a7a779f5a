"""Sustained POST /api/memory throughput: a real gunicorn server (the production settings,
pointed at the bench database) and 4 concurrent clients, each with its own keep-alive
connection, writing realistic memories with a source for DURATION seconds."""

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = 4
WORKERS = int(os.environ.get("BENCH_WEB_WORKERS", "4"))
WORKER_CLASS = os.environ.get("BENCH_WORKER_CLASS", "sync")
THREADS = int(os.environ.get("BENCH_WORKER_THREADS", "1"))
DURATION = float(os.environ.get("BENCH_DURATION", "15"))
WARMUP = 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url() -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    host = db["HOST"]
    if host.startswith("/"):
        return f"postgresql://{db['USER']}:{db['PASSWORD']}@/{db['NAME']}?host={host}"
    return f"postgresql://{db['USER']}:{db['PASSWORD']}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


def _setup() -> dict:
    from knowledge.principal import Principal
    from knowledge.principals import services

    actor = Principal.system("bench")
    trusted = services.agent_create(actor=actor, name="bench-trusted", trusted=True)
    untrusted = services.agent_create(actor=actor, name="bench-untrusted")
    return {
        "trusted": services.token_create(actor=actor, agent=trusted),
        "untrusted": services.token_create(actor=actor, agent=untrusted),
    }


def _start_server(port: int, cwd: Path = ROOT, extra_env: dict | None = None) -> subprocess.Popen:
    env = {
        **os.environ,
        **(extra_env or {}),
        "DJANGO_SETTINGS_MODULE": "brainsite.settings",
        "DATABASE_URL": _database_url(),
        "BRAIN_LOG_LEVEL": "WARNING",
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "brainsite.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(WORKERS),
            "--worker-class",
            WORKER_CLASS,
            "--threads",
            str(THREADS),
            "--log-level",
            "warning",
        ],
        cwd=cwd,
        env=env,
    )
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.terminate()
    raise RuntimeError("the bench server did not start")


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                kids.append(int(entry.name))
    return kids


def _postmaster_pid() -> int | None:
    from django.conf import settings

    pidfile = Path(settings.DATABASES["default"]["HOST"] or "/nonexistent") / "postmaster.pid"
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None  # an external database: its CPU is not ours to count


def _cpu_split(server_pid: int) -> dict:
    """CPU seconds used so far by the web server (master + workers), this machine's embedded
    PostgreSQL (postmaster + backends) and this process (the client threads)."""
    web = _proc_cpu(server_pid) + sum(_proc_cpu(k) for k in _children(server_pid))
    postmaster = _postmaster_pid()
    db = _proc_cpu(postmaster) + sum(_proc_cpu(k) for k in _children(postmaster)) if postmaster else 0.0
    return {"web": web, "db": db, "clients": time.process_time()}


def _body(i: int) -> dict:
    return {
        "scope": "agent",
        "text": f"Customer {i % 997} prefers to be contacted by e-mail before 10:00 (ticket INC-{i}).",
        "category": "preference",
        "confidence": 0.8,
        "sources": [{"kind": "ticket", "ref": f"INC-{i}"}],
        "run_id": f"run-{i // 50}",
        "turn": i % 50,
    }


def _post(address: tuple[str, int], request: bytes) -> int:
    """Send one request on a new connection and read the response to its end; its status."""
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    response = b"".join(chunks)
    try:
        return int(response[9:12])  # b"HTTP/1.1 201 Created"
    except ValueError:
        return 0


def _hammer(base: str, token: str, seconds: float, offset: int = 0) -> tuple[int, float, list[float], int]:
    """CLIENTS threads write for `seconds`; returns (writes, elapsed, latencies, errors). Calls
    that must not repeat an earlier call's texts (an exact repeat is answered as a duplicate,
    not stored) give each its own `offset`."""
    latencies: list[list[float]] = [[] for _ in range(CLIENTS)]
    errors = [0] * CLIENTS
    start_gate = threading.Barrier(CLIENTS + 1)
    stop_at = [0.0]

    def client(n: int):
        # A lean HTTP/1.1 client on raw sockets, like wrk or hey: the load generator shares the
        # server's two cores, so it should take as little of them as it can (http.client parses
        # every response's headers with the email package; httpx costs more still). Gunicorn's
        # sync workers close the connection after each response, so each write connects anew.
        host, port = base.removeprefix("http://").split(":")
        address = (host, int(port))
        head = (
            f"POST /api/memory HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nConnection: close\r\nContent-Length: "
        ).encode()
        i = offset + n * 10_000_000  # offsets: multiples of 50,000,000, past every client's range
        start_gate.wait()
        while time.perf_counter() < stop_at[0]:
            t = time.perf_counter()
            body = json.dumps(_body(i)).encode()
            status = _post(address, head + str(len(body)).encode() + b"\r\n\r\n" + body)
            latencies[n].append(time.perf_counter() - t)
            if status != 201:
                errors[n] += 1
            i += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    stop_at[0] = time.perf_counter() + seconds + 0.05
    begin = time.perf_counter()
    start_gate.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - begin
    flat = [x for per in latencies for x in per]
    return len(flat), elapsed, flat, sum(errors)


def run(report):
    tokens = _setup()
    port = _free_port()
    server = _start_server(port)
    base = f"http://127.0.0.1:{port}"
    try:
        # warm every worker's imports and connection, with texts the measured writes never repeat
        _hammer(base, tokens["trusted"], 2, offset=50_000_000)
        for label, token in (
            ("trusted (active at once)", tokens["trusted"]),
            ("untrusted (queued)", tokens["untrusted"]),
        ):
            cpu_before = _cpu_split(server.pid)
            count, elapsed, latencies, errors = _hammer(base, token, DURATION)
            cpu_after = _cpu_split(server.pid)
            per_write = {k: (cpu_after[k] - cpu_before[k]) / max(count, 1) * 1000 for k in cpu_before}
            latencies.sort()
            p50 = statistics.median(latencies) * 1000
            p95 = latencies[int(len(latencies) * 0.95)] * 1000
            report(
                f"POST /api/memory, {label}",
                count / elapsed,
                "writes/s",
                target="≥ 300 writes/s",
                note=f"{CLIENTS} clients, gunicorn {WORKERS} {WORKER_CLASS} workers, {count} writes in {elapsed:.0f} s, "
                f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, {errors} errors, {os.cpu_count()} cores; CPU per write: "
                f"web {per_write['web']:.1f} ms, db {per_write['db']:.1f} ms, clients {per_write['clients']:.1f} ms "
                f"(CPU-bound ceiling on {os.cpu_count()} idle cores: "
                f"{os.cpu_count() * 1000 / max(sum(per_write.values()), 0.001):.0f} writes/s)",
            )
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
