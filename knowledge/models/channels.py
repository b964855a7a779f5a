from django.db import models


class Channel(models.Model):
    """Where people and agents talk. A shared channel's memory scope ("routing rule") decides
    whether its conversations read and write the shared store or a channel-only store. A direct
    message belongs to one agent and one person: only that agent has conversations in it."""

    KIND_SHARED, KIND_DM = "shared", "dm"
    KINDS = [(KIND_SHARED, "shared channel"), (KIND_DM, "direct message")]
    SCOPE_SHARED, SCOPE_CHANNEL = "shared", "channel"
    SCOPES = [(SCOPE_SHARED, "shared"), (SCOPE_CHANNEL, "channel-only")]

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=10, choices=KINDS, default=KIND_SHARED)
    person = models.ForeignKey(
        "knowledge.Person", null=True, blank=True, on_delete=models.PROTECT, related_name="dm_channels"
    )
    agent = models.ForeignKey(
        "knowledge.Agent", null=True, blank=True, on_delete=models.PROTECT, related_name="dm_channels"
    )
    memory_scope = models.CharField(max_length=10, choices=SCOPES, default=SCOPE_SHARED)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                name="dm_has_person",
                condition=models.Q(kind="shared") | models.Q(kind="dm", person__isnull=False),
            ),
            models.CheckConstraint(
                name="only_dm_has_agent", condition=models.Q(kind="dm") | models.Q(agent__isnull=True)
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Conversation(models.Model):
    """An agent's session in a channel (or a thread of it). Its scope — the stores it reads and
    the store it writes — is fixed when it starts and never changes afterwards."""

    OPEN, FINISHED = "open", "finished"

    agent = models.ForeignKey("knowledge.Agent", on_delete=models.PROTECT, related_name="conversations")
    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="conversations")
    thread = models.CharField(max_length=200, blank=True)
    read_stores = models.JSONField(default=list)
    write_store = models.CharField(max_length=120)
    status = models.CharField(max_length=10, default=OPEN, choices=[(OPEN, OPEN), (FINISHED, FINISHED)])
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["agent", "channel"])]

    def __str__(self) -> str:
        return f"conversation {self.pk} ({self.agent} in {self.channel})"
