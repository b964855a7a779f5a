"""The review queue at volume: which queued memories a reviewer's filter matches (agent, store,
tier, category, reason, source kind, import, author, age, text), the counts of
each facet under the rest of the filter, and one page of the matches. The filter is what the
queue's URL says (`QueueFilterForm`), so a filtered queue can be shared, and "approve everything
this filter matches" decides exactly the memories its confirmation named
(`queue_matching_shown`, memory.lifecycle.shown).

An import is found by what it leaves on its memories: a Mem0 import (memory.imports.mem0) cites
`record` sources `mem0:<id>` and files its memories in category `mem0`; `import=mem0` matches
those, and with a store (`private:alice`) it is one person's part of the import. An agent-file
import (knowledge.portability) restores each memory exactly as it was exported — author,
status, reason and sources — so nothing on a row tells it came from a file; its queued memories
are the ones its source Brain had queued, found with the agent filter (a file lands in one
agent)."""

import datetime
from dataclasses import dataclass, fields, replace

from django.db.models import Case, CharField, Count, Exists, OuterRef, Q, QuerySet, Value, When
from django.utils import timezone

from knowledge.models import Memory, MemorySource
from knowledge.principal import Principal
from memory.lifecycle import selectors
from memory.lifecycle.shown import FINGERPRINT_FIELDS, fingerprint

OLDEST, NEWEST = "oldest", "newest"
ORDERS = (OLDEST, NEWEST)
PAGE_SIZES = (10, 25, 50, 100)
PAGE_SIZE = 10  # about 2,500 px of cards at laptop width
IMPORTS = {"mem0": ("Mem0 import", "mem0", "mem0:")}  # name → (label, category, record ref prefix)
# How long a memory has waited: name → (label, at least, under) in days; the buckets do not overlap.
AGES = {
    "day": ("under a day", 0, 1),
    "week": ("1–7 days", 1, 7),
    "month": ("7–30 days", 7, 30),
    "older": ("over 30 days", 30, None),
}


@dataclass(frozen=True)
class QueueFilter:
    """What a reviewer narrows the queue to; empty fields match everything."""

    agent: str = ""
    store: str = ""
    tier: str = ""
    category: str = ""
    reason: str = ""
    source: str = ""
    imported: str = ""
    author: str = ""  # who wrote it: an author_name (an agent, a person, a system route)
    age: str = ""  # one of AGES
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
    "tier": list(Memory.TIER_ORDER),
    "source": list(MemorySource.KINDS),
    "imported": list(IMPORTS),
    "age": list(AGES),
}


def _age_q(age: str, now: datetime.datetime) -> Q:
    _label, least, under = AGES[age]
    q = Q(created_at__lte=now - datetime.timedelta(days=least))
    if under is not None:
        q &= Q(created_at__gt=now - datetime.timedelta(days=under))
    return q


def memories_matching(qs: QuerySet, where: QueueFilter) -> QuerySet:
    """The memories of `qs` that `where` matches: the one meaning of each filter, for the
    console's queue and the API's list alike."""
    if where.agent:
        qs = qs.filter(owner__name=where.agent)
    if where.store:
        qs = qs.filter(store=where.store)
    if where.tier:
        qs = qs.filter(tier=where.tier)
    if where.category:
        qs = qs.filter(category=where.category)
    if where.author:
        qs = qs.filter(author_name=where.author)
    if where.age in AGES:
        qs = qs.filter(_age_q(where.age, timezone.now()))
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


def queued(owner: str = "") -> QuerySet:
    """Every queued memory (within the console's owner selection `owner`)."""
    qs = Memory.objects.filter(status=Memory.QUEUED)
    return qs.filter(owner__name=owner) if owner else qs


def queued_matching(where: QueueFilter, *, owner: str = "") -> QuerySet:
    """The queued memories `where` matches (within the console's owner selection `owner`)."""
    return memories_matching(queued(owner), where)


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


def queue_matching_shown(
    where: QueueFilter, *, owner: str = "", order: str = OLDEST, most: int | None = None
) -> list[tuple[int, str]]:
    """The first `most` queued memories `where` matches, in queue order, each with the
    fingerprint of what a confirmation shows of it (memory.lifecycle.shown): what a decision on
    all of them is bound to."""
    qs = queue_ordered(queued_matching(where, owner=owner), order).values_list("pk", *FINGERPRINT_FIELDS)
    return [(row[0], fingerprint(row[1:])) for row in (qs[:most] if most is not None else qs)]


# The facets that are a column of the row (or, for age, a bucket of one), counted by grouping.
GROUPED = {
    "reason": "queue_reason",
    "agent": "owner__name",
    "store": "store",
    "tier": "tier",
    "category": "category",
    "author": "author_name",
    "age": "waited",
}


def _grouped(qs: QuerySet, names: list[str], now: datetime.datetime) -> dict[str, dict[str, int]]:
    """The counts of each value of the facets `names` among `qs`, in one statement: grouped by
    all of them at once (a queue holds few combinations of agent, store, tier … ), summed here."""
    if "age" in names:
        buckets = [When(_age_q(name, now), then=Value(name)) for name in AGES]
        qs = qs.annotate(waited=Case(*buckets, default=Value(""), output_field=CharField()))
    columns = [GROUPED[name] for name in names]
    counts: dict[str, dict[str, int]] = {name: {} for name in names}
    for row in qs.order_by().values(*columns).annotate(n=Count("id")):
        for name, column in zip(names, columns, strict=True):
            value = row[column] or ""
            counts[name][value] = counts[name].get(value, 0) + row["n"]
    if "reason" in counts:
        reasons = counts["reason"]
        reasons["new"] = reasons.pop("new", 0) + reasons.pop("", 0)
        counts["reason"] = {r: reasons.get(r, 0) for r in selectors.QUEUE_REASONS}
    if "age" in counts:
        counts["age"] = {a: counts["age"].get(a, 0) for a in AGES}
    return {
        name: values if name in ("reason", "age") else dict(sorted(values.items()))
        for name, values in counts.items()
    }


def queue_reason_counts(where: QueueFilter, *, owner: str = "") -> dict[str, int]:
    """How many queued memories each reason tab holds under the rest of the filter."""
    return _grouped(queued_matching(where.without("reason"), owner=owner), ["reason"], timezone.now())[
        "reason"
    ]


def queue_facets(
    where: QueueFilter, *, owner: str = "", base: QuerySet | None = None
) -> dict[str, dict[str, int]]:
    """For each facet, how many of the queued memories `base` (default: the whole queue, within
    `owner`) each of its values matches under the rest of the filter — what choosing it would
    leave. The facets the filter leaves open share one grouped statement; each one it sets needs
    its own (the rest of the filter differs), and so do sources and imports. Reasons and ages
    list every value, the others those present."""
    base = queued(owner) if base is None else base
    now = timezone.now()
    open_ = [name for name in GROUPED if not getattr(where, name)]
    facets = _grouped(memories_matching(base, where), open_, now) if open_ else {}
    for name in GROUPED:
        if name not in facets:
            facets.update(_grouped(memories_matching(base, where.without(name)), [name], now))
    sources = (
        MemorySource.objects.filter(memory__in=memories_matching(base, where.without("source")).values("pk"))
        .values("kind")
        .annotate(n=Count("memory", distinct=True))
        .order_by("kind")
    )
    facets["source"] = {row["kind"]: row["n"] for row in sources}
    facets["imported"] = {
        name: memories_matching(base, replace(where, imported=name)).count() for name in IMPORTS
    }
    return facets
