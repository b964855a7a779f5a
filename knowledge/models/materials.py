"""External sources an agent was asked to learn (materials), their immutable versions, and
external signals with the admins' routing rules.

A material is evidence, not knowledge: its original bytes are stored (through Django's storage
API) before learning starts, and learning writes entries that cite it. A new upload or a new
connector version is a new MaterialVersion; a stored original is never overwritten."""

from django.db import models
from django.db.models import Q


class Material(models.Model):
    """One source: an uploaded file, pasted text, pasted web content, or a connector's
    read-only mirror of an external document (`connector` + `external_ref`). `version` is the
    version being (or last) learned; `state` is its learning state."""

    FILE, TEXT, WEB, CONNECTOR = "file", "text", "web", "connector"
    KINDS = [(k, k) for k in (FILE, TEXT, WEB, CONNECTOR)]
    STORED, QUEUED, LEARNING, LEARNED, FAILED = "stored", "queued", "learning", "learned", "failed"
    STATES = [(s, s) for s in (STORED, QUEUED, LEARNING, LEARNED, FAILED)]

    kind = models.CharField(max_length=10, choices=KINDS)
    title = models.CharField(max_length=300)
    owner = models.ForeignKey("knowledge.Agent", on_delete=models.PROTECT, related_name="materials")
    store = models.CharField(max_length=120)
    connector = models.SlugField(max_length=64, blank=True)
    external_ref = models.CharField(max_length=300, blank=True)
    version = models.ForeignKey(
        "knowledge.MaterialVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    state = models.CharField(max_length=10, choices=STATES, default=STORED)
    reason = models.TextField(blank=True)  # why learning failed (or was not needed)
    attempts = models.PositiveIntegerField(default=0)
    learning_started_at = models.DateTimeField(null=True, blank=True)
    learned_at = models.DateTimeField(null=True, blank=True)
    learned_with = models.CharField(max_length=40, blank=True)  # the job version that learned it
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    asked_by = models.CharField(max_length=200)  # "<kind>:<name>" of who asked for learning
    # The integration that mirrors a connector document: only it (or an admin) changes or
    # withdraws the document.
    integration = models.ForeignKey(
        "knowledge.Integration", null=True, blank=True, on_delete=models.SET_NULL, related_name="documents"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state"]), models.Index(fields=["owner", "store"])]
        constraints = [
            models.UniqueConstraint(
                fields=["connector", "external_ref"],
                condition=~Q(connector=""),
                name="material_connector_ref_unique",
            ),
            models.CheckConstraint(
                name="material_connector_has_ref",
                condition=Q(kind="connector", connector__gt="", external_ref__gt="")
                | (~Q(kind="connector") & Q(connector="")),
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def source_ref(self) -> str:
        """How memories cite it: its id, or `<connector>:<ref>` for a connector document."""
        return f"{self.connector}:{self.external_ref}" if self.connector else str(self.pk)

    @property
    def withdrawn(self) -> bool:
        return self.withdrawn_at is not None


class MaterialVersion(models.Model):
    """One immutable original: its bytes in storage (`path`), their sha256, size and media
    type (sniffed from the bytes), and the connector's version label. `sections` is how many
    sections learning cut its text into (0 until learned)."""

    material = models.ForeignKey(Material, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    label = models.CharField(max_length=200, blank=True)
    path = models.CharField(max_length=500)
    filename = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    media_type = models.CharField(max_length=120)
    sections = models.PositiveIntegerField(default=0)
    pages = models.PositiveIntegerField(default=0)
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["material", "number"]
        constraints = [models.UniqueConstraint(fields=["material", "number"], name="material_version_unique")]

    def __str__(self) -> str:
        return f"{self.material_id} v{self.number}"


class ConnectorGrant(models.Model):
    """An admin's grant: `integration` may mirror connector documents for `agent` into `store`
    (the agent's knowledge then cites them). An integration holds no other way to write into an
    agent's stores."""

    integration = models.ForeignKey("knowledge.Integration", on_delete=models.CASCADE, related_name="grants")
    agent = models.ForeignKey("knowledge.Agent", on_delete=models.CASCADE, related_name="connector_grants")
    store = models.CharField(max_length=120)
    updated_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["integration__name", "agent__name", "store"]
        constraints = [
            models.UniqueConstraint(fields=["integration", "agent", "store"], name="connector_grant_unique")
        ]

    def __str__(self) -> str:
        return f"{self.integration_id} → {self.agent_id}/{self.store}"


class SignalRule(models.Model):
    """Where external signals of a source (and optionally a type) go: a channel, its memory
    scope, and whether they may be curated into knowledge (`learn` false for fast-changing
    values such as prices or stock). The most specific rule (source + type over source alone)
    wins."""

    source = models.SlugField(max_length=64)
    type = models.CharField(max_length=64, blank=True)
    channel = models.SlugField(max_length=100)
    memory_scope = models.CharField(
        max_length=10, choices=[("shared", "shared"), ("channel", "channel-only")], default="shared"
    )
    learn = models.BooleanField(default=True)
    updated_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["source", "type"]
        constraints = [models.UniqueConstraint(fields=["source", "type"], name="signal_rule_unique")]

    def __str__(self) -> str:
        return f"{self.source}/{self.type or '*'} → {self.channel}"


class Signal(models.Model):
    """One external event, kept as a message in its rule's channel. Idempotent by
    (source, external_id)."""

    source = models.SlugField(max_length=64)
    type = models.CharField(max_length=64)
    external_id = models.CharField(max_length=200)
    text = models.TextField()
    data = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()
    rule = models.ForeignKey(SignalRule, null=True, on_delete=models.SET_NULL, related_name="signals")
    message = models.OneToOneField("knowledge.Message", on_delete=models.PROTECT, related_name="signal")
    learn = models.BooleanField()
    posted_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-occurred_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "external_id"], name="signal_external_id_unique")
        ]
