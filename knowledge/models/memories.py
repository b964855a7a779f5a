import hashlib
import json

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import HnswIndex, VectorField

EMBEDDING_DIMENSIONS = 384


class Memory(models.Model):
    """The one unit of remembered content: a loose memory written through the API, a body block
    of an Entry (then `entry` and `position` are set), or a lesson of an agent's skill overlay
    (then `skill` and `position` are set; the overlay is the owner's lessons of that skill)."""

    QUEUED, ACTIVE, SUPERSEDED, REJECTED, INVALIDATED, EXPIRED = (
        "queued",
        "active",
        "superseded",
        "rejected",
        "invalidated",
        "expired",
    )
    # An erased memory keeps its row (ids other rows point at stay valid) and nothing of its
    # content: text, key, value and vector are empty and it never leaves this state (knowledge.erasure).
    ERASED = "erased"
    STATUSES = [(s, s) for s in (QUEUED, ACTIVE, SUPERSEDED, REJECTED, INVALIDATED, EXPIRED, ERASED)]
    LIVE = (QUEUED, ACTIVE)  # the states a memory can still leave
    WORKING, EPISODIC, SEMANTIC, PROCEDURAL = "working", "episodic", "semantic", "procedural"
    TIERS = [(t, t) for t in (WORKING, EPISODIC, SEMANTIC, PROCEDURAL)]
    SHORT_TERM_TIERS = (WORKING, EPISODIC)
    TIER_ORDER = [WORKING, EPISODIC, SEMANTIC, PROCEDURAL]

    # No single-column indexes on owner and entry: (owner, store, status) and (entry, position)
    # below serve those lookups, and every index costs each write.
    owner = models.ForeignKey(
        "knowledge.Agent", on_delete=models.PROTECT, related_name="memories", db_index=False
    )
    store = models.CharField(max_length=120)
    entry = models.ForeignKey(
        "knowledge.Entry",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="blocks",
        db_index=False,
    )
    skill = models.ForeignKey(
        "knowledge.Skill",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="lessons",
        db_index=False,
    )
    position = models.PositiveIntegerField(null=True, blank=True)

    text = models.TextField()
    key = models.CharField(max_length=200, blank=True)
    value = models.JSONField(null=True, blank=True)
    tier = models.CharField(max_length=12, choices=TIERS, default=SEMANTIC)
    category = models.CharField(max_length=40, blank=True)
    confidence = models.FloatField(default=1.0)

    status = models.CharField(max_length=12, choices=STATUSES, default=QUEUED)
    queue_reason = models.CharField(max_length=16, blank=True)  # new | requeued | merge | gate
    status_reason = models.TextField(blank=True)
    stale = models.BooleanField(default=False)
    stale_reason = models.TextField(blank=True)
    pinned = models.BooleanField(default=False)

    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    content_hash = models.CharField(max_length=64)
    version = models.PositiveIntegerField(default=1)
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="superseded_candidates"
    )
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    replaces = models.JSONField(default=list, blank=True)  # ids a merged memory replaced

    author_kind = models.CharField(max_length=16)  # agent | person | distiller | dreaming | system
    author_name = models.CharField(max_length=150)
    conversation = models.ForeignKey(
        "knowledge.Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="memories"
    )
    run_id = models.CharField(max_length=100, blank=True)
    turn = models.IntegerField(null=True, blank=True)
    event_id = models.CharField(max_length=100, blank=True)

    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    # Full text of key and text, kept by PostgreSQL (the keyword route of recall reads it).
    search = models.GeneratedField(
        expression=SearchVector("key", "text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "memories"
        indexes = [
            models.Index(fields=["status", "tier"]),
            models.Index(fields=["owner", "store", "status"]),
            models.Index(fields=["key"]),
            models.Index(fields=["entry", "position"]),
            # Overlays: one agent's lessons of one skill, in order (only lessons carry a skill).
            models.Index(
                fields=["owner", "skill", "position"],
                name="memory_overlay_idx",
                condition=models.Q(skill__isnull=False),
            ),
            GinIndex(fields=["search"], name="memory_search_gin"),
            HnswIndex(
                name="memory_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]
        constraints = [
            models.CheckConstraint(
                name="memory_confidence_0_1", condition=models.Q(confidence__gte=0, confidence__lte=1)
            )
        ]

    def __str__(self) -> str:
        return f"memory {self.pk}"

    # Two times (docs/API.md, "Two times"): when what it says held — its validity, from when it was
    # written where none was given — and when Brain learned it (`created_at`).
    @property
    def held_from(self):
        return self.valid_from or self.created_at

    @property
    def held_until(self):
        return self.valid_to

    @staticmethod
    def hash_content(text: str, key: str = "", value=None) -> str:
        payload = json.dumps({"text": text, "key": key, "value": value}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()


class MemoryVersion(models.Model):
    """A past (or the current) text of a memory; an edit adds one, nothing is overwritten."""

    # Indexed by the unique (memory, version) constraint.
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="versions", db_index=False)
    version = models.PositiveIntegerField()
    text = models.TextField()
    key = models.CharField(max_length=200, blank=True)
    value = models.JSONField(null=True, blank=True)
    content_hash = models.CharField(max_length=64)
    author_kind = models.CharField(max_length=16)
    author_name = models.CharField(max_length=150)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["memory", "-version"]
        constraints = [models.UniqueConstraint(fields=["memory", "version"], name="memory_version_unique")]


class MemorySource(models.Model):
    """What a memory rests on: a source reference, its fingerprint when the memory was written,
    and its state at the last provenance check (see knowledge.memories.fingerprints, memory.provenance)."""

    KINDS = [
        "ticket",
        "kb",
        "record",
        "memory",
        "conversation",
        "message",
        "material",
        "entry",
        "task_outcome",
    ]

    # Indexed by the unique (memory, kind, ref) constraint.
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="sources", db_index=False)
    kind = models.CharField(max_length=16, choices=[(k, k) for k in KINDS])
    ref = models.CharField(max_length=300)
    UNCHANGED, CHANGED, DELETED, UNTRACKED = "unchanged", "changed", "deleted", "untracked"
    STATES = [(s, s) for s in (UNCHANGED, CHANGED, DELETED, UNTRACKED)]

    # Recorded when the memory was written (or re-baselined): the fingerprint of the fields that
    # matter for this kind, and those fields themselves so a change can be shown field by field.
    fingerprint = models.CharField(max_length=64, blank=True)
    snapshot = models.JSONField(null=True, blank=True)
    # The result of the last provenance check.
    state = models.CharField(max_length=10, choices=STATES, default=UNCHANGED, db_default=UNCHANGED)
    checked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["kind", "ref"]), models.Index(fields=["state"])]
        constraints = [models.UniqueConstraint(fields=["memory", "kind", "ref"], name="memory_source_unique")]

    def __str__(self) -> str:
        return f"{self.kind}:{self.ref}"


class MemoryContradiction(models.Model):
    """Two active memories without a key that contradict each other by the relation finder
    (memory.matching.relations): a trusted writer's memory went active against an older one.
    Both stay in force, listed under "Conflicts in force", until someone decides (replace, or
    keep both as of different times: memory.lifecycle.review.memory_conflict_resolve); a pair
    counts only while both are active with overlapping validity."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="+")  # the newer
    other = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="+")
    why = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "other"], name="memory_contradiction_unique")
        ]
        indexes = [models.Index(fields=["other"])]
