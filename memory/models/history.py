from django.db import models


class ConversationSummary(models.Model):
    """The rolling summary of a conversation's earlier turns and its cursor: the last message
    folded in, by (ts, id), the order turns are read in. Each compilation folds only the turns
    after the cursor that have left the verbatim window, so the summary is advanced, never
    recomputed. `method` says how the last fold was made (model or extractive) and `note` why
    the model was not used when it was not."""

    MODEL, EXTRACTIVE = "model", "extractive"

    conversation = models.OneToOneField(
        "knowledge.Conversation", on_delete=models.CASCADE, related_name="history_summary"
    )
    text = models.TextField(blank=True)
    tokens = models.PositiveIntegerField(default=0)
    through_ts = models.DateTimeField(null=True, blank=True)
    through_message = models.BigIntegerField(null=True, blank=True)
    turns = models.PositiveIntegerField(default=0)  # turns folded in
    skipped = models.PositiveIntegerField(default=0)  # earlier turns left out (over a fold's limit)
    method = models.CharField(max_length=12, blank=True)
    version = models.CharField(max_length=32, blank=True)
    note = models.CharField(max_length=300, blank=True)
    model_usage = models.BigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"history summary of conversation {self.conversation_id}"
