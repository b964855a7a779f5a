"""API for provenance: the source registry (PUT/DELETE /api/sources/{kind}/{ref}), the check,
one memory's provenance, and the stale list."""

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

from knowledge import access
from knowledge.memories.fingerprints import EXTERNAL_KINDS, STATE_FIELDS, validate_ref
from knowledge.principals.permissions import IsAgentOrReviewer, IsIntegrationOrAdmin, IsReviewer
from knowledge.schema import error_response
from knowledge.web import no_body
from memory.provenance import services as provenance
from memory.provenance.selectors import memory_provenance, stale_memories
from memory.provenance.serializers import (
    CheckCounts,
    ProvenanceSourceOut,
    StaleMemoryOut,
)

BAD_SOURCE = error_response("Not a kind of source that is pushed, or not a valid reference for its kind.")


def _check_source_ref(kind: str, ref: str) -> None:
    if kind not in EXTERNAL_KINDS:
        raise ValidationError(
            {"kind": [f"Push only {', '.join(EXTERNAL_KINDS)}; {kind} sources are checked internally."]}
        )
    problem = validate_ref(kind, ref)
    if problem:
        raise ValidationError({"ref": [problem]})


@extend_schema(
    methods=["PUT"],
    summary="Push the current state of an external source",
    request=inline_serializer("SourceFields", {"title": serializers.CharField(required=False)}),
    responses=inline_serializer(
        "SourceState",
        {
            "kind": serializers.CharField(),
            "ref": serializers.CharField(),
            "fingerprint": serializers.CharField(),
            "deleted": serializers.BooleanField(),
        },
    ),
)
@extend_schema(
    methods=["DELETE"],
    summary="Record that an external source is gone",
    request=None,
    responses={
        200: inline_serializer(
            "SourceGone",
            {
                "kind": serializers.CharField(),
                "ref": serializers.CharField(),
                "fingerprint": serializers.CharField(),
                "deleted": serializers.BooleanField(),
            },
        ),
        400: BAD_SOURCE,
    },
)
@api_view(["PUT", "DELETE"])
@permission_classes([IsIntegrationOrAdmin])
def source_detail(request, kind, ref):
    _check_source_ref(kind, ref)
    if request.method == "DELETE":
        state = provenance.source_delete(actor=request.user, kind=kind, ref=ref)
    else:
        if not isinstance(request.data, dict) or not request.data:
            raise ValidationError({"fields": ["Send the source's fields as a non-empty JSON object."]})
        known = STATE_FIELDS.get(kind)
        unknown = sorted(set(request.data) - set(known)) if known is not None else []
        if unknown:
            raise ValidationError(
                {name: [f"Unknown field; a {kind} has {', '.join(known)}."] for name in unknown}
            )
        if not provenance.state_size_ok(request.data):
            raise ValidationError({"fields": ["The source's state is larger than 64 KiB."]})
        state = provenance.source_push(actor=request.user, kind=kind, ref=ref, fields=request.data)
    return Response(
        {"kind": state.kind, "ref": state.ref, "fingerprint": state.fingerprint, "deleted": state.deleted}
    )


@extend_schema(summary="Check every tracked source now", request=None, responses=CheckCounts)
@api_view(["POST"])
@permission_classes([IsReviewer])
@no_body
def provenance_check(request):
    return Response(provenance.provenance_check(actor=request.user))


@extend_schema(
    summary="What a memory rests on, and each source's state at its last check",
    responses=inline_serializer(
        "MemoryProvenance",
        {
            "memory": serializers.IntegerField(),
            "status": serializers.CharField(),
            "stale": serializers.BooleanField(),
            "stale_reason": serializers.CharField(),
            "sources": serializers.ListField(child=ProvenanceSourceOut),
        },
    ),
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def provenance_detail(request, memory_id):
    # An unreadable memory answers 404 like a missing one: its provenance must not tell them apart.
    memory = access.memory_get_for(request.user, memory_id, hidden=True)
    return Response(memory_provenance(memory, request.user))


@extend_schema(
    summary="Stale memories (a source changed or disappeared)",
    parameters=[
        OpenApiParameter("agent", str),
        OpenApiParameter("store", str),
        OpenApiParameter("limit", int),
        OpenApiParameter("offset", int),
    ],
    responses=inline_serializer(
        "StaleMemoryPage",
        {
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializers.ListField(child=StaleMemoryOut),
        },
    ),
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def provenance_stale(request):
    memories = stale_memories(
        request.user, agent=request.query_params.get("agent"), store=request.query_params.get("store")
    )
    paginator = LimitOffsetPagination()
    page = paginator.paginate_queryset(memories, request)
    return paginator.get_paginated_response(
        [
            {
                "id": m.pk,
                "agent": m.owner.name,
                "store": m.store,
                "status": m.status,
                "tier": m.tier,
                "category": m.category,
                "stale_reason": m.stale_reason,
                "updated_at": m.updated_at,
            }
            for m in page
        ]
    )
