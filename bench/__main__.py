import importlib
import os
import pkgutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run only when named (`python -m bench stage_a_recall`, `python -m bench load`): slow, and a
# quality check or a minute of load rather than a figure that changes from run to run; and
# recall at 1M messages (`make bench-large`: about an hour and several GB, outside CI).
# `ingest` (10,000 messages, about 4 minutes) is part of `make bench`.
OPT_IN = {"stage_a_recall", "load", "recall_large", "peers", "recall_learned"}
# The throw-away database; BRAIN_BENCH_DATABASE lets two benchmarks run side by side.
BENCH_DATABASE = os.environ.get("BRAIN_BENCH_DATABASE", "brain_bench")
# The migrated, empty database each benchmark starts from (a copy of it, made in a second).
MIGRATED = f"{BENCH_DATABASE}_migrated"


def _admin(statements: list[str]) -> None:
    from urllib.parse import urlparse

    import psycopg

    from brainsite.embedded_db import embedded_url

    url = os.environ.get("DATABASE_URL") or embedded_url()
    admin_url = urlparse(url)._replace(path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def fresh_database(template: str = "") -> None:
    """Drop and create the bench database: empty, or a copy of `template`."""
    _admin(
        [
            f"DROP DATABASE IF EXISTS {BENCH_DATABASE} WITH (FORCE)",
            f"CREATE DATABASE {BENCH_DATABASE}" + (f" TEMPLATE {template}" if template else ""),
        ]
    )


def _disconnect() -> None:
    """Close every connection this process holds to the bench database (the request thread's
    and recall's helper threads'), and forget what this process cached about its data."""
    from django.db import connections

    from memory.caches import forget_process_caches
    from memory.recall.search import close_helper_connections

    close_helper_connections()
    connections.close_all()
    forget_process_caches()


def settle(timeout: float = 180.0) -> None:
    """Let the database finish what the previous benchmark left behind — dirty buffers to write,
    autovacuum of the tables it filled — so each benchmark measures only its own work."""
    from django.db import connection
    from django.db.utils import DatabaseError

    start = time.perf_counter()
    with connection.cursor() as cursor:
        try:
            cursor.execute("CHECKPOINT")
        except DatabaseError:  # an external database may not let us
            pass
        while time.perf_counter() - start < timeout:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
            if cursor.fetchone()[0] == 0:
                break
            time.sleep(1)
    spent = time.perf_counter() - start
    if spent > 1:
        print(f"   (waited {spent:.0f} s for the database to settle)", flush=True)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from bench import results

    if argv[:1] == ["merges"]:  # judges a file of candidates: no database, arguments of its own
        from bench.merges_eval import main as merges

        return merges(argv[1:])
    if argv[:1] == ["render"]:  # docs/PERFORMANCE.md from docs/perf-results/*.json
        return results.main()
    os.environ["DJANGO_SETTINGS_MODULE"] = "brainsite.settings_bench"
    fresh_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    _disconnect()
    _admin([f"DROP DATABASE IF EXISTS {MIGRATED}", f"CREATE DATABASE {MIGRATED} TEMPLATE {BENCH_DATABASE}"])
    names = [
        m.name[len("bench_") :]
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if m.name.startswith("bench_")
    ]
    wanted = argv or sorted(n for n in names if n not in OPT_IN)
    rows = []

    def report(name, value, unit, target="", note=""):
        rows.append((name, value, unit, target, note))
        print(f"  {name}: {results.shown(value, unit)}  (target {target}) {note}", flush=True)

    for n, name in enumerate(wanted):
        if n:
            # Each benchmark measures its own world: what an earlier one left (50,000 entries,
            # 100,000 memories …) would change both its speed and what it counts.
            _disconnect()
            fresh_database(template=MIGRATED)
        settle()
        print(f"== {name}", flush=True)
        start, first, load_before = time.perf_counter(), len(rows), results.load()
        module = importlib.import_module(f"bench.bench_{name}")
        module.run(report)
        print(f"   ({time.perf_counter() - start:.0f} s)", flush=True)
        if len(rows) > first:
            title = (module.__doc__ or name).strip().split("\n\n")[0].split(". ")[0].replace("\n", " ")
            # The settings the run was given are part of its command (BENCH_INGEST_MESSAGES=…).
            given = [
                f"{k}={v}"
                for k, v in sorted(os.environ.items())
                if k.startswith(("BRAIN_BENCH_", "BENCH_")) and k != "BRAIN_BENCH_DATABASE"
            ]
            written = results.record(
                getattr(module, "RESULTS_NAME", name),
                title=title,
                command=" ".join([*given, f"python -m bench {name}"]),
                rows=rows[first:],
                load_before=load_before,
            )
            print(f"   figures written to {written.relative_to(ROOT)}", flush=True)

    _disconnect()
    _admin([f"DROP DATABASE IF EXISTS {MIGRATED}"])
    table = ["| benchmark | result | target | note |", "|---|---|---|---|"]
    for name, value, unit, target, note in rows:
        table.append(f"| {name} | {results.shown(value, unit)} | {target} | {note} |")
    print()
    print("\n".join(table))
    print("\n`python -m bench render` rebuilds docs/PERFORMANCE.md from the figures written.")
    failed = [name for name, value, *_ in rows if value == "FAIL"]
    if failed:
        print("FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
