"""Reads of the links between memories, through what the reader may see."""

from knowledge.access import memory_readable_q
from knowledge.models import Memory
from memory.models import MemoryLink


def memory_links(memory: Memory, *, principal=None, visible_q=None) -> list[dict]:
    """The memories `memory` links to that the reader may see (`visible_q`, a filter on memories,
    or what `principal` may read), nearest first."""
    if visible_q is None:
        visible_q = memory_readable_q(principal)
    rows = (
        MemoryLink.objects.filter(memory=memory, neighbour__in=Memory.objects.filter(visible_q).values("pk"))
        .select_related("neighbour")
        .order_by("-similarity", "neighbour_id")
    )
    return [
        {
            "id": link.neighbour_id,
            "text": link.neighbour.text,
            "store": link.neighbour.store,
            "status": link.neighbour.status,
            "similarity": link.similarity,
            "plan": link.plan_id,
        }
        for link in rows
    ]
