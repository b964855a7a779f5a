"""Reads used by more than one view: principals and tokens."""

from knowledge.models import Agent, ApiToken, Heartbeat


def agent_list():
    return Agent.objects.prefetch_related("tokens").order_by("name")


def worker_signals() -> dict:
    """What knowledge.health.worker_state judges the worker by: its beat, when a job last
    started, and since when the oldest job has waited (django-q2's ORM broker: a waiting task's
    `lock` is when it became due)."""
    from django.conf import settings
    from django.utils import timezone
    from django_q.models import OrmQ

    beats = dict(Heartbeat.objects.filter(name__in=("worker", "job")).values_list("name", "beat_at"))
    queue = OrmQ.objects.using(settings.Q_CLUSTER.get("orm", "default"))
    oldest = queue.filter(lock__lte=timezone.now()).order_by("lock").values_list("lock", flat=True).first()
    return {"beat": beats.get("worker"), "job_started": beats.get("job"), "oldest_waiting": oldest}


def token_list_for_agent(agent: Agent):
    return ApiToken.objects.filter(agent=agent).order_by("-created_at")


def console_users():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.prefetch_related("groups").order_by("username")


def token_list(*, kind: str = ""):
    """Every API token, newest first, with its owner; `kind` (agent | integration | user) narrows."""
    qs = ApiToken.objects.select_related("agent", "user", "integration").order_by("-created_at", "-id")
    if kind in ("agent", "integration", "user"):
        qs = qs.filter(**{f"{kind}__isnull": False})
    return qs
