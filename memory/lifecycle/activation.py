"""THE activation function, `memory_activate`: every route by which a memory may go into force
passes here, with one set of checks. It decides and stores nothing (an `Activation`);
`knowledge.memories.activation.memory_rows_activate` stores new rows with the decision and
`activation_carry_out` does what it decided to other memories. `activate` is the one place the
three are chained, for one row or many, new or stored; it is registered with
knowledge.memories.activation at start-up, so entry blocks reach it from the base layer."""

import datetime
from collections.abc import Callable

from django.db import connection
from django.utils import timezone

from knowledge.memories.activation import ENTRY_BLOCK, Activation, NewRow, memory_rows_activate
from knowledge.memories.rows import memory_row_state, memory_rows_state
from knowledge.models import Memory
from knowledge.principal import Principal
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
    decision: str | None = None,
    boundary: datetime.datetime | None = None,
) -> Activation:
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
    5. the eval gate: in enforce mode the decision says the stored memory must pass the gate's
       check first (`Activation.gate`; activation_carry_out queues the check and holds the
       memory, the check's job activates it when it passes);
    6. going active: status, validity start (entry blocks keep the validity their writer gave),
       and what it retires: the memory it names and the conflict decision's.

    It reads and decides; it stores nothing. `activate` chains it: the decision is stored with a
    new row by `knowledge.memories.activation.memory_rows_activate` (or on a stored row) and
    carried out by activation_carry_out.

    The only bypasses, on purpose, each putting back exactly what was rather than deciding
    anything new: audit restore (knowledge/restore/) and consolidation plan revert put back an
    earlier state the data held; the portability import (knowledge/portability/) restores
    exported rows in their exported state."""
    assert connection.in_atomic_block, "memory_activate must run inside the caller's transaction"
    if route not in ROUTES:
        raise ValueError(f"unknown activation route {route!r}")
    if memory.status != Memory.QUEUED:
        raise MemoryStateConflict(memory, "activated")
    now = now or timezone.now()

    conflicts = anti_drift_conflicts(memory)
    if conflicts:
        raise MemoryConflict(conflicts)

    if not route_goes_active(actor=actor, memory=memory, route=route, now=now):
        if memory.key and memory.queue_reason in ("", QUEUE_NEW):
            found = [c for c in conflicting_active(memory, now=now) if c.pk != memory.supersedes_id]
            if found:
                return Activation.held(queue_reason=QUEUE_CONFLICT, status_reason=conflict_reason(found))
        return Activation.held(queue_reason=memory.queue_reason or QUEUE_NEW)

    if not may_retire_without_review(actor=actor, memory=memory, route=route):
        return Activation.held(
            queue_reason=QUEUE_SUPERSEDES,
            status_reason=(
                f"It would retire memory {memory.supersedes_id} of agent {memory.supersedes.owner.name}: "
                "a reviewer decides."
            ),
        )

    conflicts = [c for c in conflicting_active(memory, now=now) if c.pk != memory.supersedes_id]
    carry_out, starts = None, memory.valid_from
    if conflicts:
        carry_out = conflict_decision(
            actor=actor, memory=memory, route=route, conflicts=conflicts, decision=decision, boundary=boundary
        )
        if carry_out is None:
            return Activation.held(queue_reason=QUEUE_CONFLICT, status_reason=conflict_reason(conflicts))
        if carry_out == KEEP_BOTH:
            starts = boundary
    if starts is None and route != ENTRY_BLOCK:  # a block's validity is what its writer states
        starts = now
    ids = tuple(c.pk for c in conflicts)
    outcome = None
    if conflicts:
        # what the decision touched, for the caller's audit event and answer
        outcome = {"decision": carry_out, "retired": list(ids)}
        if carry_out == KEEP_BOTH:
            outcome["boundary"] = boundary.isoformat()
    return Activation(
        state={"status": Memory.ACTIVE, "queue_reason": "", "status_reason": "", "valid_from": starts},
        retire=((memory.supersedes_id,) if memory.supersedes_id else ())
        + (ids if carry_out == REPLACE else ()),
        close=ids if carry_out == KEEP_BOTH else (),
        boundary=boundary,
        outcome=outcome,
        gate=gate_checks_stored_memory(),
    )


def activation_carry_out(
    *,
    actor: Principal,
    memory: Memory,
    route: str,
    activation: Activation,
    now: datetime.datetime | None = None,
) -> str:
    """Carry out what memory_activate decided for `memory`, once it is stored with the decision's
    `stored_state`: the eval gate (enforce mode holds the stored memory in the queue, reason
    gate, until its background check passes — memory.lifecycle.gated; shadow mode queues a
    background check), then the memories it retires (superseded, or
    closed where it starts). Returns the memory's status afterwards. Inside the caller's
    transaction; audits what it does to other memories."""
    if activation.status != Memory.ACTIVE:
        return Memory.QUEUED
    now = now or timezone.now()
    verdict = gate_before_activation(memory, actor=actor, route=route, outcome=activation.outcome)
    if not verdict.allow:
        memory_row_state(memory, status=Memory.QUEUED, queue_reason=QUEUE_GATE, status_reason=verdict.reason)
        return Memory.QUEUED
    if activation.gate:
        memory_row_state(memory, **activation.state)
    if activation.outcome:
        memory.conflict_outcome = activation.outcome
    for other in activation.retire:
        memory_supersede(actor=actor, memory_id=other, successor=memory, now=now)
    for other in activation.close:
        memory_close(
            actor=actor,
            memory_id=other,
            valid_to=activation.boundary,
            reason=f"kept as of different times: memory {memory.pk} holds from then on",
        )
    return Memory.ACTIVE


def activate(
    *,
    actor: Principal,
    route: str,
    rows: list[NewRow],
    now: datetime.datetime | None = None,
    stored: bool = False,
    decide: Callable[[Memory], Activation | None] | None = None,
    then: Callable[[NewRow, str], None] | None = None,
) -> list[str]:
    """THE chain from the activation function to what it decided, composed here and nowhere
    else: decide each row (memory_activate, or `decide` where a route says more — a conflict
    decision, a refusal kept queued; None leaves that row out), store what was decided — new rows
    through the one entrance memory_rows_activate, stored row-locked ones (`stored`) in one
    UPDATE per decided state — then carry each out (activation_carry_out), calling `then(row,
    status)` after each. Every row is decided before the first is stored, all against the same
    state: a writer of many passes a row whose decision must see what an earlier one did after
    that one (the bulk write cuts at activation_reads_memories; an approval decides keyed
    memories one by one). Runs in the caller's transaction; returns the statuses of the rows
    decided, in order."""
    decided = []
    for row in rows:
        if decide is None:
            row.activation = memory_activate(actor=actor, memory=row.memory, route=route, now=now)
        else:
            row.activation = decide(row.memory)
        if row.activation is not None:
            decided.append(row)
    if stored:
        _states_store(decided, now=now or timezone.now())
    else:
        memory_rows_activate(rows=decided)
    statuses = []
    for row in decided:
        status = activation_carry_out(
            actor=actor, memory=row.memory, route=route, activation=row.activation, now=now
        )
        if then is not None:
            then(row, status)
        statuses.append(status)
    return statuses


def _states_store(rows: list[NewRow], *, now: datetime.datetime) -> None:
    """The decided states of stored rows: one UPDATE per state (a batch's memories that go
    active start now alike)."""
    states: dict[tuple, list[Memory]] = {}
    for row in rows:
        if row.activation.stored_state:
            states.setdefault(tuple(row.activation.stored_state.items()), []).append(row.memory)
    for state, memories in states.items():
        for memory in memories:
            memory_row_state(memory, save=False, updated_at=now, **dict(state))
        memory_rows_state([m.pk for m in memories], now=now, **dict(state))


def memory_activate_stored(
    *,
    actor: Principal,
    memory: Memory,
    route: str,
    now: datetime.datetime | None = None,
    decision: str | None = None,
    boundary: datetime.datetime | None = None,
) -> str:
    """memory_activate for a stored, queued, row-locked memory (a reviewer's approval, a merged
    memory at plan apply, a distilled memory passed again): `activate` deciding with `decision`
    and `boundary`. Returns the status afterwards (active or queued)."""
    now = now or timezone.now()
    [status] = activate(
        actor=actor,
        route=route,
        rows=[NewRow(memory)],
        now=now,
        stored=True,
        decide=lambda m: memory_activate(
            actor=actor, memory=m, route=route, now=now, decision=decision, boundary=boundary
        ),
    )
    return status


def may_retire_without_review(*, actor: Principal, memory: Memory, route: str) -> bool:
    """Whether `memory` may retire the memory it supersedes without a review: always when both
    have the same owner; another owner's memory only by a person's decision — a reviewer's
    approval, or a write by a reviewer or admin. Trust lets an agent's own writes go into force
    unreviewed; it does not let an agent retire what another agent knows."""
    if not memory.supersedes_id or memory.supersedes.owner_id == memory.owner_id:
        return True
    return route == REVIEW or (actor.is_person and actor.is_reviewer)
