"""Reads that may go to a read replica (DATABASE_REPLICA_URL), and everything else on the primary.

Only work that is read-only and may be a moment behind opts in, with `@replica_reads` on its
view or function: recall (REST and MCP), the memory list, Status. Inside it the
router (`ReplicaRouter`, settings.DATABASE_ROUTERS) sends ORM reads to the replica, and code
that runs raw SQL takes its connection from `read_connection()`. Everything else — every write,
every read outside those paths (so the page a client opens right after its write, a service's
read-modify-write), and any read inside a transaction on the primary — stays on the primary.

An opted-in call that finds nothing or is refused (NotFound, Refused, 404: the conversation or
grant it names may be a moment old and not replayed yet) is run again on the primary, which
decides. When the replica fails (stopped, unreachable, a broken connection), the call is run
again on the primary and the replica is left alone for REPLICA_RETRY_SECONDS, so the service
keeps answering; `replica_lag_seconds()` (Status, /metrics) shows it as not answering."""

import functools
import logging
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, OperationalError, connections
from django.http import Http404

from knowledge.errors import NotFound, Refused

REPLICA = "replica"
REPLICA_RETRY_SECONDS = 30.0
logger = logging.getLogger("brain.replica")

_reads_on: ContextVar[str] = ContextVar("brain_read_alias", default=DEFAULT_DB_ALIAS)
_down_until = 0.0
_down_lock = threading.Lock()


def replica_configured() -> bool:
    return REPLICA in connections.databases


def _replica_usable() -> bool:
    return replica_configured() and time.monotonic() >= _down_until


def read_alias() -> str:
    """Where a read made now goes: the replica inside `replica_reads` (unless it is resting after
    a failure, or the primary's connection is inside a transaction: such a read must see that
    transaction's writes), else the primary."""
    alias = _reads_on.get()
    if alias == REPLICA and (connections[DEFAULT_DB_ALIAS].in_atomic_block or not _replica_usable()):
        return DEFAULT_DB_ALIAS
    return alias


def read_connection():
    """The connection for a raw read (`read_connection().cursor()`), chosen as read_alias()."""
    return connections[read_alias()]


@contextmanager
def reads_on(alias: str):
    """Route this context's reads to `alias` (what a helper thread is handed from its caller)."""
    token = _reads_on.set(alias)
    try:
        yield
    finally:
        _reads_on.reset(token)


def _mark_down(exc: Exception) -> None:
    global _down_until
    with _down_lock:
        _down_until = time.monotonic() + REPLICA_RETRY_SECONDS
    try:
        connections[REPLICA].close()
    except DatabaseError:
        pass
    logger.warning("read replica failed, reading from the primary for %.0f s: %s", REPLICA_RETRY_SECONDS, exc)


def replica_reads(func):
    """Let `func`'s reads go to the replica; for a view, only a GET/HEAD/POST-that-only-reads is
    decorated (a collection view decorates GET only: see `safe_only`). A database failure on the
    replica runs `func` once more on the primary."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not _replica_usable() or _reads_on.get() == REPLICA:
            return func(*args, **kwargs)
        try:
            with reads_on(REPLICA):
                return func(*args, **kwargs)
        except (NotFound, Refused, Http404):
            # Perhaps only not replayed yet (a conversation started a moment ago, on the
            # primary): the primary decides.
            return func(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            if not _replica_failed():
                raise
            _mark_down(exc)
            return func(*args, **kwargs)

    return wrapper


def safe_only(func):
    """`replica_reads` for a view that also writes: only its GET and HEAD requests read from the
    replica."""
    routed = replica_reads(func)

    @functools.wraps(func)
    def wrapper(request, *args, **kwargs):
        if request.method in ("GET", "HEAD"):
            return routed(request, *args, **kwargs)
        return func(request, *args, **kwargs)

    return wrapper


def _replica_failed() -> bool:
    """After an error inside replica_reads: was it the replica? (Its connection is broken or it
    does not answer a ping; a primary failure is left to the primary's 503 handling.)"""
    wrapper = connections[REPLICA]
    if wrapper.connection is None:
        return True  # it never connected, or was closed on the error
    try:
        return not wrapper.is_usable()
    except DatabaseError:
        return True


class ReplicaRouter:
    """settings.DATABASE_ROUTERS when DATABASE_REPLICA_URL is set."""

    def db_for_read(self, model, **hints):
        return read_alias()

    def db_for_write(self, model, **hints):
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints):
        return True

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == DEFAULT_DB_ALIAS


def replica_lag_seconds() -> float | None:
    """How far the replica is behind: 0 when it has replayed everything it received, else the
    age of the last transaction it replayed; None when it does not answer (or is not one)."""
    if not replica_configured():
        return None
    try:
        with connections[REPLICA].cursor() as cur:
            cur.execute(
                "SELECT pg_is_in_recovery(), CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() "
                "THEN 0 ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END"
            )
            recovering, lag = cur.fetchone()
    except DatabaseError:
        try:
            connections[REPLICA].close()
        except DatabaseError:
            pass
        return None
    return float(lag) if recovering else None
