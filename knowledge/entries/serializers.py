"""Input and output serializers of the entries API, and the builders of its answers."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from knowledge import access
from knowledge.entries import services as entries
from knowledge.entries.selectors import (
    entry_body,
    entry_relations,
)
from knowledge.models import Memory, MemorySource
from knowledge.web import BoundedDictField, StrictCharField, StrictSerializer


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


def entry_list_item_out(entry) -> dict:
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
        **entry_list_item_out(entry),
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
