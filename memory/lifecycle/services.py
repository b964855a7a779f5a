"""Every write to memories: the write service behind POST /api/memory, THE activation function,
review (approve, reject, edit-then-approve), operator actions (pin, revoke, promote),
supersession and staleness, short-term expiry and clearing working memory.

Each public service is one transaction that writes its audit event inside it (ids, hashes and
reasons — never memory text) with before/after snapshots as revisions, so audit restore can put
any change back."""

import datetime
import json
from collections.abc import Callable, Iterable

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record, snapshot
from knowledge.errors import Conflict, Invalid, Refused
from knowledge.memories import ENTRY_BLOCK, memory_row_insert, memory_row_new, memory_row_revise
from knowledge.models import Agent, AgentSkill, AuditEvent, Channel, Conversation, Entry, Memory, Person
from knowledge.principals.principal import Principal
from knowledge.rowsql import update_fields
from knowledge.settings_store import setting_get
from memory.lifecycle.activation_hooks import (
    API_WRITE,
    REVIEW,
    ROUTES,
    gate_before_activation,
    gate_checks_stored_memory,
    route_goes_active,
)
from memory.lifecycle.duplicates import exact_duplicate_for_write
from memory.lifecycle.selectors import contradicts, windows_overlap
from memory.provenance.services import provenance_rebaseline, provenance_recheck_memory_sources

ANTI_DRIFT_CONFIDENCE = 0.9
LIVE = (Memory.QUEUED, Memory.ACTIVE)  # the states a memory can still leave
QUEUE_NEW, QUEUE_REQUEUED, QUEUE_MERGE, QUEUE_GATE = "new", "requeued", "merge", "gate"
QUEUE_SUPERSEDES, QUEUE_CONFLICT = "supersedes", "conflict"
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
        message = (
            f"{who} has key {memory.key} and would conflict with active {named}. "
            "Decide: replace (retire all of them), keep_both with a boundary time, or reject."
        )
        super().__init__(
            message,
            conflicts_with=self.conflicts_with,
            decisions=[REPLACE, KEEP_BOTH, "reject"],
        )


class MemoryStateConflict(Conflict):
    """The memory is no longer in a state the action needs — usually another reviewer acted
    first. Nothing was changed. The API turns it into 409."""

    code = "state_conflict"

    def __init__(self, memory: Memory, action: str):
        self.memory_id, self.current_status = memory.pk, memory.status
        last = (
            AuditEvent.objects.filter(object_type="memory", object_ids__contains=[str(memory.pk)])
            .exclude(action__in=["memory.stale", "memory.policy_violation"])
            .order_by("-created_at", "-id")
            .first()
        )
        by = ""
        if last is not None and last.action != "memory.written":
            by = f" ({last.action.removeprefix('memory.')} by {last.actor_name})"
        message = (
            f"Memory {memory.pk} is {memory.status} now{by}; it cannot be {action}. Nothing was changed."
        )
        super().__init__(message, memory=memory.pk, status=memory.status)


# --- helpers -------------------------------------------------------------------------------


def _short_term_ttl() -> datetime.timedelta:
    return datetime.timedelta(hours=settings.BRAIN_SHORT_TERM_TTL_HOURS)


def _author_of(actor: Principal) -> tuple[str, str]:
    return actor.kind, actor.name


def _lock(memory_id: int) -> Memory:
    memory = (
        Memory.objects.select_for_update(of=("self",)).select_related("owner").filter(pk=memory_id).first()
    )
    if memory is None:
        raise Memory.DoesNotExist(f"memory {memory_id} does not exist")
    return memory


def _lock_in(memory_id: int, states: Iterable[str], action: str) -> Memory:
    """Lock the row and check its state. select_for_update re-reads the newest committed row,
    so of two reviewers acting at once the second sees the first one's result here."""
    memory = _lock(memory_id)
    if memory.status not in states:
        raise MemoryStateConflict(memory, action)
    return memory


def _save(memory: Memory, *fields: str) -> None:
    update_fields(memory, *fields, "updated_at")


def _audit(action: str, *, actor: Principal, memory: Memory, before, reason: str = "", data=None):
    return audit_record(
        action,
        actor=actor,
        store=memory.store,
        owner=memory.owner.name,
        object_type="memory",
        object_ids=[memory.pk],
        reason=reason,
        data=data,
        revisions=[("memory", memory.pk, before, snapshot(memory))],
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
    first. Empty for a memory without a key, so keyless writes (most of them) pay no query."""
    if not memory.key:
        return []
    starts = memory.valid_from or now or timezone.now()
    return [
        other
        for other in same_key_active(memory).select_related("owner").order_by("created_at", "id")
        if contradicts(memory, other)
        and windows_overlap(starts, memory.valid_to, other.valid_from, other.valid_to)
    ]


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


def _record_policy_violation(
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


def _overlay_touched(memory: Memory, change: str, actor: Principal) -> None:
    """A skill lesson's review changes its overlay: the Skill experience tab shows it as the
    overlay's last change. Review locks memories only; the overlay's own writers lock the
    (agent, skill) row first and its memories after, so this skips a row one of them holds
    rather than wait for it (no lock cycle; that writer records its own change)."""
    if not memory.skill_id:
        return
    locked = list(
        AgentSkill.objects.select_for_update(skip_locked=True)
        .filter(agent_id=memory.owner_id, skill_id=memory.skill_id)
        .values_list("pk", flat=True)
    )
    AgentSkill.objects.filter(pk__in=locked).update(
        overlay_change=change,
        overlay_changed_at=timezone.now(),
        overlay_changed_by=f"{actor.kind} {actor.name}",
    )


def _entry_touched(memory: Memory, actor: Principal) -> None:
    """A decision on an entry's block changes that entry's body: the entry's "changed by" names
    whoever made it (the reviewer, the agent), not whoever last edited the entry's fields."""
    if memory.entry_id:
        Entry.all_objects.filter(pk=memory.entry_id).update(
            author_kind=actor.kind, author_name=actor.name, updated_at=timezone.now()
        )


# --- staleness and supersession -----------------------------------------------------------


def memory_mark_dependants_stale(*, actor: Principal, memory: Memory, reason: str) -> list[int]:
    """Flag every live memory that cites `memory` as a source (`memory:<id>`) as stale with
    `reason`, audited as memory.stale. Returns the ids newly flagged (already-stale ones are left
    alone, so calling it twice writes nothing twice). Runs in the caller's transaction if any.
    In requeue and invalidate modes the provenance machinery acts on the dependants instead
    (back to the queue, or retired — transitively), exactly as a provenance check would."""
    if setting_get("BRAIN_MEMORY_INVALIDATION") in ("requeue", "invalidate"):
        return provenance_recheck_memory_sources(actor=actor, retired=memory)
    with transaction.atomic():
        dependants = list(
            Memory.objects.select_for_update(of=("self",))
            .select_related("owner")
            .filter(
                sources__kind="memory",
                sources__ref=str(memory.pk),
                status__in=LIVE,
                stale=False,
            )
            .order_by("pk")
        )
        if not dependants:
            return []
        revisions = []
        for dependant in dependants:
            before = snapshot(dependant)
            dependant.stale, dependant.stale_reason = True, reason
            revisions.append(("memory", dependant.pk, before, snapshot(dependant)))
        ids = [d.pk for d in dependants]
        Memory.objects.filter(pk__in=ids).update(stale=True, stale_reason=reason, updated_at=timezone.now())
        stores = {d.store for d in dependants}
        owners = {d.owner.name for d in dependants}
        audit_record(
            "memory.stale",
            actor=actor,
            store=stores.pop() if len(stores) == 1 else "",
            owner=owners.pop() if len(owners) == 1 else "",
            object_type="memory",
            object_ids=ids,
            reason=reason,
            counts={"stale": len(ids)},
            data={"source": f"memory:{memory.pk}"},
            revisions=revisions,
        )
    return ids


def memory_supersede(
    *,
    actor: Principal,
    memory_id: int,
    successor: Memory,
    now: datetime.datetime | None = None,
    closes: datetime.datetime | None = None,
) -> bool:
    """Retire memory `memory_id` in favour of `successor`: status superseded, `superseded_by` set, its
    validity closed where the successor's begins (time, not overwrite), and memories that cite
    it become stale. Returns False (and changes nothing) if it was already retired."""
    now = now or timezone.now()
    with transaction.atomic():
        old = _lock(memory_id)
        if old.status not in LIVE:
            return False
        before = snapshot(old)
        closes = closes or successor.valid_from or now
        old.status = Memory.SUPERSEDED
        old.superseded_by = successor
        old.queue_reason = ""
        old.status_reason = f"superseded by memory {successor.pk}"
        if old.valid_to is None or old.valid_to > closes:
            old.valid_to = closes
        _save(old, "status", "superseded_by", "queue_reason", "status_reason", "valid_to")
        _entry_touched(old, actor)
        _audit(
            "memory.superseded",
            actor=actor,
            memory=old,
            before=before,
            reason=old.status_reason,
            data={"superseded_by": successor.pk},
        )
        memory_mark_dependants_stale(
            actor=actor,
            memory=old,
            reason=f"its source memory:{old.pk} was superseded by memory {successor.pk}",
        )
    return True


def memory_close(*, actor: Principal, memory_id: int, valid_to: datetime.datetime, reason: str) -> Memory:
    """Close a live memory's validity at `valid_to` (it stays in force for the time it held:
    "time, not overwrite"). Audited as memory.closed. Runs in the caller's transaction if any."""
    with transaction.atomic():
        memory = _lock_in(memory_id, LIVE, "closed")
        before = snapshot(memory)
        memory.valid_to = valid_to
        _save(memory, "valid_to")
        _audit("memory.closed", actor=actor, memory=memory, before=before, reason=reason)
    return memory


def _conflict_decision(
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


# --- the one activation function ----------------------------------------------------------


def activation_reads_memories(memory: Memory) -> bool:
    """Whether memory_activate's decision for `memory` reads other memories or needs `memory`
    stored: a key (strict anti-drift, the conflict rule), a memory it supersedes, the enforcing
    eval gate. A writer of many memories stores those of the batch it holds back before such a
    one, so the decision sees them, as it would had each been written alone."""
    return bool(memory.key) or memory.supersedes_id is not None or gate_checks_stored_memory()


def memory_activate(
    *,
    actor: Principal,
    memory: Memory,
    route: str,
    now: datetime.datetime | None = None,
    insert: Callable[[Memory], object] | None = None,
    decision: str | None = None,
    boundary: datetime.datetime | None = None,
) -> str:
    """THE activation function: every route by which a memory may go into force (api_write,
    distiller, dreaming, review, entry_block) passes here, with one set of checks in this order:

    1. strict anti-drift — raises MemoryConflict (the caller rolls back and audits it);
    2. the route's outcome (untrusted agents queue; the distiller's auto-activation setting);
    3. retiring another agent's memory (`supersedes` naming a memory of another owner) needs a
       person: a reviewer's approval or a write by a reviewer or admin; any other route (a
       trusted agent's write included) queues it (queue_reason "supersedes");
    4. the conflict rule (`conflicting_active`): a memory that would leave two values of its key
       in force over the same time needs `decision` — REPLACE (every conflicting memory is
       superseded) or KEEP_BOTH (the others are closed at `boundary`, where this one starts).
       Without one a reviewer's approval is refused (ConflictDecisionNeeded) and any other route
       queues it (queue_reason "conflict"); naming `supersedes` is the decision to replace;
    5. the eval gate hook — may hold the memory in the queue (queue_reason "gate");
    6. going active: status, validity start (entry blocks keep the validity their writer gave),
       supersession of the memory it names and the conflict decision carried out.

    Exempt, on purpose: audit restore and plan revert put back exactly what was (an earlier
    state the data held), so they set rows directly instead of activating anything.

    Runs inside the caller's transaction on a row the caller created or locked — or, given
    `insert` (memory_write), on a new memory not stored yet: then `insert` stores it with the
    decision already made (one INSERT instead of an INSERT and an UPDATE of the fresh row; the
    enforcing eval gate checks a stored memory, so it is inserted before the gate runs). Returns
    the memory's status afterwards (active or queued). The caller audits `memory` itself (as
    memory.written, memory.approved, …); this function audits what it does to other memories."""
    assert connection.in_atomic_block, "memory_activate must run inside the caller's transaction"
    if route not in ROUTES:
        raise ValueError(f"unknown activation route {route!r}")
    if memory.status != Memory.QUEUED:
        raise MemoryStateConflict(memory, "activated")
    now = now or timezone.now()

    def persist(*fields: str) -> None:
        nonlocal insert
        if insert is not None:
            insert(memory)
            insert = None
        elif fields:
            _save(memory, *fields)

    conflicts = anti_drift_conflicts(memory)
    if conflicts:
        raise MemoryConflict(conflicts)

    if not route_goes_active(actor=actor, memory=memory, route=route):
        if memory.key and memory.queue_reason in ("", QUEUE_NEW):
            found = [c for c in conflicting_active(memory, now=now) if c.pk != memory.supersedes_id]
            if found:
                memory.queue_reason, memory.status_reason = QUEUE_CONFLICT, _conflict_reason(found)
                persist("queue_reason", "status_reason")
                return Memory.QUEUED
        if memory.queue_reason:
            persist()
        else:
            memory.queue_reason = QUEUE_NEW
            persist("queue_reason")
        return Memory.QUEUED

    if not may_retire_without_review(actor=actor, memory=memory, route=route):
        memory.queue_reason = QUEUE_SUPERSEDES
        memory.status_reason = (
            f"It would retire memory {memory.supersedes_id} of agent {memory.supersedes.owner.name}: "
            "a reviewer decides."
        )
        persist("queue_reason", "status_reason")
        return Memory.QUEUED

    conflicts = [c for c in conflicting_active(memory, now=now) if c.pk != memory.supersedes_id]
    carry_out = None
    if conflicts:
        carry_out = _conflict_decision(
            actor=actor, memory=memory, route=route, conflicts=conflicts, decision=decision, boundary=boundary
        )
        if carry_out is None:
            memory.queue_reason, memory.status_reason = QUEUE_CONFLICT, _conflict_reason(conflicts)
            persist("queue_reason", "status_reason")
            return Memory.QUEUED
        if carry_out == KEEP_BOTH:
            memory.valid_from = boundary

    # ---- The eval gate plugs in here: enforce mode may hold the memory. ----
    if gate_checks_stored_memory():
        persist()
    decision = gate_before_activation(memory, route=route)
    if not decision.allow:
        memory.status, memory.queue_reason, memory.status_reason = Memory.QUEUED, QUEUE_GATE, decision.reason
        persist("status", "queue_reason", "status_reason")
        return Memory.QUEUED

    memory.status = Memory.ACTIVE
    memory.queue_reason, memory.status_reason = "", ""
    if memory.valid_from is None and route != ENTRY_BLOCK:  # a block's validity is what its writer states
        memory.valid_from = now
    persist("status", "queue_reason", "status_reason", "valid_from")
    if memory.supersedes_id:
        memory_supersede(actor=actor, memory_id=memory.supersedes_id, successor=memory, now=now)
    if conflicts:
        # what the decision touched, for the caller's audit event and answer
        memory.conflict_outcome = {"decision": carry_out, "retired": [c.pk for c in conflicts]}
        if carry_out == KEEP_BOTH:
            memory.conflict_outcome["boundary"] = boundary.isoformat()
    for other in conflicts:
        if carry_out == REPLACE:
            memory_supersede(actor=actor, memory_id=other.pk, successor=memory, now=now)
        else:
            memory_close(
                actor=actor,
                memory_id=other.pk,
                valid_to=boundary,
                reason=f"kept as of different times: memory {memory.pk} holds from then on",
            )
    return Memory.ACTIVE


def _conflict_reason(conflicts: list[Memory]) -> str:
    named = ", ".join(f"#{c.pk} ({value_label(c)})" for c in conflicts)
    return (
        f"Same key as active {named} over the same time: a reviewer decides (replace, keep both, or reject)."
    )


def may_retire_without_review(*, actor: Principal, memory: Memory, route: str) -> bool:
    """Whether `memory` may retire the memory it supersedes without a review: always when both
    have the same owner; another owner's memory only by a person's decision — a reviewer's
    approval, or a write by a reviewer or admin. Trust lets an agent's own writes go into force
    unreviewed; it does not let an agent retire what another agent knows."""
    if not memory.supersedes_id or memory.supersedes.owner_id == memory.owner_id:
        return True
    return route == REVIEW or (actor.is_person and actor.is_reviewer)


# --- writing --------------------------------------------------------------------------------


MAX_TEXT = 20_000


def _write_rules(
    *,
    owner: Agent | None,
    text: str,
    key: str,
    value,
    tier: str,
    valid_from,
    valid_to,
    expires_at,
    conversation: Conversation | None,
    owner_label: str = "",
) -> tuple[str, dict]:
    """The rules on a memory's fields that hold for every writer: the text (or, without one, the
    text derived from key and value), validity order, expiry of short-term tiers only, and the
    conversation being one of the owner's. Returns the text and the field errors."""
    errors = {}
    if not (text or "").strip():
        if key and value is not None:
            rendered = json.dumps(value, sort_keys=True, ensure_ascii=False)
            text = f"{key} = {rendered}"[:MAX_TEXT]
        else:
            errors["text"] = ["Give the memory's text (or both key and value)."]
    if valid_from and valid_to and valid_to <= valid_from:
        errors["valid_to"] = ["valid_to must be after valid_from."]
    if expires_at is not None:
        if tier not in Memory.SHORT_TERM_TIERS:
            errors["expires_at"] = ["Only working and episodic memories expire."]
        elif expires_at <= timezone.now():
            errors["expires_at"] = ["expires_at is in the past."]
    if conversation is not None and owner is not None and conversation.agent_id != owner.pk:
        errors["conversation"] = [f"Agent {owner_label or owner} has no conversation {conversation.pk}."]
    return text, errors


def memory_written_audit(
    *, actor: Principal, memory: Memory, status: str, route: str, sources: int, data: dict | None = None
) -> None:
    """The `memory.written` event of a new memory, in one shape for every writer (the write
    service, the distiller, Dreaming): its hash, version, status, route, tier, run and turn,
    what it supersedes, how many sources, plus the writer's `data`."""
    audit_record(
        "memory.written",
        actor=actor,
        store=memory.store,
        owner=memory.owner.name,
        object_type="memory",
        object_ids=[memory.pk],
        data={
            "content_hash": memory.content_hash,
            "version": memory.version,
            "status": status,
            "route": route,
            "tier": memory.tier,
            "run_id": memory.run_id,
            "turn": memory.turn,
            "event_id": memory.event_id,
            "supersedes": memory.supersedes_id,
            "sources": sources,
            **(data or {}),
        },
        revisions=[("memory", memory.pk, None, snapshot(memory))],
    )


def memory_write_request(
    *,
    actor: Principal,
    scope: str,
    agent: str | None = None,
    text: str = "",
    key: str = "",
    value=None,
    tier: str = Memory.SEMANTIC,
    supersedes: int | None = None,
    conversation: int | None = None,
    valid_from: datetime.datetime | None = None,
    valid_to: datetime.datetime | None = None,
    expires_at: datetime.datetime | None = None,
    **fields,
) -> Memory:
    """memory_write for a caller that names things (the API, MCP, a command): the owner agent by
    name (an agent token names only itself, and is the default owner), the scope (`agent`,
    `shared`, `private:<person>`, `channel:<channel>`), the superseded memory and the
    conversation by id. Every bad field is reported at once (Invalid); then memory_write."""
    owner, store, errors = memory_write_target(actor=actor, scope=scope, agent=agent)
    target = None
    if supersedes is not None:
        target = Memory.objects.select_related("owner").filter(pk=supersedes).first()
        if target is None:
            errors["supersedes"] = [f"There is no memory {supersedes} you can see."]
    conversation_row = None
    if conversation is not None:
        conversation_row = Conversation.objects.filter(pk=conversation).first()
        if conversation_row is None or owner is None:
            errors["conversation"] = [f"Agent {agent or owner} has no conversation {conversation}."]
    text, rule_errors = _write_rules(
        owner=owner,
        text=text,
        key=key,
        value=value,
        tier=tier,
        valid_from=valid_from,
        valid_to=valid_to,
        expires_at=expires_at,
        conversation=conversation_row,
        owner_label=agent or "",
    )
    errors.update(rule_errors)
    if errors:
        raise Invalid(errors)
    return memory_write(
        actor=actor,
        owner=owner,
        store=store,
        text=text,
        key=key,
        value=value,
        tier=tier,
        supersedes=target,
        conversation=conversation_row,
        valid_from=valid_from,
        valid_to=valid_to,
        expires_at=expires_at,
        **fields,
    )


def memory_write_target(*, actor: Principal, scope: str, agent: str | None = None) -> tuple:
    """(owner, store, field errors) of a write that names its scope (`agent`, `shared`,
    `private:<person>`, `channel:<channel>`) and owner agent (an agent token names only itself,
    and is the default owner) — for memory_write_request and a writer of many memories to one
    store."""
    errors = {}
    store = ""
    try:
        store = access.parse_scope(scope)
    except Invalid as exc:
        errors.update(exc.detail)
    if store.startswith("private:") and not Person.objects.filter(name=store[8:]).exists():
        errors["scope"] = [f"There is no person named {store[8:]}."]
    if store.startswith("channel:") and not Channel.objects.filter(name=store[8:]).exists():
        errors["scope"] = [f"There is no channel named {store[8:]}."]

    owner = None
    if agent is None:
        if actor.kind == "agent":
            owner = actor.agent
        else:
            errors["agent"] = ["This field is required for tokens that are not an agent's."]
    elif actor.kind == "agent" and agent == actor.agent.name:
        owner = actor.agent
    else:
        owner = Agent.objects.filter(name=agent).first()
        if owner is None:
            errors["agent"] = [f"There is no agent named {agent}."]
    return owner, store, errors


def memory_write_check(
    *,
    actor: Principal,
    owner: Agent,
    store: str,
    text: str,
    key: str = "",
    value=None,
    tier: str = Memory.SEMANTIC,
    valid_from: datetime.datetime | None = None,
    valid_to: datetime.datetime | None = None,
    expires_at: datetime.datetime | None = None,
    conversation: Conversation | None = None,
    supersedes: Memory | None = None,
    sources: list[dict] = (),
) -> str:
    """The checks a new memory passes before anything is written, whoever writes it (memory_write,
    and memory_write_many for each of its memories before the first is stored): the actor may write
    there, the fields' rules, the memory it supersedes and the sources it cites. Raises Refused or
    Invalid; returns the text to store (derived from key and value when none is given)."""
    access.check_write(actor, owner=owner, store=store)
    text, errors = _write_rules(
        owner=owner,
        text=text,
        key=key,
        value=value,
        tier=tier,
        valid_from=valid_from,
        valid_to=valid_to,
        expires_at=expires_at,
        conversation=conversation,
    )
    if errors:
        raise Invalid(errors)
    _check_references(actor=actor, owner=owner, supersedes=supersedes, sources=list(sources))
    return text


def duplicate_answers(*, actor: Principal, supersedes: Memory | None, attach: dict | None) -> bool:
    """Whether an exact duplicate answers this write: an agent repeating what a live memory
    already says gets that memory back, never stored twice (the answer carries `duplicate_of`).
    A write that supersedes or attaches to something is its own."""
    return actor.kind == "agent" and supersedes is None and not attach


def memory_row_for_write(
    *,
    actor: Principal,
    owner: Agent,
    store: str,
    text: str,
    now: datetime.datetime,
    tier: str = Memory.SEMANTIC,
    expires_at: datetime.datetime | None = None,
    author_kind: str = "",
    author_name: str = "",
    **fields,
) -> Memory:
    """The new, unsaved, queued row of a write, as memory_activate expects it: authored by the
    actor unless another author is named; a short-term memory expires after BRAIN_SHORT_TERM_TTL
    hours unless given `expires_at`."""
    if tier in Memory.SHORT_TERM_TIERS and expires_at is None:
        expires_at = now + _short_term_ttl()
    kind, name = _author_of(actor)
    return memory_row_new(
        owner=owner,
        store=store,
        text=text,
        author_kind=author_kind or kind,
        author_name=author_name or name,
        status=Memory.QUEUED,
        queue_reason=QUEUE_NEW,
        tier=tier,
        expires_at=expires_at,
        **fields,
    )


def memory_write(
    *,
    actor: Principal,
    owner: Agent,
    store: str,
    text: str,
    sources: Iterable[dict] = (),
    tier: str = Memory.SEMANTIC,
    category: str = "",
    key: str = "",
    value=None,
    confidence: float = 1.0,
    supersedes: Memory | None = None,
    valid_from: datetime.datetime | None = None,
    valid_to: datetime.datetime | None = None,
    expires_at: datetime.datetime | None = None,
    run_id: str = "",
    turn: int | None = None,
    event_id: str = "",
    conversation: Conversation | None = None,
    route: str = API_WRITE,
    author_kind: str = "",
    author_name: str = "",
    now: datetime.datetime | None = None,
    attach: dict | None = None,
    audit_data: dict | None = None,
) -> Memory:
    """Write a memory owned by `owner` into `store` and pass it through memory_activate: it comes
    back `queued` (awaiting review) or `active`. Short-term tiers get `expires_at` (default TTL
    BRAIN_SHORT_TERM_TTL hours). Raises Refused when `actor` may not write there and
    MemoryConflict (after auditing memory.policy_violation) when strict anti-drift refuses it;
    then nothing is written. `attach` sets the fields that attach the memory to something
    (a skill overlay's `skill` and `position`, a precomputed `embedding`); `audit_data` is added
    to the memory.written event."""
    sources = list(sources)
    text = memory_write_check(
        actor=actor,
        owner=owner,
        store=store,
        text=text,
        key=key,
        value=value,
        tier=tier,
        valid_from=valid_from,
        valid_to=valid_to,
        expires_at=expires_at,
        conversation=conversation,
        supersedes=supersedes,
        sources=sources,
    )
    if duplicate_answers(actor=actor, supersedes=supersedes, attach=attach):
        existing = exact_duplicate_for_write(
            owner=owner, store=store, tier=tier, text=text, key=key, value=value
        )
        if existing is not None:
            existing.duplicate_of = existing.pk
            return existing
    now = now or timezone.now()
    memory = memory_row_for_write(
        actor=actor,
        owner=owner,
        store=store,
        text=text,
        now=now,
        author_kind=author_kind,
        author_name=author_name,
        tier=tier,
        category=category,
        key=key,
        value=value,
        confidence=confidence,
        supersedes=supersedes,
        valid_from=valid_from,
        valid_to=valid_to,
        expires_at=expires_at,
        run_id=run_id,
        turn=turn,
        event_id=event_id,
        conversation=conversation,
        **(attach or {}),
    )
    try:
        with transaction.atomic():
            status = memory_activate(
                actor=actor,
                memory=memory,
                route=route,
                now=now,
                insert=lambda new: memory_row_insert(new, sources=sources),
            )
            memory_written_audit(
                actor=actor, memory=memory, status=status, route=route, sources=len(sources), data=audit_data
            )
    except MemoryConflict as exc:
        _record_policy_violation(
            actor=actor,
            owner=owner,
            store=store,
            memory_id=None,
            content_hash=Memory.hash_content(text, key, value),
            route=route,
            conflicts=exc.conflicts_with,
        )
        raise
    memory.source_list = [{"kind": s["kind"], "ref": s["ref"]} for s in _unique_sources(sources)]
    return memory


def _check_references(*, actor: Principal, owner: Agent, supersedes: Memory | None, sources: list[dict]):
    """A writer may supersede only a live memory it can read, in a store it may write into, and
    cite only sources it can read (`access.check_sources`, every kind). Unknown and invisible ids
    get the same answer (400)."""
    errors = {}
    if supersedes is not None:
        visible = access.can_read_store(actor, owner=supersedes.owner, store=supersedes.store)
        if not visible:
            errors["supersedes"] = [f"There is no memory {supersedes.pk} you can see."]
        elif supersedes.status not in LIVE:
            errors["supersedes"] = [
                f"Memory {supersedes.pk} is {supersedes.status}; it cannot be superseded."
            ]
        else:
            try:
                access.check_write(actor, owner=owner, store=supersedes.store)
            except Refused:
                errors["supersedes"] = [f"You may not write into the store of memory {supersedes.pk}."]
    try:
        access.check_sources(actor, sources)
    except Invalid as exc:
        errors.update(exc.fields)
    if errors:
        raise Invalid(errors)


def _unique_sources(sources):
    seen = set()
    for source in sources:
        pair = (source["kind"], source["ref"])
        if pair not in seen:
            seen.add(pair)
            yield source


# --- review ---------------------------------------------------------------------------------


def memory_approve(
    *,
    actor: Principal,
    memory_id: int,
    text: str | None = None,
    reason: str = "",
    supersedes: Memory | None = None,
    decision: str | None = None,
    boundary: datetime.datetime | None = None,
) -> Memory:
    """A reviewer's approval: the queued memory goes through memory_activate (route review).
    With `text`, the reviewer's edit becomes a new version first (edit-then-approve). With
    `supersedes`, the reviewer also retires that memory. A memory that conflicts with active
    ones (same key, another value, same time) needs `decision`: REPLACE retires every one of
    them, KEEP_BOTH closes them at `boundary` where this one starts; without it
    ConflictDecisionNeeded and nothing changes. Of two reviewers acting at once exactly one
    wins; the other gets MemoryStateConflict."""
    try:
        with transaction.atomic():
            memory = _lock_in(memory_id, [Memory.QUEUED], "approved")
            before = snapshot(memory)
            edited = text is not None and text.strip() != "" and text != memory.text
            from_version = memory.version
            if edited:
                memory_row_revise(
                    memory=memory,
                    text=text,
                    author_kind=actor.kind,
                    author_name=actor.name,
                    reason=reason or "edited in review",
                )
            if supersedes is not None and supersedes.pk != memory.supersedes_id:
                if supersedes.pk == memory.pk or supersedes.status not in LIVE:
                    raise Invalid({"supersedes": [f"Memory {supersedes.pk} cannot be superseded."]})
                memory.supersedes = supersedes
                _save(memory, "supersedes")
            queue_reason = memory.queue_reason
            status = memory_activate(
                actor=actor, memory=memory, route=REVIEW, decision=decision, boundary=boundary
            )
            if status == Memory.ACTIVE and memory.stale:
                # Approving a memory that went stale confirms it still holds: its sources are
                # re-baselined to their current state.
                provenance_rebaseline(memory)
                memory.stale, memory.stale_reason = False, ""
                _save(memory, "stale", "stale_reason")
            data = {"queue_reason": queue_reason, "status": status, "version": memory.version}
            if edited:
                data.update(edited=True, from_version=from_version, content_hash=memory.content_hash)
            if memory.supersedes_id:
                data["supersedes"] = memory.supersedes_id
            outcome = getattr(memory, "conflict_outcome", None)
            if outcome:
                data.update(outcome)
            _overlay_touched(memory, "lesson approved" if status == Memory.ACTIVE else "lesson held", actor)
            _entry_touched(memory, actor)
            _audit(
                "memory.approved" if status == Memory.ACTIVE else "memory.held",
                actor=actor,
                memory=memory,
                before=before,
                reason=reason if status == Memory.ACTIVE else memory.status_reason,
                data=data,
            )
    except MemoryConflict as exc:
        memory = Memory.objects.select_related("owner").get(pk=memory_id)
        _record_policy_violation(
            actor=actor,
            owner=memory.owner,
            store=memory.store,
            memory_id=memory.pk,
            content_hash=memory.content_hash,
            route=REVIEW,
            conflicts=exc.conflicts_with,
        )
        raise
    return memory


def memory_edit_and_approve(*, actor: Principal, memory_id: int, text: str, reason: str = "") -> Memory:
    """Edit-then-approve: the reviewer's text becomes a new version, then the memory is approved."""
    if not (text or "").strip():
        raise Invalid({"text": ["The edited text may not be empty."]})
    return memory_approve(actor=actor, memory_id=memory_id, text=text, reason=reason)


def memory_reject(*, actor: Principal, memory_id: int, reason: str) -> Memory:
    """A reviewer's rejection of a queued memory, with a required reason. Memories that cite it
    become stale. Of two reviewers acting at once exactly one wins."""
    reason = (reason or "").strip()
    if not reason:
        raise Invalid({"reason": ["Say why the memory is rejected."]})
    return _reject(actor=actor, memory_id=memory_id, reason=reason)


def memory_reject_duplicate(*, actor: Principal, memory_id: int, of: int) -> Memory:
    """Reject a queued memory as a duplicate of live memory `of` (one click in the queue): the
    reason is filled in and the audit event names the original (`duplicate_of`)."""
    original = Memory.objects.filter(pk=of, status__in=LIVE).filter(access.readable_q(actor)).first()
    if original is None or original.pk == memory_id:
        raise Invalid({"of": [f"There is no live memory {of} you can see."]})
    return _reject(actor=actor, memory_id=memory_id, reason=f"duplicate of #{of}", data={"duplicate_of": of})


def _reject(*, actor: Principal, memory_id: int, reason: str, data: dict | None = None) -> Memory:
    with transaction.atomic():
        memory = _lock_in(memory_id, [Memory.QUEUED], "rejected")
        before = snapshot(memory)
        queue_reason = memory.queue_reason
        memory.status, memory.status_reason = Memory.REJECTED, reason
        _save(memory, "status", "status_reason")
        _overlay_touched(memory, "lesson rejected", actor)
        _entry_touched(memory, actor)
        _audit(
            "memory.rejected",
            actor=actor,
            memory=memory,
            before=before,
            reason=reason,
            data={"queue_reason": queue_reason, **(data or {})},
        )
        memory_mark_dependants_stale(
            actor=actor, memory=memory, reason=f"its source memory:{memory.pk} was rejected"
        )
    return memory


def memory_review_bulk(*, actor: Principal, memory_ids: Iterable[int], action: str, reason: str = "") -> dict:
    """Approve or reject many queued memories. Each memory is decided in its own transaction
    (one audit event each, sharing one batch id), so a memory another reviewer took first, or one
    strict anti-drift refuses, does not stop the rest. Returns {"done": [ids], "failed": {id: message}}."""
    import uuid

    from knowledge.audit.services import current_batch_id

    if action not in ("approve", "reject"):
        raise Invalid({"action": ["Use approve or reject."]})
    if action == "reject" and not (reason or "").strip():
        raise Invalid({"reason": ["Say why the memories are rejected."]})
    done, failed = [], {}
    token = current_batch_id.set(current_batch_id.get() or uuid.uuid4())
    try:
        for memory_id in dict.fromkeys(memory_ids):
            try:
                if action == "approve":
                    memory_approve(actor=actor, memory_id=memory_id, reason=reason)
                else:
                    memory_reject(actor=actor, memory_id=memory_id, reason=reason)
                done.append(memory_id)
            except (MemoryConflict, MemoryStateConflict, ConflictDecisionNeeded) as exc:
                failed[memory_id] = str(exc.detail["detail"])
            except Memory.DoesNotExist:
                failed[memory_id] = f"Memory {memory_id} does not exist."
    finally:
        current_batch_id.reset(token)
    return {"done": done, "failed": failed}


def memory_revise(*, actor: Principal, memory_id: int, text: str, reason: str) -> Memory:
    """A person corrects a live memory's text: a new version (the old text stays in the history)
    with a required reason. Its status does not change."""
    errors = {}
    if not (text or "").strip():
        errors["text"] = ["The text may not be empty."]
    if not (reason or "").strip():
        errors["reason"] = ["Say why the text changes."]
    if errors:
        raise Invalid(errors)
    with transaction.atomic():
        memory = _lock_in(memory_id, LIVE, "edited")
        if text == memory.text:
            return memory
        before = snapshot(memory)
        from_version = memory.version
        memory_row_revise(
            memory=memory, text=text, author_kind=actor.kind, author_name=actor.name, reason=reason
        )
        _audit(
            "memory.revised",
            actor=actor,
            memory=memory,
            before=before,
            reason=reason.strip(),
            data={
                "from_version": from_version,
                "version": memory.version,
                "content_hash": memory.content_hash,
            },
        )
    return memory


def memory_requeue(
    *, actor: Principal, memory_id: int, reason: str, queue_reason: str = QUEUE_REQUEUED
) -> Memory:
    """Send a live memory (back) to the review queue with a reason a reviewer can act on, e.g.
    "re-check: its source ticket:INC-12 changed" (provenance), a consolidation merge or a gate
    regression. A queued memory is not recalled until it is approved again."""
    reason = (reason or "").strip()
    if not reason:
        raise Invalid({"reason": ["Say why the memory goes back to the queue."]})
    if queue_reason not in (
        QUEUE_NEW,
        QUEUE_REQUEUED,
        QUEUE_MERGE,
        QUEUE_GATE,
        QUEUE_SUPERSEDES,
        QUEUE_CONFLICT,
    ):
        raise Invalid({"queue_reason": ["Use new, requeued, merge, gate, supersedes or conflict."]})
    with transaction.atomic():
        memory = _lock_in(memory_id, LIVE, "requeued")
        before = snapshot(memory)
        memory.status, memory.queue_reason, memory.status_reason = Memory.QUEUED, queue_reason, reason
        _save(memory, "status", "queue_reason", "status_reason")
        _audit(
            "memory.requeued",
            actor=actor,
            memory=memory,
            before=before,
            reason=reason,
            data={"queue_reason": queue_reason, "from_status": before["status"]},
        )
    return memory


def memory_conflict_resolve(
    *,
    actor: Principal,
    memory_id: int,
    decision: str,
    boundary: datetime.datetime | None = None,
    reason: str = "",
) -> Memory:
    """A reviewer settles a conflict already in force (data from before the conflict rule) in
    favour of active memory `memory_id`: REPLACE supersedes every active memory it conflicts
    with (closed now); KEEP_BOTH keeps them as of different times — the others end at
    `boundary`, where this one starts. One transaction, audited as memory.conflict_resolved
    naming every memory it touched. Returns the memory kept."""
    if decision not in CONFLICT_DECISIONS:
        raise Invalid({"decision": [f"Use one of {', '.join(CONFLICT_DECISIONS)}."]})
    now = timezone.now()
    with transaction.atomic():
        memory = _lock_in(memory_id, [Memory.ACTIVE], "kept")
        # the window it has in force, so the rule sees what it sees at activation
        conflicts = conflicting_active(memory, now=memory.valid_from or memory.created_at)
        if not conflicts:
            raise Conflict(f"Memory {memory.pk} conflicts with no active memory now. Nothing was changed.")
        before = snapshot(memory)
        if decision == KEEP_BOTH:
            _conflict_decision(
                actor=actor,
                memory=memory,
                route=REVIEW,
                conflicts=conflicts,
                decision=KEEP_BOTH,
                boundary=boundary,
            )
            memory.valid_from = boundary
            _save(memory, "valid_from")
        for other in conflicts:
            if decision == REPLACE:
                memory_supersede(actor=actor, memory_id=other.pk, successor=memory, now=now, closes=now)
            else:
                memory_close(
                    actor=actor,
                    memory_id=other.pk,
                    valid_to=boundary,
                    reason=f"kept as of different times: memory {memory.pk} holds from then on",
                )
        data = {"decision": decision, "retired": [c.pk for c in conflicts], "key": memory.key}
        if boundary is not None and decision == KEEP_BOTH:
            data["boundary"] = boundary.isoformat()
        memory.conflict_outcome = data
        _audit(
            "memory.conflict_resolved",
            actor=actor,
            memory=memory,
            before=before,
            reason=(reason or "").strip() or f"conflict on {memory.key} settled: {decision}",
            data=data,
        )
    return memory


# --- operator actions -----------------------------------------------------------------------


def memory_pin(*, actor: Principal, memory_id: int) -> Memory:
    """Pin a live memory (a critical fact an operator wants kept in view). Pinning twice is a no-op."""
    return _set_pinned(actor=actor, memory_id=memory_id, pinned=True)


def memory_unpin(*, actor: Principal, memory_id: int) -> Memory:
    """Unpin a memory. Unpinning an unpinned memory is a no-op."""
    return _set_pinned(actor=actor, memory_id=memory_id, pinned=False)


def _set_pinned(*, actor: Principal, memory_id: int, pinned: bool) -> Memory:
    with transaction.atomic():
        memory = _lock(memory_id)
        if pinned and memory.status not in LIVE:
            raise MemoryStateConflict(memory, "pinned")
        if memory.pinned == pinned:
            return memory
        before = snapshot(memory)
        memory.pinned = pinned
        _save(memory, "pinned")
        _audit("memory.pinned" if pinned else "memory.unpinned", actor=actor, memory=memory, before=before)
    return memory


def memory_revoke(*, actor: Principal, memory_id: int, reason: str) -> Memory:
    """An operator retires a wrong memory for good (status invalidated, row kept for lineage),
    with a required reason. Memories that cite it become stale."""
    reason = (reason or "").strip()
    if not reason:
        raise Invalid({"reason": ["Say why the memory is revoked."]})
    with transaction.atomic():
        memory = _lock_in(memory_id, LIVE, "revoked")
        before = snapshot(memory)
        memory.status, memory.status_reason, memory.queue_reason = Memory.INVALIDATED, reason, ""
        if memory.valid_to is None:
            memory.valid_to = timezone.now()
        _save(memory, "status", "status_reason", "queue_reason", "valid_to")
        _audit("memory.revoked", actor=actor, memory=memory, before=before, reason=reason)
        memory_mark_dependants_stale(
            actor=actor, memory=memory, reason=f"its source memory:{memory.pk} was revoked"
        )
    return memory


def memory_promote(
    *, actor: Principal, memory_id: int, tier: str | None = None, confidence: float | None = None
) -> Memory:
    """Promote a live memory to a higher tier and/or a higher confidence (an operator action of the memory inspector).
    With neither given, a short-term memory becomes semantic and a long-term one gets confidence
    1.0. A memory promoted out of the short-term tiers no longer expires."""
    errors = {}
    if tier is not None and tier not in Memory.TIER_ORDER:
        errors["tier"] = [f"Use one of {', '.join(Memory.TIER_ORDER)}."]
    if confidence is not None and not (0 <= confidence <= 1):
        errors["confidence"] = ["Confidence is between 0 and 1."]
    if errors:
        raise Invalid(errors)
    with transaction.atomic():
        memory = _lock_in(memory_id, LIVE, "promoted")
        if tier is None and confidence is None:
            if memory.tier in Memory.SHORT_TERM_TIERS:
                tier = Memory.SEMANTIC
            elif memory.confidence < 1.0:
                confidence = 1.0
            else:
                raise Invalid({"tier": ["Already long-term with full confidence: nothing to promote."]})
        if tier is not None and Memory.TIER_ORDER.index(tier) <= Memory.TIER_ORDER.index(memory.tier):
            raise Invalid({"tier": [f"{tier} is not above the memory's tier {memory.tier}."]})
        if confidence is not None and confidence <= memory.confidence:
            raise Invalid(
                {"confidence": [f"{confidence} is not above the memory's confidence {memory.confidence}."]}
            )
        before = snapshot(memory)
        data = {}
        if tier is not None:
            data.update(from_tier=memory.tier, to_tier=tier)
            memory.tier = tier
            if tier not in Memory.SHORT_TERM_TIERS:
                memory.expires_at = None
        if confidence is not None:
            data.update(from_confidence=memory.confidence, to_confidence=confidence)
            memory.confidence = confidence
        _save(memory, "tier", "confidence", "expires_at")
        _audit("memory.promoted", actor=actor, memory=memory, before=before, data=data)
    return memory


# --- short-term memory ------------------------------------------------------------------------


def _retire_batch(
    *, actor: Principal, memories: list[Memory], action: str, reason: str, at, data=None
) -> None:
    revisions = []
    changed_at = timezone.now()
    for memory in memories:
        before = snapshot(memory)
        memory.status, memory.status_reason, memory.queue_reason = Memory.EXPIRED, reason, ""
        ends = at or memory.expires_at  # an expired memory was valid until its expiry time
        if memory.valid_to is None or memory.valid_to > ends:
            memory.valid_to = ends
        memory.updated_at = changed_at
        revisions.append(("memory", memory.pk, before, snapshot(memory)))
    Memory.objects.bulk_update(
        memories, ["status", "status_reason", "queue_reason", "valid_to", "updated_at"], batch_size=500
    )
    stores = {m.store for m in memories}
    owners = {m.owner.name for m in memories}
    audit_record(
        action,
        actor=actor,
        store=stores.pop() if len(stores) == 1 else "",
        owner=owners.pop() if len(owners) == 1 else "",
        object_type="memory",
        object_ids=[m.pk for m in memories],
        reason=reason,
        counts={"memories": len(memories)},
        data=data,
        revisions=revisions,
    )


def _in_open_plans():
    from memory.models import ConsolidationItem, ConsolidationPlan

    return ConsolidationItem.objects.filter(plan__state__in=ConsolidationPlan.OPEN_STATES).values("memory_id")


def memory_expire_due(
    *, actor: Principal | None = None, now: datetime.datetime | None = None, batch: int = 500
) -> int:
    """Expire every live memory whose `expires_at` has passed (status expired, never recalled
    again), in batches of `batch`, one audited transaction each. Idempotent and safe to run on
    two workers at once (rows are claimed with SKIP LOCKED). Returns how many expired."""
    actor = actor or Principal.system("short-term expiry")
    now = now or timezone.now()
    total = 0
    while True:
        with transaction.atomic():
            memories = list(
                Memory.objects.select_for_update(of=("self",), skip_locked=True)
                .select_related("owner")
                .filter(status__in=LIVE, expires_at__lte=now)
                # a memory in an open plan (a session digest waiting for review) is the plan's to expire
                .exclude(pk__in=_in_open_plans())
                .order_by("expires_at", "pk")[:batch]
            )
            if not memories:
                break
            _retire_batch(
                actor=actor,
                memories=memories,
                action="memory.expired",
                reason="short-term memory reached its expiry time",
                at=None,
            )
        total += len(memories)
        if len(memories) < batch:
            break
    return total


def memory_clear_working(
    *,
    actor: Principal,
    conversation: Conversation | None = None,
    run_id: str = "",
    owner: Agent | None = None,
    now: datetime.datetime | None = None,
) -> list[int]:
    """Clear the working memory of a finished conversation or run: its live working-tier
    memories become expired ("cleared"), audited as memory.cleared. For a run, `owner` limits it
    to one agent's run (run ids are chosen by agents). Returns the ids cleared; running it again
    clears nothing more."""
    if (conversation is None) == (not run_id):
        raise ValueError("give exactly one of conversation or run_id")
    now = now or timezone.now()
    qs = Memory.objects.filter(status__in=LIVE, tier=Memory.WORKING)
    if conversation is not None:
        qs = qs.filter(conversation=conversation)
        reason, data = f"conversation {conversation.pk} finished", {"conversation": conversation.pk}
    else:
        qs = qs.filter(run_id=run_id)
        reason, data = f"run {run_id} finished", {"run_id": run_id}
    if owner is not None:
        qs = qs.filter(owner=owner)
    with transaction.atomic():
        memories = list(qs.select_for_update(of=("self",)).select_related("owner").order_by("pk"))
        if memories:
            _retire_batch(
                actor=actor, memories=memories, action="memory.cleared", reason=reason, at=now, data=data
            )
    return [m.pk for m in memories]
