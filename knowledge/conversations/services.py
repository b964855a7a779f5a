"""Every write of conversation evidence: channels (created, opened through the API, integrations
taking part in them), conversations started, and message ingestion (bulk, idempotent by
external_id)."""

from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.conversations.speakers import speakers_resolve
from knowledge.embeddings.kick import request_embedding_run
from knowledge.errors import Invalid
from knowledge.models import Agent, Channel, ChannelIntegration, Conversation, Integration, Message, Person
from knowledge.principal import ADMIN, Principal
from knowledge.principals.services import person_get_or_create

MAX_BATCH = 1000


def channel_create(
    *,
    actor: Principal,
    name: str,
    kind: str = Channel.KIND_SHARED,
    person: Person | None = None,
    agent: Agent | None = None,
    memory_scope: str = Channel.SCOPE_SHARED,
) -> Channel:
    """A channel. A direct message names its person and the one agent it belongs to. A changed
    routing rule (memory_scope) only applies to later conversations."""
    errors = {}
    if kind == Channel.KIND_DM:
        if person is None:
            errors["person"] = ["A direct-message channel needs the person it is with."]
        if agent is None:
            errors["agent"] = ["A direct-message channel needs the agent it belongs to."]
    elif agent is not None:
        errors["agent"] = ["Only a direct-message channel belongs to an agent."]
    if errors:
        raise Invalid(errors)
    with transaction.atomic():
        if Channel.objects.filter(name=name).exists():
            raise Invalid({"name": [f"A channel named {name} already exists."]})
        channel = Channel(name=name, kind=kind, person=person, agent=agent, memory_scope=memory_scope)
        channel.full_clean()
        channel.save()
        data = {"kind": kind, "memory_scope": memory_scope}
        if agent is not None:
            data["agent"] = agent.name
        audit_record(
            "channel.created",
            actor=actor,
            owner=agent.name if agent is not None else "",
            object_type="channel",
            object_ids=[channel.pk],
            data=data,
        )
    return channel


def conversation_start(*, actor: Principal, agent: Agent, channel: Channel, thread: str = "") -> Conversation:
    """Open a conversation for `agent` in `channel` (who may: `access.check_join`); its read
    stores and write store are fixed now, from the channel's current routing rule."""
    access.check_join(actor, agent=agent, channel=channel)
    read, write = access.conversation_scope(channel)
    with transaction.atomic():
        conversation = Conversation.objects.create(
            agent=agent, channel=channel, thread=thread, read_stores=read, write_store=write
        )
        audit_record(
            "conversation.started",
            actor=actor,
            store=write,
            owner=agent.name,
            object_type="conversation",
            object_ids=[conversation.pk],
        )
    return conversation


def channel_open(
    *,
    actor: Principal,
    name: str,
    kind: str = Channel.KIND_SHARED,
    person: Person | str | None = None,
    agent: Agent | None = None,
    memory_scope: str = Channel.SCOPE_SHARED,
    integrations: list[Integration] = (),
) -> Channel:
    """Create a channel (channel_create) and let integrations take part in it: the creating
    integration always, plus any an admin names. A direct message is with `person` — a row, or
    a name, the person then created when new, in the same transaction — and belongs to `agent`;
    it always uses the person's private store."""
    if kind == Channel.KIND_SHARED and person:
        raise Invalid({"person": ["Only a direct-message channel has a person."]})
    if kind == Channel.KIND_DM and memory_scope != Channel.SCOPE_SHARED:
        raise Invalid({"memory_scope": ["A direct message always uses the person's private store."]})
    if integrations:
        access.require_role(actor, ADMIN, "Only admins may name integrations that take part in a channel.")
    with transaction.atomic():
        if isinstance(person, str):
            person = person_get_or_create(actor=actor, name=person)
        channel = channel_create(
            actor=actor, name=name, kind=kind, person=person, agent=agent, memory_scope=memory_scope
        )
        members = list(integrations)
        if actor.is_integration and actor.integration not in members:
            members.append(actor.integration)
        for integration in members:
            channel_integration_add(actor=actor, channel=channel, integration=integration)
    return channel


def channel_integration_add(*, actor: Principal, channel: Channel, integration: Integration) -> None:
    """Let `integration` post messages to `channel` (a no-op when it already may)."""
    with transaction.atomic():
        _, created = ChannelIntegration.objects.get_or_create(channel=channel, integration=integration)
        if created:
            audit_record(
                "channel.integration_added",
                actor=actor,
                object_type="channel",
                object_ids=[channel.pk],
                data={"integration": integration.name},
            )


@dataclass
class MessageIn:
    channel: Channel
    speaker: str
    text: str
    ts: datetime | None = None
    thread: str = ""
    external_id: str | None = None


@dataclass
class IngestResult:
    ids: list[int | None] = field(default_factory=list)  # per input message, in order
    duplicate: list[bool] = field(default_factory=list)

    @property
    def stored(self) -> int:
        return self.duplicate.count(False)

    @property
    def duplicates(self) -> int:
        return self.duplicate.count(True)


_INSERT = """
INSERT INTO knowledge_message
  (id, channel_id, thread, store, speaker_person_id, speaker_agent_id, speaker_name, text, ts,
   external_id, posted_by, created_at)
SELECT u.id, u.channel_id, u.thread, u.store, u.person_id, u.agent_id, u.speaker_name, u.text, u.ts,
       u.external_id, %s, %s
FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::bigint[], %s::bigint[], %s::text[],
            %s::text[], %s::timestamptz[], %s::text[])
  AS u(id, channel_id, thread, store, person_id, agent_id, speaker_name, text, ts, external_id)
ON CONFLICT (channel_id, external_id) DO NOTHING
RETURNING id
"""


def message_ingest(*, actor: Principal, messages: list[MessageIn]) -> IngestResult:
    """Store messages in one transaction and one INSERT. A message whose (channel, external_id)
    is already stored — earlier, or earlier in the same batch — is not stored again; its
    result points at the stored one. Embedding happens later, in the worker."""
    if not messages:
        return IngestResult()
    if len(messages) > MAX_BATCH:
        raise Invalid({"messages": [f"At most {MAX_BATCH} messages per call."]})
    now = timezone.now()
    with transaction.atomic():
        speakers = speakers_resolve(actor, {m.speaker for m in messages})
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence('knowledge_message', 'id')) "
                "FROM generate_series(1, %s)",
                [len(messages)],
            )
            new_ids = [r[0] for r in cursor.fetchall()]
            stores = {m.channel.pk: access.message_store(m.channel) for m in messages}
            columns = [[] for _ in range(10)]
            for new_id, m in zip(new_ids, messages, strict=True):
                kind, sid, speaker_name = speakers[m.speaker]
                row = (
                    new_id,
                    m.channel.pk,
                    m.thread or "",
                    stores[m.channel.pk],
                    sid if kind == "person" else None,
                    sid if kind == "agent" else None,
                    speaker_name,
                    m.text,
                    m.ts or now,
                    m.external_id or None,
                )
                for col, value in zip(columns, row, strict=True):
                    col.append(value)
            cursor.execute(_INSERT, [f"{actor.kind_label}:{actor.name}", now, *columns])
            inserted = {r[0] for r in cursor.fetchall()}
        result = IngestResult()
        missing = [
            (m.channel.pk, m.external_id)
            for new_id, m in zip(new_ids, messages, strict=True)
            if new_id not in inserted
        ]
        existing = {}
        if missing:
            channel_ids = {c for c, _ in missing}
            external = {e for _, e in missing}
            existing = {
                (c, e): pk
                for pk, c, e in Message.objects.filter(
                    channel_id__in=channel_ids, external_id__in=external
                ).values_list("pk", "channel_id", "external_id")
            }
        for new_id, m in zip(new_ids, messages, strict=True):
            if new_id in inserted:
                result.ids.append(new_id)
                result.duplicate.append(False)
            else:
                result.ids.append(existing.get((m.channel.pk, m.external_id)))
                result.duplicate.append(True)
        channels = sorted({m.channel.pk for m in messages})
        stored_ids = [i for i, dup in zip(result.ids, result.duplicate, strict=True) if not dup]
        if result.stored:  # an idempotent re-send that stores nothing changes nothing
            audit_record(
                "messages.ingested",
                actor=actor,
                store=stores[channels[0]] if len(channels) == 1 else "",
                object_type="message",
                object_ids=stored_ids,
                counts={"received": len(messages), "stored": result.stored, "duplicates": result.duplicates},
                data={"channels": channels},
            )
        if result.stored:
            transaction.on_commit(request_embedding_run)
    return result
