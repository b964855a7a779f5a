import uuid

from django.db import models
from django.db.models.fields.json import KeyTransform


class AuditEvent(models.Model):
    """One change: who did what to which objects, in which store, and why. Never memory text —
    ids, reasons and counts only. Restorable changes also carry Revisions."""

    action = models.CharField(max_length=64, db_index=True)
    actor_kind = models.CharField(max_length=16)  # agent | person | integration | system
    actor_name = models.CharField(max_length=150)
    store = models.CharField(max_length=120, blank=True)
    owner = models.CharField(max_length=64, blank=True)  # owner agent name, if any
    object_type = models.CharField(max_length=32, blank=True)
    object_ids = models.JSONField(default=list)
    reason = models.TextField(blank=True)
    counts = models.JSONField(default=dict)
    data = models.JSONField(default=dict)  # ids and hashes (content_hash, run_id, …), never text
    batch_id = models.UUIDField(default=uuid.uuid4, db_index=True)
    request_id = models.CharField(max_length=64, blank=True)
    dreaming_run = models.BigIntegerField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # Plain indexes (db_index=True would add a second, LIKE index per column; nothing
            # filters these by prefix, and each index costs every audited write).
            models.Index(fields=["store"], name="audit_store_idx"),
            models.Index(fields=["owner"], name="audit_owner_idx"),
            models.Index(fields=["actor_kind", "actor_name"]),
            # An entry's history (entry services record the entry id in `data`).
            models.Index(KeyTransform("entry", "data"), name="audit_data_entry_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_kind}:{self.actor_name}"


class Revision(models.Model):
    """The before/after snapshot of one object changed by an audited event, kept so admins can
    preview and restore it. `before` is None for a creation, `after` None for a deletion."""

    event = models.ForeignKey(AuditEvent, on_delete=models.CASCADE, related_name="revisions")
    object_type = models.CharField(max_length=32)
    object_id = models.CharField(max_length=64)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]
