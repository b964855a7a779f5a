"""The erasure ledger: what was erased, by whom, when and why, as ids and content hashes, never
text (knowledge.erasure). A restore re-applies it, so an erased row never comes back."""

from django.db import models


class Erasure(models.Model):
    """One irreversible erasure an admin made: what it named (`kind`, `target`), why, and how many
    rows of each kind it took (`counts`). Its items are the tombstones."""

    MEMORY, MESSAGE, CONVERSATION, PERSON, ENTRY = "memory", "message", "conversation", "person", "entry"
    CHANNEL, MATERIAL, STORE = "channel", "material", "store"
    RESTORED = "restored"  # tombstones the ledger file gave back to a restored database
    KINDS = [
        (k, k) for k in (MEMORY, MESSAGE, CONVERSATION, CHANNEL, PERSON, ENTRY, MATERIAL, STORE, RESTORED)
    ]

    kind = models.CharField(max_length=16, choices=KINDS)
    # an id; a person's or channel's name; `<agent>/<store>`
    target = models.CharField(max_length=200)
    actor_kind = models.CharField(max_length=16)
    actor_name = models.CharField(max_length=150)
    reason = models.TextField()
    counts = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["kind", "target"], name="erasure_target_idx")]

    def __str__(self) -> str:
        return f"erasure {self.pk} of {self.kind} {self.target}"


class ErasedItem(models.Model):
    """A tombstone: one row whose content is gone (`kind` is the row's type: memory, message,
    episode, entry, material), with the sha256 of what it held so a copy can be recognised, never the text."""

    erasure = models.ForeignKey(Erasure, on_delete=models.PROTECT, related_name="items")
    kind = models.CharField(max_length=16)
    ref = models.CharField(max_length=64)
    content_hash = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["kind", "ref"], name="erased_item_once")]
        indexes = [models.Index(fields=["erasure"], name="erased_item_erasure_idx")]

    def __str__(self) -> str:
        return f"erased {self.kind} {self.ref}"
