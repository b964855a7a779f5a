"""Which active memories keyless queued memories contradict, for many at once: what a reviewer's
approval reads before the conflict rule (`conflicts.conflicting_active` takes them from
`memory.contradicted`, which the approval sets from this)."""

from knowledge.models import Memory, MemoryContradiction
from memory.lifecycle.hints import across_people, dismissed_among, pair
from memory.matching.relations import CONTRADICTION, related_for


def contradicted_active_for(memories: list[Memory]) -> dict[int, list[Memory]]:
    """For each memory: the active memories a keyless one contradicts by the relation finder's
    rules (memory.matching.relations, in the stores its agent reads), other than the one it
    supersedes; oldest first; none for a keyed one (the conflict rule reads its key). For one
    queued for a conflict, also those the model found while it waited (contradictions_mark
    recorded them and set that reason). Never a memory in another person's private store
    (hints.across_people: a decision does not retire it), nor one of a pair a reviewer dismissed
    as unrelated. The finder's statements once for all of them, one for the dismissed pairs, and
    one more only when one waits for a conflict."""
    found: dict[int, dict[int, Memory]] = {memory.pk: {} for memory in memories}
    keyless = [memory for memory in memories if not memory.key]
    for memory_id, related in related_for(keyless).items():
        found[memory_id] = {r.memory.pk: r.memory for r in related if r.relation == CONTRADICTION}
    waiting = [memory.pk for memory in keyless if memory.queue_reason == "conflict"]
    if waiting:
        recorded = MemoryContradiction.objects.filter(
            memory_id__in=waiting, other__status=Memory.ACTIVE
        ).select_related("other__owner")
        for row in recorded:
            found[row.memory_id][row.other_id] = row.other
    dismissed = dismissed_among(list(found)) if any(found.values()) else set()
    by_id = {memory.pk: memory for memory in memories}
    return {
        memory_id: sorted(
            (
                other
                for other in others.values()
                if not across_people(by_id[memory_id], other) and pair(memory_id, other.pk) not in dismissed
            ),
            key=lambda m: (m.created_at, m.pk),
        )
        for memory_id, others in found.items()
    }
