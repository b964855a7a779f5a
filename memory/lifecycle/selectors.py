"""Reads of memories for the API and the console — every one through knowledge.access."""

import difflib
import re
from dataclasses import dataclass, field

from django.db.models import Count, Q
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from knowledge import access
from knowledge.models import AuditEvent, Memory
from knowledge.principals.principal import Principal
from memory.models import GateCheck

QUEUE_REASONS = ["new", "requeued", "merge", "gate"]
QUEUE_REASON_LABELS = {
    "new": "new",
    "requeued": "requeued: a source changed",
    "merge": "consolidation merge",
    "gate": "eval gate",
    "supersedes": "retires another agent's memory",
}
REVIEW_ACTIONS = ["memory.approved", "memory.rejected", "memory.held"]


def contradicts(a: Memory, b: Memory) -> bool:
    """Whether two memories with the same key say different things: different values, or (for
    memories without a value) different text once case and spacing are set aside."""
    if a.value is not None or b.value is not None:
        return a.value != b.value
    return " ".join(a.text.split()).casefold() != " ".join(b.text.split()).casefold()


def memory_list(
    principal: Principal,
    *,
    status: str = "",
    tier: str = "",
    category: str = "",
    store: str = "",
    agent: str = "",
    q: str = "",
    stale: bool | None = None,
    pinned: bool | None = None,
    key: str = "",
):
    """Memories `principal` may read, newest first, filtered; sources prefetched."""
    qs = Memory.objects.filter(access.readable_q(principal)).select_related("owner")
    if status:
        qs = qs.filter(status=status)
    if tier:
        qs = qs.filter(tier=tier)
    if category:
        qs = qs.filter(category=category)
    if store:
        qs = qs.filter(store=store)
    if agent:
        qs = qs.filter(owner__name=agent)
    if key:
        qs = qs.filter(key=key)
    if stale is not None:
        qs = qs.filter(stale=stale)
    if pinned is not None:
        qs = qs.filter(pinned=pinned)
    if q:
        qs = qs.filter(Q(text__icontains=q) | Q(key__icontains=q))
    return qs.prefetch_related("sources").order_by("-created_at", "-id")


def memory_stores(owner: str = "") -> list[str]:
    """Every store that holds a memory (for the console's store filter)."""
    qs = Memory.objects.all()
    if owner:
        qs = qs.filter(owner__name=owner)
    return list(qs.order_by("store").values_list("store", flat=True).distinct())


def queue_count(owner: str = "") -> int:
    qs = Memory.objects.filter(status=Memory.QUEUED)
    if owner:
        qs = qs.filter(owner__name=owner)
    return qs.count()


def queue_reason_counts(owner: str = "") -> dict[str, int]:
    qs = Memory.objects.filter(status=Memory.QUEUED)
    if owner:
        qs = qs.filter(owner__name=owner)
    rows = qs.values("queue_reason").annotate(n=Count("id"))
    counts = {reason: 0 for reason in QUEUE_REASONS}
    for row in rows:
        counts[row["queue_reason"] or "new"] = counts.get(row["queue_reason"] or "new", 0) + row["n"]
    return counts


@dataclass
class QueueItem:
    memory: Memory
    compare_to: Memory | None = None  # the memory it would supersede, or one it contradicts
    relation: str = ""  # "supersedes" | "contradicts"
    contradicts: list[Memory] = field(default_factory=list)
    gate_check: object = None  # the latest finished eval-gate verdict, if any

    @property
    def diff(self) -> SafeString | None:
        if self.compare_to is None:
            return None
        return text_diff_html(self.compare_to.text, self.memory.text)


def _queued(*, owner: str = "", reason: str = ""):
    qs = Memory.objects.filter(status=Memory.QUEUED)
    if owner:
        qs = qs.filter(owner__name=owner)
    if reason:
        qs = qs.filter(queue_reason=reason) if reason != "new" else qs.filter(queue_reason__in=["new", ""])
    return qs


def review_queue(*, owner: str = "", reason: str = "", ids=None, limit: int | None = None) -> list[QueueItem]:
    """Queued memories, oldest first (at most `limit`), each with what it would supersede (or
    the active memories with the same key that it contradicts) — in a fixed number of queries."""
    qs = (
        _queued(owner=owner, reason=reason)
        .select_related("owner", "supersedes")
        .prefetch_related("sources")
        .order_by("created_at", "id")
    )
    if ids is not None:
        qs = qs.filter(pk__in=ids)
    if limit is not None:
        qs = qs[:limit]
    return _queue_items(list(qs))


def review_queue_total(*, owner: str = "", reason: str = "") -> int:
    return _queued(owner=owner, reason=reason).count()


def _queue_items(memories: list[Memory]) -> list[QueueItem]:
    keyed = [m for m in memories if m.key]
    by_key: dict[tuple, list[Memory]] = {}
    if keyed:
        active = Memory.objects.filter(
            status=Memory.ACTIVE, key__in={m.key for m in keyed}, store__in={m.store for m in keyed}
        ).order_by("-created_at")
        for other in active:
            by_key.setdefault((other.key, other.store), []).append(other)
    gate_checks = (
        {
            check.memory_id: check
            for check in GateCheck.objects.filter(memory_id__in=[m.pk for m in memories])
            .exclude(verdict__in=[GateCheck.PENDING, GateCheck.RUNNING])
            .order_by("memory_id", "-created_at", "-id")
            .distinct("memory_id")
        }
        if memories
        else {}
    )
    items = []
    for memory in memories:
        item = QueueItem(memory=memory, gate_check=gate_checks.get(memory.pk))
        if memory.key:
            item.contradicts = [
                other
                for other in by_key.get((memory.key, memory.store), [])
                if other.pk != memory.supersedes_id
                and (
                    not memory.store.startswith(access.OWNER_ONLY_PREFIXES)
                    or other.owner_id == memory.owner_id
                )
                and contradicts(memory, other)
            ]
        if memory.supersedes_id:
            item.compare_to, item.relation = memory.supersedes, "supersedes"
        elif item.contradicts:
            item.compare_to, item.relation = item.contradicts[0], "contradicts"
        items.append(item)
    return items


def recent_review_decisions(*, owner: str = "", limit: int = 15):
    """The newest review decisions (approve, reject, held), for the queue page's audit panel."""
    qs = AuditEvent.objects.filter(action__in=REVIEW_ACTIONS)
    if owner:
        qs = qs.filter(owner=owner)
    return list(qs.order_by("-created_at", "-id")[:limit])


def memory_audit_history(memory: Memory):
    """Every audit event that names this memory, newest first."""
    return list(
        AuditEvent.objects.filter(object_type="memory", object_ids__contains=[str(memory.pk)]).order_by(
            "-created_at", "-id"
        )
    )


def supersession_chain(memory: Memory, limit: int = 50) -> list[Memory]:
    """The memories this one replaced and that replaced it, oldest first (itself included)."""
    back, cursor, seen = [], memory, {memory.pk}
    while cursor.supersedes_id and cursor.supersedes_id not in seen and len(back) < limit:
        cursor = Memory.objects.select_related("owner").get(pk=cursor.supersedes_id)
        seen.add(cursor.pk)
        back.append(cursor)
    forward, cursor = [], memory
    while cursor.superseded_by_id and cursor.superseded_by_id not in seen and len(forward) < limit:
        cursor = Memory.objects.select_related("owner").get(pk=cursor.superseded_by_id)
        seen.add(cursor.pk)
        forward.append(cursor)
    return [*reversed(back), memory, *forward]


def memory_versions(memory: Memory):
    """The memory's versions, newest first, each with a diff against the one before it."""
    versions = list(memory.versions.order_by("version"))
    previous = None
    for version in versions:
        version.diff = text_diff_html(previous.text, version.text) if previous is not None else None
        previous = version
    return list(reversed(versions))


def memory_dependants(memory: Memory):
    """Memories that cite this one as a source."""
    return list(
        Memory.objects.filter(sources__kind="memory", sources__ref=str(memory.pk))
        .select_related("owner")
        .order_by("-created_at")
    )


_TOKENS = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)


def text_diff_html(old: str, new: str) -> SafeString:
    """A word-level diff of two texts as HTML: removed words in <del>, added in <ins>. Every
    piece of text is escaped before it is wrapped."""
    a, b = _TOKENS.findall(old or ""), _TOKENS.findall(new or "")
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(escape("".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            out.append(f"<del>{escape(''.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            out.append(f"<ins>{escape(''.join(b[j1:j2]))}</ins>")
    return mark_safe("".join(out))  # noqa: S308 — every piece above is escaped
