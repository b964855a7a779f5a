"""Input and output serializers of the audit API, and the builders of its answers."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from knowledge.models import AuditEvent
from knowledge.web import StrictSerializer


class AuditEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    action = serializers.CharField()
    actor = inline_serializer(
        "AuditActor", {"kind": serializers.CharField(), "name": serializers.CharField()}
    )
    store = serializers.CharField()
    owner = serializers.CharField()
    object_type = serializers.CharField()
    object_ids = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField()
    counts = serializers.DictField()
    data = serializers.DictField()
    batch_id = serializers.UUIDField()
    request_id = serializers.CharField()
    dreaming_run = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    restorable = serializers.BooleanField()


class AuditRevisionSerializer(serializers.Serializer):
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    before = serializers.DictField(allow_null=True)
    after = serializers.DictField(allow_null=True)


class RestoreRecordSerializer(serializers.Serializer):
    event = serializers.IntegerField()
    action = serializers.CharField()
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    label = serializers.CharField()
    before = serializers.DictField(allow_null=True, help_text="The value now.")
    after = serializers.DictField(allow_null=True, help_text="The value the restore writes.")
    changes = serializers.ListField(child=serializers.DictField())
    conflict_fields = serializers.ListField(child=serializers.CharField())


class RestoreInSerializer(StrictSerializer):
    events = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=500)
    preview = serializers.BooleanField(required=False, default=False)


def event_out(event: AuditEvent) -> dict:
    return {
        "id": event.pk,
        "action": event.action,
        "actor": {"kind": event.actor_kind, "name": event.actor_name},
        "store": event.store,
        "owner": event.owner,
        "object_type": event.object_type,
        "object_ids": event.object_ids,
        "reason": event.reason,
        "counts": event.counts,
        "data": event.data,
        "batch_id": event.batch_id,
        "request_id": event.request_id,
        "dreaming_run": event.dreaming_run,
        "created_at": event.created_at,
        "restorable": getattr(event, "restorable", None),
    }


def outcome_out(outcome) -> dict:
    return {
        "object_type": outcome.object_type,
        "object_id": outcome.object_id,
        "label": outcome.label,
        "kind": outcome.kind,
        "fields": outcome.fields,
    }


def record_out(step) -> dict:
    return {
        "event": step.event.pk,
        "action": step.event.action,
        "object_type": step.object_type,
        "object_id": step.object_id,
        "label": step.label,
        "before": step.current,
        "after": step.restore_to,
        "changes": [{"field": f, "from": a, "to": b} for f, a, b in step.changes],
        "conflict_fields": step.conflict_fields,
    }
