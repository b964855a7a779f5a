"""How to judge the worker from what it records. The worker's sentinel (the process that guards
its pool, `python -m brainsite.ops.worker`) writes the `worker` beat itself every
BRAIN_WORKER_HEARTBEAT_SECONDS while its pool, pusher and monitor live, so a busy worker still
beats; three missed beats mean the worker is gone or frozen. Each pool process writes the `job`
beat when it starts a job: jobs waiting longer than a job may run (Q_CLUSTER["timeout"]) while
none started mean a worker that lives but takes no work."""

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

MISSED_BEATS = 3


def worker_stale_after() -> timedelta:
    return timedelta(seconds=MISSED_BEATS * settings.BRAIN_WORKER_HEARTBEAT_SECONDS)


def jobs_stuck_after() -> timedelta:
    """No job started for this long while jobs wait: every running job ends (or is killed) within
    the queue's timeout, so a free worker would have taken one."""
    return timedelta(seconds=settings.Q_CLUSTER["timeout"]) + worker_stale_after()


def worker_state(
    beat: datetime | None,
    now: datetime | None = None,
    *,
    oldest_waiting: datetime | None = None,
    job_started: datetime | None = None,
) -> str:
    """ "ok"; "never" (no beat yet); "stale" (the last beat is too old); or "stuck" (the worker
    beats, but jobs have waited longer than jobs_stuck_after and none started meanwhile)."""
    now = now or timezone.now()
    if beat is None:
        return "never"
    if now - beat > worker_stale_after():
        return "stale"
    limit = jobs_stuck_after()
    if oldest_waiting and now - oldest_waiting > limit and (job_started is None or now - job_started > limit):
        return "stuck"
    return "ok"


PROBLEMS = {
    "never": "the worker has never beaten",
    "stale": "the worker's heartbeat is stale",
    "stuck": "jobs wait and the worker has started none",
}
