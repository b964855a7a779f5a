"""Input and output serializers of the materials API, and the builders of its answers."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from knowledge.models import Material, SignalRule
from knowledge.web import BoundedDictField, StrictCharField, StrictSerializer


class MaterialFileIn(StrictSerializer):
    file = serializers.FileField(help_text="Plain text, Markdown, HTML, PDF or DOCX (judged from its bytes).")
    agent = serializers.CharField(required=False, max_length=64, help_text="Default: the calling agent.")
    scope = serializers.CharField(max_length=160, default="shared", help_text="The memory scope (store).")
    title = serializers.CharField(required=False, max_length=300, allow_blank=True)


class MaterialPasteIn(StrictSerializer):
    title = StrictCharField(
        max_length=300,
        required=False,
        allow_blank=True,
        default="",
        help_text="Required for text; for html, the page's <title> (else its first <h1>) when left out.",
    )
    text = StrictCharField(required=False, max_length=5_000_000)
    html = StrictCharField(required=False, max_length=5_000_000)
    agent = serializers.CharField(required=False, max_length=64, help_text="Default: the calling agent.")
    scope = serializers.CharField(max_length=160, default="shared")

    def validate(self, data):
        if ("text" in data) == ("html" in data):
            raise ValidationError({"text": ["Send either text (pasted text) or html (web content)."]})
        return data


class RetryIn(StrictSerializer):
    again = serializers.BooleanField(
        required=False, default=False, help_text="Learn a learned material again (Learn again)."
    )


class ConnectorDocumentIn(StrictSerializer):
    title = StrictCharField(max_length=300)
    version = serializers.CharField(
        max_length=200, help_text="The external system's version of the document."
    )
    content = StrictCharField(required=False, max_length=5_000_000, help_text="The document as text.")
    file = serializers.FileField(required=False, help_text="The document's file (multipart).")
    agent = serializers.CharField(max_length=64, help_text="The agent whose knowledge it feeds.")
    scope = serializers.CharField(max_length=160, default="shared")
    access = serializers.ChoiceField(
        choices=["ok", "lost"], required=False, default="ok", help_text="`lost` withdraws the mirror."
    )

    def validate(self, data):
        if data.get("access") != "lost" and ("content" in data) == ("file" in data):
            raise ValidationError({"content": ["Send either content (text) or file."]})
        return data


class SignalIn(StrictSerializer):
    source = serializers.SlugField(max_length=64)
    type = serializers.CharField(max_length=64)
    text = StrictCharField(max_length=20_000)
    data = BoundedDictField(required=False, default=dict)
    occurred_at = serializers.DateTimeField(required=False)
    external_id = serializers.CharField(max_length=200)


class SignalRuleIn(StrictSerializer):
    source = serializers.SlugField(max_length=64)
    type = serializers.CharField(max_length=64, required=False, default="", allow_blank=True)
    channel = serializers.SlugField(max_length=100)
    memory_scope = serializers.ChoiceField(choices=["shared", "channel"], default="shared")
    learn = serializers.BooleanField(default=True)


class ConnectorGrantIn(StrictSerializer):
    integration = serializers.SlugField(max_length=64)
    agent = serializers.SlugField(max_length=64)
    scope = serializers.CharField(
        max_length=160,
        help_text="The agent's store: agent (self), shared, private:<person>, channel:<channel>.",
    )


ConnectorGrantOut = inline_serializer(
    "ConnectorGrant",
    {
        "id": serializers.IntegerField(),
        "integration": serializers.CharField(),
        "agent": serializers.CharField(),
        "store": serializers.CharField(),
        "updated_by": serializers.CharField(allow_blank=True),
        "created_at": serializers.DateTimeField(),
    },
)


_version = inline_serializer(
    "MaterialVersion",
    {
        "number": serializers.IntegerField(),
        "label": serializers.CharField(allow_blank=True),
        "sha256": serializers.CharField(),
        "size": serializers.IntegerField(),
        "media_type": serializers.CharField(),
        "filename": serializers.CharField(),
        "sections": serializers.IntegerField(),
        "pages": serializers.IntegerField(),
        "created_at": serializers.DateTimeField(),
    },
)


MaterialOut = inline_serializer(
    "Material",
    {
        "id": serializers.IntegerField(),
        "kind": serializers.ChoiceField(choices=[k for k, _ in Material.KINDS]),
        "title": serializers.CharField(),
        "ref": serializers.CharField(help_text='Cite it as {"kind": "material", "ref": ref}.'),
        "agent": serializers.CharField(),
        "store": serializers.CharField(),
        "state": serializers.ChoiceField(choices=[s for s, _ in Material.STATES]),
        "reason": serializers.CharField(allow_blank=True),
        "attempts": serializers.IntegerField(),
        "asked_by": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "learned_at": serializers.DateTimeField(allow_null=True),
        "learned_with": serializers.CharField(allow_blank=True),
        "withdrawn": serializers.BooleanField(),
        "connector": serializers.CharField(allow_blank=True),
        "external_ref": serializers.CharField(allow_blank=True),
        "version": _version,
    },
)


MaterialDetailOut = inline_serializer(
    "MaterialDetail",
    {
        "material": MaterialOut,
        "versions": serializers.ListField(child=_version),
        "entries": serializers.ListField(
            child=inline_serializer(
                "MaterialCitingEntry",
                {
                    "id": serializers.IntegerField(),
                    "name": serializers.CharField(),
                    "blocks": serializers.IntegerField(),
                },
            )
        ),
    },
)


MaterialCreatedOut = inline_serializer(
    "MaterialCreated",
    {
        "material": MaterialOut,
        "entry": serializers.IntegerField(
            allow_null=True, help_text="Pasted text or web content: the new entry."
        ),
    },
)


ConnectorOut = inline_serializer(
    "ConnectorDocument",
    {
        "material": MaterialOut,
        "outcome": serializers.ChoiceField(
            choices=["created", "updated", "restored", "unchanged", "withdrawn"]
        ),
    },
)


SignalOut = inline_serializer(
    "SignalStored",
    {
        "id": serializers.IntegerField(),
        "message": serializers.IntegerField(),
        "channel": serializers.CharField(),
        "store": serializers.CharField(),
        "learn": serializers.BooleanField(),
        "rule": serializers.IntegerField(allow_null=True),
        "duplicate": serializers.BooleanField(),
    },
)


SignalRuleOut = inline_serializer(
    "SignalRule",
    {
        "id": serializers.IntegerField(),
        "source": serializers.CharField(),
        "type": serializers.CharField(allow_blank=True),
        "channel": serializers.CharField(),
        "memory_scope": serializers.CharField(),
        "learn": serializers.BooleanField(),
        "updated_by": serializers.CharField(allow_blank=True),
        "updated_at": serializers.DateTimeField(),
    },
)


def version_out(v) -> dict:
    return {
        "number": v.number,
        "label": v.label,
        "sha256": v.sha256,
        "size": v.size,
        "media_type": v.media_type,
        "filename": v.filename,
        "sections": v.sections,
        "pages": v.pages,
        "created_at": v.created_at,
    }


def material_out(m: Material) -> dict:
    return {
        "id": m.pk,
        "kind": m.kind,
        "title": m.title,
        "ref": m.source_ref,
        "agent": m.owner.name,
        "store": m.store,
        "state": m.state,
        "reason": m.reason,
        "attempts": m.attempts,
        "asked_by": m.asked_by,
        "created_at": m.created_at,
        "learned_at": m.learned_at,
        "learned_with": m.learned_with,
        "withdrawn": m.withdrawn,
        "connector": m.connector,
        "external_ref": m.external_ref,
        "version": version_out(m.version),
    }


def rule_out(r: SignalRule) -> dict:
    return {
        "id": r.pk,
        "source": r.source,
        "type": r.type,
        "channel": r.channel,
        "memory_scope": r.memory_scope,
        "learn": r.learn,
        "updated_by": r.updated_by,
        "updated_at": r.updated_at,
    }


def grant_out(g) -> dict:
    return {
        "id": g.pk,
        "integration": g.integration.name,
        "agent": g.agent.name,
        "store": g.store,
        "updated_by": g.updated_by,
        "created_at": g.created_at,
    }
