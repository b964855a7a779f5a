"""How many calls Brain has in flight to one model server: at most BRAIN_MODEL_ENDPOINT_SLOTS
at a time per endpoint (0: no limit), across every worker and process. A server with one slot
(llama-cpp-python's) answers one request at a time and queues the rest, so a call sent behind
another spends its own timeout waiting in the server's queue; here it waits for a free slot
first, that wait is measured (`waited_ms` on its usage row), and its timeout starts only once
it is sent. A slot is a PostgreSQL session advisory lock, so a process that dies frees it.

The background reachability check asks `slots_taken` before it calls a silent server
unreachable: a server Brain is waiting on is busy, not down."""

import contextlib
import time
import zlib

from django.conf import settings
from django.db import connection

SLOT_NAMESPACE = 7008  # pg advisory lock namespace (budgets use 7007)
POLL_SECONDS = 0.25


class NoFreeSlot(Exception):
    """Every slot of the endpoint stayed taken for BRAIN_MODEL_SLOT_WAIT_SECONDS."""


def _keys(base_url: str) -> list[int]:
    slots = settings.BRAIN_MODEL_ENDPOINT_SLOTS
    return [zlib.crc32(f"{base_url}#{i}".encode()) & 0x7FFFFFFF for i in range(slots)]


@contextlib.contextmanager
def endpoint_slot(base_url: str):
    """Hold one of the endpoint's slots for the block; yields the seconds waited for it. Raises
    NoFreeSlot when none came free within BRAIN_MODEL_SLOT_WAIT_SECONDS."""
    keys = _keys(base_url)
    if not keys:
        yield 0.0
        return
    started = time.monotonic()
    deadline = started + settings.BRAIN_MODEL_SLOT_WAIT_SECONDS
    held = None
    with connection.cursor() as cursor:
        while held is None:
            for key in keys:
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [SLOT_NAMESPACE, key])
                if cursor.fetchone()[0]:
                    held = key
                    break
            else:
                if time.monotonic() >= deadline:
                    raise NoFreeSlot(
                        f"busy: all {len(keys)} of the endpoint's slots stayed taken for "
                        f"{settings.BRAIN_MODEL_SLOT_WAIT_SECONDS:g} s"
                    )
                time.sleep(POLL_SECONDS)
    try:
        yield time.monotonic() - started
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [SLOT_NAMESPACE, held])


def slots_taken(base_url: str) -> int:
    """How many of the endpoint's slots a call holds now (any process)."""
    keys = _keys(base_url)
    if not keys:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s AND objid = ANY(%s) AND objsubid = 2",
            [SLOT_NAMESPACE, keys],
        )
        return cursor.fetchone()[0]
