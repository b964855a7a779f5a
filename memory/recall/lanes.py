"""Lanes: a few worker threads, each with its own database connection, so the routes of one
memory_search run side by side instead of one after another (and the query is embedded while
the keyword routes run).

A search's routes are independent read-only queries; on PostgreSQL each runs in its own backend,
so two lanes plus the request's own thread use both cores of a small machine. The lanes are
started lazily in each process (after a fork, new ones), keep their connections open between
searches (a fresh connection costs more than a route), and are used only when the caller is not
inside a transaction: work inside one (the eval gate compiling a context within
`memory_activate`, a test's transaction) must see its own uncommitted rows, so it runs the
routes in order on its own connection. `BRAIN_RECALL_LANES=0` switches lanes off."""

import atexit
import os
import queue
import threading
from concurrent.futures import Future

from django.conf import settings
from django.db import connection, transaction

_lock = threading.Lock()
_state = {"pid": None, "lanes": [], "jobs": None}


def lane_count() -> int:
    return max(0, int(getattr(settings, "BRAIN_RECALL_LANES", 2) or 0))


def available() -> bool:
    """Whether this search may fan out: lanes configured, and no open transaction whose rows
    the lanes' connections could not see."""
    return lane_count() > 0 and not connection.in_atomic_block


class _Lane(threading.Thread):
    """Takes jobs from the queue all lanes share, so a job goes to whichever lane is free."""

    def __init__(self, n: int, jobs: queue.SimpleQueue):
        super().__init__(name=f"recall-lane-{n}", daemon=True)
        self.jobs = jobs

    def run(self):
        while True:
            job = self.jobs.get()
            if job is None:
                connection.close()
                return
            future, setup_sql, fn = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                connection.close_if_unusable_or_obsolete()
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(setup_sql)
                    result = fn()
                future.set_result(result)
            except BaseException as exc:  # handed to the caller, who re-raises it
                if connection.connection is not None and not connection.is_usable():
                    connection.close()
                future.set_exception(exc)


def _jobs() -> queue.SimpleQueue:
    with _lock:
        if _state["pid"] != os.getpid():  # first use in this process, or a forked child
            _state.update(pid=os.getpid(), lanes=[], jobs=queue.SimpleQueue())
        while len(_state["lanes"]) < lane_count():
            lane = _Lane(len(_state["lanes"]), _state["jobs"])
            lane.start()
            _state["lanes"].append(lane)
        return _state["jobs"]


def submit(setup_sql: str, fn) -> Future:
    """Run `fn()` on a free lane, in its own transaction, after `setup_sql` (the search's
    SET LOCAL settings). The future holds its result or its exception."""
    future: Future = Future()
    _jobs().put((future, setup_sql, fn))
    return future


def close_lanes() -> None:
    """Stop this process's lanes and close their connections (tests, before the test database
    is dropped; process exit)."""
    with _lock:
        lanes = _state["lanes"] if _state["pid"] == os.getpid() else []
        jobs = _state["jobs"]
        _state["lanes"] = []
    for _ in lanes:
        jobs.put(None)  # each lane takes one and stops
    for lane in lanes:
        lane.join(timeout=10)


atexit.register(close_lanes)
