"""Reads used by more than one view: principals and tokens."""

from knowledge.models import Agent, ApiToken


def agent_list():
    return Agent.objects.prefetch_related("tokens").order_by("name")


def token_list_for_agent(agent: Agent):
    return ApiToken.objects.filter(agent=agent).order_by("-created_at")
