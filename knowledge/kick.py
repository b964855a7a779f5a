"""Queueing a sweep job after writes without queueing one per write: at most one per `seconds`
per process, and the queued run lingers a little past that window, so every write committed
meanwhile is in it and a write after it queues the next. Used by the embedding backlog's kick
and the contradictions sweep."""

from django.conf import settings
from django.core.cache import cache


def task_kick(func: str, *, name: str, seconds: int = 5) -> None:
    """Queue django-q2 task `func` (its `linger_seconds` set to seconds + 1) unless this process
    queued it in the last `seconds`. Never runs it in the caller's process unless the cluster
    runs tasks synchronously (tests; no linger then)."""
    if not cache.add(f"brain:kick:{func}", 1, timeout=seconds):
        return
    from django_q.tasks import async_task

    linger = 0 if settings.Q_CLUSTER.get("sync") else seconds + 1
    async_task(func, linger_seconds=linger, task_name=f"{name} (kick)")
