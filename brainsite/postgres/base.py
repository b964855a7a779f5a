"""Django's PostgreSQL backend, with a persistent connection's health check done by looking at
the connection instead of asking the server.

With CONN_HEALTH_CHECKS, Django sends `SELECT 1` before the first query of every request that
reuses a connection: one more round trip per API call, ≈ 0.4 ms of CPU (web and database
together) on every POST /api/memory — 7 % of the write. A connection that sits idle between
requests has nothing to read; when the server closes it (a restart, an idle timeout, a
terminated backend) its socket turns readable (the termination notice, then end of file) or
libpq already knows it is gone. Checking that is a poll of the socket, not a query. A request
that failed on the connection is still checked by Django's full `is_usable()` when it ends.

It also counts its commits — those that succeeded, and those whose COMMIT got no answer (the
connection broke: stored or not, no one can tell) — so a request that fails because the
database went away can say whether it had already stored something
(brainsite.ops.errors.database_unavailable) instead of always claiming nothing was written."""

import select

import psycopg
from django.db import InterfaceError, OperationalError
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresDatabaseWrapper
from psycopg import pq


class DatabaseWrapper(PostgresDatabaseWrapper):
    commits = 0
    commits_unanswered = 0

    def _commit(self):
        try:
            result = super()._commit()
        except (OperationalError, InterfaceError):  # the connection broke (psycopg's, as Django raises it)
            self.commits_unanswered += 1
            raise
        if self.connection is not None:
            self.commits += 1
        return result

    def close_if_health_check_failed(self):
        if self.pool or self.connection is None or not self.health_check_enabled or self.health_check_done:
            return
        if not idle_connection_healthy(self.connection):
            self.close()
        self.health_check_done = True


def idle_connection_healthy(connection) -> bool:
    """True when an idle psycopg connection is open, outside any transaction and has nothing
    waiting to be read (an idle server never speaks first, except to say it is closing)."""
    pgconn = connection.pgconn
    if (
        connection.closed
        or pgconn.status != pq.ConnStatus.OK
        or pgconn.transaction_status != pq.TransactionStatus.IDLE
    ):
        return False
    try:
        poller = select.poll()
        poller.register(pgconn.socket, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError, psycopg.OperationalError):  # the socket is gone
        return False
