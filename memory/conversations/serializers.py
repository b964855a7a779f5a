"""Input and output serializers of the conversations API, and the builders of its answers."""

from drf_spectacular.utils import PolymorphicProxySerializer, inline_serializer
from rest_framework import serializers

from knowledge.conversations import services as evidence
from knowledge.conversations.speakers import MAX_SPEAKER, speaker_error
from knowledge.models import Channel, Conversation
from knowledge.web import SLUG, StrictCharField, StrictSerializer


class ChannelIn(StrictSerializer):
    name = serializers.RegexField(
        SLUG, max_length=100, error_messages={"invalid": "Use letters, digits, - and _ only."}
    )
    kind = serializers.ChoiceField(
        choices=[Channel.KIND_SHARED, Channel.KIND_DM], default=Channel.KIND_SHARED
    )
    person = serializers.RegexField(SLUG, max_length=64, required=False)
    agent = serializers.RegexField(SLUG, max_length=64, required=False)
    memory_scope = serializers.ChoiceField(
        choices=[Channel.SCOPE_SHARED, Channel.SCOPE_CHANNEL], default=Channel.SCOPE_SHARED
    )
    integrations = serializers.ListField(
        child=serializers.RegexField(SLUG, max_length=64), required=False, default=list
    )


def channel_out(channel: Channel) -> dict:
    return {
        "id": channel.pk,
        "name": channel.name,
        "kind": channel.kind,
        "person": channel.person.name if channel.person_id else None,
        "agent": channel.agent.name if channel.agent_id else None,
        "memory_scope": channel.memory_scope,
        "integrations": sorted(channel.integrations.values_list("integration__name", flat=True)),
        "created_at": channel.created_at,
    }


ChannelOut = inline_serializer(
    "Channel",
    {
        "id": serializers.IntegerField(),
        "name": serializers.CharField(),
        "kind": serializers.CharField(),
        "person": serializers.CharField(allow_null=True),
        "agent": serializers.CharField(allow_null=True),
        "memory_scope": serializers.CharField(),
        "integrations": serializers.ListField(child=serializers.CharField()),
        "created_at": serializers.DateTimeField(),
    },
)


class MessageIn(StrictSerializer):
    channel = serializers.RegexField(SLUG, max_length=100)
    thread = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    speaker = StrictCharField(
        max_length=MAX_SPEAKER + len("person:"),
        help_text="A person's or agent's display name (spaces and any script; at most 64 characters), "
        "optionally prefixed with person: or agent:. An agent's name in any letter case is that agent.",
    )
    text = StrictCharField(max_length=100_000, trim_whitespace=False)
    ts = serializers.DateTimeField(required=False)
    external_id = serializers.CharField(max_length=200, required=False, allow_blank=True)

    def validate_speaker(self, value):
        problem = speaker_error(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


class MessageBatchIn(StrictSerializer):
    messages = MessageIn(many=True, allow_empty=False, max_length=evidence.MAX_BATCH)


class MessageStoredSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    channel = serializers.CharField()
    external_id = serializers.CharField(allow_null=True)
    duplicate = serializers.BooleanField()


BatchOut = inline_serializer(
    "MessagesStored",
    {
        "received": serializers.IntegerField(),
        "stored": serializers.IntegerField(),
        "duplicates": serializers.IntegerField(),
        "messages": MessageStoredSerializer(many=True),
    },
)


MessagesIn = PolymorphicProxySerializer(
    "MessagesIn",
    serializers=[MessageIn, MessageBatchIn],
    resource_type_field_name=None,
)


MessagesOut = PolymorphicProxySerializer(
    "MessagesOut",
    serializers=[MessageStoredSerializer, BatchOut],
    resource_type_field_name=None,
)


class ConversationIn(StrictSerializer):
    agent = serializers.RegexField(SLUG, max_length=64)
    channel = serializers.RegexField(SLUG, max_length=100)
    thread = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


ConversationOut = inline_serializer(
    "Conversation",
    {
        "id": serializers.IntegerField(),
        "agent": serializers.CharField(),
        "channel": serializers.CharField(),
        "thread": serializers.CharField(),
        "status": serializers.CharField(),
        "read_stores": serializers.ListField(child=serializers.CharField()),
        "write_store": serializers.CharField(),
        "started_at": serializers.DateTimeField(),
        "finished_at": serializers.DateTimeField(allow_null=True),
    },
)


def conversation_out(c: Conversation) -> dict:
    return {
        "id": c.pk,
        "agent": c.agent.name,
        "channel": c.channel.name,
        "thread": c.thread,
        "status": c.status,
        "read_stores": c.read_stores,
        "write_store": c.write_store,
        "started_at": c.started_at,
        "finished_at": c.finished_at,
    }
