"""Brain against mem0 on the same questions, in one window (`make bench-peers`).

The LoCoMo dev split (bench/locomo.py) is posted through the API and embedded; then Brain answers
each question once at k=10 over HTTP (the server `make run` starts, one keep-alive client), and
after it mem0 2.2.1's own `Memory.search` answers the same questions in-process, with the same
embedding model, over the same turns (bench/peers_mem0.py, run by mem0ai's venv, which
`make bench-peers` builds). Both warm up on 20 other queries first. Prints p50/p95 of each with
the load average around it, and Brain's p95 as a multiple of mem0's."""

import json
import os
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx
from django.test import override_settings

from bench import locomo
from bench.bench_load import _start_server
from bench.bench_memory_write import _free_port
from bench.recall_seed import ACTOR, agent, analyze
from knowledge.embeddings.backlog import run_backlog
from knowledge.models import Message
from knowledge.principals import services

ROOT = Path(__file__).resolve().parent.parent
MEM0_PYTHON = Path(os.environ.get("BRAIN_BENCH_MEM0", ROOT / "var" / "mem0-venv" / "bin" / "python"))
K = 10
WARMUP = 20


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * q) - 1)]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _brain(cases) -> tuple[list[float], dict[str, list[float]]]:
    raw = services.token_create(actor=ACTOR, agent=agent("locomo-reader"))
    port = _free_port()
    server = _start_server(port)
    timings, stages = [], defaultdict(list)
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {raw}"}, timeout=60
        ) as http:
            work = [(c, f"{c.q} (warm-up)") for c in cases[:WARMUP]] + [(c, c.q) for c in cases]
            for i, (case, q) in enumerate(work):
                body = {
                    "agent": "locomo-reader",
                    "conversation": case.scope.conversation.pk,
                    "q": q,
                    "k": K,
                    "now": case.now.isoformat(),
                }
                t0 = time.perf_counter()
                response = http.post("/api/memory/search", json=body)
                spent = (time.perf_counter() - t0) * 1000
                assert response.status_code == 200, response.content[:300]
                if i >= WARMUP:
                    timings.append(spent)
                    for part in response.headers["Server-Timing"].split(", "):
                        name, dur = part.split(";dur=")
                        stages[name].append(float(dur))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return timings, stages


def _mem0(cases) -> dict:
    turns = defaultdict(list)
    for text, group in Message.objects.order_by("pk").values_list("text", "channel__name"):
        turns[group.removeprefix("locomo-")].append(text)
    work = {
        "turns": turns,
        "warmup": [[c.group, f"{c.q} (warm-up)"] for c in cases[:WARMUP]],
        "questions": [[c.group, c.q] for c in cases],
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(work, fh)
    try:
        done = subprocess.run(
            [str(MEM0_PYTHON), str(ROOT / "bench" / "peers_mem0.py"), fh.name],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
    finally:
        os.unlink(fh.name)
    if done.returncode != 0:
        raise RuntimeError(f"mem0's run failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(report):
    if not locomo.available():
        print(f"   skipped: {locomo.PATH} is not there (evaluation data, never shipped)")
        return
    if not MEM0_PYTHON.exists():
        print(f"   skipped: no mem0 venv at {MEM0_PYTHON} (`make bench-peers` builds it)")
        return
    with override_settings(BRAIN_EMBEDDING_KICK=False):
        cases, _ = locomo.load()
        run_backlog(max_seconds=3600)
        analyze()
    before = _load()
    brain, stages = _brain(cases)
    between = _load()
    mem0 = _mem0(cases)
    after = _load()
    n = len(cases)
    b50, b95 = statistics.median(brain), _p(brain, 0.95)
    m50, m95 = statistics.median(mem0["timings"]), _p(mem0["timings"], 0.95)
    report(
        f"Brain memory_search k={K} p95 (HTTP), LoCoMo dev",
        b95,
        "ms",
        note=f"p50 {b50:.1f} ms, {n} questions, load average before {before}, after {between}",
    )
    for name, values in stages.items():  # the stage table: where Brain's time went
        report(
            f"Brain stage {name} p50 (Server-Timing)",
            statistics.median(values),
            "ms",
            note=f"p95 {_p(values, 0.95):.1f} ms",
        )
    report(
        f"mem0 2.2.1 Memory.search top_k={K} p95 (in-process, same model)",
        m95,
        "ms",
        note=f"p50 {m50:.1f} ms, {n} questions, load average after {after}",
    )
    report(
        "Brain p95 as a share of mem0 p95",
        100 * b95 / m95,
        "%",
        target="≤ 60 %",
        note="the same run, one after the other",
    )
