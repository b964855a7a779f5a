"""Entries API: entries with their body blocks and relations, and curation guides. Thin DRF
function views over `knowledge.entries` (writes) and `knowledge.entries.selectors` (reads); store
visibility through `knowledge.access`, exactly as in the console."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from knowledge import access, names
from knowledge.entries import services as entries
from knowledge.entries.guides import guide_update
from knowledge.entries.projection import entry_markdown
from knowledge.entries.selectors import (
    entry_body,
    entry_filters_from,
    entry_relations,
    entry_search,
)
from knowledge.entries.serializers import (
    BlockAddSerializer,
    BlockPatchSerializer,
    EntryBlockChangedSerializer,
    EntryCreateSerializer,
    EntryPageOut,
    EntryPatchSerializer,
    EntryRelationAddedSerializer,
    EntrySerializer,
    GuideInSerializer,
    GuideOut,
    RelationInSerializer,
    block_out,
    entry_list_item_out,
    entry_out,
    guide_out,
    relation_out,
)
from knowledge.models import Memory
from knowledge.principal import ADMIN
from knowledge.principals.permissions import IsAgentOrReviewer
from knowledge.schema import error_response
from knowledge.web import page_params, validated

STALE_VERSION = error_response("`version` is not the current one: someone changed it meanwhile.")

# --- serializers -----------------------------------------------------------------------------------


# --- output ----------------------------------------------------------------------------------------


# --- filters ---------------------------------------------------------------------------------------


LIST_PARAMS = [
    OpenApiParameter("q", str, description="Search name, aliases, summary and body (ranked)."),
    OpenApiParameter("type", str),
    OpenApiParameter("store", str, description="shared, self, private:<person>, channel:<channel>."),
    OpenApiParameter("author", str, description="A block author's or the last editor's name."),
    OpenApiParameter("owner", str, description="Owner agent name."),
    OpenApiParameter("updated_after", str, description="Date or date-time (inclusive)."),
    OpenApiParameter("updated_before", str, description="Date (inclusive) or date-time (exclusive)."),
    OpenApiParameter("deleted", bool, description="List deleted entries instead (reviewers, admins)."),
    OpenApiParameter("sort", str, enum=["updated", "name"], description="Without q."),
    OpenApiParameter("page", int),
    OpenApiParameter("page_size", int),
]


# --- views -----------------------------------------------------------------------------------------


@extend_schema(
    methods=["GET"],
    parameters=LIST_PARAMS,
    responses=EntryPageOut,
    summary="Search and list entries",
    operation_id="entries_list",
)
@extend_schema(
    methods=["POST"],
    request=EntryCreateSerializer,
    responses={201: EntrySerializer},
    summary="Create an entry with its body blocks",
)
@api_view(["GET", "POST"])
@permission_classes([IsAgentOrReviewer])
def entry_collection(request):
    principal = request.user
    if request.method == "GET":
        filters = entry_filters_from(request.query_params, principal)
        page, size = page_params(request.query_params)
        result = entry_search(principal, filters, page=page, page_size=size)
        return Response(
            {
                "count": result.count,
                "page": result.page,
                "pages": result.pages,
                "page_size": result.page_size,
                "results": [entry_list_item_out(e) for e in result.entries],
            }
        )
    data = validated(EntryCreateSerializer, request.data)
    owner = access.owner_for_write(principal, data.get("owner"))
    store = access.parse_scope(data["scope"])
    entry = entries.entry_create(
        actor=principal,
        owner=owner,
        store=store,
        name=data["name"],
        type=data["type"],
        aliases=data["aliases"],
        summary=data["summary"],
        properties=data["properties"],
        blocks=data["blocks"],
    )
    return Response(
        entry_out(principal, entry, audit_event=entry.audit_event), status=status.HTTP_201_CREATED
    )


@extend_schema(methods=["GET"], responses=EntrySerializer, summary="An entry with its blocks and relations")
@extend_schema(
    methods=["PATCH"],
    request=EntryPatchSerializer,
    responses={200: EntrySerializer, 409: STALE_VERSION},
    summary="Change an entry's metadata",
)
@extend_schema(
    methods=["DELETE"],
    parameters=[OpenApiParameter("reason", str)],
    responses={
        200: inline_serializer(
            "EntryDeleted",
            {
                "id": serializers.IntegerField(),
                "deleted_at": serializers.DateTimeField(),
                "audit_event": serializers.IntegerField(),
            },
        )
    },
    summary="Delete an entry (restorable from its delete record)",
)
@api_view(["GET", "PATCH", "DELETE"])
@permission_classes([IsAgentOrReviewer])
def entry_detail(request, entry_id):
    principal = request.user
    if request.method == "GET":
        entry = access.entry_get_for(principal, entry_id, include_deleted=principal.is_reviewer)
        return Response(entry_out(principal, entry))
    entry = access.entry_get_for(principal, entry_id)
    if request.method == "PATCH":
        data = dict(validated(EntryPatchSerializer, request.data, partial=True))
        expected = data.pop("version", None)
        entry = entries.entry_update(actor=principal, entry_id=entry.pk, expected_version=expected, **data)
        return Response(entry_out(principal, entry, audit_event=getattr(entry, "audit_event", None)))
    reason = request.query_params.get("reason") or (request.data or {}).get("reason", "")
    entry = entries.entry_delete(actor=principal, entry_id=entry.pk, reason=reason)
    return Response({"id": entry.pk, "deleted_at": entry.deleted_at, "audit_event": entry.audit_event.pk})


@extend_schema(
    responses=inline_serializer(
        "EntryProjection", {"id": serializers.IntegerField(), "markdown": serializers.CharField()}
    ),
    summary="The Markdown an agent reads for this entry",
)
@api_view(["GET"])
@permission_classes([IsAgentOrReviewer])
def entry_projection(request, entry_id):
    entry = access.entry_get_for(request.user, entry_id)
    outgoing, incoming = entry_relations(request.user, entry)
    markdown = entry_markdown(entry, entry_body(entry), outgoing, incoming, links=False)
    return Response({"id": entry.pk, "markdown": markdown})


@extend_schema(
    request=BlockAddSerializer, responses={201: EntryBlockChangedSerializer}, summary="Add a body block"
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def block_collection(request, entry_id):
    entry = access.entry_get_for(request.user, entry_id)
    data = validated(BlockAddSerializer, request.data)
    block = entries.block_add(
        actor=request.user,
        entry_id=entry.pk,
        text=data["text"],
        sources=data["sources"],
        position=data["position"],
    )
    event = block.audit_event
    block = Memory.objects.prefetch_related("sources").get(pk=block.pk)
    return Response({**block_out(block), "audit_event": event.pk}, status=status.HTTP_201_CREATED)


@extend_schema(
    methods=["PATCH"],
    request=BlockPatchSerializer,
    responses={200: EntryBlockChangedSerializer, 409: STALE_VERSION},
    summary="Correct a block (text and a required reason) and/or move it",
)
@extend_schema(
    methods=["DELETE"],
    parameters=[OpenApiParameter("reason", str)],
    responses={200: EntryBlockChangedSerializer},
    summary="Remove a block from the body (restorable)",
)
@api_view(["PATCH", "DELETE"])
@permission_classes([IsAgentOrReviewer])
def block_detail(request, entry_id, block_id):
    principal = request.user
    entry = access.entry_get_for(principal, entry_id)
    get_object_or_404(Memory, pk=block_id, entry=entry, status__in=entries.BODY_STATUSES)
    if request.method == "DELETE":
        reason = request.query_params.get("reason") or (request.data or {}).get("reason", "")
        block = entries.block_remove(actor=principal, entry_id=entry.pk, block_id=block_id, reason=reason)
        event = block.audit_event
        block = Memory.objects.prefetch_related("sources").get(pk=block.pk)
        return Response({**block_out(block), "audit_event": event.pk})
    data = validated(BlockPatchSerializer, request.data)
    event = None
    if "text" in data or "sources" in data:
        current = Memory.objects.get(pk=block_id)
        block = entries.block_correct(
            actor=principal,
            entry_id=entry.pk,
            block_id=block_id,
            text=data.get("text", current.text),
            reason=data.get("reason", ""),
            sources=data.get("sources"),
            expected_version=data.get("version"),
        )
        event = block.audit_event
    if "position" in data:
        moved = entries.block_move(
            actor=principal, entry_id=entry.pk, block_id=block_id, position=data["position"]
        )
        event = getattr(moved, "audit_event", event)
    block = Memory.objects.prefetch_related("sources").get(pk=block_id)
    return Response({**block_out(block), "audit_event": event.pk if event else None})


@extend_schema(
    request=RelationInSerializer,
    responses={201: EntryRelationAddedSerializer},
    summary="Relate this entry to another",
)
@api_view(["POST"])
@permission_classes([IsAgentOrReviewer])
def relation_collection(request, entry_id):
    entry = access.entry_get_for(request.user, entry_id)
    data = validated(RelationInSerializer, request.data)
    relation = entries.relation_add(
        actor=request.user,
        entry_id=entry.pk,
        predicate=data["predicate"],
        target_id=data["target"],
        sources=[dict(s) for s in data["sources"]],
        valid_from=data["valid_from"],
        valid_to=data["valid_to"],
    )
    return Response(
        {**relation_out(relation), "audit_event": relation.audit_event.pk}, status=status.HTTP_201_CREATED
    )


@extend_schema(
    parameters=[OpenApiParameter("reason", str)],
    responses={
        200: inline_serializer(
            "RelationRemoved", {"id": serializers.IntegerField(), "audit_event": serializers.IntegerField()}
        )
    },
    summary="Remove a relation (restorable)",
)
@api_view(["DELETE"])
@permission_classes([IsAgentOrReviewer])
def relation_detail(request, entry_id, relation_id):
    entry = access.entry_get_for(request.user, entry_id)
    reason = request.query_params.get("reason") or (request.data or {}).get("reason", "")
    event = entries.relation_remove(
        actor=request.user, entry_id=entry.pk, relation_id=relation_id, reason=reason
    )
    return Response({"id": relation_id, "audit_event": event.pk})


@extend_schema(methods=["GET"], responses=GuideOut, summary="A principal's curation guide")
@extend_schema(
    methods=["PUT"],
    request=GuideInSerializer,
    responses={200: GuideOut, 409: STALE_VERSION},
    summary="Edit a curation guide (admins only; never agents)",
)
@api_view(["GET", "PUT"])
@permission_classes([IsAgentOrReviewer])
def guide_detail(request, agent_name):
    owner = names.agent_named(agent_name)
    principal = request.user
    if request.method == "GET":
        return Response(guide_out(access.guide_get_for(principal, owner)))
    access.require_role(
        principal, ADMIN, "Only admins edit curation guides; agents and Dreaming only read them.", person=True
    )
    data = dict(validated(GuideInSerializer, request.data))
    expected = data.pop("version", None)
    guide = guide_update(actor=principal, owner=owner, expected_version=expected, **data)
    return Response(guide_out(guide))
