"""Evidence from conversations: messages (immutable once stored), the episodes Dreaming's stage A
cuts them into, and which integrations take part in which channels."""

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import F, Func
from pgvector.django import HnswIndex, VectorField

from knowledge.models.memories import EMBEDDING_DIMENSIONS

# The full-text configuration of every keyword route (messages, memories, entries).
FTS_CONFIG = "english"


class ChannelIntegration(models.Model):
    """An integration takes part in a channel (and may post messages to it): the channels it
    created itself, and those an admin attached it to."""

    channel = models.ForeignKey("knowledge.Channel", on_delete=models.CASCADE, related_name="integrations")
    integration = models.ForeignKey(
        "knowledge.Integration", on_delete=models.CASCADE, related_name="channel_links"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["channel", "integration"], name="channel_integration_unique")
        ]


class Message(models.Model):
    """One message said in a channel (optionally in a thread). Evidence: never rewritten.

    `store` is the channel's message store when the message arrived (`shared`, `channel:<name>`
    or `private:<person>`); it never changes, so a later change of the channel's routing rule
    moves no old message across a visibility boundary. `external_id` makes ingestion idempotent
    (unique per channel). Its vector is a MessageVector."""

    # Indexed by (channel, ts) and (channel, thread, ts) below.
    channel = models.ForeignKey(
        "knowledge.Channel", on_delete=models.PROTECT, related_name="messages", db_index=False
    )
    thread = models.CharField(max_length=200, blank=True)
    store = models.CharField(max_length=120)
    speaker_person = models.ForeignKey(
        "knowledge.Person", null=True, blank=True, on_delete=models.PROTECT, related_name="messages"
    )
    speaker_agent = models.ForeignKey(
        "knowledge.Agent", null=True, blank=True, on_delete=models.PROTECT, related_name="messages"
    )
    speaker_name = models.CharField(max_length=64)
    text = models.TextField()
    ts = models.DateTimeField()
    external_id = models.CharField(max_length=200, null=True, blank=True)
    posted_by = models.CharField(max_length=200)  # "<kind>:<name>" of the token that posted it
    episode = models.ForeignKey(
        "knowledge.Episode", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    # Who said it is indexed with what was said: questions name people ("what did Ana say about…").
    search = models.GeneratedField(
        expression=SearchVector("speaker_name", "text", config=FTS_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    # False for signals routed with `learn: false` (fast-changing values): kept as messages,
    # searchable, never curated into knowledge (Dreaming's stage A reads only learn=True).
    learn = models.BooleanField(default=True, db_default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["ts", "id"]
        indexes = [
            models.Index(fields=["channel", "ts"], name="message_channel_ts"),
            models.Index(fields=["channel", "thread", "ts"], name="message_thread_ts"),
            # The words with the channel and the day beside them (migration 0027), so the keyword
            # route selects "these words in this channel or these days" inside the index.
            GinIndex(
                Func(
                    F("search"),
                    F("channel_id"),
                    F("ts"),
                    function="brain_message_keys",
                    output_field=SearchVectorField(),
                ),
                name="message_keys_gin",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["channel", "external_id"], name="message_external_id_unique"),
            models.CheckConstraint(
                name="message_has_one_speaker",
                condition=models.Q(speaker_person__isnull=False, speaker_agent__isnull=True)
                | models.Q(speaker_person__isnull=True, speaker_agent__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"message {self.pk} in {self.channel_id}"

    @property
    def held_from(self):  # when it was said; `created_at` is when Brain received it
        return self.ts

    held_until = None


class MessageVector(models.Model):
    """A message's vector, in its own table: messages are by far the largest table, and 1.5 kB of
    floats inline in every row would make each keyword, thread and filter scan read ~7× more
    pages (measured: keyword search over 100,000 messages 17 ms → 7 ms). `model` names the
    embedding model that made it; another model means the message is backlog again."""

    message = models.OneToOneField(Message, primary_key=True, on_delete=models.CASCADE, related_name="vector")
    model = models.CharField(max_length=100)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)

    class Meta:
        indexes = [
            HnswIndex(
                name="message_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]


class Episode(models.Model):
    """Stage A's navigation aid over messages: a topic, its summary, the question someone is
    likely to ask later, how it was resolved and the messages that support it. It never
    replaces messages; the messages it covers point at it (Message.episode)."""

    channel = models.ForeignKey("knowledge.Channel", on_delete=models.PROTECT, related_name="episodes")
    thread = models.CharField(max_length=200, blank=True)
    store = models.CharField(max_length=120)
    topic = models.CharField(max_length=300)
    summary = models.TextField()
    likely_question = models.TextField(blank=True)
    resolution = models.TextField(blank=True)
    related_systems = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    evidence = models.ManyToManyField(Message, blank=True, related_name="supported_episodes")
    start_ts = models.DateTimeField()
    end_ts = models.DateTimeField()
    dreaming_run = models.BigIntegerField(null=True, blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-end_ts", "-id"]
        indexes = [
            models.Index(fields=["channel", "end_ts"], name="episode_channel_end"),
            HnswIndex(
                name="episode_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"episode {self.pk}: {self.topic}"

    @property
    def held_from(self):  # the conversation's own time; `created_at` is when Brain summed it up
        return self.start_ts

    @property
    def held_until(self):
        return self.end_ts

    def embedding_text(self) -> str:
        parts = [self.topic, self.summary, self.likely_question, self.resolution]
        return "\n".join(p for p in parts if p)
