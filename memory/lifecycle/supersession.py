"""Supersession and staleness: retiring a memory in favour of its successor (time, not
overwrite), closing a memory's validity, and flagging the memories that cite a retired one."""

import datetime

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import audit_record, snapshot
from knowledge.memories.rows import memory_row_state, memory_rows_state
from knowledge.models import Memory, MemorySource
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
    return memories_mark_dependants_stale(actor=actor, retired=[(memory, reason)])


def memories_mark_dependants_stale(*, actor: Principal, retired: list[tuple[Memory, str]]) -> list[int]:
    """memory_mark_dependants_stale for many retired memories at once (a batch of rejections):
    the dependants of all of them found and locked in two statements; one memory.stale event per
    retired memory that has any, a dependant citing several counted once, for the first."""
    if setting_get("BRAIN_MEMORY_INVALIDATION") in ("requeue", "invalidate"):
        return [
            i for memory, _ in retired for i in provenance_recheck_memory_sources(actor=actor, retired=memory)
        ]
    with transaction.atomic():
        cites: dict[int, str] = {}  # dependant id -> the first retired memory it cites
        order = {str(memory.pk): n for n, (memory, _) in enumerate(retired)}
        found = MemorySource.objects.filter(
            kind="memory", ref__in=list(order), memory__status__in=Memory.LIVE, memory__stale=False
        ).values_list("memory_id", "ref")
        for dependant_id, ref in sorted(found, key=lambda row: order[row[1]]):
            cites.setdefault(dependant_id, ref)
        if not cites:
            return []
        dependants = list(
            Memory.objects.select_for_update(of=("self",))
            .select_related("owner")
            .filter(pk__in=list(cites), status__in=Memory.LIVE, stale=False)
            .order_by("pk")
        )
        now, flagged = timezone.now(), []
        for memory, reason in retired:
            group = [d for d in dependants if cites[d.pk] == str(memory.pk)]
            if not group:
                continue
            revisions = []
            for dependant in group:
                before = snapshot(dependant)
                dependant.stale, dependant.stale_reason = True, reason
                revisions.append(("memory", dependant.pk, before, snapshot(dependant)))
            ids = [d.pk for d in group]
            memory_rows_state(ids, now=now, stale=True, stale_reason=reason)
            stores = {d.store for d in group}
            owners = {d.owner.name for d in group}
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
            flagged += ids
    return flagged


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
