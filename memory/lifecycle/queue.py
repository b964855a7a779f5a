"""The review queue at volume: which queued memories a reviewer's filter matches, the counts of
each facet under the rest of the filter, and one page of the matches. The filter is what the
queue's URL says (`QueueFilterForm`), so a filtered queue can be shared, and "approve everything
this filter matches" decides exactly the memories the reviewer was shown the count of.

An import is found by what it leaves on its memories: a Mem0 import (memory.imports.mem0) cites
`record` sources `mem0:<id>` and files its memories in category `mem0`; `import=mem0` matches
those, and with a store (`private:alice`) it is one person's part of the import. An agent-file
import (knowledge.portability) restores each memory exactly as it was exported — author,
status, reason and sources — so nothing on a row tells it came from a file; its queued memories
are the ones its source Brain had queued, found with the agent filter (a file lands in one
agent)."""

from dataclasses import dataclass, fields, replace

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from knowledge.models import Memory, MemorySource
from knowledge.principal import Principal
from memory.lifecycle import selectors

OLDEST, NEWEST = "oldest", "newest"
ORDERS = (OLDEST, NEWEST)
PAGE_SIZES = (10, 25, 50, 100)
PAGE_SIZE = 10  # about 2,500 px of cards at laptop width
IMPORTS = {"mem0": ("Mem0 import", "mem0", "mem0:")}  # name → (label, category, record ref prefix)


@dataclass(frozen=True)
class QueueFilter:
    """What a reviewer narrows the queue to; empty fields match everything."""

    agent: str = ""
    store: str = ""
    category: str = ""
    reason: str = ""
    source: str = ""
    imported: str = ""
    q: str = ""

    def without(self, name: str) -> "QueueFilter":
        return replace(self, **{name: ""})

    def params(self) -> dict[str, str]:
        """The filter as URL parameters (the form's names), empty ones left out."""
        names = {"imported": "import"}
        return {
            names.get(f.name, f.name): getattr(self, f.name) for f in fields(self) if getattr(self, f.name)
        }

    @property
    def narrowed(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))


FACET_CHOICES = {  # the facets with a fixed set of values: the console's form and the API's list
    "reason": list(selectors.QUEUE_REASONS),
    "source": list(MemorySource.KINDS),
    "imported": list(IMPORTS),
}


def memories_matching(qs: QuerySet, where: QueueFilter) -> QuerySet:
    """The memories of `qs` that `where` matches: the one meaning of each filter, for the
    console's queue and the API's list alike."""
    if where.agent:
        qs = qs.filter(owner__name=where.agent)
    if where.store:
        qs = qs.filter(store=where.store)
    if where.category:
        qs = qs.filter(category=where.category)
    if where.reason:
        qs = (
            qs.filter(queue_reason__in=["new", ""])
            if where.reason == "new"
            else qs.filter(queue_reason=where.reason)
        )
    if where.source:
        qs = qs.filter(Exists(MemorySource.objects.filter(memory=OuterRef("pk"), kind=where.source)))
    if where.imported in IMPORTS:
        _label, category, prefix = IMPORTS[where.imported]
        cites = MemorySource.objects.filter(memory=OuterRef("pk"), kind="record", ref__startswith=prefix)
        qs = qs.filter(Exists(cites), category=category)
    if where.q:
        qs = qs.filter(Q(text__icontains=where.q) | Q(key__icontains=where.q))
    return qs


def queued_matching(where: QueueFilter, *, owner: str = "") -> QuerySet:
    """The queued memories `where` matches (within the console's owner selection `owner`)."""
    qs = Memory.objects.filter(status=Memory.QUEUED)
    if owner:
        qs = qs.filter(owner__name=owner)
    return memories_matching(qs, where)


def queue_ordered(qs: QuerySet, order: str = OLDEST) -> QuerySet:
    return qs.order_by("-created_at", "-id") if order == NEWEST else qs.order_by("created_at", "id")


def queue_offset_after(where: QueueFilter, *, owner: str = "", order: str = OLDEST, after: int) -> int | None:
    """How many matching memories come up to and including memory `after` in queue order (None
    when there is no such memory): where "next page" starts, counted afresh, so memories decided
    on this page since it was shown do not make the next page skip the ones after them."""
    anchor = Memory.objects.filter(pk=after).values_list("created_at", flat=True).first()
    if anchor is None:
        return None
    if order == NEWEST:
        upto = Q(created_at__gt=anchor) | Q(created_at=anchor, pk__gte=after)
    else:
        upto = Q(created_at__lt=anchor) | Q(created_at=anchor, pk__lte=after)
    return queued_matching(where, owner=owner).filter(upto).count()


def queue_page(
    where: QueueFilter,
    *,
    owner: str = "",
    order: str = OLDEST,
    offset: int = 0,
    size: int = PAGE_SIZE,
    principal: Principal | None = None,
) -> list[selectors.QueueItem]:
    """One page of the matching queue, each item with what review_queue gives it (what it would
    supersede, contradictions, gate verdict, duplicate hints), in a fixed number of queries."""
    ids = list(
        queue_ordered(queued_matching(where, owner=owner), order).values_list("pk", flat=True)[
            offset : offset + size
        ]
    )
    items = selectors.review_queue(ids=ids, principal=principal) if ids else []
    position = {pk: i for i, pk in enumerate(ids)}
    return sorted(items, key=lambda item: position[item.memory.pk])


def queue_matching_ids(where: QueueFilter, *, owner: str = "", order: str = OLDEST) -> list[int]:
    """Every queued memory `where` matches, in queue order (for a decision on all of them)."""
    return list(queue_ordered(queued_matching(where, owner=owner), order).values_list("pk", flat=True))


def _counted(qs: QuerySet, field: str) -> dict[str, int]:
    rows = qs.order_by().values(field).annotate(n=Count("id", distinct=True))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[field] or ""] = counts.get(row[field] or "", 0) + row["n"]
    return dict(sorted(counts.items()))


def queue_reason_counts(where: QueueFilter, *, owner: str = "") -> dict[str, int]:
    """How many queued memories each reason tab holds under the rest of the filter."""
    reasons = _counted(queued_matching(where.without("reason"), owner=owner), "queue_reason")
    reasons["new"] = reasons.pop("new", 0) + reasons.pop("", 0)
    return {r: reasons.get(r, 0) for r in selectors.QUEUE_REASONS}


def queue_facets(where: QueueFilter, *, owner: str = "") -> dict[str, dict[str, int]]:
    """For each facet, how many queued memories each of its values matches under the rest of the
    filter (so a reviewer sees what choosing it would leave), one query per facet."""
    imports = {}
    for name in IMPORTS:
        imports[name] = queued_matching(replace(where, imported=name), owner=owner).count()
    sources = (
        MemorySource.objects.filter(memory__in=queued_matching(where.without("source"), owner=owner))
        .values("kind")
        .annotate(n=Count("memory", distinct=True))
        .order_by("kind")
    )
    return {
        "reason": queue_reason_counts(where, owner=owner),
        "agent": _counted(queued_matching(where.without("agent"), owner=owner), "owner__name"),
        "store": _counted(queued_matching(where.without("store"), owner=owner), "store"),
        "category": _counted(queued_matching(where.without("category"), owner=owner), "category"),
        "source": {row["kind"]: row["n"] for row in sources},
        "imported": imports,
    }
