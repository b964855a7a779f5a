"""Review: a reviewer's approval (through the one activation function, route review), rejection,
bulk decisions (all three set-wise in memory.lifecycle.approval, a lone decision being a batch
of one), sending a memory back to the queue, and settling a conflict already in force. Of two
reviewers acting at once exactly one wins; the other gets MemoryStateConflict."""

import datetime
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_batch, audit_held, snapshot
from knowledge.errors import Conflict, Invalid, NotFound
from knowledge.memories.rows import memory_row_state
from knowledge.models import Memory
from knowledge.principal import Principal
from memory.lifecycle.activation_hooks import REVIEW
from memory.lifecycle.approval import Ask, memories_approve, memories_reject
from memory.lifecycle.common import (
    QUEUE_REASONS,
    QUEUE_REQUEUED,
    memory_audit,
    memory_lock_in,
    memory_save,
)
from memory.lifecycle.conflicts import (
    CONFLICT_DECISIONS,
    KEEP_BOTH,
    REPLACE,
    MemoryConflict,
    conflict_decision,
    conflicting_active,
    policy_violation_record,
)
from memory.lifecycle.hints import hints_confirm
from memory.lifecycle.shown import FINGERPRINT_FIELDS, fingerprint, shown_read
from memory.lifecycle.supersession import memory_close, memory_supersede
from memory.models import HintVerdict


def memory_approve(
    *,
    actor: Principal,
    memory_id: int,
    text: str | None = None,
    reason: str = "",
    supersedes: Memory | None = None,
    decision: str | None = None,
    boundary: datetime.datetime | None = None,
    shown: Iterable[int] | None = None,
) -> Memory:
    """A reviewer's approval: the queued memory goes through memory_activate (route review).
    With `text`, the reviewer's edit becomes a new version first (edit-then-approve). With
    `supersedes`, the reviewer also retires that memory. A memory that conflicts with active
    ones (same key, another value, same time) needs `decision`: REPLACE retires every one of
    them, KEEP_BOTH closes them at `boundary` where this one starts; without it
    ConflictDecisionNeeded and nothing changes. Of two reviewers acting at once exactly one
    wins; the other gets MemoryStateConflict. With `shown`, the memories the reviewer's card
    named as what it retires or closes: an approval that would touch any other is refused
    (approval.NotShown) and nothing changes. One audit batch for all of it. The batch approval
    with one memory (approval.memories_approve)."""
    ask = Ask(
        memory_id,
        text=text,
        supersedes=supersedes,
        decision=decision,
        boundary=boundary,
        shown=frozenset(shown) if shown is not None else None,
    )
    try:
        # one decision, one audit batch: the approval and every memory it retires or closes
        with audit_batch(), transaction.atomic():
            decided = memories_approve(actor=actor, asks=[ask], reason=reason)
            if decided.failed:
                raise decided.failed[memory_id]
    except MemoryConflict as exc:
        _violation_record(actor, memory_id, exc)
        raise
    return decided.memories[0]


def _violation_record(actor: Principal, memory_id: int, exc: MemoryConflict) -> None:
    """Strict anti-drift refused the approval: audited after the decision rolled back."""
    memory = Memory.objects.select_related("owner").get(pk=memory_id)
    policy_violation_record(
        actor=actor,
        owner=memory.owner,
        store=memory.store,
        memory_id=memory.pk,
        content_hash=memory.content_hash,
        route=REVIEW,
        conflicts=exc.conflicts_with,
    )


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


def memory_reject_duplicate(*, actor: Principal, memory_id: int, of: int, hint: str = "") -> Memory:
    """Reject a queued memory as a duplicate of live memory `of` (the queue's duplicate key): the
    reason is filled in and the audit event names the original (`duplicate_of`). `hint`, the
    hint the card showed (duplicate, exact-duplicate, near-duplicate), is counted as confirmed."""
    original = Memory.objects.filter(pk=of, status__in=Memory.LIVE).filter(access.readable_q(actor)).first()
    if original is None or original.pk == memory_id:
        raise Invalid({"of": [f"There is no live memory {of} you can see."]})
    if hint and hint not in (HintVerdict.DUPLICATE, HintVerdict.EXACT, HintVerdict.NEAR):
        raise Invalid({"hint": ["Use duplicate, exact-duplicate or near-duplicate."]})
    return _reject(
        actor=actor,
        memory_id=memory_id,
        reason=f"duplicate of #{of}",
        data={"duplicate_of": of, **({"hint": hint} if hint else {})},
        confirms=[(memory_id, of, hint)] if hint else [],
    )


def _reject(
    *, actor: Principal, memory_id: int, reason: str, data: dict | None = None, confirms=()
) -> Memory:
    with audit_batch(), transaction.atomic():
        decided = memories_reject(actor=actor, memory_ids=[memory_id], reason=reason, data=data)
        if decided.failed:
            raise decided.failed[memory_id]
        hints_confirm(actor=actor, pairs=confirms)
    return decided.memories[0]


BULK_CHUNK = 100  # memories decided in one transaction of a bulk decision


def memory_review_bulk(
    *,
    actor: Principal,
    memory_ids: Iterable[int],
    action: str,
    reason: str = "",
    expect: dict[int, str] | None = None,
) -> dict:
    """Approve or reject many queued memories, set-wise (memory.lifecycle.approval): a
    transaction per BULK_CHUNK memories, each memory with the checks and the audit event a lone
    decision gives it, all events sharing one batch id (restorable together). A memory that
    needs a decision a bulk action cannot make (a conflict, a contradiction, strict anti-drift),
    or that another reviewer took first, is skipped and the rest decided. With `expect` (id →
    the fingerprint the reviewer was shown, memory.lifecycle.shown), a memory whose fingerprint
    differs now, read under its row lock, is left as it is and listed in "changed". Returns
    {"done": [ids], "held": [ids the enforcing eval gate holds, among done], "changed": [ids],
    "failed": {id: message}, "batch": the audit batch id of their events}."""
    if action not in ("approve", "reject"):
        raise Invalid({"action": ["Use approve or reject."]})
    reason = (reason or "").strip() if action == "reject" else reason
    if action == "reject" and not reason:
        raise Invalid({"reason": ["Say why the memories are rejected."]})
    ids = list(dict.fromkeys(memory_ids))
    done, held, changed, failed = [], [], [], {}
    with audit_batch() as batch:
        for start in range(0, len(ids), BULK_CHUNK):
            chunk = ids[start : start + BULK_CHUNK]
            with transaction.atomic(), audit_held():
                if expect is not None:
                    moved = _changed_since_shown(chunk, expect)
                    chunk = [i for i in chunk if i not in moved]
                    changed += moved
                if action == "approve":
                    decided = memories_approve(actor=actor, asks=[Ask(i) for i in chunk], reason=reason)
                else:
                    decided = memories_reject(actor=actor, memory_ids=chunk, reason=reason)
            decided_ids = {m.pk for m in decided.memories}
            done += [i for i in chunk if i in decided_ids]
            held += [m.pk for m in decided.memories if m.status == Memory.QUEUED]
            for memory_id, exc in decided.failed.items():
                if isinstance(exc, MemoryConflict):
                    _violation_record(actor, memory_id, exc)
                failed[memory_id] = (
                    f"Memory {memory_id} does not exist."
                    if isinstance(exc, NotFound)
                    else str(exc.detail["detail"])
                )
    for memory_id in changed:
        failed[memory_id] = (
            f"Memory {memory_id} changed since it was shown; it was left queued to be seen again."
        )
    return {"done": done, "held": held, "changed": changed, "failed": failed, "batch": str(batch)}


def _changed_since_shown(ids: list[int], expect: dict[int, str]) -> list[int]:
    """The queued memories of `ids` whose fingerprint is no longer the one shown, read with their
    rows locked (so none changes between this check and the decision). The ones that left the
    queue are the decision's to report (another reviewer first)."""
    rows = (
        Memory.objects.select_for_update()
        .filter(pk__in=ids, status=Memory.QUEUED)
        .values_list("pk", *FINGERPRINT_FIELDS)
    )
    return sorted(row[0] for row in rows if fingerprint(row[1:]) != expect.get(row[0]))


FLAGGED_CHOICES = ("include", "leave")


def memory_review_shown(
    *, actor: Principal, snapshot: str, action: str, reason: str = "", flagged: str = ""
) -> dict:
    """A decision on the memories a confirmation showed (memory.lifecycle.shown): exactly the
    ones its snapshot token names, each as it was shown, through memory_review_bulk. A memory
    that came to match the filter afterwards is not among them; one that changed since is left
    queued and reported in "changed". An approval whose confirmation named duplicates or
    contradictions it would put in force needs `flagged`: "include" approves them too, "leave"
    leaves them queued (reported in "left"); without it Invalid and nothing changes. Returns
    memory_review_bulk's answer with "shown", the ids the token named, and "left"."""
    expect, flags = shown_read(snapshot)
    left: list[int] = []
    if action == "approve" and flags:
        if flagged not in FLAGGED_CHOICES:
            raise Invalid(
                {
                    "flagged": [
                        f"{len(flags)} of these would put a duplicate or a contradiction in force: approve "
                        "them too (include) or leave them queued (leave)."
                    ]
                }
            )
        if flagged == "leave":
            left = [pk for pk in expect if pk in set(flags)]
            expect = {pk: fp for pk, fp in expect.items() if pk not in set(flags)}
    result = memory_review_bulk(
        actor=actor, memory_ids=list(expect), action=action, reason=reason, expect=expect
    )
    return {**result, "shown": list(expect) + left, "left": left}


def memory_requeue(
    *, actor: Principal, memory_id: int, reason: str, queue_reason: str = QUEUE_REQUEUED
) -> Memory:
    """Send a live memory (back) to the review queue with a reason a reviewer can act on, e.g.
    "re-check: its source ticket:INC-12 changed" (provenance), a consolidation merge or a gate
    regression. A queued memory is not recalled until it is approved again."""
    reason = (reason or "").strip()
    if not reason:
        raise Invalid({"reason": ["Say why the memory goes back to the queue."]})
    if queue_reason not in QUEUE_REASONS:
        raise Invalid({"queue_reason": ["Use new, requeued, merge, gate, supersedes or conflict."]})
    with transaction.atomic():
        memory = memory_lock_in(memory_id, Memory.LIVE, "requeued")
        before = snapshot(memory)
        memory_row_state(memory, status=Memory.QUEUED, queue_reason=queue_reason, status_reason=reason)
        memory_audit(
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
    with audit_batch(), transaction.atomic():
        memory = memory_lock_in(memory_id, [Memory.ACTIVE], "kept")
        # the window it has in force, so the rule sees what it sees at activation
        conflicts = conflicting_active(memory, now=memory.valid_from or memory.created_at)
        if not conflicts:
            raise Conflict(f"Memory {memory.pk} conflicts with no active memory now. Nothing was changed.")
        before = snapshot(memory)
        if decision == KEEP_BOTH:
            conflict_decision(
                actor=actor,
                memory=memory,
                route=REVIEW,
                conflicts=conflicts,
                decision=KEEP_BOTH,
                boundary=boundary,
            )
            memory.valid_from = boundary
            memory_save(memory, "valid_from")
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
        memory_audit(
            "memory.conflict_resolved",
            actor=actor,
            memory=memory,
            before=before,
            reason=(reason or "").strip()
            or f"conflict on {memory.key or 'a contradiction'} settled: {decision}",
            data=data,
        )
    return memory
