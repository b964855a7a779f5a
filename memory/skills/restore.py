"""Restore for skills and their enablement (registered with knowledge.restore.restorers in
MemoryConfig.ready); lessons are memories, restored by the memory restorer."""

from knowledge.audit.services import snapshot
from knowledge.errors import Invalid
from knowledge.models import AgentSkill, Skill
from knowledge.restore.restorers import Restorer, register_restorer


class SkillRestorer(Restorer):
    """A skill's title and base instructions come back as a new version. Skills are never
    deleted, so a creation cannot be restored (400, nothing written)."""

    object_type, model = "skill", Skill
    content_fields = ("name", "title", "instructions")
    derived_fields = ("id", "created_at", "updated_at", "version", "updated_by")

    def label(self, object_id, value):
        return f"skill {object_id}" + (f" “{value['name']}”" if value and value.get("name") else "")

    def scope(self, value):
        return "", ""

    def write(self, object_id, current, target, *, actor, fields, row=None):
        if target is None:
            raise Invalid(
                {
                    "events": f"Skill {object_id} was created by this event; skills are never deleted, so it cannot be undone."
                }
            )
        skill = row if row is not None else Skill.objects.get(pk=int(object_id))
        for field in fields:
            setattr(skill, field, target[field])
        skill.version += 1
        skill.updated_by = f"{actor.kind_label} {actor.name}"
        skill.save()
        return snapshot(skill)


class AgentSkillRestorer(Restorer):
    """Enabled or disabled; restoring the event that first enabled a skill disables it."""

    object_type, model = "agent_skill", AgentSkill
    content_fields = ("enabled",)
    derived_fields = (
        "id",
        "created_at",
        "updated_at",
        "updated_by",
        "agent_id",
        "skill_id",
        "overlay_change",
        "overlay_changed_at",
        "overlay_changed_by",
    )

    def label(self, object_id, value):
        return f"skill enablement {object_id}"

    def scope(self, value):
        return "self", ""

    def write(self, object_id, current, target, *, actor, fields, row=None):
        link = row if row is not None else AgentSkill.objects.get(pk=int(object_id))
        link.enabled = False if target is None else bool(target["enabled"])
        link.updated_by = f"{actor.kind_label} {actor.name}"
        link.save(update_fields=["enabled", "updated_by", "updated_at"])
        return snapshot(link)


def register() -> None:
    register_restorer(SkillRestorer())
    register_restorer(AgentSkillRestorer())
