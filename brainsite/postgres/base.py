"""Django's PostgreSQL backend, with one change: a persistent connection is health-checked at
the start of a request (a `SELECT 1` round trip, CONN_HEALTH_CHECKS) only when it has been idle
for HEALTH_CHECK_AFTER_IDLE seconds.

A busy web worker's connection was just used by its previous request, so the check is almost
always wasted work — measured at about a tenth of a memory write's time under load. A connection
that went bad between two close requests (a database restart) fails that one request; Django then
closes it at the request's end (errors_occurred) and the next request connects afresh — the same
as any connection that breaks during a request."""

import time

from django.db.backends.postgresql import base

HEALTH_CHECK_AFTER_IDLE = 2.0  # seconds


class DatabaseWrapper(base.DatabaseWrapper):
    _last_used = float("-inf")  # when a cursor was last opened on this connection

    def close_if_health_check_failed(self):
        recent = time.monotonic() - self._last_used < HEALTH_CHECK_AFTER_IDLE
        if self.connection is not None and not self.health_check_done and recent:
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _cursor(self, name=None):
        cursor = super()._cursor(name)
        self._last_used = time.monotonic()
        return cursor
