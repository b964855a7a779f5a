"""Finishing a conversation, and what happens when one ends."""

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import audit_record
from knowledge.errors import Conflict
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
