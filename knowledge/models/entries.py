from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models


class LiveEntryManager(models.Manager):
    """`Entry.objects`: entries that are not deleted. Restore and the audit use `all_objects`."""

    def get_queryset(self):
        return super().get_queryset().filter(deleted_at__isnull=True)


class AllEntryManager(models.Manager):
    """`Entry.all_objects`: deleted entries too."""


class Entry(models.Model):
    """One stable topic of curated knowledge. Its body blocks are Memories attached to it
    (`entry`, `position`); blocks in the body are the active and queued ones.

    A deleted entry keeps its row (`deleted_at` set) and its blocks are retired, so its delete
    audit record can restore it exactly. `head_vector`, `name_trigrams`, `block_count` and
    `block_authors` (and the EntrySearch document) are derived by database triggers (migration 0006_entry_search)
    from the entry's fields and its body blocks, whoever writes them; values written from
    Python are overwritten on every insert and update."""

    name = models.CharField(max_length=300)
    type = models.CharField(max_length=64, blank=True)
    aliases = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    summary = models.TextField(blank=True)
    properties = models.JSONField(default=dict, blank=True)
    store = models.CharField(max_length=120)
    owner = models.ForeignKey("knowledge.Agent", on_delete=models.PROTECT, related_name="entries")
    version = models.PositiveIntegerField(default=1)
    author_kind = models.CharField(max_length=16, blank=True)  # who last changed the metadata
    author_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # an entry holds what its blocks say, each with its own time; `created_at` is when Brain
    # learned of it
    held_from = held_until = None
    deleted_at = models.DateTimeField(null=True, blank=True)

    head_vector = SearchVectorField(null=True, editable=False)  # name, aliases (A), summary (B)
    # The trigrams of name and aliases, each packed into a bigint (brain_trigram_codes in SQL).
    name_trigrams = ArrayField(models.BigIntegerField(), default=list, blank=True, editable=False)
    block_count = models.PositiveIntegerField(default=0, editable=False)
    block_authors = ArrayField(models.TextField(), default=list, blank=True, editable=False)

    DERIVED_FIELDS = ("head_vector", "name_trigrams", "block_count", "block_authors")

    objects = LiveEntryManager()
    all_objects = AllEntryManager()

    class Meta:
        ordering = ["name"]
        base_manager_name = "all_objects"
        verbose_name_plural = "entries"
        indexes = [
            models.Index(fields=["owner", "store"]),
            models.Index(fields=["-updated_at", "-id"], name="entry_updated_idx"),
            models.Index(fields=["name", "id"], name="entry_name_idx"),
            GinIndex(fields=["name_trigrams"], name="entry_trigram_gin"),
            GinIndex(fields=["head_vector"], name="entry_head_gin"),  # recall's keyword route
            GinIndex(fields=["block_authors"], name="entry_authors_gin"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None


class EntrySearch(models.Model):
    """An entry's full-text document (name and aliases weight A, summary B, body blocks C),
    written only by the database trigger. A table of its own so entry rows stay narrow: lists,
    counts and filters never read the documents."""

    entry = models.OneToOneField(Entry, primary_key=True, on_delete=models.CASCADE, related_name="search")
    document = SearchVectorField()

    class Meta:
        indexes = [GinIndex(fields=["document"], name="entry_search_gin")]


class EntryRelation(models.Model):
    """entry → predicate → entry, stored only where a source states it: `sources` is a
    non-empty list of {"kind", "ref"} source references (the same kinds as MemorySource)."""

    source = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="relations_out")
    predicate = models.CharField(max_length=100)
    target = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="relations_in")
    sources = models.JSONField(default=list)
    valid_from = models.DateField(null=True, blank=True)
    valid_to = models.DateField(null=True, blank=True)
    author_kind = models.CharField(max_length=16)
    author_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["predicate", "id"]
        indexes = [models.Index(fields=["source", "predicate"]), models.Index(fields=["target"])]
        constraints = [
            models.CheckConstraint(name="relation_has_evidence", condition=~models.Q(sources=[])),
            models.CheckConstraint(
                name="relation_valid_interval",
                condition=models.Q(valid_from__isnull=True)
                | models.Q(valid_to__isnull=True)
                | models.Q(valid_to__gte=models.F("valid_from")),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} {self.predicate} {self.target_id}"


class CurationGuide(models.Model):
    """One per principal, in its self store: the domain types, page thresholds, taxonomy and
    update rules Dreaming follows. Only people (admins) edit it; every edit is a new version
    and is audited with its before/after."""

    STORE = "self"

    owner = models.OneToOneField("knowledge.Agent", on_delete=models.CASCADE, related_name="curation_guide")
    store = models.CharField(max_length=120, default=STORE, editable=False)
    domain_types = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    taxonomy = models.TextField(blank=True)
    page_thresholds = models.JSONField(default=dict, blank=True)
    update_rules = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    updated_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    DEFAULT_DOMAIN_TYPES = ["person", "organization", "project", "policy", "system"]
    DEFAULT_PAGE_THRESHOLDS = {"min_mentions_for_entry": 2, "min_evidence_for_induction": 2, "max_blocks": 40}
    DEFAULT_UPDATE_RULES = (
        "Update the entry that owns the topic instead of creating a new one.\n"
        "Keep old facts with their end date and the new ones with their start date.\n"
        "Do not store temporary progress, one-time errors, or unverified guesses as durable knowledge."
    )

    class Meta:
        ordering = ["owner__name"]

    def __str__(self) -> str:
        return f"curation guide of {self.owner_id}"

    @classmethod
    def for_owner(cls, owner) -> "CurationGuide":
        """The owner's curation guide, or an unsaved one with the defaults (version 0)."""
        guide = cls.objects.filter(owner=owner).first()
        if guide is None:
            guide = cls(
                owner=owner,
                domain_types=list(cls.DEFAULT_DOMAIN_TYPES),
                page_thresholds=dict(cls.DEFAULT_PAGE_THRESHOLDS),
                update_rules=cls.DEFAULT_UPDATE_RULES,
                version=0,
            )
        return guide
