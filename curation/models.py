from django.db import models


class DistillerRun(models.Model):
    """The distiller's work on one finished conversation: a conversation is distilled once.
    A failed attempt (model unavailable, invalid output) may be retried a few times."""

    PENDING, RUNNING, DONE, FAILED, SKIPPED = "pending", "running", "done", "failed", "skipped"
    STATES = [(s, s) for s in (PENDING, RUNNING, DONE, FAILED, SKIPPED)]
    MAX_ATTEMPTS = 3

    conversation = models.OneToOneField(
        "knowledge.Conversation", on_delete=models.CASCADE, related_name="distiller_run"
    )
    state = models.CharField(max_length=10, choices=STATES, default=PENDING, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    memory_ids = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)  # why it failed or was skipped
    usage_id = models.BigIntegerField(null=True, blank=True)  # the ModelUsage row of the last attempt
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"distiller run for conversation {self.conversation_id} ({self.state})"
