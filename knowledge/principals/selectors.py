"""Reads used by more than one view: principals and tokens."""

from knowledge.models import Agent, ApiToken, Heartbeat


def agent_list():
    return Agent.objects.prefetch_related("tokens").order_by("name")


def worker_beat():
    """When the worker last beat (None: never); `knowledge.health` judges it."""
    return Heartbeat.objects.filter(name="worker").values_list("beat_at", flat=True).first()


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
