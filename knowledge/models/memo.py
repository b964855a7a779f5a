from django.db import models


class PinnedMemo(models.Model):
    """An agent's pinned memo: a few rules that must apply on every turn, within a fixed token
    budget (BRAIN_MEMO_BUDGET_TOKENS). Admins edit it; Dreaming stage B compacts it. Every
    change is a new version, audited with a revision so it can be restored."""

    agent = models.OneToOneField("knowledge.Agent", on_delete=models.CASCADE, related_name="memo")
    text = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=0)
    updated_by_kind = models.CharField(max_length=16, blank=True)
    updated_by_name = models.CharField(max_length=150, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"memo of {self.agent_id}"
