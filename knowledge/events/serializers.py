"""Input and output serializers of the event feed and webhooks API, and the builder of a webhook's answer."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from knowledge.events.feed import CURSOR_HELP, CURSOR_RE, EVENT_TYPES, MAX_LIMIT, START
from knowledge.models import Webhook
from knowledge.web import StrictSerializer


class FeedParams(StrictSerializer):
    after = serializers.CharField(required=False, allow_blank=True, max_length=64, default="0-0")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=100)
    types = serializers.CharField(required=False, allow_blank=True, max_length=1000, default="")

    def validate_after(self, value):
        if value and not CURSOR_RE.match(value):
            raise serializers.ValidationError(CURSOR_HELP)
        return value or START

    def validate_types(self, value):
        types = [t.strip() for t in value.split(",") if t.strip()]
        unknown = sorted(set(types) - set(EVENT_TYPES))
        if unknown:
            raise serializers.ValidationError(f"Unknown event types: {', '.join(unknown)}.")
        return types


EventOut = inline_serializer(
    "MemoryEvent",
    {
        "cursor": serializers.CharField(help_text="This event's position; pass it as `after` to resume."),
        "type": serializers.ChoiceField(choices=EVENT_TYPES),
        "action": serializers.CharField(help_text="The audit action that made the change."),
        "memory": serializers.IntegerField(),
        "content_hash": serializers.CharField(),
        "version": serializers.IntegerField(allow_null=True),
        "status": serializers.CharField(),
        "previous_status": serializers.CharField(allow_null=True),
        "store": serializers.CharField(),
        "owner": serializers.CharField(),
        "tier": serializers.CharField(),
        "provenance": inline_serializer(
            "MemoryEventProvenance",
            {
                "run_id": serializers.CharField(),
                "turn": serializers.IntegerField(allow_null=True),
                "event_id": serializers.CharField(),
            },
        ),
        "audit_event": serializers.IntegerField(),
        "actor": inline_serializer(
            "MemoryEventActor", {"kind": serializers.CharField(), "name": serializers.CharField()}
        ),
        "reason": serializers.CharField(),
        "at": serializers.DateTimeField(),
    },
)


class WebhookIn(StrictSerializer):
    url = serializers.URLField(max_length=500, help_text="http or https.")
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENT_TYPES), min_length=1, max_length=len(EVENT_TYPES)
    )
    secret = serializers.CharField(
        min_length=16, max_length=200, help_text="Signs each body; never shown again."
    )

    def validate_url(self, value):
        if not value.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError("Use an http or https URL.")
        return value


class WebhookSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField())
    active = serializers.BooleanField()
    cursor = serializers.CharField(help_text="The feed position up to which deliveries are queued.")
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    deliveries = inline_serializer(
        "WebhookDeliveryCounts",
        {
            "pending": serializers.IntegerField(),
            "delivered": serializers.IntegerField(),
            "failed": serializers.IntegerField(),
        },
    )


def webhook_out(w: Webhook) -> dict:
    return {
        "id": w.pk,
        "url": w.url,
        "events": w.events,
        "active": w.active,
        "cursor": w.cursor,
        "created_by": w.created_by,
        "created_at": w.created_at,
        "deliveries": {
            "pending": getattr(w, "n_pending", 0),
            "delivered": getattr(w, "n_delivered", 0),
            "failed": getattr(w, "n_failed", 0),
        },
    }
