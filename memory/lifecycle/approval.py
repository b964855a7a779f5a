"""A reviewer's decisions on queued memories, set-wise: the one implementation of approving and
rejecting, for one memory (`review.memory_approve`, `review.memory_reject`) and for a batch
(`review.memory_review_bulk`) alike. Each runs in the caller's transaction and returns what it
decided and, per memory it left as it was, why (the error the one-memory services raise).

An approval passes every memory through the one activation function (`memory_activate`, route
review) with the same reads a lone approval makes, in statements per batch rather than per
memory: the rows locked in one statement, the relation finder's contradictions of all keyless
memories in one pass (`contradicted_active_for`), the decided state stored in one UPDATE, the
audit events in the caller's `audit_held` block. Memories whose decision reads other memories'
state — a key (the conflict rule, strict anti-drift) or a memory they supersede — are decided
one by one first, each stored before the next is decided, so a batch never leaves two values of
one key in force; the keyless rest are then decided together against what is active then. Not
against each other in the request (the finder costs ~8 ms a memory; a second pass would double a
batch's time): when two or more keyless memories go active together, the relation finder's
background sweep checks them after the commit (conflicts.contradictions_sweep), so two of one
batch that contradict each other are marked and listed under Conflicts in force, as a trusted
write's are, and recall never hands an agent both as facts."""

import datetime
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import snapshot
from knowledge.errors import Conflict, DomainError, Invalid
from knowledge.memories.activation import Activation, NewRow
from knowledge.memories.rows import memory_row_revise, memory_row_state, memory_rows_state
from knowledge.models import Memory
from knowledge.principal import Principal
from memory.lifecycle.activation import activate, memory_activate
from memory.lifecycle.activation_hooks import REVIEW
from memory.lifecycle.common import (
    MemoryNotFound,
    MemoryStateConflict,
    entries_touched,
    memories_lock,
    memory_audit,
    memory_save,
    overlay_touched,
)
from memory.lifecycle.conflicts import ConflictDecisionNeeded, MemoryConflict, contradictions_mark_later
from memory.lifecycle.contradicted import contradicted_active_for
from memory.lifecycle.hints import hints_confirm
from memory.lifecycle.supersession import memories_mark_dependants_stale
from memory.models import HintVerdict
from memory.provenance.services import provenance_rebaseline

# What leaves one memory of a batch as it was while the rest are decided: a decision a bulk
# action cannot make (a conflict, a contradiction, strict anti-drift), or another reviewer first.
SKIPPED = (MemoryConflict, ConflictDecisionNeeded)


@dataclass
class Ask:
    """One approval: the queued memory, and what a lone reviewer may add to it — an edit
    (`text`, a new version first), a memory it retires (`supersedes`), a conflict decision."""

    memory_id: int
    text: str | None = None
    supersedes: Memory | None = None
    decision: str | None = None
    boundary: datetime.datetime | None = None
    shown: frozenset[int] | None = None  # what the reviewer's card named as retired or closed


class NotShown(Conflict):
    """The approval would retire or close a memory the reviewer's card did not show (one that
    came into force, or came to conflict, since the card was drawn). Nothing was changed: the
    card is shown again with it."""

    code = "not_shown"

    def __init__(self, memory: Memory, unseen: list[int]):
        self.unseen = unseen
        named = ", ".join(f"#{i}" for i in unseen)
        super().__init__(
            f"Approving memory {memory.pk} would also retire or close {named}, which its card did not "
            "show. Nothing was changed: look at the card again.",
            memory=memory.pk,
            unseen=unseen,
        )


@dataclass
class _Approval:
    ask: Ask
    memory: Memory
    before: dict
    queue_reason: str
    data: dict = field(default_factory=dict)
    activation: Activation | None = None
    became: str = ""  # the status the decision left it in ("" while undecided)


@dataclass
class Decided:
    """What a batch decision did: the memories decided, in the order asked (approved ones active,
    or held queued by the enforcing eval gate), and the ones left as they were with why."""

    memories: list[Memory] = field(default_factory=list)
    failed: dict[int, DomainError] = field(default_factory=dict)


def _locked_queued(ids: list[int], action: str) -> tuple[dict[int, Memory], dict[int, DomainError]]:
    """The queued rows of `ids`, locked in one statement; the others with their error."""
    locked, queued, failed = memories_lock(ids), {}, {}
    for memory_id in ids:
        memory = locked.get(memory_id)
        if memory is None:
            failed[memory_id] = MemoryNotFound(f"There is no memory {memory_id}.")
        elif memory.status != Memory.QUEUED:
            failed[memory_id] = MemoryStateConflict(memory, action)
        else:
            queued[memory_id] = memory
    return queued, failed


def memories_approve(*, actor: Principal, asks: list[Ask], reason: str = "") -> Decided:
    """Approve the queued memories `asks` names (see the module's docstring): each goes active
    through memory_activate (route review) or is held by the enforcing gate (memory.held), or is
    left queued with its error in `failed` — a conflict or keyless contradiction that needs a
    decision (ConflictDecisionNeeded), strict anti-drift (MemoryConflict), another reviewer's
    decision first (MemoryStateConflict), no such memory. A bad edit, supersedes or decision is
    Invalid and the caller's transaction rolls back. Inside the caller's transaction."""
    now = timezone.now()
    queued, failed = _locked_queued([ask.memory_id for ask in asks], "approved")
    approvals = [
        _prepare(actor, ask, queued[ask.memory_id], reason) for ask in asks if ask.memory_id in queued
    ]
    # Decisions that read other memories' state, one by one, each stored before the next ...
    retired: set[int] = set()  # what the batch has retired so far
    together = []
    for approval in approvals:
        if not (approval.memory.key or approval.memory.supersedes_id):
            together.append(approval)
        elif not _retired_meanwhile(approval, retired, failed):
            _activate(actor, [approval], now, failed)
            if approval.became == Memory.ACTIVE:
                retired.update(approval.activation.retire)
    together = [a for a in together if not _retired_meanwhile(a, retired, failed)]
    # ... then the rest together, against what is active now.
    _activate(actor, together, now, failed)
    beside = [a for a in together if a.became == Memory.ACTIVE]
    if len(beside) > 1:  # each against the others too, after the commit (the sweep reads the flag)
        for approval in beside:
            approval.data["went_active_together"] = True
        transaction.on_commit(contradictions_mark_later)
    done = [a for a in approvals if a.became]
    for approval in done:
        memory, status = approval.memory, approval.became
        if status == Memory.ACTIVE and memory.stale:
            # Approving a memory that went stale confirms it still holds: its sources are
            # re-baselined to their current state.
            provenance_rebaseline(memory)
            memory.stale, memory.stale_reason = False, ""
            memory_save(memory, "stale", "stale_reason")
        overlay_touched(memory, "lesson approved" if status == Memory.ACTIVE else "lesson held", actor)
    entries_touched([a.memory for a in done], actor)
    for approval in done:
        memory, status = approval.memory, approval.became
        data = {"queue_reason": approval.queue_reason, "status": status, "version": memory.version}
        data.update(approval.data)
        if memory.supersedes_id:
            data["supersedes"] = memory.supersedes_id
        data.update(getattr(memory, "conflict_outcome", None) or {})
        memory_audit(
            "memory.approved" if status == Memory.ACTIVE else "memory.held",
            actor=actor,
            memory=memory,
            before=approval.before,
            reason=reason if status == Memory.ACTIVE else memory.status_reason,
            data=data,
        )
    return Decided(memories=[a.memory for a in done], failed=failed)


def _retired_meanwhile(approval: _Approval, retired: set[int], failed: dict) -> bool:
    """Whether a memory decided earlier in the batch retired this one (MemoryStateConflict)."""
    if approval.memory.pk not in retired:
        return False
    approval.memory.refresh_from_db(fields=["status"])
    failed[approval.memory.pk] = MemoryStateConflict(approval.memory, "approved")
    return True


def _prepare(actor: Principal, ask: Ask, memory: Memory, reason: str) -> _Approval:
    """What the reviewer adds before the decision: the edit (a new version), the memory it
    retires. Both only in a lone approval; nothing to store for a plain one."""
    approval = _Approval(ask=ask, memory=memory, before=snapshot(memory), queue_reason=memory.queue_reason)
    text, supersedes = ask.text, ask.supersedes
    if text is not None and text.strip() != "" and text != memory.text:
        from_version = memory.version
        memory_row_revise(
            memory=memory,
            text=text,
            author_kind=actor.kind_label,
            author_name=actor.name,
            reason=reason or "edited in review",
        )
        approval.data = {"edited": True, "from_version": from_version, "content_hash": memory.content_hash}
    if supersedes is not None and supersedes.pk != memory.supersedes_id:
        if supersedes.pk == memory.pk or supersedes.status not in Memory.LIVE:
            raise Invalid({"supersedes": [f"Memory {supersedes.pk} cannot be superseded."]})
        memory.supersedes = supersedes
        memory_save(memory, "supersedes")
    return approval


def _activate(actor: Principal, approvals: list[_Approval], now, failed: dict) -> None:
    """Decide `approvals` together: the keyless ones' contradictions in one pass of the relation
    finder (a keyless contradiction needs the decision a keyed conflict needs:
    conflicting_active reads memory.contradicted), then the activation chain (`activate`):
    memory_activate for each with the reviewer's decision, the decided states stored in one
    UPDATE, then carried out (the gate, what each retires). Sets each decided approval's
    `became`; the others go to `failed`."""
    if not approvals:
        return
    contradicted = contradicted_active_for([a.memory for a in approvals])
    by_memory = {a.memory.pk: a for a in approvals}

    def decide(memory: Memory) -> Activation | None:
        approval, ask = by_memory[memory.pk], by_memory[memory.pk].ask
        memory.contradicted = contradicted[memory.pk]
        try:
            approval.activation = memory_activate(
                actor=actor,
                memory=memory,
                route=REVIEW,
                now=now,
                decision=ask.decision,
                boundary=ask.boundary,
            )
        except SKIPPED as exc:
            failed[memory.pk] = exc
            return None
        touched = [*approval.activation.retire, *approval.activation.close]
        unseen = [i for i in touched if ask.shown is not None and i not in ask.shown]
        if unseen:
            failed[memory.pk] = NotShown(memory, unseen)
            return None
        return approval.activation

    def then(row: NewRow, status: str) -> None:
        approval = by_memory[row.memory.pk]
        approval.became = status
        if status == Memory.ACTIVE and approval.ask.decision and approval.memory.contradicted:
            # the reviewer decided the contradictions the finder hinted: confirmed hints
            hints_confirm(
                actor=actor,
                pairs=[
                    (approval.memory.pk, c.pk, HintVerdict.CONTRADICTION)
                    for c in approval.memory.contradicted
                ],
            )

    activate(
        actor=actor,
        route=REVIEW,
        rows=[NewRow(a.memory) for a in approvals],
        now=now,
        stored=True,
        decide=decide,
        then=then,
    )


def memories_reject(
    *, actor: Principal, memory_ids: list[int], reason: str, data: dict | None = None
) -> Decided:
    """Reject the queued memories `memory_ids` with `reason` (required, checked by the caller):
    one UPDATE, a memory.rejected event each, and the memories that cite them become stale (their
    dependants found for all at once). The ones no longer queued, or missing, go to `failed`.
    Inside the caller's transaction."""
    queued, failed = _locked_queued(memory_ids, "rejected")
    memories = list(queued.values())
    now = timezone.now()
    befores = {m.pk: snapshot(m) for m in memories}
    for memory in memories:
        memory_row_state(memory, save=False, status=Memory.REJECTED, status_reason=reason, updated_at=now)
    if memories:
        memory_rows_state([m.pk for m in memories], now=now, status=Memory.REJECTED, status_reason=reason)
    for memory in memories:
        overlay_touched(memory, "lesson rejected", actor)
    entries_touched(memories, actor)
    for memory in memories:
        memory_audit(
            "memory.rejected",
            actor=actor,
            memory=memory,
            before=befores[memory.pk],
            reason=reason,
            data={"queue_reason": befores[memory.pk]["queue_reason"], **(data or {})},
        )
    memories_mark_dependants_stale(
        actor=actor, retired=[(m, f"its source memory:{m.pk} was rejected") for m in memories]
    )
    return Decided(memories=memories, failed=failed)
