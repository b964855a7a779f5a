"""API: the memory event feed (`GET /api/events`) and webhooks (`/api/webhooks`, admins)."""

from django.db.models import Count, Q
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge.events.feed import CURSOR_HELP, CURSOR_RE, EVENT_TYPES, MAX_LIMIT, START, feed_read
from knowledge.events.services import webhook_create, webhook_delete
from knowledge.models import Webhook, WebhookDelivery
from knowledge.principals.permissions import IsAdmin, IsAgentOrReviewer
from knowledge.schema import error_response
from knowledge.web import StrictSerializer, no_body


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


@extend_schema(
    parameters=[
        OpenApiParameter(
            "after",
            str,
            description="A cursor from `next_cursor` (or an event's `cursor`); "
            "0-0, the default, is the start of the feed.",
        ),
        OpenApiParameter("limit", int, description=f"At most this many events (1–{MAX_LIMIT}, default 100)."),
        OpenApiParameter("types", str, description="Comma-separated event types; all when empty."),
    ],
    responses={
        200: inline_serializer(
            "MemoryEventPage",
            {
                "events": serializers.ListField(child=EventOut),
                "next_cursor": serializers.CharField(),
                "has_more": serializers.BooleanField(),
            },
        )
    },
    summary="Memory events after a cursor, oldest first",
    description="One event per committed change of a memory, read from the audit trail: durable and "
    "strictly ordered, so a consumer that resumes from its last `next_cursor` misses nothing and sees "
    "nothing twice. An event appears once every transaction older than it has ended. A token sees only "
    "the events of memories it may see.",
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def event_feed(request):
    params = FeedParams(data=request.query_params.dict())
    params.is_valid(raise_exception=True)
    v = params.validated_data
    page = feed_read(request.user, after=v["after"], limit=v["limit"], types=v["types"] or None)
    return Response({"events": page.events, "next_cursor": page.next_cursor, "has_more": page.has_more})


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


def webhooks_with_counts():
    return Webhook.objects.annotate(
        n_pending=Count(
            "deliveries", filter=Q(deliveries__state__in=[WebhookDelivery.PENDING, WebhookDelivery.SENDING])
        ),
        n_delivered=Count("deliveries", filter=Q(deliveries__state=WebhookDelivery.DELIVERED)),
        n_failed=Count("deliveries", filter=Q(deliveries__state=WebhookDelivery.FAILED)),
    ).order_by("id")


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


@extend_schema(methods=["GET"], responses={200: WebhookSerializer(many=True)}, summary="The webhooks")
@extend_schema(
    methods=["POST"],
    request=WebhookIn,
    responses={201: WebhookSerializer},
    summary="Register a webhook (admins)",
    description="It receives the events of the given types committed from now on, each as a POST of "
    "the event's JSON signed `X-Brain-Signature: sha256=<hex HMAC-SHA256 of the body with the secret>`; "
    "a try that fails (no 2xx) is retried with back-off.",
)
@api_view(["GET", "POST"])
@permission_classes([IsAdmin])
def webhook_collection(request):
    if request.method == "POST":
        data = WebhookIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        webhook = webhook_create(actor=request.user, url=v["url"], events=v["events"], secret=v["secret"])
        return Response(webhook_out(webhook), status=status.HTTP_201_CREATED)
    return Response([webhook_out(w) for w in webhooks_with_counts()])


@extend_schema(
    responses={204: None, 404: error_response("No such webhook.")},
    summary="Remove a webhook and its delivery log (admins)",
)
@api_view(["DELETE"])
@permission_classes([IsAdmin])
@no_body
def webhook_detail(request, webhook_id: int):
    webhook = get_object_or_404(Webhook, pk=webhook_id)
    webhook_delete(actor=request.user, webhook=webhook)
    return Response(status=status.HTTP_204_NO_CONTENT)
