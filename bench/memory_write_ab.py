"""POST /api/memory throughput of this tree against an earlier commit, alternated in one run on
one database: both servers run (the same settings and worker count), and short rounds take
turns — this tree trusted, the base trusted, this tree untrusted, the base untrusted — so the
machine's slow and fast phases fall on both alike. Run:

    python -m bench.memory_write_ab [BASE_COMMIT] [ROUNDS]

The base tree is exported with `git archive` into a temporary directory (the repository is not
touched). Prints each round and the medians; the conflict and duplicate checks of issue 32 sit
on this path and must stay within 10 %."""

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUND_SECONDS = float(os.environ.get("BENCH_AB_SECONDS", "8"))
GUARD_SETTING = "brain.memory_writer"  # knowledge.memories.guard.SETTING (read before django.setup)


def main(argv: list[str]) -> int:
    base_commit = argv[0] if argv else "9e112a0"
    rounds = int(argv[1]) if len(argv) > 1 else 4
    sys.path.insert(0, str(ROOT))
    from bench import results as written

    load_before = written.load()
    os.environ["DJANGO_SETTINGS_MODULE"] = "brainsite.settings_bench"
    from bench.__main__ import fresh_database

    fresh_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench import bench_memory_write as W

    with tempfile.TemporaryDirectory(prefix="brain-ab-") as tmp:
        archive = subprocess.run(
            ["git", "archive", base_commit], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        tokens = W._setup()
        servers = {}
        try:
            # A base from before the one writer's database guard (knowledge.memories.guard) does
            # not open it: its sessions start with the guard's setting on (libpq's PGOPTIONS).
            base_env = {"PGOPTIONS": f"-c {GUARD_SETTING}=on"}
            for name, cwd, extra in (("this tree", ROOT, None), (f"base {base_commit}", Path(tmp), base_env)):
                port = W._free_port()
                servers[name] = (W._start_server(port, cwd=cwd, extra_env=extra), f"http://127.0.0.1:{port}")
                W._hammer(servers[name][1], tokens["trusted"], 2, offset=len(servers) * 50_000_000)  # warm
            results: dict[tuple[str, str], list[float]] = {}
            calls = 1  # every call writes texts of its own (a repeat would be a duplicate, not a write)
            for n in range(rounds):
                for kind in ("trusted", "untrusted"):
                    for name, (_, base) in servers.items():
                        calls += 1
                        count, elapsed, _, errors = W._hammer(
                            base, tokens[kind], ROUND_SECONDS, offset=calls * 100_000_000
                        )
                        rate = count / elapsed
                        results.setdefault((name, kind), []).append(rate)
                        print(
                            f"round {n + 1} {kind:9} {name:16} {rate:7.1f} writes/s ({errors} errors)",
                            flush=True,
                        )
            print()
            rows = []
            for kind in ("trusted", "untrusted"):
                this, base = (statistics.median(results[(name, kind)]) for name in servers)
                print(
                    f"{kind:9} median: this tree {this:.1f} · base {base:.1f} writes/s ({(this / base - 1) * 100:+.1f} %)"
                )
                rows.append(
                    [
                        f"POST /api/memory, {kind}: this tree against {base_commit}",
                        (this / base - 1) * 100,
                        "%",
                        "within 5 %",
                        f"medians of {rounds} alternated rounds: {this:.1f} against {base:.1f} writes/s",
                    ]
                )
            written.record(
                "memory_write_ab",
                title="Write throughput against an earlier commit, alternated in one run",
                command=f"python -m bench.memory_write_ab {base_commit} {rounds}",
                rows=rows,
                load_before=load_before,
            )
        finally:
            for server, _ in servers.values():
                server.terminate()
                try:
                    server.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
