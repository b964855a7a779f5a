"""django-q2 entry point: fold a conversation's newer turns into its summary with the model, in
the background (a compilation never waits for it)."""

from django.core.cache import cache

from knowledge import access
from knowledge.llm import deferred_reason
from knowledge.models import Conversation, Message
from knowledge.principal import Principal
from memory.history.section import QUEUED_KEY, FoldDeferred, summary_advance, summary_fold_defer


def summary_fold(conversation_id: int, boundary_id: int, deferrals: int = 0) -> str:
    """Fold the turns before `boundary_id` (the oldest verbatim turn when it was queued) into
    the conversation's summary with the light model (extractively when its reply is refused or
    no model may be asked). When the model server does not answer, nothing is written and the
    fold comes back here after a back-off (`deferrals`: outages in a row so far)."""
    cache.delete(QUEUED_KEY.format(conversation_id))
    conversation = Conversation.objects.select_related("agent", "channel").filter(pk=conversation_id).first()
    boundary = Message.objects.filter(pk=boundary_id).first()
    if conversation is None or boundary is None:
        return "nothing to fold: the conversation or its message is gone"
    as_agent = Principal.for_agent(conversation.agent)
    messages = Message.objects.filter(
        access.message_readable_q(as_agent, conversation=conversation),
        channel_id=conversation.channel_id,
        thread=conversation.thread,
    ).only("pk", "ts", "speaker_name", "text")
    try:
        row = summary_advance(
            messages, conversation=conversation, agent=conversation.agent, boundary=boundary
        )
    except FoldDeferred as exc:
        at = summary_fold_defer(conversation_id, boundary_id, deferrals=deferrals)
        return f"{deferred_reason(exc.reason)}; again from {at:%Y-%m-%d %H:%M:%S} UTC"
    return f"folded: {row.method}" if row is not None else "nothing to fold"
