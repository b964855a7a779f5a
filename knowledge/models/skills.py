import re

from django.db import models
from django.db.models import Q

from knowledge.models.principals import NAME_HELP


class Skill(models.Model):
    """How one kind of work is done: base instructions (Markdown) written by a person. An agent
    enables skills (AgentSkill); what an agent learnt doing that work is its overlay, the
    ordered `procedural` lesson memories attached to (agent, skill) through `Memory.skill`.
    An overlay never changes the base skill."""

    # The skills API's name rule (its SlugField and skill_create together), for every route that
    # names a skill (the agent file too): a name the console's <slug:> URLs can always hold.
    NAME_RULE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

    name = models.SlugField(max_length=64, unique=True, help_text=NAME_HELP)
    title = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    updated_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AgentSkill(models.Model):
    """Whether an agent has a skill enabled. A disabled skill's overlay stays stored and never
    enters the agent's context."""

    agent = models.ForeignKey("knowledge.Agent", on_delete=models.CASCADE, related_name="agent_skills")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="agent_skills")
    enabled = models.BooleanField(default=True)
    updated_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The overlay's last change (a lesson added, revised, edited, removed or reordered): what,
    # when and by whom ("agent copilot", "person adam", "dreaming run 12").
    overlay_change = models.CharField(max_length=40, blank=True)
    overlay_changed_at = models.DateTimeField(null=True, blank=True)
    overlay_changed_by = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["agent", "skill"]
        constraints = [models.UniqueConstraint(fields=["agent", "skill"], name="agent_skill_unique")]


class TaskOutcome(models.Model):
    """Evidence of how a task went — never of whether an answer was right. Immutable; cited by
    lessons as the source kind `task_outcome`, which never goes stale."""

    SUCCESS, FAILURE, RECOVERED, CORRECTED = "success", "failure", "recovered", "corrected"
    RESULTS = [(r, r) for r in (SUCCESS, FAILURE, RECOVERED, CORRECTED)]

    agent = models.ForeignKey("knowledge.Agent", on_delete=models.PROTECT, related_name="task_outcomes")
    skill = models.ForeignKey(Skill, on_delete=models.PROTECT, related_name="task_outcomes")
    conversation = models.ForeignKey(
        "knowledge.Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    task = models.CharField(max_length=500)
    result = models.CharField(max_length=10, choices=RESULTS)
    steps = models.JSONField(default=list, blank=True)
    correction = models.JSONField(null=True, blank=True)  # {"text", "by"}: what a person corrected
    external_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["agent", "skill", "-created_at"], name="outcome_agent_skill_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "external_id"],
                condition=~Q(external_id=""),
                name="outcome_external_id_unique",
            )
        ]

    def __str__(self) -> str:
        return f"task outcome {self.pk}"
