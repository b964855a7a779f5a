"""Entries API: entries with their body blocks and relations, and curation guides. Thin DRF
function views over `knowledge.entries` (writes) and `knowledge.entries.selectors` (reads); store
visibility through `knowledge.access`, exactly as in the console."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from knowledge import access
from knowledge.entries import services as entries
from knowledge.entries.guides import guide_update
from knowledge.entries.projection import entry_markdown
from knowledge.entries.selectors import (
    entry_body,
    entry_filters_from,
    entry_relations,
    entry_search,
)
from knowledge.models import Agent, Memory, MemorySource
from knowledge.principals.permissions import IsAgentOrReviewer
from knowledge.schema import error_response
from knowledge.web import BoundedDictField, StrictCharField, StrictSerializer, page_params

STALE_VERSION = error_response("`version` is not the current one: someone changed it meanwhile.")

# --- serializers -----------------------------------------------------------------------------------


class EntrySourceSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=MemorySource.KINDS)
    ref = serializers.CharField(max_length=300)


class BlockInSerializer(StrictSerializer):
    text = StrictCharField(max_length=entries.MAX_TEXT)
    sources = EntrySourceSerializer(many=True, required=False, default=list)


class BlockAddSerializer(BlockInSerializer):
    position = serializers.IntegerField(required=False, min_value=0, allow_null=True, default=None)


class BlockPatchSerializer(StrictSerializer):
    text = StrictCharField(max_length=entries.MAX_TEXT, required=False)
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    sources = EntrySourceSerializer(many=True, required=False)
    position = serializers.IntegerField(required=False, min_value=0)
    version = serializers.IntegerField(required=False, min_value=1, help_text="Expected current version.")

    def validate(self, data):
        if not {"text", "sources", "position"} & set(data):
            raise ValidationError({"text": ["Give text (with a reason) or sources, and/or position."]})
        if {"text", "sources"} & set(data) and not (data.get("reason") or "").strip():
            raise ValidationError({"reason": ["A reason is required to correct a block."]})
        return data


class EntryCreateSerializer(StrictSerializer):
    name = StrictCharField(max_length=300)
    type = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    scope = serializers.CharField(
        required=False,
        default="agent",
        help_text="agent (the owner's self store), shared, private:<person> or channel:<channel>.",
    )
    owner = serializers.SlugField(
        required=False, help_text="The owner agent; agents always own what they write, people must name one."
    )
    aliases = serializers.ListField(child=serializers.CharField(max_length=300), required=False, default=list)
    summary = serializers.CharField(required=False, allow_blank=True, default="")
    properties = BoundedDictField(required=False, default=dict)
    blocks = BlockInSerializer(many=True, required=False, default=list)


class EntryPatchSerializer(StrictSerializer):
    name = StrictCharField(max_length=300, required=False)
    type = serializers.CharField(max_length=64, required=False, allow_blank=True)
    aliases = serializers.ListField(child=serializers.CharField(max_length=300), required=False)
    summary = serializers.CharField(required=False, allow_blank=True)
    properties = BoundedDictField(required=False)
    version = serializers.IntegerField(required=False, min_value=1, help_text="Expected current version.")


class RelationInSerializer(StrictSerializer):
    predicate = serializers.CharField(max_length=100)
    target = serializers.IntegerField(help_text="The related entry's id.")
    sources = EntrySourceSerializer(many=True, required=False, default=list, help_text="At least one.")
    valid_from = serializers.DateField(required=False, allow_null=True, default=None)
    valid_to = serializers.DateField(required=False, allow_null=True, default=None)

    def validate_sources(self, value):
        if not value:
            raise ValidationError("A relation needs at least one evidence source.")
        return value


class GuideInSerializer(StrictSerializer):
    domain_types = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    taxonomy = serializers.CharField(required=False, allow_blank=True)
    page_thresholds = serializers.DictField(child=serializers.FloatField(), required=False)
    update_rules = serializers.CharField(required=False, allow_blank=True)
    version = serializers.IntegerField(required=False, min_value=0, help_text="Expected current version.")


AuthorOut = inline_serializer(
    "BlockAuthor", {"kind": serializers.CharField(), "name": serializers.CharField()}
)


class EntryBlockSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    position = serializers.IntegerField()
    text = serializers.CharField()
    status = serializers.CharField()
    version = serializers.IntegerField()
    content_hash = serializers.CharField()
    author = AuthorOut
    sources = EntrySourceSerializer(many=True)
    updated_at = serializers.DateTimeField()


class EntryBlockChangedSerializer(EntryBlockSerializer):
    audit_event = serializers.IntegerField(
        allow_null=True, help_text="The change's audit event (none when nothing changed)."
    )


class EntryRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class EntryRelationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    predicate = serializers.CharField()
    source = EntryRefSerializer()
    target = EntryRefSerializer()
    sources = EntrySourceSerializer(many=True)
    valid_from = serializers.DateField(allow_null=True)
    valid_to = serializers.DateField(allow_null=True)
    author = AuthorOut


class EntryRelationAddedSerializer(EntryRelationSerializer):
    audit_event = serializers.IntegerField()


class EntryListItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    summary = serializers.CharField()
    store = serializers.CharField()
    owner = serializers.CharField()
    version = serializers.IntegerField()
    block_count = serializers.IntegerField()
    updated_at = serializers.DateTimeField()
    deleted_at = serializers.DateTimeField(allow_null=True)


class EntrySerializer(EntryListItemSerializer):
    properties = serializers.DictField()
    author = AuthorOut
    created_at = serializers.DateTimeField()
    blocks = EntryBlockSerializer(many=True)
    relations = EntryRelationSerializer(many=True)
    incoming_relations = EntryRelationSerializer(many=True)
    audit_event = serializers.IntegerField(required=False)


EntryPageOut = inline_serializer(
    "EntryPage",
    {
        "count": serializers.IntegerField(),
        "page": serializers.IntegerField(),
        "pages": serializers.IntegerField(),
        "page_size": serializers.IntegerField(),
        "results": EntryListItemSerializer(many=True),
    },
)
GuideOut = inline_serializer(
    "CurationGuide",
    {
        "owner": serializers.CharField(),
        "store": serializers.CharField(),
        "version": serializers.IntegerField(),
        "domain_types": serializers.ListField(child=serializers.CharField()),
        "taxonomy": serializers.CharField(),
        "page_thresholds": serializers.DictField(),
        "update_rules": serializers.CharField(),
        "updated_by": serializers.CharField(),
        "updated_at": serializers.DateTimeField(allow_null=True),
    },
)


def _valid(serializer_class, data, **kwargs):
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


# --- output ----------------------------------------------------------------------------------------


def block_out(block: Memory) -> dict:
    return {
        "id": block.pk,
        "position": block.position,
        "text": block.text,
        "status": block.status,
        "version": block.version,
        "content_hash": block.content_hash,
        "author": {"kind": block.author_kind, "name": block.author_name},
        "sources": [{"kind": s.kind, "ref": s.ref} for s in block.sources.all()],
        "updated_at": block.updated_at,
    }


def relation_out(rel) -> dict:
    return {
        "id": rel.pk,
        "predicate": rel.predicate,
        "source": {"id": rel.source_id, "name": rel.source.name},
        "target": {"id": rel.target_id, "name": rel.target.name},
        "sources": rel.sources,
        "valid_from": rel.valid_from,
        "valid_to": rel.valid_to,
        "author": {"kind": rel.author_kind, "name": rel.author_name},
    }


def entry_list_item(entry) -> dict:
    return {
        "id": entry.pk,
        "name": entry.name,
        "type": entry.type,
        "aliases": entry.aliases,
        "summary": entry.summary,
        "store": entry.store,
        "owner": entry.owner.name,
        "version": entry.version,
        "block_count": entry.block_count,
        "updated_at": entry.updated_at,
        "deleted_at": entry.deleted_at,
    }


def entry_out(principal, entry, *, audit_event=None) -> dict:
    entry = access.entry_get_for(principal, entry.pk, include_deleted=True)
    outgoing, incoming = entry_relations(principal, entry)
    data = {
        **entry_list_item(entry),
        "properties": entry.properties,
        "author": {"kind": entry.author_kind, "name": entry.author_name},
        "created_at": entry.created_at,
        "blocks": [block_out(b) for b in entry_body(entry)],
        "relations": [relation_out(r) for r in outgoing],
        "incoming_relations": [relation_out(r) for r in incoming],
    }
    if audit_event is not None:
        data["audit_event"] = audit_event.pk
    return data


def guide_out(guide) -> dict:
    return {
        "owner": guide.owner.name,
        "store": guide.STORE,
        "version": guide.version,
        "domain_types": guide.domain_types,
        "taxonomy": guide.taxonomy,
        "page_thresholds": guide.page_thresholds,
        "update_rules": guide.update_rules,
        "updated_by": guide.updated_by,
        "updated_at": guide.updated_at,
    }


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
                "results": [entry_list_item(e) for e in result.entries],
            }
        )
    data = _valid(EntryCreateSerializer, request.data)
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
        data = dict(_valid(EntryPatchSerializer, request.data, partial=True))
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
    data = _valid(BlockAddSerializer, request.data)
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
    data = _valid(BlockPatchSerializer, request.data)
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
    data = _valid(RelationInSerializer, request.data)
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
    owner = get_object_or_404(Agent, name=agent_name)
    principal = request.user
    if request.method == "GET":
        return Response(guide_out(access.guide_get_for(principal, owner)))
    if not (principal.kind == "person" and principal.is_admin):
        raise PermissionDenied("Only admins edit curation guides; agents and Dreaming only read them.")
    data = dict(_valid(GuideInSerializer, request.data))
    expected = data.pop("version", None)
    guide = guide_update(actor=principal, owner=owner, expected_version=expected, **data)
    return Response(guide_out(guide))
