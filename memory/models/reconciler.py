"""The reconciler's own rows: links between memories, and one row per reconciler run."""

from django.db import models


class MemoryLink(models.Model):
    """One direction of a link between two memories of one store: `memory` → `neighbour`, with
    the cosine similarity of their vectors. A link is always written in both directions, by the
    plan that made it; reverting that plan removes exactly its links."""

    memory = models.ForeignKey("knowledge.Memory", on_delete=models.CASCADE, related_name="links")
    neighbour = models.ForeignKey("knowledge.Memory", on_delete=models.CASCADE, related_name="+")
    similarity = models.FloatField()
    plan = models.ForeignKey(
        "memory.ConsolidationPlan", null=True, blank=True, on_delete=models.SET_NULL, related_name="links"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["memory", "-similarity", "neighbour"]
        constraints = [
            models.UniqueConstraint(fields=["memory", "neighbour"], name="memory_link_once"),
            models.CheckConstraint(
                name="memory_link_not_self", condition=~models.Q(memory=models.F("neighbour"))
            ),
        ]
        indexes = [models.Index(fields=["plan"])]


class ReconcilerRun(models.Model):
    """One reconciler pass over one agent's memories: why it ran, the plan it wrote (its change
    set, applied, proposed or empty), and what it counted."""

    TURNS, IDLE, MANUAL, EXPIRY = "turns", "idle", "manual", "expiry"
    TRIGGERS = [(t, t) for t in (TURNS, IDLE, MANUAL, EXPIRY)]
    RUNNING, DONE, SKIPPED, FAILED = "running", "done", "skipped", "failed"
    STATES = [(s, s) for s in (RUNNING, DONE, SKIPPED, FAILED)]

    agent = models.ForeignKey("knowledge.Agent", on_delete=models.CASCADE, related_name="reconciler_runs")
    trigger = models.CharField(max_length=8, choices=TRIGGERS)
    state = models.CharField(max_length=8, choices=STATES, default=RUNNING)
    plan = models.ForeignKey(
        "memory.ConsolidationPlan", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    counts = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    turns = models.PositiveIntegerField(default=0)  # turns seen since the run before
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["agent", "-started_at"])]

    def __str__(self) -> str:
        return f"reconciler run {self.pk} of {self.agent_id} ({self.state})"
