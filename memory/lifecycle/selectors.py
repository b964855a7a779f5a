"""Reads of memories for the API and the console — every one through knowledge.access."""

import datetime
import difflib
import re
from dataclasses import dataclass, field

from django.contrib.postgres.search import SearchQuery
from django.db.models import Q
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from knowledge import access, names
from knowledge.models import AuditEvent, Memory, MemoryContradiction
from knowledge.principal import Principal
from memory.lifecycle import hints
from memory.matching.facts import contradicts, windows_overlap
from memory.matching.relations import CONTRADICTION, DUPLICATE, Related, related_for
from memory.models import GateCheck

QUEUE_REASONS = ["new", "conflict", "requeued", "merge", "gate", "supersedes"]
QUEUE_REASON_LABELS = {
    "new": "new",
    "requeued": "requeued: a source changed",
    "merge": "consolidation merge",
    "gate": "eval gate",
    "supersedes": "retires another agent's memory",
    "conflict": "conflict: same key, another value",
}
REVIEW_ACTIONS = ["memory.approved", "memory.rejected", "memory.held"]


def memory_label(memory: Memory) -> str:
    """How a decision names a memory it touches: its id, and what it belongs to — "#32 (block 2
    of entry VPN client)", "#40 (lesson of skill triage, agent copilot)" — so a card or a result
    never hides that it retires part of an entry or an overlay."""
    if memory.entry_id:
        entry = memory.entry
        position = (memory.position or 0) + 1
        return f"#{memory.pk} (block {position} of entry {entry.name}, agent {memory.owner.name})"
    if memory.skill_id:
        return f"#{memory.pk} (lesson of skill {memory.skill.name}, agent {memory.owner.name})"
    person = memory.store.removeprefix(hints.PRIVATE) if memory.store.startswith(hints.PRIVATE) else ""
    return f"#{memory.pk} (agent {memory.owner.name}, {memory.store}{f', person {person}' if person else ''})"


def retired_by(memory: Memory) -> str:
    """A sentence naming every memory an approval or write just retired or closed."""
    outcome = getattr(memory, "conflict_outcome", None) or {}
    ids = list(outcome.get("retired", []))
    if memory.supersedes_id and memory.supersedes_id not in ids:
        ids.insert(0, memory.supersedes_id)
    if not ids:
        return ""
    rows = {m.pk: m for m in Memory.objects.select_related("owner", "entry", "skill").filter(pk__in=ids)}
    named = ", ".join(memory_label(rows[i]) for i in ids if i in rows)
    if outcome.get("decision") == "keep_both":
        return f"Kept as of different times: {named} now end{'s' if len(ids) == 1 else ''} at {outcome['boundary']}."
    return f"Retired {named}."


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
    words: str = "",
):
    """Memories `principal` may read, newest first, filtered; sources prefetched. `q` matches a
    substring of the text or key (the list's filter); `words` matches words of them, stemmed,
    through the stored tsvector and its GIN index (the header search: a rare word would
    otherwise scan every memory)."""
    qs = Memory.objects.filter(access.memory_readable_q(principal)).select_related("owner")
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
    if words:
        qs = qs.filter(search=SearchQuery(words, config="english", search_type="plain"))
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


@dataclass
class QueueItem:
    memory: Memory
    compare_to: Memory | None = None  # the memory it would supersede, or one it contradicts
    relation: str = ""  # "supersedes" | "contradicts"
    contradicts: list[Memory] = field(default_factory=list)
    gate_check: object = None  # the latest finished eval-gate verdict, if any
    labels: dict = field(default_factory=dict)  # id → memory_label of every memory it touches
    dups: object = None  # memory.lifecycle.duplicates.DuplicateHints, for the reader
    related: list = field(default_factory=list)  # memory.matching.relations.Related, for the reader
    queued_contradicts: list = field(default_factory=list)  # Related: queued memories it contradicts

    @property
    def related_duplicates(self) -> list:
        """The relation finder's duplicates the vector hints do not already show."""
        shown = {d.pk for d in self.dups.exact} | {d.pk for d, _ in self.dups.near} if self.dups else set()
        return [r for r in self.related if r.relation == DUPLICATE and r.memory.pk not in shown]

    @property
    def shown_ids(self) -> str:
        """The memories the card names as what approving it retires or closes (what it
        supersedes, what it conflicts with): the approval touches no other (memory_approve's
        `shown`)."""
        ids = [self.compare_to.pk] if self.compare_to and self.relation == "supersedes" else []
        return ",".join(str(i) for i in [*ids, *(c.pk for c in self.contradicts)])

    @property
    def why(self) -> dict:
        """id → the finder's reason, for each related memory."""
        return {r.memory.pk: r.why for r in self.related}

    @property
    def boundary_default(self):
        """Where "keep both" starts the new value unless the reviewer says otherwise: when the
        memory holds from (its valid_from, else when it was written), moved to the first whole
        minute after every memory it conflicts with began (the field has minutes; the rule wants
        the boundary after their start)."""
        starts = [self.memory.valid_from or self.memory.created_at]
        starts += [c.valid_from or c.created_at for c in self.contradicts]
        latest = max(s for s in starts if s is not None)
        return latest.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)

    @property
    def compare_label(self) -> str:
        return self.labels.get(self.compare_to.pk, f"#{self.compare_to.pk}") if self.compare_to else ""

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


def review_queue(
    *,
    owner: str = "",
    reason: str = "",
    ids=None,
    limit: int | None = None,
    principal: Principal | None = None,
) -> list[QueueItem]:
    """Queued memories, oldest first (at most `limit`), each with what it would supersede (or
    the active memories with the same key that it contradicts) and, given the reader
    `principal`, its duplicate hints among what the reader may see — in a fixed number of queries."""
    qs = (
        _queued(owner=owner, reason=reason)
        .select_related(
            "owner", "entry", "skill", "supersedes__owner", "supersedes__entry", "supersedes__skill"
        )
        .prefetch_related("sources")
        .order_by("created_at", "id")
    )
    if ids is not None:
        qs = qs.filter(pk__in=ids)
    if limit is not None:
        qs = qs[:limit]
    items = _queue_items(list(qs))
    if principal is not None:
        from memory.lifecycle.duplicates import queue_duplicate_hints

        found = queue_duplicate_hints([i.memory for i in items], principal)
        # the pairs dismissed as unrelated came with the duplicate hints' round trip
        dismissed = {hints.pair(pk, other) for pk, h in found.items() for other in h.dismissed}
        related = related_with_model([i.memory for i in items], principal, dismissed=dismissed)
        for item in items:
            memory = item.memory
            item.dups = found.get(memory.pk)
            item.related = related.get(memory.pk, [])  # without the pairs dismissed as unrelated
            item.queued_contradicts = item.dups.queued if item.dups else []
            item.labels.update({r.memory.pk: memory_label(r.memory) for r in item.queued_contradicts})
            if not memory.key:
                # a keyless contradiction gets the keyed conflict's decision (contradicted_active_for),
                # never one in another person's private store (hints.across_people)
                known = {c.pk for c in item.contradicts}
                item.contradicts += [
                    r.memory
                    for r in item.related
                    if r.relation == CONTRADICTION
                    and r.memory.pk not in known
                    and not hints.across_people(memory, r.memory)
                ]
                item.labels.update({c.pk: memory_label(c) for c in item.contradicts})
                if item.compare_to is None and item.contradicts:
                    item.compare_to, item.relation = item.contradicts[0], "contradicts"
            if item.dups:  # a contradiction is never offered as a duplicate too
                against = {c.pk for c in item.contradicts} | {r.memory.pk for r in item.queued_contradicts}
                item.dups.exact = [d for d in item.dups.exact if d.pk not in against]
                item.dups.near = [(d, sim) for d, sim in item.dups.near if d.pk not in against]
    return items


def _queue_items(memories: list[Memory]) -> list[QueueItem]:
    keyed = [m for m in memories if m.key]
    by_key: dict[tuple, list[Memory]] = {}
    if keyed:
        active = (
            Memory.objects.filter(
                status=Memory.ACTIVE, key__in={m.key for m in keyed}, store__in={m.store for m in keyed}
            )
            .select_related("owner", "entry", "skill")
            .order_by("-created_at")
        )
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
                and windows_overlap(memory.valid_from, memory.valid_to, other.valid_from, other.valid_to)
            ]
        if memory.supersedes_id:
            item.compare_to, item.relation = memory.supersedes, "supersedes"
        elif item.contradicts:
            item.compare_to, item.relation = item.contradicts[0], "contradicts"
        item.labels = {
            other.pk: memory_label(other)
            for other in [*([item.compare_to] if item.compare_to else []), *item.contradicts]
        }
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


# --- conflicts in force (data written before the conflict rule, or by an exempt route) ------


@dataclass
class ConflictGroup:
    """Active memories of one store with one key that disagree over overlapping time."""

    store: str
    key: str
    memories: list[Memory]
    labels: dict = field(default_factory=dict)

    @property
    def owners(self) -> list[str]:
        return sorted({m.owner.name for m in self.memories})

    @property
    def newest(self) -> Memory:
        return max(self.memories, key=lambda m: (m.valid_from or m.created_at, m.pk))


def _conflict_pairs_sql(*, owner_id=None, store: str = "") -> tuple[str, list]:
    """Set-wise: every pair (a < b) of active memories with one store and key, different values
    (the value, else the text with case and spacing folded) and overlapping validity; in an
    owner-only store, only pairs of one owner. And every pair of active keyless memories a
    trusted write recorded as contradicting (MemoryContradiction) with overlapping validity."""
    table = Memory._meta.db_table
    owner_only = " OR ".join(
        "a.store = %s" if not p.endswith(":") else "a.store LIKE %s" for p in access.OWNER_ONLY_PREFIXES
    )
    params: list = [p if not p.endswith(":") else p + "%" for p in access.OWNER_ONLY_PREFIXES]
    norm = "lower(regexp_replace(btrim({0}.text), '\\s+', ' ', 'g'))"
    where = ""
    if owner_id is not None:
        where += " AND (a.owner_id = %s OR b.owner_id = %s)"
        params += [owner_id, owner_id]
    if store:
        where += " AND a.store = %s"
        params.append(store)
    sql = f"""
        SELECT a.id, b.id FROM {table} a JOIN {table} b
          ON b.store = a.store AND b.key = a.key AND b.id > a.id AND b.status = 'active'
        WHERE a.status = 'active' AND a.key <> ''
          AND (a.owner_id = b.owner_id OR NOT ({owner_only}))
          AND CASE WHEN a.value IS NULL AND b.value IS NULL
                   THEN {norm.format("a")} <> {norm.format("b")}
                   ELSE a.value IS DISTINCT FROM b.value END
          AND (a.valid_to IS NULL OR b.valid_from IS NULL OR b.valid_from < a.valid_to)
          AND (b.valid_to IS NULL OR a.valid_from IS NULL OR a.valid_from < b.valid_to)
          {where}
        UNION
        SELECT least(a.id, b.id), greatest(a.id, b.id)
        FROM {MemoryContradiction._meta.db_table} c
        JOIN {table} a ON a.id = c.memory_id AND a.status = 'active'
        JOIN {table} b ON b.id = c.other_id AND b.status = 'active'
        WHERE (a.valid_to IS NULL OR b.valid_from IS NULL OR b.valid_from < a.valid_to)
          AND (b.valid_to IS NULL OR a.valid_from IS NULL OR a.valid_from < b.valid_to)
          {where}
        ORDER BY 1, 2"""
    return sql, params + params[len(access.OWNER_ONLY_PREFIXES) :]


def conflict_pairs(*, owner_id=None, store: str = "") -> list[tuple[int, int]]:
    from django.db import connection

    sql, params = _conflict_pairs_sql(owner_id=owner_id, store=store)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(a, b) for a, b in cursor.fetchall()]


def conflicts_in_force(
    principal: Principal | None = None, *, owner: str = "", limit: int = 50
) -> list[ConflictGroup]:
    """Conflicts still in force, grouped by store and key (a group joins every memory linked by a
    conflicting pair), newest group first; with `principal`, only groups whose every memory it
    may read. `owner` keeps groups that involve that agent."""
    owner_id = None
    if owner:
        owner_row = names.owner_selected(owner)
        if owner_row is None:
            return []
        owner_id = owner_row.pk
    pairs = conflict_pairs(owner_id=owner_id)
    if not pairs:
        return []
    ids = {i for pair in pairs for i in pair}
    qs = Memory.objects.filter(pk__in=ids).select_related("owner", "entry", "skill")
    if principal is not None:
        qs = qs.filter(access.memory_readable_q(principal))
    rows = {m.pk: m for m in qs}
    parent = {i: i for i in ids}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        parent[find(a)] = find(b)
    grouped: dict[int, list[int]] = {}
    for i in sorted(ids):
        grouped.setdefault(find(i), []).append(i)
    groups = []
    for members in grouped.values():
        if any(i not in rows for i in members):
            continue  # a reader sees a conflict only where it sees every side of it
        memories = [rows[i] for i in members]
        groups.append(
            ConflictGroup(
                store=memories[0].store,
                key=memories[0].key,
                memories=memories,
                labels={m.pk: memory_label(m) for m in memories},
            )
        )
    groups.sort(key=lambda g: max(m.pk for m in g.memories), reverse=True)
    return groups[:limit]


def conflict_count() -> int:
    """How many memories take part in a conflict still in force (for Status)."""
    return len({i for pair in conflict_pairs() for i in pair})


def conflicts_status() -> dict:
    """The Status tab's and GET /api/status's conflicts section: conflicts still in force, and
    the review queue's hints as reviewers judged them (per hint: unrelated, confirmed, precision)."""
    groups = conflicts_in_force(limit=20)
    return {
        "memories": conflict_count(),
        "hints": hints.hint_verdict_counts(),
        "groups": [
            {
                "store": g.store,
                "key": g.key,
                "agents": g.owners,
                "memories": [{"id": m.pk, "agent": m.owner.name} for m in g.memories],
            }
            for g in groups
        ],
    }


def conflicts_alerts(data: dict) -> list[dict]:
    if not data["memories"]:
        return []
    return [
        {
            "level": "warning",
            "text": f"{data['memories']} active memories disagree with another of the same key over the same "
            "time; decide under Conflicts in force in the review queue.",
        }
    ]


def model_related(memories: list[Memory], reader: Principal | None = None) -> dict[int, list[Related]]:
    """For queued memories: the active memories the model found them contradicting in the
    background (contradictions_mark), that `reader` may read, as the finder's Related."""
    queued = [m.pk for m in memories if m.status == Memory.QUEUED and not m.key]
    out: dict[int, list[Related]] = {pk: [] for pk in queued}
    if not queued:
        return out
    rows = MemoryContradiction.objects.filter(memory_id__in=queued, other__status=Memory.ACTIVE)
    for row in rows.select_related("other__owner").order_by("other__created_at", "other_id"):
        other = row.other
        if reader is None or access.can_read_store(reader, owner=other.owner, store=other.store):
            out[row.memory_id].append(Related(other, CONTRADICTION, "model", 0.0, row.why))
    return out


def related_with_model(
    memories: list[Memory], reader: Principal | None = None, *, dismissed: set | None = None
) -> dict[int, list[Related]]:
    """related_for, and for queued memories what the model added in the background; never a
    pair a reviewer dismissed as unrelated (`dismissed`, (low, high) pairs, when the caller has
    read them already; else read here, one query when anything is related)."""
    related = related_for(memories, reader)
    for pk, extra in model_related(memories, reader).items():
        have = {r.memory.pk for r in related.get(pk, [])}
        related.setdefault(pk, []).extend(r for r in extra if r.memory.pk not in have)
    if dismissed is None:
        dismissed = hints.dismissed_among(list(related)) if any(related.values()) else set()
    return {
        pk: [r for r in found if hints.pair(pk, r.memory.pk) not in dismissed]
        for pk, found in related.items()
    }
