"""Audit API: the trail (reviewers and admins read it) and atomic batch restore (admins)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge.audit.selectors import AuditFilters, audit_events
from knowledge.principals.permissions import IsAdmin, IsReviewer
from knowledge.restore.filters import audit_filters_from
from knowledge.restore.serializers import (
    AuditEventSerializer,
    AuditRevisionSerializer,
    RestoreInSerializer,
    RestoreRecordSerializer,
    event_out,
    outcome_out,
    record_out,
)
from knowledge.restore.services import RestoreConflict, audit_restore
from knowledge.schema import error_response
from knowledge.web import page_params

AUDIT_PARAMS = [
    OpenApiParameter("store", str),
    OpenApiParameter("action", str, description="Exact, or a prefix ending in '.' or '*'."),
    OpenApiParameter("actor", str, description="Actor name."),
    OpenApiParameter("owner", str, description="Owner agent name."),
    OpenApiParameter("object_type", str),
    OpenApiParameter("entry", int, description="Events of one entry."),
    OpenApiParameter("dreaming_run", int),
    OpenApiParameter("since", str, description="Date or date-time (inclusive)."),
    OpenApiParameter("until", str, description="Date (inclusive) or date-time (exclusive)."),
    OpenApiParameter("restorable", bool, description="Only events with before/after revisions."),
    OpenApiParameter("batch", str, description="The events of one batch (an event's batch_id)."),
    OpenApiParameter("page", int),
    OpenApiParameter("page_size", int),
]


@extend_schema(
    parameters=AUDIT_PARAMS,
    responses=inline_serializer(
        "AuditPage",
        {
            "count": serializers.IntegerField(),
            "page": serializers.IntegerField(),
            "page_size": serializers.IntegerField(),
            "results": AuditEventSerializer(many=True),
        },
    ),
    summary="The audit trail, newest first",
    operation_id="audit_list",
)
@api_view(["GET"])
@permission_classes([IsReviewer])
def audit_list(request):
    filters = audit_filters_from(request.query_params)
    page, size = page_params(request.query_params)
    qs = audit_events(filters)
    events = list(qs[(page - 1) * size : page * size])
    return Response(
        {"count": qs.count(), "page": page, "page_size": size, "results": [event_out(e) for e in events]}
    )


@extend_schema(
    responses=inline_serializer(
        "AuditEventDetail", {"event": AuditEventSerializer(), "revisions": AuditRevisionSerializer(many=True)}
    ),
    summary="One audit event with the before/after of every object it changed",
)
@api_view(["GET"])
@permission_classes([IsReviewer])
def audit_detail(request, event_id):
    event = get_object_or_404(audit_events(AuditFilters()), pk=event_id)
    revisions = [
        {"object_type": r.object_type, "object_id": r.object_id, "before": r.before, "after": r.after}
        for r in event.revisions.all()
    ]
    return Response({"event": event_out(event), "revisions": revisions})


@extend_schema(
    request=RestoreInSerializer,
    responses={
        200: inline_serializer(
            "RestoreResult",
            {
                "restored": serializers.BooleanField(),
                "preview": serializers.BooleanField(),
                "audit_event": serializers.IntegerField(allow_null=True),
                "records": RestoreRecordSerializer(many=True),
                "writes": serializers.ListField(
                    child=inline_serializer(
                        "RestoreWrite",
                        {
                            "object_type": serializers.CharField(),
                            "object_id": serializers.CharField(),
                            "label": serializers.CharField(),
                            "kind": serializers.CharField(
                                help_text="change, recreate, invalidate, delete, ..."
                            ),
                            "fields": serializers.ListField(child=serializers.CharField()),
                        },
                    ),
                    help_text="What the restore writes (preview) or wrote: one per object — the same "
                    "list either way, and as many as the restore event's `records` count.",
                ),
                "erased": serializers.ListField(
                    child=inline_serializer(
                        "RestoreErased",
                        {
                            "object_type": serializers.CharField(),
                            "object_id": serializers.CharField(),
                            "label": serializers.CharField(),
                        },
                    ),
                    help_text="Objects of these events that were erased: left as they are "
                    "(erased, cannot be restored).",
                ),
            },
        ),
        409: inline_serializer(
            "RestoreConflict",
            {
                "error": serializers.CharField(),
                "conflicts": serializers.ListField(child=serializers.DictField()),
                "records": RestoreRecordSerializer(many=True),
            },
        ),
        404: error_response("An event named is not in the audit trail."),
    },
    summary="Restore one or more audit events atomically, newest first (admins)",
    description=(
        "Every record's current value is compared with the value its event left behind; if any "
        "differs, nothing is written and 409 names the conflicting records. With preview=true "
        "nothing is written either way."
    ),
)
@api_view(["POST"])
@permission_classes([IsAdmin])
def audit_restore_view(request):
    data = RestoreInSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    preview = data.validated_data["preview"]
    try:
        plan = audit_restore(actor=request.user, event_ids=data.validated_data["events"], preview=preview)
    except RestoreConflict as conflict:
        return Response(
            {
                "error": "Nothing was restored: " + "; ".join(c["message"] for c in conflict.conflicts),
                "conflicts": conflict.conflicts,
                "records": [record_out(s) for s in conflict.plan.steps],
            },
            status=409,
        )
    return Response(
        {
            "restored": not preview,
            "preview": preview,
            "audit_event": plan.event.pk if plan.event else None,
            "records": [record_out(s) for s in plan.steps],
            "writes": [outcome_out(o) for o in plan.outcomes],
            "erased": plan.erased,
        }
    )
