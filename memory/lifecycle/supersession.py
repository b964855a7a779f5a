"""Supersession and staleness: retiring a memory in favour of its successor (time, not
overwrite), closing a memory's validity, and flagging the memories that cite a retired one."""

import datetime

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import audit_record, snapshot
from knowledge.memories.rows import memory_row_state, memory_rows_state
from knowledge.models import Memory
from knowledge.principal import Principal
from knowledge.settings_store import setting_get
from memory.lifecycle.common import entry_touched, memory_audit, memory_lock, memory_lock_in, memory_save
from memory.provenance.services import provenance_recheck_memory_sources


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
                status__in=Memory.LIVE,
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
        memory_rows_state(ids, now=timezone.now(), stale=True, stale_reason=reason)
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
        old = memory_lock(memory_id)
        if old.status not in Memory.LIVE:
            return False
        before = snapshot(old)
        closes = closes or successor.valid_from or now
        memory_row_state(
            old,
            status=Memory.SUPERSEDED,
            superseded_by=successor,
            queue_reason="",
            status_reason=f"superseded by memory {successor.pk}",
            valid_to=closes if old.valid_to is None or old.valid_to > closes else old.valid_to,
        )
        entry_touched(old, actor)
        memory_audit(
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
        memory = memory_lock_in(memory_id, Memory.LIVE, "closed")
        before = snapshot(memory)
        memory.valid_to = valid_to
        memory_save(memory, "valid_to")
        memory_audit("memory.closed", actor=actor, memory=memory, before=before, reason=reason)
    return memory
