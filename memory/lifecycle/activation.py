"""THE activation function, `memory_activate`: every route by which a memory may go into force
passes here (registered with knowledge.memories.activation at start-up, so entry blocks reach it
from the base layer), with one set of checks."""

import datetime
from collections.abc import Callable

from django.db import connection
from django.utils import timezone

from knowledge.memories.activation import ENTRY_BLOCK
from knowledge.memories.rows import memory_row_state
from knowledge.models import Memory
from knowledge.principals.principal import Principal
from memory.lifecycle.activation_hooks import (
    REVIEW,
    ROUTES,
    gate_before_activation,
    gate_checks_stored_memory,
    route_goes_active,
)
from memory.lifecycle.common import (
    QUEUE_CONFLICT,
    QUEUE_GATE,
    QUEUE_NEW,
    QUEUE_SUPERSEDES,
    MemoryStateConflict,
)
from memory.lifecycle.conflicts import (
    KEEP_BOTH,
    REPLACE,
    MemoryConflict,
    anti_drift_conflicts,
    conflict_decision,
    conflict_reason,
    conflicting_active,
)
from memory.lifecycle.supersession import memory_close, memory_supersede


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

    The only bypasses, on purpose, each putting back exactly what was rather than deciding
    anything new: audit restore (knowledge/restore/) and consolidation plan revert put back an
    earlier state the data held; the portability import (knowledge/portability/) restores
    exported rows in their exported state. They write rows through knowledge.memories.rows or
    set-wise SQL instead of activating anything.

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

    def persist(**state) -> None:
        """Set the state decided (through the row writer) and store it: the pending INSERT of a
        new row, or an UPDATE of exactly those fields of a stored one."""
        nonlocal insert
        memory_row_state(memory, save=insert is None and bool(state), **state)
        if insert is not None:
            insert(memory)
            insert = None

    conflicts = anti_drift_conflicts(memory)
    if conflicts:
        raise MemoryConflict(conflicts)

    if not route_goes_active(actor=actor, memory=memory, route=route):
        if memory.key and memory.queue_reason in ("", QUEUE_NEW):
            found = [c for c in conflicting_active(memory, now=now) if c.pk != memory.supersedes_id]
            if found:
                persist(queue_reason=QUEUE_CONFLICT, status_reason=conflict_reason(found))
                return Memory.QUEUED
        if memory.queue_reason:
            persist()
        else:
            persist(queue_reason=QUEUE_NEW)
        return Memory.QUEUED

    if not may_retire_without_review(actor=actor, memory=memory, route=route):
        persist(
            queue_reason=QUEUE_SUPERSEDES,
            status_reason=(
                f"It would retire memory {memory.supersedes_id} of agent {memory.supersedes.owner.name}: "
                "a reviewer decides."
            ),
        )
        return Memory.QUEUED

    conflicts = [c for c in conflicting_active(memory, now=now) if c.pk != memory.supersedes_id]
    carry_out = None
    if conflicts:
        carry_out = conflict_decision(
            actor=actor, memory=memory, route=route, conflicts=conflicts, decision=decision, boundary=boundary
        )
        if carry_out is None:
            persist(queue_reason=QUEUE_CONFLICT, status_reason=conflict_reason(conflicts))
            return Memory.QUEUED
        if carry_out == KEEP_BOTH:
            memory.valid_from = boundary

    # ---- The eval gate plugs in here: enforce mode may hold the memory. ----
    if gate_checks_stored_memory():
        persist()
    decision = gate_before_activation(memory, route=route)
    if not decision.allow:
        persist(status=Memory.QUEUED, queue_reason=QUEUE_GATE, status_reason=decision.reason)
        return Memory.QUEUED

    starts = memory.valid_from
    if starts is None and route != ENTRY_BLOCK:  # a block's validity is what its writer states
        starts = now
    persist(status=Memory.ACTIVE, queue_reason="", status_reason="", valid_from=starts)
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


def may_retire_without_review(*, actor: Principal, memory: Memory, route: str) -> bool:
    """Whether `memory` may retire the memory it supersedes without a review: always when both
    have the same owner; another owner's memory only by a person's decision — a reviewer's
    approval, or a write by a reviewer or admin. Trust lets an agent's own writes go into force
    unreviewed; it does not let an agent retire what another agent knows."""
    if not memory.supersedes_id or memory.supersedes.owner_id == memory.owner_id:
        return True
    return route == REVIEW or (actor.is_person and actor.is_reviewer)
