"""Faults under load, against a supervised `make run`: writes keep coming while the worker, then
the database, then the web server are SIGKILLed. Every write that got a 201 is there afterwards, failed writes
are 503 JSON (never a 500 page), /healthz tells the truth in between, and service comes back
without anyone restarting anything."""

import os
import signal
import threading
import time

import httpx

from tests.ops.conftest import children_of, cmdline, is_json, wait_for

WRITERS = 3


class Load:
    def __init__(self, brain):
        self.brain = brain
        self.acknowledged: list[int] = []
        self.unavailable = 0  # 503 JSON
        self.refused = 0  # no HTTP answer at all (nothing acknowledged)
        self.bad: list[tuple[int, str]] = []
        self.health: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.write, args=(n,)) for n in range(WRITERS)]
        self.threads.append(threading.Thread(target=self.watch))

    def write(self, n: int) -> None:
        with httpx.Client() as client:
            i = 0
            while not self.stop.is_set():
                i += 1
                try:
                    r = self.brain.write(client, f"fault test writer {n} #{i}")
                except httpx.HTTPError:
                    self.refused += 1
                    time.sleep(0.1)
                    continue
                if r.status_code == 201:
                    self.acknowledged.append(r.json()["id"])
                elif r.status_code == 503 and is_json(r) and r.json()["error"] == "database_unavailable":
                    self.unavailable += 1
                    time.sleep(0.1)
                else:
                    self.bad.append((r.status_code, r.text[:300]))

    def watch(self) -> None:
        while not self.stop.is_set():
            try:
                status, body = self.brain.healthz()
                self.health.append(body["status"] if status in (200, 503) else f"http {status}")
            except (httpx.HTTPError, ValueError):
                self.health.append("unreachable")
            time.sleep(0.2)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)


def _worker_main(brain) -> int | None:
    mains = [p for p in children_of(brain.process.pid) if "brainsite.ops.worker" in cmdline(p)]
    return mains[0] if mains else None


def test_worker_then_database_killed_while_writing(brain):
    brain.wait_healthy()
    with Load(brain) as load:
        wait_for(lambda: len(load.acknowledged) >= 20, timeout=60, what="the first writes")

        # 1. The worker dies, and keeps dying for as long as it takes /healthz to notice.
        killed = set()

        def worker_killed_until_degraded():
            main = _worker_main(brain)
            if main is not None and main not in killed:
                for pid in brain.worker_pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                killed.add(main)
            return "degraded" in load.health

        wait_for(worker_killed_until_degraded, timeout=90, what="/healthz to say degraded without a worker")
        brain.wait_healthy(timeout=120)  # the supervisor started a worker, and it runs jobs
        assert _worker_main(brain) not in killed

        # 2. The database dies.
        before = len(load.acknowledged)
        os.kill(brain.postmaster_pid(), signal.SIGKILL)
        wait_for(lambda: "error" in load.health, timeout=60, what="/healthz to say error without a database")
        wait_for(lambda: load.unavailable > 0, timeout=60, what="a write answered 503 JSON")
        brain.wait_healthy(timeout=120)  # the supervisor restarted it; nobody else did anything
        wait_for(lambda: len(load.acknowledged) > before + 20, timeout=60, what="writes to succeed again")

        # 3. The web server dies.
        web = [p for p in children_of(brain.process.pid) if "gunicorn" in cmdline(p)]
        assert len(web) == 1
        before = len(load.acknowledged)
        os.kill(web[0], signal.SIGKILL)
        wait_for(lambda: "unreachable" in load.health, timeout=60, what="/healthz to go unanswered")
        brain.wait_healthy(timeout=120)
        wait_for(
            lambda: len(load.acknowledged) > before + 20, timeout=60, what="writes after the web restart"
        )

    assert load.bad == [], load.bad[:5]
    ids = sorted(set(load.acknowledged))
    assert len(ids) == len(load.acknowledged)
    present = brain.count("SELECT count(*) FROM knowledge_memory WHERE id = ANY(%s)", (ids,))
    assert present == len(ids), f"{len(ids) - present} acknowledged writes are missing"
    log = brain.log_text()
    assert "supervisor: worker killed by SIGKILL" in log
    assert "supervisor: the embedded PostgreSQL is not running" in log
    assert "supervisor: the embedded PostgreSQL is running again" in log
    assert "supervisor: web server killed by SIGKILL" in log
