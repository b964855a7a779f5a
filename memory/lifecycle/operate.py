"""Operator actions of the memory inspector: pin, unpin, revoke, promote, and a person's
correction of a live memory's text (memory_revise)."""

from django.db import transaction
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import snapshot
from knowledge.errors import Invalid
from knowledge.memories.rows import memory_row_state, memory_text_revise
from knowledge.models import Memory
from knowledge.principal import Principal
from memory.lifecycle.common import (
    MemoryStateConflict,
    memory_audit,
    memory_lock,
    memory_lock_in,
    memory_save,
)
from memory.lifecycle.supersession import memory_mark_dependants_stale


def memory_pin(*, actor: Principal, memory_id: int) -> Memory:
    """Pin a live memory (a critical fact an operator wants kept in view). Pinning twice is a no-op."""
    return _set_pinned(actor=actor, memory_id=memory_id, pinned=True)


def memory_unpin(*, actor: Principal, memory_id: int) -> Memory:
    """Unpin a memory. Unpinning an unpinned memory is a no-op."""
    return _set_pinned(actor=actor, memory_id=memory_id, pinned=False)


def _set_pinned(*, actor: Principal, memory_id: int, pinned: bool) -> Memory:
    with transaction.atomic():
        memory = memory_lock(memory_id)
        if pinned and memory.status not in Memory.LIVE:
            raise MemoryStateConflict(memory, "pinned")
        if memory.pinned == pinned:
            return memory
        before = snapshot(memory)
        memory.pinned = pinned
        memory_save(memory, "pinned")
        memory_audit(
            "memory.pinned" if pinned else "memory.unpinned", actor=actor, memory=memory, before=before
        )
    return memory


def memory_revoke(*, actor: Principal, memory_id: int, reason: str) -> Memory:
    """An operator retires a wrong memory for good (status invalidated, row kept for lineage),
    with a required reason. Memories that cite it become stale."""
    reason = (reason or "").strip()
    if not reason:
        raise Invalid({"reason": ["Say why the memory is revoked."]})
    with transaction.atomic():
        memory = memory_lock_in(memory_id, Memory.LIVE, "revoked")
        before = snapshot(memory)
        memory_row_state(
            memory,
            status=Memory.INVALIDATED,
            status_reason=reason,
            queue_reason="",
            valid_to=memory.valid_to or timezone.now(),
        )
        memory_audit("memory.revoked", actor=actor, memory=memory, before=before, reason=reason)
        memory_mark_dependants_stale(
            actor=actor, memory=memory, reason=f"its source memory:{memory.pk} was revoked"
        )
    return memory


def memory_retire(*, actor: Principal, memory_id: int, reason: str = "") -> Memory:
    """DELETE /api/memory/{id}: an agent takes its own memory out of recall at once (a reviewer
    any memory it may read), as a revoke: reversible from the audit trail, erasable by an admin.
    Another agent's memory is Refused; one that is no longer live is a conflict."""
    memory = access.memory_get_for(actor, memory_id)
    if access.is_agent_other_than(actor, memory.owner_id):
        raise access.another_agents("That memory")
    reason = (reason or "").strip() or f"retired by {actor.kind_label} {actor.name}"
    return memory_revoke(actor=actor, memory_id=memory_id, reason=reason)


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
        memory = memory_lock_in(memory_id, Memory.LIVE, "promoted")
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
        memory_save(memory, "tier", "confidence", "expires_at")
        memory_audit("memory.promoted", actor=actor, memory=memory, before=before, data=data)
    return memory


def memory_revise(*, actor: Principal, memory_id: int, text: str, reason: str) -> Memory:
    """A person corrects a live memory's text: a new version (the old text stays in the history)
    with a required reason, through the one text revision (memory_text_revise: the same text is
    refused as nothing changed). Its status does not change."""
    errors = {}
    if not (text or "").strip():
        errors["text"] = ["The text may not be empty."]
    if not (reason or "").strip():
        errors["reason"] = ["Say why the text changes."]
    if errors:
        raise Invalid(errors)
    with transaction.atomic():
        memory = memory_lock_in(memory_id, Memory.LIVE, "edited")
        before = snapshot(memory)
        from_version = memory_text_revise(actor=actor, memory=memory, text=text, reason=reason)
        memory_audit(
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
