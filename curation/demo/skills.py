"""Demo data for skills: one skill written by an admin, enabled for both agents, and the
scribe's experience with it (two task outcomes and the lessons they taught)."""

from knowledge.models import Skill
from knowledge.principal import Principal
from memory.skills import outcomes, services

ADMIN = Principal(kind="person", name="demo-admin", role="admin")  # skills are written by people
INSTRUCTIONS = """Write meeting notes people can act on.

- Start with the decisions, then the action items (owner, due date), then open questions.
- Quote numbers and dates exactly as they were said.
- Keep it under 200 words."""


def seed(*, agents) -> bool:
    if Skill.objects.filter(name="meeting-notes").exists():
        return False
    skill = services.skill_create(
        actor=ADMIN, name="meeting-notes", title="Meeting notes", instructions=INSTRUCTIONS
    )
    for agent in agents.values():
        services.skill_enable(actor=ADMIN, agent=agent, skill=skill, enabled=True)
    scribe = agents["scribe"]
    as_scribe = Principal.for_agent(scribe)
    lessons = [
        (
            "corrected",
            "Notes for the Q3 planning call",
            {"text": "Action items need a due date, not 'soon'", "by": "alice"},
            "Give every action item a due date; if none was said, write 'due date: not agreed'.",
        ),
        (
            "recovered",
            "Notes for the vendor call with two dial-ins",
            None,
            "When two people share a dial-in, ask who spoke before attributing a decision.",
        ),
    ]
    for result, task, correction, lesson in lessons:
        outcome, _ = outcomes.outcome_record(
            actor=as_scribe,
            agent=scribe,
            skill=skill,
            task=task,
            result=result,
            correction=correction,
            external_id=f"demo-{result}",
        )
        services.lesson_add(
            actor=as_scribe,
            agent=scribe,
            skill=skill,
            text=lesson,
            sources=[{"kind": "task_outcome", "ref": str(outcome.pk)}],
        )
    return True
