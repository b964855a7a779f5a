"""`manage.py import_mem0` of a 1,000-memory Mem0 export (the `Memory.get_all()` shape), for a
trusted agent and for an untrusted one (whose imports are queued for review), then the same file
again, which must import nothing and write no event (target ≥ 500 memories/s). The load average
goes beside the figure: the machine this runs on is often shared."""

import io
import json
import os
import random
import tempfile
import time
import uuid
from pathlib import Path

from django.core.management import call_command

from knowledge.models import AuditEvent, Memory
from knowledge.principal import Principal
from knowledge.principals import services

N = 1_000
TOPICS = ["VPN", "mail quota", "laptop", "printer", "badge", "wifi", "payroll", "SSO", "backup", "phone"]


def export(rng: random.Random) -> dict:
    """A get_all() answer: {"results": [MemoryItem with the promoted ids…]}."""
    results = []
    for i in range(N):
        topic = rng.choice(TOPICS)
        results.append(
            {
                "id": str(uuid.UUID(int=rng.getrandbits(128))),
                "memory": f"User {i % 97} had a {topic} problem fixed by step {rng.randint(1, 40)} (case {i})",
                "hash": f"{rng.getrandbits(128):032x}",
                "metadata": {"category": topic, "priority": rng.randint(1, 3)} if i % 3 else None,
                "created_at": f"2026-0{1 + i % 9}-1{i % 10}T08:{i % 60:02d}:00.000000-07:00",
                "updated_at": None,
                "user_id": f"user-{i % 97}",
                "agent_id": "support-bot",
                "run_id": f"run-{i // 50}",
            }
        )
    return {"results": results}


def run(report) -> None:
    actor = Principal.system("bench")
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mem0.json"
        path.write_text(json.dumps(export(rng)))
        for name, trusted in (("bench-mem0-trusted", True), ("bench-mem0-untrusted", False)):
            services.agent_create(actor=actor, name=name, trusted=trusted)
            start = time.perf_counter()
            call_command("import_mem0", str(path), agent=name, stdout=io.StringIO(), stderr=io.StringIO())
            first = time.perf_counter() - start
            load = os.getloadavg()[0]
            written = Memory.objects.filter(owner__name=name).count()
            events = AuditEvent.objects.count()
            start = time.perf_counter()
            out = io.StringIO()
            call_command("import_mem0", str(path), agent=name, stdout=out, stderr=io.StringIO())
            again = time.perf_counter() - start
            assert written == N, written
            assert Memory.objects.filter(owner__name=name).count() == N, "a re-run imported duplicates"
            assert AuditEvent.objects.count() == events, "a re-run wrote events"
            assert f"Imported 0 of {N}" in out.getvalue(), out.getvalue()
            kind = "trusted" if trusted else "untrusted (queued)"
            report(
                f"import_mem0 {N:,} memories, {kind}",
                N / first,
                "memories/s",
                "≥ 500",
                f"load average {load:.1f} on {os.cpu_count()} cores",
            )
            report(
                f"import_mem0 re-run, {kind}", again * 1000, "ms", "", "0 imported, 0 duplicates, 0 events"
            )
