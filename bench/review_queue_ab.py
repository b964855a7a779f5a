"""The review queue page of this tree against an earlier commit, alternated in one run on one
database (bench_review_queue's first world: 500 queued among 10,000 active): a render process
per tree, and short rounds that take turns — this tree, the base, the base, this tree … — so the
shared machine's slow and fast phases fall on both alike. Run:

    python -m bench.review_queue_ab BASE_COMMIT [ROUNDS] [URL]

(BENCH_AB_REUSE=1: the world of an earlier run, left in the bench database, is used again.)

The base tree is exported with `git archive` into a temporary directory (the repository is not
touched). Prints each round's median and, per tree, the median and p95 of every render."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PER_ROUND = 10

# One process per tree: Django set up from that tree, logged in as the bench's reviewer; each
# line read is a URL, answered with the server times of PER_ROUND renders (after one to warm).
RENDERER = """
import json, os, sys, time
sys.path.insert(0, os.getcwd())
os.environ["DJANGO_SETTINGS_MODULE"] = "brainsite.settings_bench"
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
client = Client(SERVER_NAME="localhost")
client.force_login(get_user_model().objects.get(username="rq-reviewer"))
for line in sys.stdin:
    url, n = line.split()
    assert client.get(url).status_code == 200
    times = []
    for _ in range(int(n)):
        t = time.perf_counter()
        assert client.get(url).status_code == 200
        times.append((time.perf_counter() - t) * 1000)
    print(json.dumps(times), flush=True)
"""


def main(argv: list[str]) -> int:
    base_commit = argv[0] if argv else "HEAD"
    rounds = int(argv[1]) if len(argv) > 1 else 6
    url = argv[2] if len(argv) > 2 else "/review/?size=100"
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "brainsite.settings_bench"
    from bench.__main__ import fresh_database

    reuse = os.environ.get("BENCH_AB_REUSE") == "1"  # the world an earlier run seeded
    if not reuse:
        fresh_database()
    import django

    django.setup()
    if not reuse:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from bench import bench_review_queue
        from knowledge.principal import Principal
        from knowledge.principals import services

        bench_review_queue.seed()
        services.consoleuser_create(
            actor=Principal.system("bench"), username="rq-reviewer", role="reviewer", password="x" * 12
        )
    from bench.bench_memory_write import _database_url

    database_url = _database_url()
    with tempfile.TemporaryDirectory(prefix="brain-ab-") as tmp, open(Path(tmp) / "errors", "w") as errors:
        archive = subprocess.run(["git", "archive", base_commit], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        trees = {"this tree": ROOT, f"base {base_commit}": Path(tmp)}
        renderers = {
            name: subprocess.Popen(
                [sys.executable, "-c", RENDERER],
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                env={**os.environ, "DATABASE_URL": database_url},  # this server, not one of the copy's
            )
            for name, cwd in trees.items()
        }
        times: dict[str, list[float]] = {name: [] for name in trees}
        order = list(trees)
        try:
            for n in range(rounds):
                for name in order if n % 2 == 0 else reversed(order):
                    renderer = renderers[name]
                    renderer.stdin.write(f"{url} {PER_ROUND}\n")
                    renderer.stdin.flush()
                    line = renderer.stdout.readline()
                    if not line:
                        errors.flush()
                        sys.exit(f"{name}'s renderer stopped:\n" + (Path(tmp) / "errors").read_text()[-3000:])
                    got = json.loads(line)
                    times[name] += got
                    load = os.getloadavg()[0]
                    print(f"round {n + 1} {name}: median {statistics.median(got):.1f} ms (load {load:.1f})")
        finally:
            for renderer in renderers.values():
                renderer.stdin.close()
                renderer.wait(timeout=60)
    print(f"\n{url}, {rounds} rounds of {PER_ROUND} renders each:")
    for name, got in times.items():
        got.sort()
        print(f"  {name}: median {statistics.median(got):.1f} ms, p95 {got[int(len(got) * 0.95)]:.1f} ms")
    ours, theirs = (statistics.median(t) for t in times.values())
    print(f"  this tree / base: {ours / theirs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
