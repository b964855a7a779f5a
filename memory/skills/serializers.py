"""Input and output serializers of the skills API. They parse and render; the services decide.
Every input serializer refuses fields it does not know (a misspelt `lesosn` is a 400, not
silently ignored)."""

from rest_framework import serializers

from knowledge.models import Memory, MemorySource, Skill, TaskOutcome
from knowledge.web import StrictCharField, StrictSerializer
from memory.skills import services


class SkillCreateIn(StrictSerializer):
    name = serializers.SlugField(max_length=64)
    title = StrictCharField(max_length=services.MAX_TITLE)
    instructions = StrictCharField(
        max_length=services.MAX_INSTRUCTIONS,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
    )


class SkillUpdateIn(StrictSerializer):
    title = StrictCharField(max_length=services.MAX_TITLE, required=False)
    instructions = StrictCharField(
        max_length=services.MAX_INSTRUCTIONS, required=False, allow_blank=True, trim_whitespace=False
    )
    version = serializers.IntegerField(
        required=False, min_value=1, help_text="The version you edited; 409 if it changed meanwhile."
    )
    reason = StrictCharField(max_length=services.MAX_REASON, required=False, allow_blank=True, default="")


class EnableIn(StrictSerializer):
    enabled = serializers.BooleanField()

    def to_internal_value(self, data):
        if isinstance(data, dict) and "enabled" in data and not isinstance(data["enabled"], bool):
            raise serializers.ValidationError({"enabled": ["Must be true or false."]})
        return super().to_internal_value(data)


class SourceIn(StrictSerializer):
    kind = serializers.ChoiceField(choices=MemorySource.KINDS)
    ref = serializers.CharField(max_length=300)


class ExperienceIn(StrictSerializer):
    lesson = StrictCharField(max_length=services.MAX_LESSON, help_text="One reusable working lesson.")
    sources = SourceIn(
        many=True,
        max_length=services.MAX_SOURCES,
        help_text="At least one task outcome, message or conversation of this agent.",
    )
    revises = serializers.IntegerField(
        required=False,
        min_value=1,
        allow_null=True,
        default=None,
        help_text="The id of the lesson this replaces.",
    )


class CorrectionIn(StrictSerializer):
    text = StrictCharField(max_length=services.MAX_CORRECTION)
    by = StrictCharField(max_length=150, required=False, allow_blank=True, default="")


class OutcomeIn(StrictSerializer):
    agent = serializers.SlugField(max_length=64, required=False, help_text="Default: the agent of the token.")
    skill = serializers.SlugField(max_length=64)
    conversation = serializers.IntegerField(required=False, min_value=1, allow_null=True, default=None)
    task = StrictCharField(max_length=services.MAX_TASK)
    result = serializers.ChoiceField(choices=[r for r, _ in TaskOutcome.RESULTS])
    steps = serializers.ListField(
        child=StrictCharField(max_length=services.MAX_STEP),
        required=False,
        max_length=services.MAX_STEPS,
        default=list,
    )
    correction = CorrectionIn(required=False, allow_null=True, default=None)
    external_id = StrictCharField(
        max_length=services.MAX_EXTERNAL_ID, required=False, allow_blank=True, default=""
    )


class OutcomeQuery(StrictSerializer):
    agent = serializers.SlugField(max_length=64, required=False)
    skill = serializers.SlugField(max_length=64, required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)


class LessonEditIn(StrictSerializer):
    text = StrictCharField(max_length=services.MAX_LESSON)
    reason = StrictCharField(max_length=services.MAX_REASON)


class ReasonIn(StrictSerializer):
    reason = StrictCharField(max_length=services.MAX_REASON)


class OrderIn(StrictSerializer):
    order = serializers.ListField(child=serializers.IntegerField(min_value=1), max_length=500)


def skill_out(skill: Skill) -> dict:
    return {
        "name": skill.name,
        "title": skill.title,
        "instructions": skill.instructions,
        "version": skill.version,
        "updated_by": skill.updated_by,
        "created_at": skill.created_at,
        "updated_at": skill.updated_at,
    }


def outcome_out(outcome: TaskOutcome) -> dict:
    return {
        "id": outcome.pk,
        "agent": outcome.agent.name,
        "skill": outcome.skill.name,
        "conversation": outcome.conversation_id,
        "task": outcome.task,
        "result": outcome.result,
        "steps": outcome.steps,
        "correction": outcome.correction,
        "external_id": outcome.external_id,
        "created_at": outcome.created_at,
    }


def lesson_out(lesson: Memory) -> dict:
    return {
        "id": lesson.pk,
        "agent": lesson.owner.name,
        "skill": lesson.skill.name if lesson.skill_id else None,
        "text": lesson.text,
        "status": lesson.status,
        "queue_reason": lesson.queue_reason,
        "status_reason": lesson.status_reason,
        "position": lesson.position,
        "version": lesson.version,
        "supersedes": lesson.supersedes_id,
        "author": f"{lesson.author_kind}:{lesson.author_name}",
        "sources": [{"kind": s.kind, "ref": s.ref} for s in lesson.sources.all()],
        "created_at": lesson.created_at,
        "updated_at": lesson.updated_at,
    }
