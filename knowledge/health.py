"""How fresh the worker's heartbeat must be. The worker beats every
BRAIN_WORKER_HEARTBEAT_SECONDS (`python -m brainsite.ops.worker` queues the beat through the
broker, so a beat proves that jobs are taken and run); three missed beats mean no job runs."""

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

MISSED_BEATS = 3


def worker_stale_after() -> timedelta:
    return timedelta(seconds=MISSED_BEATS * settings.BRAIN_WORKER_HEARTBEAT_SECONDS)


def worker_state(beat: datetime | None, now: datetime | None = None) -> str:
    """ "ok" (a beat within the allowance), "stale" (the last beat is too old) or "never"."""
    if beat is None:
        return "never"
    return "ok" if (now or timezone.now()) - beat <= worker_stale_after() else "stale"
