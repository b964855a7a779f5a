"""Webhooks that receive the memory event feed, and the log of every delivery to them."""

from django.db import models


class Webhook(models.Model):
    """An endpoint an admin registered for some memory event types. `cursor` is the feed position
    (see knowledge.events.feed) up to which its deliveries have been queued; a new webhook starts
    at the feed's head. The secret signs every body and is never shown again."""

    url = models.URLField(max_length=500)
    events = models.JSONField(default=list)  # event types, e.g. ["memory.written", "memory.stale"]
    secret = models.CharField(max_length=200)
    active = models.BooleanField(default=True)
    cursor = models.CharField(max_length=64, default="0-0")
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.url}"


class WebhookDelivery(models.Model):
    """One event for one webhook: the exact body sent (signed as stored, so every retry sends the
    same bytes), its attempts and their outcome."""

    PENDING, SENDING, DELIVERED, FAILED = "pending", "sending", "delivered", "failed"
    STATES = [(s, s) for s in (PENDING, SENDING, DELIVERED, FAILED)]

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    cursor = models.CharField(max_length=64)  # the event's position in the feed
    event_type = models.CharField(max_length=64)
    memory_id = models.BigIntegerField()
    body = models.TextField()
    state = models.CharField(max_length=10, choices=STATES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveIntegerField(null=True, blank=True)  # HTTP status of the last try
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="delivery_due_idx")]
        constraints = [
            models.UniqueConstraint(fields=["webhook", "cursor"], name="delivery_once_per_event"),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of {self.event_type} to webhook {self.webhook_id}"
