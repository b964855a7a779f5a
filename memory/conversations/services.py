"""Posting messages, opening and finishing a conversation, and what happens when one ends (the
REST API and the MCP server both call these)."""

from django.db import transaction
from django.utils import timezone

from knowledge import names
from knowledge.access import can_post_message
from knowledge.audit.services import audit_record
from knowledge.conversations import services as evidence
from knowledge.errors import Conflict, Refused
from knowledge.models import Conversation
from knowledge.principal import Principal
from knowledge.signals import conversation_finished
from memory.lifecycle.expiry import memory_clear_working


class AlreadyFinished(Conflict):
    default_message = "This conversation is already finished."


def conversation_finish(*, actor: Principal, conversation_id: int) -> Conversation:
    """Close an open conversation (row-locked: of two concurrent finishes exactly one wins, the
    other gets AlreadyFinished → 409). Its stores stay as they were fixed at the start."""
    with transaction.atomic():
        conversation = (
            Conversation.objects.select_for_update().select_related("agent").get(pk=conversation_id)
        )
        if conversation.status == Conversation.FINISHED:
            raise AlreadyFinished()
        conversation.status = Conversation.FINISHED
        conversation.finished_at = timezone.now()
        conversation.save(update_fields=["status", "finished_at"])

        # Working memory of this conversation is cleared in this same transaction; the
        # distiller (curation, listening to this signal) learns from it after commit.
        memory_clear_working(actor=actor, conversation=conversation)
        conversation_finished.send(sender=Conversation, conversation=conversation)

        audit_record(
            "conversation.finished",
            actor=actor,
            store=conversation.write_store,
            owner=conversation.agent.name,
            object_type="conversation",
            object_ids=[conversation.pk],
        )
    return conversation


def messages_post(principal: Principal, items: list[dict]) -> tuple[list[dict], evidence.IngestResult]:
    """Store validated messages (`MessageIn` data) for `principal`: every channel must exist
    (400) and take the principal's posts (`can_post_message`, 403). Returns one row per message
    (`id`, `channel`, `external_id`, `duplicate`) and the ingestion result. The API and the MCP
    server both post through here."""
    channels = names.channels_named(i["channel"] for i in items)
    for channel in channels.values():
        if not can_post_message(principal, channel):
            raise Refused(f"You take no part in channel {channel.name}.")
    result = evidence.message_ingest(
        actor=principal,
        messages=[
            evidence.MessageIn(
                channel=channels[i["channel"]],
                speaker=i["speaker"],
                text=i["text"],
                ts=i.get("ts"),
                thread=i.get("thread") or "",
                external_id=i.get("external_id") or None,
            )
            for i in items
        ],
    )
    rows = [
        {"id": pk, "channel": i["channel"], "external_id": i.get("external_id") or None, "duplicate": dup}
        for i, pk, dup in zip(items, result.ids, result.duplicate, strict=True)
    ]
    return rows, result


def conversation_open(principal: Principal, v: dict) -> Conversation:
    """Open a conversation from validated `ConversationIn` data: unknown names are a 400; who may
    join is `knowledge.conversations.services.conversation_start`'s rule (`check_join`)."""
    agent, _, channel = names.scope_for(principal, agent=v["agent"], channel=v["channel"])
    return evidence.conversation_start(actor=principal, agent=agent, channel=channel, thread=v["thread"])
