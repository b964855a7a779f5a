"""The documented shapes of the provenance answers (the selectors build the dicts themselves)."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from knowledge.models import MemorySource

CheckCounts = inline_serializer(
    "ProvenanceCheck",
    {
        name: serializers.IntegerField()
        for name in (
            "checked",
            "unchanged",
            "changed",
            "deleted",
            "untracked",
            "stale",
            "requeued",
            "invalidated",
        )
    }
    | {"mode": serializers.CharField()},
)


ProvenanceChangeOut = inline_serializer(
    "ProvenanceChange",
    {
        "field": serializers.CharField(),
        "before": serializers.JSONField(allow_null=True),
        "after": serializers.JSONField(allow_null=True),
    },
)


ProvenanceSourceOut = inline_serializer(
    "ProvenanceSource",
    {
        "kind": serializers.CharField(),
        "ref": serializers.CharField(),
        "fingerprint": serializers.CharField(),
        "state": serializers.ChoiceField(choices=MemorySource.STATES),
        "checked_at": serializers.DateTimeField(allow_null=True),
        "readable": serializers.BooleanField(
            help_text="False for a source you may not read: its fingerprint is blank and its changes "
            "are left out."
        ),
        "changes": serializers.ListField(
            child=ProvenanceChangeOut, help_text="For a changed source: each field that changed."
        ),
    },
)


StaleMemoryOut = inline_serializer(
    "StaleMemory",
    {
        "id": serializers.IntegerField(),
        "agent": serializers.CharField(),
        "store": serializers.CharField(),
        "status": serializers.CharField(),
        "tier": serializers.CharField(),
        "category": serializers.CharField(),
        "stale_reason": serializers.CharField(),
        "updated_at": serializers.DateTimeField(),
    },
)
