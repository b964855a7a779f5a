"""Consolidation plans: write a run's change set, apply it, revert it exactly, or discard it.

Every write here is one transaction with its audit events. Apply and revert are bulk changes of
many memories, done set-wise in SQL; each memory's exact state before (and after) is kept on the
plan's items, so a revert puts back status, reason, successor, validity, update time and sources
exactly — and refuses (409) if anything changed since, writing nothing."""

import json
from collections import defaultdict
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from knowledge.audit import audit_record, snapshot
from knowledge.memories import memory_row_create
from knowledge.models import Agent, Memory, MemorySource
from knowledge.settings_store import setting_get
from memory.consolidation.find import Change, Findings, find_changes
from memory.models import ConsolidationGroup, ConsolidationItem, ConsolidationPlan

STALE_RUN = timedelta(hours=1)
MERGING_KINDS = (ConsolidationGroup.NEAR_DUPLICATE, ConsolidationGroup.SUMMARY)


class PlanConflict(Exception):
    """The request cannot be carried out in the plan's (or the memories') current state: 409."""

    def __init__(self, message: str, **extra):
        super().__init__(message)
        self.message = message
        self.extra = extra


class ConsolidationOff(PlanConflict):
    pass


class ConsolidationBusy(PlanConflict):
    pass


def actor_label(actor) -> str:
    return f"{actor.kind}:{actor.name}"


def _json_time(value):
    return value.isoformat() if value is not None else None


def _source_state(source: MemorySource) -> dict:
    return {
        "id": source.pk,
        "kind": source.kind,
        "ref": source.ref,
        "fingerprint": source.fingerprint,
        "snapshot": source.snapshot,
        "created_at": _json_time(source.created_at),
    }


def memory_state(memory: Memory, sources) -> dict:
    """The exact state of one memory as a plan records it: its row and its sources."""
    return {"memory": snapshot(memory), "sources": [_source_state(s) for s in sources]}


# --- the one activation step, and its undo ----------------------------------------------------


def merged_memories_activate(*, memory_ids: list[int], plan: ConsolidationPlan, actor, now) -> None:
    """Put a plan's merged memories into force. This is the one step that belongs to the
    activation function (memory.services.memory_activate) once it exists: route it there."""
    Memory.objects.filter(pk__in=memory_ids, status=Memory.QUEUED).update(
        status=Memory.ACTIVE,
        queue_reason="",
        status_reason=f"consolidation plan #{plan.pk} applied",
        updated_at=now,
    )


def merged_memories_retire(
    *, memory_ids: list[int], plan: ConsolidationPlan, status: str, reason: str, now
) -> None:
    """Take a plan's merged memories out of use for good (the rows stay, for lineage)."""
    Memory.objects.filter(pk__in=memory_ids).update(
        status=status, queue_reason="", status_reason=reason, updated_at=now
    )


# --- run ------------------------------------------------------------------------------------


def consolidation_run(
    *, actor, owner: Agent | None = None, store: str = "", mode: str | None = None, now=None
):
    """Run consolidation (optionally for one owner agent and/or one store) and write its plan.
    Mode (default: the BRAIN_MEMORY_CONSOLIDATION setting) `propose` leaves the plan for a
    reviewer, `apply` applies it at once, `off` refuses. One run at a time (ConsolidationBusy).
    Model calls happen before the write transaction; see memory.consolidation.find."""
    mode = mode or setting_get("BRAIN_MEMORY_CONSOLIDATION")
    if mode == "off":
        raise ConsolidationOff("Consolidation is off (BRAIN_MEMORY_CONSOLIDATION is off).")
    now = now or timezone.now()
    ConsolidationPlan.objects.filter(state=ConsolidationPlan.RUNNING, created_at__lt=now - STALE_RUN).update(
        state=ConsolidationPlan.FAILED, error="the run did not finish within an hour", finished_at=now
    )
    try:
        with transaction.atomic():
            plan = ConsolidationPlan.objects.create(
                state=ConsolidationPlan.RUNNING,
                mode=mode,
                owner=owner,
                store=store,
                created_by=actor_label(actor),
                created_at=now,
            )
    except IntegrityError:
        raise ConsolidationBusy("Another consolidation run is in progress; try again when it has finished.")
    try:
        findings = find_changes(owner_id=owner.pk if owner else None, store=store, actor=actor, now=now)
        plan = _plan_write(plan=plan, findings=findings, actor=actor, now=now)
    except Exception as exc:
        ConsolidationPlan.objects.filter(pk=plan.pk).update(
            state=ConsolidationPlan.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:1000],
            finished_at=timezone.now(),
        )
        raise
    if mode == "apply" and plan.state == ConsolidationPlan.PROPOSED:
        try:
            plan = plan_apply(actor=actor, plan_id=plan.pk)
        except PlanConflict as exc:  # something changed in between: the plan waits, saying why
            ConsolidationPlan.objects.filter(pk=plan.pk).update(error=exc.message)
            plan.refresh_from_db()
    return plan


def _merged_create(*, change: Change, memories: dict, sources: dict, plan, now) -> Memory:
    members = [memories[i] for i in change.folds]
    keys = {m.key for m in members}
    values = {json.dumps(m.value, sort_keys=True) for m in members}
    key = keys.pop() if len(keys) == 1 else ""
    value = members[0].value if key and len(values) == 1 else None
    tier = Memory.PROCEDURAL if all(m.tier == Memory.PROCEDURAL for m in members) else Memory.SEMANTIC
    confidences = [m.confidence for m in members]
    confidence = max(confidences) if change.kind == ConsolidationGroup.NEAR_DUPLICATE else min(confidences)
    what = "merges" if change.kind == ConsolidationGroup.NEAR_DUPLICATE else "summarises"
    memory = memory_row_create(
        owner=members[0].owner,
        store=change.store,
        text=change.merged_text,
        author_kind="system",
        author_name="consolidation",
        status=Memory.QUEUED,
        queue_reason="merge",
        status_reason=f"{what} #{', #'.join(map(str, change.folds))} (consolidation plan #{plan.pk})",
        replaces=list(change.folds),
        tier=tier,
        category=change.category,
        key=key,
        value=value,
        confidence=confidence,
        reason=f"consolidation plan #{plan.pk}",
    )
    seen, rows = set(), []
    for member_id in change.folds:  # the provenance of every original, once
        for source in sources[member_id]:
            if (source.kind, source.ref) not in seen:
                seen.add((source.kind, source.ref))
                rows.append(
                    MemorySource(
                        memory=memory,
                        kind=source.kind,
                        ref=source.ref,
                        fingerprint=source.fingerprint,
                        snapshot=source.snapshot,
                    )
                )
    MemorySource.objects.bulk_create(rows)
    return memory


def _plan_write(*, plan: ConsolidationPlan, findings: Findings, actor, now) -> ConsolidationPlan:
    with transaction.atomic():
        ids = sorted({i for c in findings.changes for i in c.memory_ids})
        memories = {
            m.pk: m
            for m in Memory.objects.select_for_update().filter(pk__in=ids).defer("embedding").order_by("pk")
        }
        busy = set(
            ConsolidationItem.objects.filter(memory_id__in=ids, plan__state__in=ConsolidationPlan.OPEN_STATES)
            .exclude(plan=plan)
            .values_list("memory_id", flat=True)
        )
        kept, dropped = [], 0
        for change in findings.changes:  # anything changed since it was found is left for the next run
            if any(
                i not in memories or memories[i].status != Memory.ACTIVE or i in busy
                for i in change.memory_ids
            ):
                dropped += 1
            else:
                kept.append(change)
        sources = defaultdict(list)
        for source in MemorySource.objects.filter(memory_id__in=ids).order_by("id"):
            sources[source.memory_id].append(source)

        groups, merged = [], {}
        for position, change in enumerate(kept):
            if change.kind in MERGING_KINDS:
                target = _merged_create(change=change, memories=memories, sources=sources, plan=plan, now=now)
                merged[position] = target
                target_id = target.pk
            else:
                target_id = change.keep
            groups.append(
                ConsolidationGroup(
                    plan=plan,
                    kind=change.kind,
                    owner_id=change.owner_id,
                    store=change.store,
                    category=change.category,
                    key=change.key,
                    target_id=target_id,
                    merged_text=change.merged_text,
                    reason=change.reason,
                    position=position,
                )
            )
        ConsolidationGroup.objects.bulk_create(groups)
        items = []
        for position, (group, change) in enumerate(zip(groups, kept, strict=True)):
            if position in merged:
                target = merged[position]
                items.append(
                    ConsolidationItem(
                        plan=plan,
                        group=group,
                        memory=target,
                        role=ConsolidationItem.MERGED,
                        before=memory_state(target, target.sources.order_by("id")),
                    )
                )
            else:
                items.append(
                    ConsolidationItem(
                        plan=plan,
                        group=group,
                        memory_id=change.keep,
                        role=ConsolidationItem.KEEP,
                        before=memory_state(memories[change.keep], sources[change.keep]),
                    )
                )
            for memory_id in change.folds:
                items.append(
                    ConsolidationItem(
                        plan=plan,
                        group=group,
                        memory_id=memory_id,
                        role=ConsolidationItem.FOLD,
                        before=memory_state(memories[memory_id], sources[memory_id]),
                    )
                )
        ConsolidationItem.objects.bulk_create(items, batch_size=5000)

        counts = dict(findings.counts)
        counts.update(groups=len(kept), memories=len(items), merged=len(merged), dropped=dropped)
        plan.state = ConsolidationPlan.PROPOSED if kept else ConsolidationPlan.EMPTY
        plan.counts = counts
        plan.model_note = "; ".join(findings.notes)
        plan.finished_at = timezone.now()
        plan.save(update_fields=["state", "counts", "model_note", "finished_at"])

        audit_record(
            "memory.consolidation.run",
            actor=actor,
            store=plan.store,
            owner=plan.owner.name if plan.owner_id else "",
            object_type="consolidation_plan",
            object_ids=[plan.pk],
            reason=plan.model_note,
            counts=counts,
            data={"mode": plan.mode, "state": plan.state},
        )
        by_store = defaultdict(list)
        for item in items:
            by_store[(item.group.owner_id, item.group.store)].append(item)
        owners = dict(Agent.objects.filter(pk__in={k[0] for k in by_store}).values_list("pk", "name"))
        for (owner_id, store), store_items in sorted(by_store.items()):
            created = [i for i in store_items if i.role == ConsolidationItem.MERGED]
            audit_record(
                "memory.consolidation.proposed",
                actor=actor,
                store=store,
                owner=owners[owner_id],
                object_type="memory",
                object_ids=[i.memory_id for i in store_items],
                counts={
                    "groups": len({i.group_id for i in store_items}),
                    "memories": len(store_items),
                    "merged": len(created),
                },
                data={"plan": plan.pk, "merged": [i.memory_id for i in created]},
                revisions=[("memory", i.memory_id, None, i.before["memory"]) for i in created],
            )
    return plan


# --- apply ----------------------------------------------------------------------------------


def _lock_plan(plan_id: int) -> ConsolidationPlan:
    plan = ConsolidationPlan.objects.select_for_update().filter(pk=plan_id).first()
    if plan is None:
        raise ConsolidationPlan.DoesNotExist(f"No consolidation plan {plan_id}.")
    return plan


def _current(ids) -> dict[int, dict]:
    return {
        row["id"]: row
        for row in Memory.objects.select_for_update()
        .filter(pk__in=ids)
        .order_by("pk")
        .values("id", "status", "content_hash", "version", "superseded_by_id")
    }


VERIFIED = ("status", "content_hash", "version", "superseded_by_id")


def _changed_since(items, current, state_of) -> list[int]:
    changed = []
    for item in items:
        expected, now_ = state_of(item), current.get(item.memory_id)
        if now_ is None or any(now_[f] != expected[f] for f in VERIFIED):
            changed.append(item.memory_id)
    return changed


def _fold_after(item, group, keep_before, plan, now) -> dict:
    state = dict(item.before["memory"])
    state.update(
        status=Memory.SUPERSEDED,
        superseded_by_id=group.target_id,
        status_reason=f"{group.get_kind_display()} folded into #{group.target_id} (consolidation plan #{plan.pk})",
        updated_at=now.isoformat(),
    )
    if group.kind == ConsolidationGroup.CONFLICT and state["valid_to"] is None and keep_before is not None:
        # Time, not overwrite: the losing value is closed where the winning one begins.
        winner_start = keep_before["valid_from"] or keep_before["created_at"]
        if datetime.fromisoformat(winner_start) > datetime.fromisoformat(state["created_at"]):
            state["valid_to"] = winner_start
    return state


def _bulk_set(rows: list[tuple]) -> None:
    """rows: (id, status, status_reason, superseded_by_id, valid_to, queue_reason, updated_at)."""
    if not rows:
        return
    columns = list(zip(*rows, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE {Memory._meta.db_table} AS m
                SET status = v.status, status_reason = v.status_reason, superseded_by_id = v.superseded_by_id,
                    valid_to = v.valid_to, queue_reason = v.queue_reason, updated_at = v.updated_at
                FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::bigint[], %s::timestamptz[], %s::text[],
                            %s::timestamptz[])
                     AS v(id, status, status_reason, superseded_by_id, valid_to, queue_reason, updated_at)
                WHERE m.id = v.id""",
            [list(c) for c in columns],
        )


def _row(state: dict) -> tuple:
    return (
        state["id"],
        state["status"],
        state["status_reason"],
        state["superseded_by_id"],
        state["valid_to"],
        state["queue_reason"],
        state["updated_at"],
    )


def _save_after(items) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE {ConsolidationItem._meta.db_table} AS i SET after = v.after::jsonb,
                       added_sources = v.added::jsonb
                FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, after, added) WHERE i.id = v.id""",
            [
                [i.pk for i in items],
                [json.dumps(i.after) for i in items],
                [json.dumps(i.added_sources) for i in items],
            ],
        )


def _audit_by_store(action: str, *, actor, plan, items, pairs) -> None:
    """One event per owner/store, naming every memory changed there, with its revision."""
    by_store = defaultdict(list)
    for item in items:
        by_store[(item.group.owner_id, item.group.store)].append(item)
    owners = dict(Agent.objects.filter(pk__in={k[0] for k in by_store}).values_list("pk", "name"))
    for (owner_id, store), store_items in sorted(by_store.items()):
        counts = defaultdict(int)
        for item in store_items:
            counts[item.role] += 1
        audit_record(
            action,
            actor=actor,
            store=store,
            owner=owners[owner_id],
            object_type="memory",
            object_ids=[i.memory_id for i in store_items],
            counts=dict(counts),
            data={"plan": plan.pk},
            revisions=[("memory", i.memory_id, *pairs(i)) for i in store_items],
        )


def plan_apply(*, actor, plan_id: int, now=None) -> ConsolidationPlan:
    """Put a proposed plan in force: folded memories superseded by their target, duplicates'
    sources merged into the kept memory, merged memories activated. All or nothing: if any
    memory changed since the plan was made, PlanConflict and nothing is written."""
    now = now or timezone.now()
    with transaction.atomic():
        plan = _lock_plan(plan_id)
        if plan.state != ConsolidationPlan.PROPOSED:
            raise PlanConflict(
                f"Plan {plan.pk} is {plan.state}; only a proposed plan can be applied.", state=plan.state
            )
        items = list(plan.items.select_related("group").order_by("id"))
        current = _current([i.memory_id for i in items])
        originals = [i for i in items if i.role != ConsolidationItem.MERGED]
        merged = [i for i in items if i.role == ConsolidationItem.MERGED]
        changed = _changed_since(originals, current, lambda i: i.before["memory"])
        changed += [
            i.memory_id
            for i in merged
            if current[i.memory_id]["status"] not in (Memory.QUEUED, Memory.ACTIVE)
            or current[i.memory_id]["content_hash"] != i.before["memory"]["content_hash"]
        ]
        if changed:
            raise PlanConflict(
                f"{len(changed)} memories changed since plan {plan.pk} was made (#"
                + ", #".join(map(str, sorted(changed)[:10]))
                + "); discard it and run consolidation again.",
                changed=sorted(changed),
            )

        keeps = {i.group_id: i for i in items if i.role == ConsolidationItem.KEEP}
        rows = []
        for item in items:
            if item.role == ConsolidationItem.FOLD:
                keep = keeps.get(item.group_id)
                state = _fold_after(item, item.group, keep.before["memory"] if keep else None, plan, now)
                item.after = {"memory": state, "sources": item.before["sources"]}
                rows.append(_row(state))
            elif item.role == ConsolidationItem.KEEP:
                state = dict(item.before["memory"], updated_at=now.isoformat())
                item.after = {"memory": state, "sources": list(item.before["sources"])}
                rows.append(_row(state))
        _bulk_set(rows)

        # Duplicates: the kept memory carries the provenance of every copy folded into it.
        pairs = [
            (i.memory_id, i.group.target_id)
            for i in items
            if i.role == ConsolidationItem.FOLD and i.group.kind == ConsolidationGroup.DUPLICATE
        ]
        if pairs:
            src = MemorySource._meta.db_table
            with connection.cursor() as cursor:
                cursor.execute(
                    f"""INSERT INTO {src} (memory_id, kind, ref, fingerprint, snapshot, created_at)
                        SELECT v.keep, s.kind, s.ref, s.fingerprint, s.snapshot, %s
                        FROM unnest(%s::bigint[], %s::bigint[]) AS v(fold, keep)
                        JOIN {src} s ON s.memory_id = v.fold
                        ORDER BY s.id
                        ON CONFLICT (memory_id, kind, ref) DO NOTHING
                        RETURNING id, memory_id, kind, ref, fingerprint, snapshot, created_at""",
                    [now, [p[0] for p in pairs], [p[1] for p in pairs]],
                )
                added = cursor.fetchall()
            by_keep = {i.memory_id: i for i in items if i.role == ConsolidationItem.KEEP}
            for source_id, memory_id, kind, ref, fingerprint, snap, created_at in sorted(added):
                item = by_keep[memory_id]
                item.added_sources.append(source_id)
                item.after["sources"].append(
                    {
                        "id": source_id,
                        "kind": kind,
                        "ref": ref,
                        "fingerprint": fingerprint,
                        "snapshot": json.loads(snap) if isinstance(snap, str) else snap,
                        "created_at": _json_time(created_at),
                    }
                )

        merged_memories_activate(memory_ids=[i.memory_id for i in merged], plan=plan, actor=actor, now=now)
        fresh = {
            m.pk: m for m in Memory.objects.filter(pk__in=[i.memory_id for i in merged]).defer("embedding")
        }
        for item in merged:
            item.after = {"memory": snapshot(fresh[item.memory_id]), "sources": item.before["sources"]}
        _save_after(items)

        plan.state, plan.applied_by, plan.applied_at = ConsolidationPlan.APPLIED, actor_label(actor), now
        plan.error = ""
        plan.save(update_fields=["state", "applied_by", "applied_at", "error"])
        counts = {
            "groups": len(keeps) + len(merged),
            "superseded": sum(1 for i in items if i.role == ConsolidationItem.FOLD),
            "activated": len(merged),
            "sources_merged": sum(len(i.added_sources) for i in items),
        }
        audit_record(
            "memory.consolidation.apply",
            actor=actor,
            store=plan.store,
            owner=plan.owner.name if plan.owner_id else "",
            object_type="consolidation_plan",
            object_ids=[plan.pk],
            counts=counts,
        )
        _audit_by_store(
            "memory.consolidation.applied",
            actor=actor,
            plan=plan,
            items=items,
            pairs=lambda i: (i.before["memory"], i.after["memory"]),
        )
    return plan


# --- revert ---------------------------------------------------------------------------------


def plan_revert(*, actor, plan_id: int, now=None) -> ConsolidationPlan:
    """Put an applied plan's before back exactly: originals in use again with their exact
    status, reasons, validity, update time and sources; merged memories retired (invalidated,
    rows kept). All or nothing: a memory changed since the apply → PlanConflict."""
    now = now or timezone.now()
    with transaction.atomic():
        plan = _lock_plan(plan_id)
        if plan.state != ConsolidationPlan.APPLIED:
            raise PlanConflict(
                f"Plan {plan.pk} is {plan.state}; only an applied plan can be reverted.", state=plan.state
            )
        items = list(plan.items.select_related("group").order_by("id"))
        current = _current([i.memory_id for i in items])
        changed = _changed_since(items, current, lambda i: i.after["memory"])
        if changed:
            raise PlanConflict(
                f"{len(changed)} memories changed since plan {plan.pk} was applied (#"
                + ", #".join(map(str, sorted(changed)[:10]))
                + "); revert those changes first.",
                changed=sorted(changed),
            )
        originals = [i for i in items if i.role != ConsolidationItem.MERGED]
        merged = [i for i in items if i.role == ConsolidationItem.MERGED]
        _bulk_set([_row(i.before["memory"]) for i in originals])
        added = [s for i in originals for s in i.added_sources]
        if added:
            MemorySource.objects.filter(pk__in=added).delete()
        merged_memories_retire(
            memory_ids=[i.memory_id for i in merged],
            plan=plan,
            status=Memory.INVALIDATED,
            reason=f"retired: consolidation plan #{plan.pk} was reverted",
            now=now,
        )
        fresh = {
            m.pk: m for m in Memory.objects.filter(pk__in=[i.memory_id for i in merged]).defer("embedding")
        }

        plan.state, plan.reverted_by, plan.reverted_at = ConsolidationPlan.REVERTED, actor_label(actor), now
        plan.save(update_fields=["state", "reverted_by", "reverted_at"])
        audit_record(
            "memory.consolidation.revert",
            actor=actor,
            store=plan.store,
            owner=plan.owner.name if plan.owner_id else "",
            object_type="consolidation_plan",
            object_ids=[plan.pk],
            counts={"restored": len(originals), "retired": len(merged), "sources_removed": len(added)},
        )
        _audit_by_store(
            "memory.consolidation.reverted",
            actor=actor,
            plan=plan,
            items=items,
            pairs=lambda i: (
                i.after["memory"],
                snapshot(fresh[i.memory_id]) if i.role == ConsolidationItem.MERGED else i.before["memory"],
            ),
        )
    return plan


def plan_discard(*, actor, plan_id: int, reason: str = "") -> ConsolidationPlan:
    """Drop a proposed plan: its merged memories leave the review queue as rejected and its
    memories become free for the next run. Nothing else changes."""
    now = timezone.now()
    with transaction.atomic():
        plan = _lock_plan(plan_id)
        if plan.state != ConsolidationPlan.PROPOSED:
            raise PlanConflict(
                f"Plan {plan.pk} is {plan.state}; only a proposed plan can be discarded.", state=plan.state
            )
        merged = list(plan.items.filter(role=ConsolidationItem.MERGED).select_related("group"))
        current = _current([i.memory_id for i in merged])
        active = [i.memory_id for i in merged if current[i.memory_id]["status"] == Memory.ACTIVE]
        if active:
            raise PlanConflict(
                f"Merged memories #{', #'.join(map(str, active))} are already in force; apply the plan instead.",
                changed=active,
            )
        merged_memories_retire(
            memory_ids=[i.memory_id for i in merged if current[i.memory_id]["status"] == Memory.QUEUED],
            plan=plan,
            status=Memory.REJECTED,
            reason=f"consolidation plan #{plan.pk} discarded" + (f": {reason}" if reason else ""),
            now=now,
        )
        fresh = {
            m.pk: m for m in Memory.objects.filter(pk__in=[i.memory_id for i in merged]).defer("embedding")
        }
        plan.state = ConsolidationPlan.DISCARDED
        plan.save(update_fields=["state"])
        audit_record(
            "memory.consolidation.discarded",
            actor=actor,
            store=plan.store,
            owner=plan.owner.name if plan.owner_id else "",
            object_type="consolidation_plan",
            object_ids=[plan.pk],
            reason=reason,
            counts={"rejected": len(merged)},
            data={"merged": [i.memory_id for i in merged]},
            revisions=[
                ("memory", i.memory_id, i.before["memory"], snapshot(fresh[i.memory_id])) for i in merged
            ],
        )
    return plan
