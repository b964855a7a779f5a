"""Task outcomes: what an agent reports about a task it did (result, steps, a person's
correction), the evidence skill lessons cite. Recorded once per external id."""

from django.db import IntegrityError, transaction

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.errors import Invalid
from knowledge.models import Agent, Conversation, Skill, TaskOutcome
from knowledge.principal import Principal
from memory.skills.services import (
    LESSON_STORE,
    MAX_CORRECTION,
    MAX_EXTERNAL_ID,
    MAX_STEP,
    MAX_STEPS,
    MAX_TASK,
    clean_text,
)


def _clean_steps(steps) -> list[str]:
    if steps is None:
        return []
    if not isinstance(steps, list | tuple):
        raise Invalid({"steps": "A list of short texts."})
    if len(steps) > MAX_STEPS:
        raise Invalid({"steps": f"At most {MAX_STEPS} steps."})
    out = []
    for step in steps:
        if not isinstance(step, str) or not step.strip():
            raise Invalid({"steps": "Every step is a non-empty string."})
        if len(step) > MAX_STEP:
            raise Invalid({"steps": f"A step has at most {MAX_STEP} characters."})
        out.append(step.strip())
    return out


def _clean_correction(correction) -> dict | None:
    if correction in (None, {}):
        return None
    if not isinstance(correction, dict) or set(correction) - {"text", "by"}:
        raise Invalid({"correction": "An object {text, by}: what a person corrected, and who."})
    return {
        "text": clean_text(correction.get("text"), "correction", max_length=MAX_CORRECTION),
        "by": clean_text(correction.get("by"), "correction", max_length=150, required=False),
    }


def outcome_record(
    *,
    actor: Principal,
    agent: Agent,
    skill: Skill,
    task: str,
    result: str,
    conversation: Conversation | None = None,
    steps=None,
    correction=None,
    external_id: str = "",
) -> tuple[TaskOutcome, bool]:
    """Record how a task went (evidence of the task, never of whether an answer was right).
    Idempotent by `external_id` per agent: sending it again returns the stored outcome and
    writes nothing. Returns (outcome, created)."""
    access.check_write(actor, owner=agent, store=LESSON_STORE)
    task = clean_text(task, "task", max_length=MAX_TASK)
    if result not in dict(TaskOutcome.RESULTS):
        raise Invalid({"result": "One of success, failure, recovered, corrected."})
    steps = _clean_steps(steps)
    correction = _clean_correction(correction)
    external_id = clean_text(external_id, "external_id", max_length=MAX_EXTERNAL_ID, required=False)
    if conversation is not None and conversation.agent_id != agent.pk:
        raise Invalid({"conversation": f"Conversation {conversation.pk} is not {agent.name}'s."})
    if external_id:
        found = TaskOutcome.objects.filter(agent=agent, external_id=external_id).first()
        if found is not None:
            return found, False
    try:
        with transaction.atomic():
            outcome = TaskOutcome.objects.create(
                agent=agent,
                skill=skill,
                conversation=conversation,
                task=task,
                result=result,
                steps=steps,
                correction=correction,
                external_id=external_id,
            )
            audit_record(
                "task_outcome.recorded",
                actor=actor,
                store=LESSON_STORE,
                owner=agent.name,
                object_type="task_outcome",
                object_ids=[outcome.pk],
                data={"skill": skill.name, "result": result, "external_id": external_id},
            )
    except IntegrityError:  # the same external_id arrived twice at once: the other one won
        return TaskOutcome.objects.get(agent=agent, external_id=external_id), False
    return outcome, True
