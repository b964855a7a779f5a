from django.db import models
from django.db.models import Q


class ConsolidationPlan(models.Model):
    """One consolidation run's change set: every memory it would change (or changed), before and
    after. Proposed plans wait for a reviewer; applied plans can be reverted exactly. Nothing in a
    plan ever deletes a memory."""

    RUNNING, PROPOSED, APPLIED, REVERTED, DISCARDED, EMPTY, FAILED = (
        "running",
        "proposed",
        "applied",
        "reverted",
        "discarded",
        "empty",
        "failed",
    )
    STATES = [(s, s) for s in (RUNNING, PROPOSED, APPLIED, REVERTED, DISCARDED, EMPTY, FAILED)]
    OPEN_STATES = (RUNNING, PROPOSED)  # their memories are not considered by another run

    state = models.CharField(max_length=10, choices=STATES, default=RUNNING, db_index=True)
    mode = models.CharField(max_length=10)  # propose | apply: the mode the run was made in
    owner = models.ForeignKey(
        "knowledge.Agent", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    store = models.CharField(max_length=120, blank=True)  # scope of the run ("" = every store)
    created_by = models.CharField(max_length=160)
    created_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    applied_by = models.CharField(max_length=160, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    reverted_by = models.CharField(max_length=160, blank=True)
    reverted_at = models.DateTimeField(null=True, blank=True)
    counts = models.JSONField(default=dict)
    model_note = models.TextField(blank=True)  # why the model did not (fully) take part
    added_sources = models.JSONField(default=list, blank=True)  # MemorySource ids apply added
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # At most one run at a time: a second run gets a clear "busy" instead of racing.
            models.UniqueConstraint(
                fields=["state"], condition=Q(state="running"), name="one_consolidation_running"
            )
        ]

    def __str__(self) -> str:
        return f"consolidation plan {self.pk} ({self.state})"


class ConsolidationGroup(models.Model):
    """One change of a plan: memories folded into a kept duplicate, near-duplicates merged into
    a new memory, a same-key conflict settled, or the oldest memories summarised. The reconciler
    adds vector duplicates (folded into the most confident), promotions (episodic → semantic),
    session digests (expired episodic memories summarised into one) and links (a memory and its
    nearest neighbours); `data` holds what such a change adds besides memories (sources, links)."""

    DUPLICATE, NEAR_DUPLICATE, CONFLICT, SUMMARY = "duplicate", "near_duplicate", "conflict", "summary"
    VECTOR_DUPLICATE, PROMOTION, DIGEST, LINK = "vector_duplicate", "promotion", "digest", "link"
    KINDS = [
        (k, k.replace("_", "-"))
        for k in (DUPLICATE, NEAR_DUPLICATE, CONFLICT, SUMMARY, VECTOR_DUPLICATE, PROMOTION, DIGEST, LINK)
    ]

    plan = models.ForeignKey(ConsolidationPlan, on_delete=models.CASCADE, related_name="groups")
    kind = models.CharField(max_length=16, choices=KINDS)
    owner = models.ForeignKey("knowledge.Agent", on_delete=models.PROTECT, related_name="+")
    store = models.CharField(max_length=120)
    category = models.CharField(max_length=40, blank=True)
    key = models.CharField(max_length=200, blank=True)
    target = models.ForeignKey("knowledge.Memory", on_delete=models.PROTECT, related_name="+")
    merged_text = models.TextField(blank=True)  # the model's merged or summary text
    reason = models.TextField(blank=True)
    position = models.PositiveIntegerField(default=0)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["plan", "position", "id"]


class ConsolidationItem(models.Model):
    """One memory named by a plan, with its exact state before (and after) the plan, so apply
    can check nothing changed meanwhile and revert can put it back exactly."""

    FOLD, KEEP, MERGED = "fold", "keep", "merged"
    ROLES = [(r, r) for r in (FOLD, KEEP, MERGED)]

    plan = models.ForeignKey(ConsolidationPlan, on_delete=models.CASCADE, related_name="items")
    group = models.ForeignKey(ConsolidationGroup, on_delete=models.CASCADE, related_name="items")
    memory = models.ForeignKey("knowledge.Memory", on_delete=models.PROTECT, related_name="+")
    role = models.CharField(max_length=8, choices=ROLES)
    before = models.JSONField()  # {"memory": snapshot, "sources": [source rows]}
    # Merged memories: the fields apply changed. Originals' changes follow from the plan (see
    # memory.consolidation.plans), so they are not stored.
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["group", "id"]
        constraints = [models.UniqueConstraint(fields=["plan", "memory"], name="consolidation_item_once")]
        indexes = [models.Index(fields=["memory"])]
