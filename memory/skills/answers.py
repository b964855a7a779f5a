"""What a skills call answers — a lesson added, an outcome reported — from validated input, for
the REST API and the MCP server alike (siblings over this module, neither importing the other)."""

from knowledge import names
from knowledge.models import Agent, Memory
from memory.skills import services
from memory.skills.outcomes import outcome_record
from memory.skills.serializers import lesson_out, outcome_out


def lesson_loaded(lesson: Memory) -> dict:
    """A lesson's JSON, read again with its owner, skill and sources."""
    lesson = Memory.objects.select_related("owner", "skill").prefetch_related("sources").get(pk=lesson.pk)
    return lesson_out(lesson)


def experience_add_for(principal, agent: Agent, skill, data: dict) -> dict:
    """Add a lesson from validated `ExperienceIn` data (the API and the MCP server)."""
    lesson = services.lesson_add(
        actor=principal,
        agent=agent,
        skill=skill,
        text=data["lesson"],
        sources=[dict(s) for s in data["sources"]],
        revises=data["revises"],
    )
    return lesson_loaded(lesson)


def outcome_report(principal, data: dict) -> tuple[dict, bool]:
    """Record a task outcome from validated `OutcomeIn` data (the names it carries resolved by
    `names.outcome_target`). Returns the outcome and whether it was new."""
    target = names.outcome_target(
        principal, skill=data["skill"], agent=data.get("agent"), conversation=data["conversation"]
    )
    outcome, created = outcome_record(
        actor=principal,
        agent=target.agent,
        skill=target.skill,
        conversation=target.conversation,
        task=data["task"],
        result=data["result"],
        steps=data["steps"],
        correction=dict(data["correction"]) if data["correction"] else None,
        external_id=data["external_id"],
    )
    return outcome_out(outcome), created
