"""The conflict rule and strict anti-drift, which activation and review apply: which active
memories a memory would contradict, the decisions a conflict needs (replace, keep both as of
different times), and the errors that say so."""

import datetime
import json
import time

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.errors import Conflict, Invalid
from knowledge.kick import task_kick
from knowledge.llm import LIGHT, defer_later, model_availability, outage
from knowledge.memories.rows import memory_row_state
from knowledge.models import Agent, AuditEvent, Memory, MemoryContradiction
from knowledge.principal import Principal
from knowledge.settings_store import setting_get
from memory.lifecycle.activation_hooks import API_WRITE, REVIEW
from memory.matching.facts import contradicts, windows_overlap
from memory.matching.relation_model import RelationDeferred, model_relation
from memory.matching.relations import CONTRADICTION, UNDECIDED, Related, related_for

MODEL_PAIRS = 3  # undecided pairs put to the model per trusted write

ANTI_DRIFT_CONFIDENCE = 0.9
# The decisions a conflict (same store, same key, another value, overlapping validity) needs
# before a memory may go into force: retire every memory it conflicts with, or keep both with
# validity windows that meet at a boundary the reviewer gives. Rejecting is memory_reject.
REPLACE, KEEP_BOTH = "replace", "keep_both"


CONFLICT_DECISIONS = (REPLACE, KEEP_BOTH)


class MemoryConflict(Conflict):
    """Strict anti-drift refused a memory that contradicts confident semantic memories without
    naming them in `supersedes`. The API turns it into 409 with `policy_violation`."""

    code = "memory_conflict"

    def __init__(self, conflicts_with: list[int]):
        self.conflicts_with = conflicts_with
        message = (
            "Strict anti-drift: this contradicts confident semantic "
            f"memor{'y' if len(conflicts_with) == 1 else 'ies'} {', '.join(map(str, conflicts_with))}. "
            "Name it in 'supersedes' to replace it."
        )
        super().__init__(message, policy_violation="memory_conflict", conflicts_with=conflicts_with)


def value_label(memory: Memory) -> str:
    """What a keyed memory says, in a few words, for a conflict message or note."""
    if memory.value is not None:
        shown = (
            memory.value if isinstance(memory.value, str) else json.dumps(memory.value, ensure_ascii=False)
        )
    else:
        shown = " ".join(memory.text.split())
    return shown if len(shown) <= 60 else shown[:57] + "..."


class ConflictDecisionNeeded(Conflict):
    """Activating the memory would leave two active memories with one key, different values and
    overlapping validity. Nothing was changed: the reviewer decides (replace, keep both as of
    different times with a boundary, or reject). The API turns it into 409."""

    code = "conflict_decision_needed"

    def __init__(self, memory: Memory, conflicts: list[Memory]):
        self.conflicts_with = [c.pk for c in conflicts]
        named = ", ".join(f"#{c.pk} ({value_label(c)})" for c in conflicts)
        who = f"Memory {memory.pk}" if memory.pk else "This memory"
        says = f"has key {memory.key} and would conflict with" if memory.key else "contradicts"
        message = (
            f"{who} {says} active {named}. "
            "Decide: replace (retire all of them), keep_both with a boundary time, or reject."
        )
        super().__init__(
            message,
            conflicts_with=self.conflicts_with,
            decisions=[REPLACE, KEEP_BOTH, "reject"],
        )


def same_key_active(memory: Memory):
    """Active memories with the same key in the same store (and, in an owner-only store, the
    same owner) as `memory` — the ones it could contradict. Empty for memories without a key."""
    if not memory.key:
        return Memory.objects.none()
    qs = Memory.objects.filter(key=memory.key, store=memory.store, status=Memory.ACTIVE).exclude(pk=memory.pk)
    if memory.store.startswith(access.OWNER_ONLY_PREFIXES):
        qs = qs.filter(owner_id=memory.owner_id)
    return qs


def conflicting_active(memory: Memory, *, now: datetime.datetime | None = None) -> list[Memory]:
    """THE conflict rule: the active memories in `memory`'s store (across owners; in an
    owner-only store, the owner's) with its key, a different value and a validity window that
    overlaps the one `memory` would have once active (from `valid_from`, else `now`). Oldest
    first. Empty for a memory without a key, so keyless writes (most of them) pay no query —
    unless a reviewer's approval attached the keyless contradictions the relation finder found
    (`contradicted.contradicted_active_for`, memory.contradicted): those need the same decision."""
    if not memory.key:
        starts = memory.valid_from or now or timezone.now()
        found = list(getattr(memory, "contradicted", ()))
        if memory.pk and memory.status == Memory.ACTIVE:
            found += marked_contradictions(memory)  # in force since a trusted write
        return [
            other
            for other in found
            if windows_overlap(starts, memory.valid_to, other.valid_from, other.valid_to)
        ]
    starts = memory.valid_from or now or timezone.now()
    return [
        other
        for other in same_key_active(memory).select_related("owner").order_by("created_at", "id")
        if contradicts(memory, other)
        and windows_overlap(starts, memory.valid_to, other.valid_from, other.valid_to)
    ]


def contradictions_mark(memory: Memory) -> list[int]:
    """A keyless memory that went active (a trusted writer's) and contradicts active memories
    stays active: each such pair is recorded (MemoryContradiction) and listed under "Conflicts
    in force" until someone decides. Pairs the rules leave undecided are put to the light model
    when one is configured (memory.matching.relation_model; a reply failing its schema or check
    records nothing). For a queued keyless memory only the model's contradictions are recorded
    (the rules' are found whenever it is read) and its queue reason becomes "conflict": its card
    and API representation list them (selectors.model_related) and its approval needs the
    decision a contradiction needs (contradicted_active_for). Inside the
    caller's transaction (the background task's, never a request's). Returns the other ids, and
    why the model's part waits ("" when it does not): when a pair needs the model and its server
    does not answer (an outage), what the rules found is recorded all the same and the caller
    asks again for this memory later (pairs already recorded are not recorded twice)."""
    if memory.key or memory.status not in Memory.LIVE:
        return [], ""
    queued = memory.status == Memory.QUEUED
    if (
        queued
        and model_availability(LIGHT, agent=memory.owner)
        and not outage(profile=LIGHT, agent=memory.owner)
    ):
        return [], ""  # no model to ask (not an outage): nothing the rules do not say already
    # only older memories: a pair is recorded once, from its newer side; and only pairs in force
    # at once (two whose windows do not overlap were kept both "as of different times")
    starts = memory.valid_from or memory.created_at
    related = [
        r
        for r in related_for([memory], undecided=True)[memory.pk]
        if r.memory.pk < memory.pk
        and windows_overlap(starts, memory.valid_to, r.memory.valid_from, r.memory.valid_to)
    ]
    found = [] if queued else [r for r in related if r.relation == CONTRADICTION]
    waiting = ""
    # the pairs no rule decides go to the light model when one may be asked (at most MODEL_PAIRS)
    for r in [r for r in related if r.kind == UNDECIDED][:MODEL_PAIRS]:
        try:
            said = model_relation(
                r.memory.text, memory.text, agent=memory.owner, actor=Principal.system("relations")
            )
        except RelationDeferred as exc:  # an outage: the model's pairs wait, the rules' do not
            waiting = exc.reason
            break
        if said is not None and said.relation == CONTRADICTION:
            found.append(Related(r.memory, CONTRADICTION, said.kind, r.score, said.why))
    MemoryContradiction.objects.bulk_create(
        [MemoryContradiction(memory=memory, other=r.memory, why=r.why[:500]) for r in found],
        ignore_conflicts=True,
    )
    if queued and found and memory.queue_reason != "conflict":
        memory_row_state(memory, queue_reason="conflict")  # what its approval reads (contradicted_active_for)
    return [r.memory.pk for r in found], waiting


KICK_SECONDS = 5  # at most one sweep queued per web process per this many seconds
SWEPT = "memory.contradictions_swept"
FIRST_SWEEP = datetime.timedelta(hours=1)  # what the first sweep of an install looks back on
RECHECK = "memory.lifecycle.conflicts.contradictions_recheck"
RECHECK_DEFERRED = "relation finder: pairs waiting for the model"  # its deferral's name


def contradictions_mark_later() -> None:
    """After a trusted keyless write's (or a batch approval's) commit: queue the sweep
    (contradictions_sweep) at most once per KICK_SECONDS per process. The sweep lingers past that window, so every write
    committed meanwhile is in it and a write after it queues the next: the finder costs a write
    more than its budget (docs/PERFORMANCE.md, "Relations"), so it runs in the worker, and a
    task per write cost a fifth of the trusted write throughput."""
    task_kick("memory.lifecycle.conflicts.contradictions_sweep", name="contradictions", seconds=KICK_SECONDS)


def contradictions_sweep(linger_seconds: float = 0) -> int:
    """Every keyless memory an API write put in force since the last sweep (its memory.written
    event after the last memory.contradictions_swept event's `upto`), and every one a batch
    approval put in force beside others (memory.approved with went_active_together: each was
    checked against what was active before the batch, not against the rest of it), is checked by
    contradictions_marked. A lone approval is not: its reviewer already decided its
    contradictions. One sweep at a time (an advisory lock: a second waits, then sees the writes
    the first could not). Returns how many memories it checked.

    An outage (a pair needs the model and its server does not answer) never holds back what the
    rules find: those pairs are recorded at once, and the memories whose model pairs wait are
    asked again by one deferred task (contradictions_recheck, knowledge.llm.outage), so no pair
    is skipped."""
    if linger_seconds:
        time.sleep(linger_seconds)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('brain:contradictions-sweep'))")
        last = AuditEvent.objects.filter(action=SWEPT).order_by("-pk").values_list("data", flat=True).first()
        events = AuditEvent.objects.filter(
            Q(action="memory.written", data__status__in=Memory.LIVE, data__route=API_WRITE)
            | Q(action="memory.approved", data__status=Memory.ACTIVE, data__went_active_together=True)
        ).exclude(action="memory.written", data__tier=Memory.WORKING)  # scratch is no claim
        events = events.order_by("pk")
        if last:
            events = events.filter(pk__gt=last["upto"])
        else:
            events = events.filter(created_at__gte=timezone.now() - FIRST_SWEEP)
        rows = list(events.values_list("pk", "object_ids"))
        if not rows:
            return 0
        marked, waiting = 0, []
        for _, object_ids in rows:
            ids, why = contradictions_marked(int(object_ids[0]))
            marked += bool(ids)
            if why:
                waiting.append(int(object_ids[0]))
        audit_record(
            SWEPT,
            actor=Principal.system("relations"),
            object_type="memory",
            reason="the relation finder checked the keyless memories API writes put in force",
            data={"upto": rows[-1][0], "checked": len(rows), "marked": marked, "model_waiting": waiting},
        )
        if waiting:
            defer_later(RECHECK, waiting, deferrals=1, what=RECHECK_DEFERRED)
        return len(rows)


def contradictions_recheck(memory_ids: list[int], deferrals: int = 0) -> int:
    """The memories whose pairs waited for the model in an outage, asked again (a deferred task,
    knowledge.llm.outage): still down, it defers itself once more with the ones still waiting,
    without calling the server when the background check finds it down. Returns how many
    memories it checked."""
    if outage(profile=LIGHT):
        defer_later(RECHECK, memory_ids, deferrals=deferrals + 1, what=RECHECK_DEFERRED)
        return 0
    waiting = [memory_id for memory_id in memory_ids if contradictions_marked(memory_id)[1]]
    if waiting:
        defer_later(RECHECK, waiting, deferrals=deferrals + 1, what=RECHECK_DEFERRED)
    return len(memory_ids)


def contradictions_marked(memory_id: int) -> tuple[list[int], str]:
    """Mark the pairs of one memory in one transaction, and audit the newly recorded ones on the
    memory (memory.contradictions_marked). Nothing when the memory is no longer live or has a
    key. Returns (the other ids, why its model pairs wait: "" when they do not)."""

    with transaction.atomic():
        memory = Memory.objects.select_related("owner").filter(pk=memory_id, status__in=Memory.LIVE).first()
        if memory is None or memory.key:
            return [], ""
        known = set(MemoryContradiction.objects.filter(memory=memory).values_list("other_id", flat=True))
        ids, waiting = contradictions_mark(memory)
        new = [i for i in ids if i not in known]
        if new:
            audit_record(
                "memory.contradictions_marked",
                actor=Principal.system("relations"),
                store=memory.store,
                owner=memory.owner.name,
                object_type="memory",
                object_ids=[str(memory.pk), *map(str, new)],
                reason=(
                    "contradicts active memories; both stay active until someone decides"
                    if memory.status == Memory.ACTIVE
                    else "the model finds it contradicts active memories: approving it needs a decision"
                ),
                data={"memory": memory.pk, "conflict_with": new},
            )
        return ids, waiting


def marked_contradictions(memory: Memory) -> list[Memory]:
    """The active memories recorded as contradicting `memory` (either side of the pair)."""
    ids = (
        MemoryContradiction.objects.filter(memory=memory)
        .values("other")
        .union(MemoryContradiction.objects.filter(other=memory).values("memory"))
    )
    return list(
        Memory.objects.filter(pk__in=[row["other"] for row in ids], status=Memory.ACTIVE)
        .select_related("owner")
        .order_by("created_at", "id")
    )


def anti_drift_conflicts(memory: Memory) -> list[int]:
    """Strict anti-drift: the ids of active semantic memories of confidence ≥ 0.9
    with the same key whose content `memory` contradicts, other than the one it supersedes.
    Empty when BRAIN_STRICT_ANTI_DRIFT is off."""
    if not memory.key or not setting_get("BRAIN_STRICT_ANTI_DRIFT"):
        return []
    candidates = same_key_active(memory).filter(tier=Memory.SEMANTIC, confidence__gte=ANTI_DRIFT_CONFIDENCE)
    if memory.supersedes_id:
        candidates = candidates.exclude(pk=memory.supersedes_id)
    return sorted(other.pk for other in candidates.only("pk", "text", "value") if contradicts(memory, other))


def policy_violation_record(
    *, actor: Principal, owner: Agent, store: str, memory_id, content_hash, route, conflicts
):
    with transaction.atomic():
        audit_record(
            "memory.policy_violation",
            actor=actor,
            store=store,
            owner=owner.name,
            object_type="memory",
            object_ids=[*([memory_id] if memory_id else []), *conflicts],
            reason="memory_conflict",
            data={
                "policy_violation": "memory_conflict",
                "conflicts_with": conflicts,
                "memory": memory_id,
                "content_hash": content_hash,
                "route": route,
            },
        )


def conflict_decision(
    *,
    actor: Principal,
    memory: Memory,
    route: str,
    conflicts: list[Memory],
    decision: str | None,
    boundary: datetime.datetime | None,
) -> str | None:
    """Check the decision a conflicting activation carries; returns the decision to carry out,
    or None when the memory must wait in the queue (queue_reason conflict) for a person. A
    reviewer's approval without a decision is refused (ConflictDecisionNeeded): no default may
    leave two values in force. A writer that names what it supersedes has decided to replace."""
    if decision is None and memory.supersedes_id:
        decision = REPLACE
    if decision is None:
        if route == REVIEW:
            raise ConflictDecisionNeeded(memory, conflicts)
        return None
    if decision not in CONFLICT_DECISIONS:
        raise Invalid({"decision": [f"Use one of {', '.join(CONFLICT_DECISIONS)} (or reject the memory)."]})
    if decision == REPLACE:
        person = route == REVIEW or (actor.is_person and actor.is_reviewer)
        if not person and any(other.owner_id != memory.owner_id for other in conflicts):
            return None  # retiring what another agent knows needs a person
        return REPLACE
    if boundary is None:
        raise Invalid({"boundary": ["Give the time at which the new value starts to hold."]})
    late = [c.pk for c in conflicts if (c.valid_from or c.created_at) >= boundary]
    if late:
        raise Invalid(
            {
                "boundary": [
                    f"Memor{'y' if len(late) == 1 else 'ies'} #{', #'.join(map(str, late))} "
                    "began after that time; give a boundary after it began."
                ]
            }
        )
    if memory.valid_to is not None and memory.valid_to <= boundary:
        raise Invalid({"boundary": ["The boundary must be before the memory's own valid_to."]})
    return KEEP_BOTH


def conflict_reason(conflicts: list[Memory]) -> str:
    named = ", ".join(f"#{c.pk} ({value_label(c)})" for c in conflicts)
    return (
        f"Same key as active {named} over the same time: a reviewer decides (replace, keep both, or reject)."
    )
