"""What the memory app derived from erased content goes with it (knowledge.erasure sends
`content_erased` inside its transaction): conversation summaries that may quote an erased
message are dropped (the next compilation folds again from what remains), links and gate checks
of erased memories go, and consolidation plans keep no copy of an erased memory's text."""

from django.db.models import Q

from memory.models import ConsolidationGroup, ConsolidationItem, ConversationSummary, GateCheck, MemoryLink


def derived_of_erased_drop(*, memory_ids, conversation_ids, channel_ids, **kwargs) -> None:
    ConversationSummary.objects.filter(
        Q(conversation_id__in=conversation_ids) | Q(conversation__channel_id__in=channel_ids)
    ).delete()
    if not memory_ids:
        return
    MemoryLink.objects.filter(Q(memory_id__in=memory_ids) | Q(neighbour_id__in=memory_ids)).delete()
    GateCheck.objects.filter(memory_id__in=memory_ids).delete()
    groups = set(
        ConsolidationItem.objects.filter(memory_id__in=memory_ids).values_list("group_id", flat=True)
    )
    groups |= set(ConsolidationGroup.objects.filter(target_id__in=memory_ids).values_list("pk", flat=True))
    ConsolidationItem.objects.filter(memory_id__in=memory_ids).update(before={"erased": True}, after=None)
    ConsolidationItem.objects.filter(group_id__in=groups, role=ConsolidationItem.MERGED).update(after=None)
    ConsolidationGroup.objects.filter(pk__in=groups).update(merged_text="", key="", reason="", data={})
