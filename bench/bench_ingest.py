"""A team's history going in, end to end, as `make run` serves it: the real web server (gunicorn,
uvicorn workers) and the real worker cluster (`python -m brainsite.ops.worker`, two pool
processes) on the bench database; BENCH_INGEST_MESSAGES chat messages (default 10,000; 5–60
words, in 10 channels, each after the turn before it) posted through POST /api/messages in
batches of 500, then timed until the worker has embedded all of them and a search finds them.

Figures: messages/s end to end (posting to the last vector), the backlog's rate against the
model alone on the same texts with the same lanes in the same run (before and after), seconds
per step of the backlog (claim, read, embed, write) from a drain of its own, peak RSS per process
kind, the longest open transaction seen, jobs killed by the queue's timeout, and the first search
after the start against the next ten."""

import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import httpx

from bench.bench_memory_write import _children, _database_url, _free_port
from bench.model_alone import model_alone
from bench.textgen import TextGen

MESSAGES = int(os.environ.get("BENCH_INGEST_MESSAGES", "10000"))
# `make bench` runs the default; `make bench-large` a longer prefix, recorded beside it.
RESULTS_NAME = "ingest" if MESSAGES == 10_000 else f"ingest-{MESSAGES // 1000}k"
CHANNELS = 10
POST_BATCH = 500
SAMPLE = 1500  # texts the model alone embeds, before and after
WEB_WORKERS = 2


def _setup() -> tuple[str, list[str]]:
    from knowledge.conversations import services as conversations
    from knowledge.principal import Principal
    from knowledge.principals import services

    actor = Principal.system("bench")
    agent = services.agent_create(actor=actor, name="ingest", trusted=True)
    names = []
    for n in range(CHANNELS):
        channel = conversations.channel_create(
            actor=actor, name=f"team-{n}", kind="shared", person=None, agent=None, memory_scope="shared"
        )
        conversations.conversation_start(actor=actor, agent=agent, channel=channel)
        names.append(channel.name)
    return services.token_create(actor=actor, agent=agent), names


def _history(channels: list[str]) -> list[dict]:
    gen = TextGen(11)
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    return [
        {
            "channel": channels[i % CHANNELS],
            "speaker": gen.speaker(),
            "text": gen.message(),
            "ts": (start + datetime.timedelta(seconds=i * 13)).isoformat(),  # a turn every 13 s
            "external_id": f"h-{i}",
        }
        for i in range(MESSAGES)
    ]


def _embedding_texts(history: list[dict]) -> list[str]:
    """The texts the backlog embeds for the first SAMPLE messages: speaker and text, after the
    turn before it in its channel (knowledge.embeddings.backlog.embedding_text)."""
    from knowledge.embeddings.backlog import embedding_text

    last: dict[str, dict] = {}
    out = []
    for m in history[: SAMPLE * 2]:
        before = last.get(m["channel"], {})
        row = (None, m["speaker"], m["text"], before.get("speaker"), before.get("text"))
        out.append(embedding_text("messages", row))
        last[m["channel"]] = m
    return out[-SAMPLE:]


class Watch:
    """Samples, every half second: peak RSS per process kind (web, worker, database) and the
    longest open transaction of the bench database."""

    def __init__(self, kinds: dict[str, int]):
        self.kinds = kinds  # kind -> root pid (itself and its descendants)
        self.peak = dict.fromkeys(kinds, 0)
        self.longest = 0.0
        self.longest_what = ""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def tree(self, pid: int) -> list[int]:
        out, todo = [], [pid]
        while todo:
            p = todo.pop()
            out.append(p)
            todo += _children(p)
        return out

    def rss(self, pid: int) -> int:
        try:
            for line in open(f"/proc/{pid}/status"):  # noqa: SIM115
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def run(self):
        import psycopg

        with psycopg.connect(_database_url(), autocommit=True) as conn:
            while not self.stop.wait(0.5):
                for kind, root in self.kinds.items():
                    if root:
                        self.peak[kind] = max(
                            self.peak[kind], *(self.rss(p) for p in self.tree(root)[1:] or [root])
                        )
                row = conn.execute(
                    "SELECT extract(epoch FROM now() - xact_start), state, left(query, 80) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND xact_start IS NOT NULL AND pid <> pg_backend_pid() "
                    "ORDER BY xact_start LIMIT 1"
                ).fetchone()
                if row and row[0] > self.longest:
                    self.longest, self.longest_what = float(row[0]), f"{row[1]}: {row[2]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def _start(env: dict, args: list[str]) -> subprocess.Popen:
    """Start a server process; its log (a line per request) goes to a file, not the figures."""
    log = tempfile.NamedTemporaryFile(prefix="bench-ingest-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen([sys.executable, *args], env=env, stdout=log, stderr=subprocess.STDOUT)
    process.log_path = log.name
    return process


def run(report):
    from django.conf import settings
    from django.core.management import call_command
    from django_q.models import Failure

    from knowledge.embeddings.backlog import Timings, backlog_counts, run_backlog
    from knowledge.embeddings.embedder import message_model_name
    from knowledge.models import MessageVector

    call_command("brain_schedules", stdout=open(os.devnull, "w"))  # noqa: SIM115  as make run does
    token, channels = _setup()
    history = _history(channels)
    texts = _embedding_texts(history)
    alone_before = model_alone(texts)
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "brainsite.settings",
        "DATABASE_URL": _database_url(),
        "BRAIN_LOG_LEVEL": "WARNING",
        "BRAIN_WORKERS": "2",
    }
    web = _start(
        env,
        [
            "-m",
            "gunicorn",
            "brainsite.asgi:application",
            "--worker-class",
            "brainsite.ops.web_worker.BrainUvicornWorker",
            "--workers",
            str(WEB_WORKERS),
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
    )
    worker = _start(env, ["-m", "brainsite.ops.worker"])
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        time.sleep(3)  # let the web workers load their query model (they do it as they start)
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            searches = []
            for i in range(11):
                t0 = time.perf_counter()
                r = client.post(
                    "/api/memory/search",
                    json={"agent": "ingest", "channel": "team-0", "q": f"printer error {i}", "k": 5},
                )
                assert r.status_code == 200, r.text[:300]
                searches.append((time.perf_counter() - t0) * 1000)
            with Watch({"web": web.pid, "worker": worker.pid}) as watch:
                start = time.perf_counter()
                for at in range(0, len(history), POST_BATCH):
                    r = client.post("/api/messages", json={"messages": history[at : at + POST_BATCH]})
                    assert r.status_code == 201, r.text[:300]
                posted = time.perf_counter() - start
                shown = start
                while True:
                    left = sum(backlog_counts().values())
                    now = time.perf_counter()
                    if not left:
                        break
                    if now - shown >= 15:
                        done = MESSAGES - left
                        print(f"   {done:,} of {MESSAGES:,} embedded after {now - start:.0f} s", flush=True)
                        shown = now
                    time.sleep(0.5)
                drained = time.perf_counter() - start
                status = client.get("/healthz").json()
    finally:
        for process in (web, worker):
            process.terminate()
        for process in (web, worker):
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
    with open(web.log_path, errors="replace") as log:
        web_timeouts = log.read().count("WORKER TIMEOUT")  # gunicorn's line for a worker it killed
    vectors = MessageVector.objects.filter(model=message_model_name()).count()
    killed = sum("timeout" in str(f.result).lower() for f in Failure.objects.all())
    alone_after = model_alone(texts)
    alone = (alone_before + alone_after) / 2
    rate = MESSAGES / (drained - posted) if drained > posted else float("inf")

    # The steps of a drain, on a second copy of the same texts, in this process.
    MessageVector.objects.all().delete()
    steps = Timings()
    t0 = time.perf_counter()
    result = run_backlog(max_seconds=3600, kinds=["messages"], timings=steps)
    again = result["messages"] / (time.perf_counter() - t0)
    per_lane = steps.as_dict()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())

    report(
        f"ingest {MESSAGES:,} messages end to end",
        MESSAGES / drained,
        "messages/s",
        note=f"posting {posted:.1f} s ({MESSAGES / posted:,.0f} messages/s), then the worker's backlog "
        f"until the last vector: {drained:.1f} s in all; vectors from the current model: {vectors:,} of {MESSAGES:,}; "
        f"/healthz during the backlog: {status['status']} (worker {status['worker']})",
    )
    report(
        "ingest: the worker's backlog",
        rate,
        "texts/s",
        target="≥ 80 % of the model alone",
        note=f"{100 * rate / alone:.0f} % of the model alone on the same texts with the same lanes "
        f"({alone_before:,.0f} before, {alone_after:,.0f} after; load average {load})",
    )
    report(
        "ingest: a drain in one process",
        again,
        "texts/s",
        note=f"{100 * again / alone:.0f} % of the model alone; seconds summed over the lanes: "
        + ", ".join(f"{k} {v:,.1f}" for k, v in per_lane.items()),
    )
    report(
        "ingest: peak RSS, worker process",
        watch.peak["worker"] / 2**20,
        "MiB",
        target="≤ 1,024 MiB",
        note=f"largest process of the worker cluster; web workers: {watch.peak['web'] / 2**20:,.0f} MiB each "
        f"at most, web workers timed out by gunicorn: {web_timeouts}",
    )
    report(
        "ingest: longest open transaction",
        watch.longest,
        "s",
        target="≤ 5 s",
        note=f"{watch.longest_what[:90]}; jobs killed by the queue's timeout: {killed}",
    )
    report(
        "ingest: first search after the start",
        searches[0],
        "ms",
        note=f"the next ten: median {statistics.median(searches[1:]):.1f} ms (the query model loads as a web "
        f"worker starts; Q_CLUSTER timeout {settings.Q_CLUSTER['timeout']} s)",
    )
