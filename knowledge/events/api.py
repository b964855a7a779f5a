"""API: the memory event feed (`GET /api/events`) and webhooks (`/api/webhooks`, admins)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge.events.feed import MAX_LIMIT, feed_read
from knowledge.events.serializers import (
    EventOut,
    FeedParams,
    WebhookIn,
    WebhookSerializer,
    webhook_out,
)
from knowledge.events.services import webhook_create, webhook_delete, webhooks_with_counts
from knowledge.models import Webhook
from knowledge.principals.permissions import IsAdmin, IsAgentOrReviewer
from knowledge.schema import error_response
from knowledge.web import no_body


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
