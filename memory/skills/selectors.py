"""Reads of skills and overlays: what an agent receives when a skill loads (base instructions
followed by its overlay, within the overlay budget, rendered as compiled context renders it:
memory.recall.skills), the Skill experience summary, task outcomes, overlays over budget."""

from django.db.models import Count, Q

from knowledge.models import Agent, AgentSkill, Memory, Skill, TaskOutcome
from knowledge.tokens import count_tokens
from memory.recall.skills import lesson_tokens, overlay_budget_tokens, render_skill


def skill_list():
    return Skill.objects.all().order_by("name")


def agent_skills(agent: Agent) -> list[AgentSkill]:
    return list(AgentSkill.objects.filter(agent=agent).select_related("skill").order_by("skill__name"))


def overlay(agent: Agent, skill: Skill, *, statuses=(Memory.ACTIVE,)) -> list[Memory]:
    return list(
        Memory.objects.filter(owner=agent, skill=skill, status__in=statuses)
        .prefetch_related("sources")
        .order_by("position", "id")
    )


def skill_load(agent: Agent, skill: Skill, *, budget: int | None = None) -> dict:
    """What `agent` receives when `skill` loads: base instructions followed by its active
    overlay, with token counts (GET /api/agents/{agent}/skills/{skill})."""
    link = AgentSkill.objects.filter(agent=agent, skill=skill).first()
    lessons = overlay(agent, skill)
    overlay_budget = overlay_budget_tokens()
    one = render_skill(
        skill,
        [(m.pk, m.text, count_tokens(m.text), False) for m in lessons],
        budget if budget is not None else 10**9,
    )
    return {
        "agent": agent.name,
        "skill": skill.name,
        "title": skill.title,
        "version": skill.version,
        "enabled": bool(link and link.enabled),
        "text": one["text"],
        "tokens": one["tokens"],
        "base_tokens": one["base_tokens"],
        "overlay_tokens": one["overlay_tokens"],
        "overlay_budget_tokens": overlay_budget,
        "truncated": one["truncated"],
        "lessons": [
            {
                "id": m.pk,
                "text": m.text,
                "position": m.position,
                "version": m.version,
                "tokens": lesson_tokens(m.text),
                "author": f"{m.author_kind}:{m.author_name}",
                "sources": [{"kind": s.kind, "ref": s.ref} for s in m.sources.all()],
                "in_context": any(x["id"] == m.pk for x in one["lessons"]),
            }
            for m in lessons
        ],
    }


def outcome_list(*, agent: Agent | None = None, skill: Skill | None = None):
    qs = TaskOutcome.objects.select_related("agent", "skill").order_by("-created_at", "-id")
    if agent is not None:
        qs = qs.filter(agent=agent)
    if skill is not None:
        qs = qs.filter(skill=skill)
    return qs


def overlay_sizes(*, owner: Agent | None = None) -> dict[tuple[int, int], dict]:
    """{(agent id, skill id): {"active", "queued", "tokens"}} over live lessons, in one query
    (tokens of the active lessons, as context counts them)."""
    qs = Memory.objects.filter(skill__isnull=False, status__in=Memory.LIVE)
    if owner is not None:
        qs = qs.filter(owner=owner)
    sizes: dict[tuple[int, int], dict] = {}
    for owner_id, skill_id, status, text in qs.values_list("owner_id", "skill_id", "status", "text"):
        size = sizes.setdefault((owner_id, skill_id), {"active": 0, "queued": 0, "tokens": 0})
        size[status] += 1
        if status == Memory.ACTIVE:
            size["tokens"] += lesson_tokens(text)
    return sizes


def experience_summary(*, owner: Agent | None = None, recent_outcomes: int = 5) -> list[dict]:
    """One row per (agent, skill) that has been enabled or has lessons: enabled or not, lessons
    active and queued, tokens against the overlay budget, the last change and who made it, and
    the task outcomes behind it (count and the most recent). A few queries, whatever the count."""
    links = AgentSkill.objects.select_related("agent", "skill").order_by("agent__name", "skill__name")
    if owner is not None:
        links = links.filter(agent=owner)
    links = list(links)
    sizes = overlay_sizes(owner=owner)
    counts = {
        (r["agent_id"], r["skill_id"]): r["n"]
        for r in TaskOutcome.objects.filter(**({"agent": owner} if owner else {}))
        .values("agent_id", "skill_id")
        .annotate(n=Count("id"))
    }
    recent: dict[tuple[int, int], list] = {}
    if links:
        pairs = Q()
        for link in links:
            pairs |= Q(agent_id=link.agent_id, skill_id=link.skill_id)
        # The newest few outcomes per overlay, by a window function (one query).
        from django.db.models import F, Window
        from django.db.models.functions import RowNumber

        ranked = (
            TaskOutcome.objects.filter(pairs)
            .annotate(
                rank=Window(
                    RowNumber(),
                    partition_by=[F("agent_id"), F("skill_id")],
                    order_by=[F("created_at").desc(), F("id").desc()],
                )
            )
            .order_by("agent_id", "skill_id", "-created_at", "-id")
        )
        for outcome in ranked:
            if outcome.rank <= recent_outcomes:
                recent.setdefault((outcome.agent_id, outcome.skill_id), []).append(outcome)
    budget = overlay_budget_tokens()
    rows = []
    for link in links:
        key = (link.agent_id, link.skill_id)
        size = sizes.get(key, {"active": 0, "queued": 0, "tokens": 0})
        rows.append(
            {
                "agent": link.agent,
                "skill": link.skill,
                "enabled": link.enabled,
                "active": size["active"],
                "queued": size["queued"],
                "tokens": size["tokens"],
                "budget_tokens": budget,
                "over": size["tokens"] > budget,
                "last_change": link.overlay_change,
                "changed_at": link.overlay_changed_at,
                "changed_by": link.overlay_changed_by,
                "outcomes": counts.get(key, 0),
                "recent_outcomes": recent.get(key, []),
            }
        )
    return rows


def overlays_over_budget() -> list[dict]:
    """Overlays whose active lessons count more than BRAIN_OVERLAY_BUDGET_TOKENS (the budget was
    lowered, or people wrote past it): context compilation cuts them."""
    budget = overlay_budget_tokens()
    over = [(key, size) for key, size in overlay_sizes().items() if size["tokens"] > budget]
    if not over:
        return []
    agents = Agent.objects.in_bulk([k[0] for k, _ in over])
    skills = Skill.objects.in_bulk([k[1] for k, _ in over])
    return sorted(
        (
            {
                "agent": agents[a].name,
                "skill": skills[s].name,
                "tokens": size["tokens"],
                "budget_tokens": budget,
            }
            for (a, s), size in over
        ),
        key=lambda o: (o["agent"], o["skill"]),
    )
