"""Consolidation plans: write a run's change set, apply it, revert it exactly, or discard it.

Every write here is one transaction with its audit events. Apply and revert are bulk changes of
many memories, done set-wise in SQL; each memory's exact state before (and after) is kept on the
plan's items, so a revert puts back status, reason, successor, validity, update time and sources
exactly — and refuses (409) if anything changed since, writing nothing."""

import json
from collections import defaultdict
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from knowledge.audit import _json_value, audit_record, snapshot
from knowledge.memories import memory_row_create
from knowledge.models import Agent, Memory, MemorySource, Revision
from knowledge.settings_store import setting_get
from memory.consolidation.bulk import allocate_ids, copy_rows
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


SNAPSHOT_FIELDS = [f.attname for f in Memory._meta.concrete_fields if f.name != "embedding"]
SOURCE_FIELDS = ["id", "memory_id", "kind", "ref", "fingerprint", "snapshot", "created_at"]


def _locked_snapshots(ids) -> dict[int, dict]:
    """Lock the memories and return each one's snapshot, exactly as knowledge.audit.snapshot
    would make it from the row (built from values(), which is much cheaper for many rows)."""
    rows = Memory.objects.select_for_update().filter(pk__in=ids).order_by("pk").values(*SNAPSHOT_FIELDS)
    return {row["id"]: {k: _json_value(v) for k, v in row.items()} for row in rows}


def _source_row(row: dict) -> dict:
    return {
        "id": row["id"],
        "kind": row["kind"],
        "ref": row["ref"],
        "fingerprint": row["fingerprint"],
        "snapshot": row["snapshot"],
        "created_at": _json_time(row["created_at"]),
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
    keys = {m["key"] for m in members}
    values = {json.dumps(m["value"], sort_keys=True) for m in members}
    key = keys.pop() if len(keys) == 1 else ""
    value = members[0]["value"] if key and len(values) == 1 else None
    tier = Memory.PROCEDURAL if all(m["tier"] == Memory.PROCEDURAL for m in members) else Memory.SEMANTIC
    confidences = [m["confidence"] for m in members]
    confidence = max(confidences) if change.kind == ConsolidationGroup.NEAR_DUPLICATE else min(confidences)
    what = "merges" if change.kind == ConsolidationGroup.NEAR_DUPLICATE else "summarises"
    memory = memory_row_create(
        owner=Agent.objects.get(pk=change.owner_id),
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
            if (source["kind"], source["ref"]) not in seen:
                seen.add((source["kind"], source["ref"]))
                rows.append(
                    MemorySource(
                        memory=memory,
                        kind=source["kind"],
                        ref=source["ref"],
                        fingerprint=source["fingerprint"],
                        snapshot=source["snapshot"],
                    )
                )
    MemorySource.objects.bulk_create(rows)
    return memory


def _snapshot_sql(alias: str = "m") -> str:
    """SQL for knowledge.audit.snapshot(memory) of the row `alias`, as jsonb (built in the
    database: a plan may name tens of thousands of memories)."""
    chunks = [SNAPSHOT_FIELDS[n : n + 40] for n in range(0, len(SNAPSHOT_FIELDS), 40)]  # ≤ 100 args each
    return " || ".join(
        "jsonb_build_object(" + ", ".join(f"'{f}', {alias}.{f}" for f in chunk) + ")" for chunk in chunks
    )


def _sources_sql(alias: str = "m") -> str:
    return f"""coalesce((SELECT jsonb_agg(jsonb_build_object('id', s.id, 'kind', s.kind, 'ref', s.ref,
                    'fingerprint', s.fingerprint, 'snapshot', s.snapshot, 'created_at', s.created_at) ORDER BY s.id)
                FROM {T_SOURCE} s WHERE s.memory_id = {alias}.id), '[]'::jsonb)"""


def _plan_write(*, plan: ConsolidationPlan, findings: Findings, actor, now) -> ConsolidationPlan:
    with transaction.atomic():
        ids = sorted({i for c in findings.changes for i in c.memory_ids})
        status = dict(
            _sql(
                f"SELECT id, status FROM {T_MEMORY} WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
                [ids],
                fetch=True,
            )
        )
        busy = set(
            ConsolidationItem.objects.filter(memory_id__in=ids, plan__state__in=ConsolidationPlan.OPEN_STATES)
            .exclude(plan=plan)
            .values_list("memory_id", flat=True)
        )
        kept, dropped = [], 0
        for change in findings.changes:  # anything changed since it was found is left for the next run
            if any(status.get(i) != Memory.ACTIVE or i in busy for i in change.memory_ids):
                dropped += 1
            else:
                kept.append(change)

        # Merges and summaries create their memory now (queued, marked as a merge).
        merging = [i for c in kept if c.kind in MERGING_KINDS for i in c.folds]
        members = _locked_snapshots(merging)
        sources = defaultdict(list)
        for source in (
            MemorySource.objects.filter(memory_id__in=merging).order_by("id").values(*SOURCE_FIELDS)
        ):
            sources[source["memory_id"]].append(_source_row(source))
        group_ids = allocate_ids(T_GROUP, len(kept))
        groups, merged = [], {}
        for position, (group_id, change) in enumerate(zip(group_ids, kept, strict=True)):
            if change.kind in MERGING_KINDS:
                target = _merged_create(change=change, memories=members, sources=sources, plan=plan, now=now)
                merged[group_id] = target
                target_id = target.pk
            else:
                target_id = change.keep
            groups.append(
                (
                    group_id,
                    plan.pk,
                    change.kind,
                    change.owner_id,
                    change.store,
                    change.category,
                    change.key,
                    target_id,
                    change.merged_text,
                    change.reason,
                    position,
                )
            )
        copy_rows(
            T_GROUP,
            [
                "id",
                "plan_id",
                "kind",
                "owner_id",
                "store",
                "category",
                "key",
                "target_id",
                "merged_text",
                "reason",
                "position",
            ],
            groups,
        )

        # Items: the exact state of every original, snapshotted in the database.
        originals = [
            (memory_id, group_id, memory_id == change.keep)
            for group_id, change in zip(group_ids, kept, strict=True)
            for memory_id in change.memory_ids
        ]
        if originals:
            _sql(
                f"""INSERT INTO {T_ITEM} (plan_id, group_id, memory_id, role, before)
                    SELECT %s, v.group_id, m.id, CASE WHEN v.keep THEN 'keep' ELSE 'fold' END,
                           jsonb_build_object('memory', {_snapshot_sql()}, 'sources', {_sources_sql()})
                    FROM unnest(%s::bigint[], %s::bigint[], %s::boolean[]) AS v(memory_id, group_id, keep)
                    JOIN {T_MEMORY} m ON m.id = v.memory_id
                    ORDER BY v.group_id, v.keep DESC, m.id""",
                [plan.pk, [o[0] for o in originals], [o[1] for o in originals], [o[2] for o in originals]],
            )
        ConsolidationItem.objects.bulk_create(
            ConsolidationItem(
                plan=plan,
                group_id=group_id,
                memory=target,
                role=ConsolidationItem.MERGED,
                before=memory_state(target, target.sources.order_by("id")),
            )
            for group_id, target in merged.items()
        )
        if len(originals) > 1000:  # fresh statistics, so apply's joins over the items plan well
            _sql(f"ANALYZE {T_ITEM}, {T_GROUP}")

        counts = dict(findings.counts)
        counts.update(
            groups=len(kept), memories=len(originals) + len(merged), merged=len(merged), dropped=dropped
        )
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
        for group_id, change in zip(group_ids, kept, strict=True):
            by_store[(change.owner_id, change.store)].append((group_id, change))
        owners = dict(Agent.objects.filter(pk__in={k[0] for k in by_store}).values_list("pk", "name"))
        for (owner_id, store), changes in sorted(by_store.items()):
            created = [merged[g] for g, _ in changes if g in merged]
            named = [i for _, c in changes for i in c.memory_ids] + [m.pk for m in created]
            audit_record(
                "memory.consolidation.proposed",
                actor=actor,
                store=store,
                owner=owners[owner_id],
                object_type="memory",
                object_ids=named,
                counts={"groups": len(changes), "memories": len(named), "merged": len(created)},
                data={"plan": plan.pk, "merged": [m.pk for m in created]},
                revisions=[("memory", m.pk, None, snapshot(m)) for m in created],
            )
    return plan


# --- apply and revert: set-wise SQL over the plan's items --------------------------------------
#
# An original's item keeps `before` = {"memory": <snapshot>, "sources": [...]}. What apply does
# to it is a pure function of the item, its group and the apply time (`_PATCH`), so the memory
# after the apply is exactly `before.memory || patch`: apply writes it, revert checks against it
# and puts `before.memory` back. Merged memories (a few per plan) keep their `after` on the
# item. Everything runs inside PostgreSQL, so a plan of tens of thousands of memories applies
# and reverts in a handful of statements.

T_MEMORY = Memory._meta.db_table
T_SOURCE = MemorySource._meta.db_table
T_ITEM = ConsolidationItem._meta.db_table
T_GROUP = ConsolidationGroup._meta.db_table
T_REVISION = Revision._meta.db_table

# One row per original of the plan: p.memory_id, p.owner_id, p.store, p.b (before), p.a (patch).
# Parameters: %(plan)s and %(stamp)s (the apply time, ISO 8601).
_ORIGINALS = f"""
    SELECT i.id, i.memory_id, i.role, g.owner_id, g.store, i.before->'memory' AS b,
        CASE WHEN i.role = 'keep' THEN jsonb_build_object('updated_at', %(stamp)s::text)
        ELSE jsonb_build_object(
                'status', 'superseded',
                'superseded_by_id', g.target_id,
                'status_reason', format('%%s folded into #%%s (consolidation plan #%%s)',
                                        replace(g.kind, '_', '-'), g.target_id, %(plan)s::bigint),
                'updated_at', %(stamp)s::text)
            -- time, not overwrite: a losing conflict value is closed where the winning one begins
            || CASE WHEN g.kind = 'conflict' AND i.before->'memory'->>'valid_to' IS NULL
                     AND coalesce(k.b->>'valid_from', k.b->>'created_at')::timestamptz
                         > (i.before->'memory'->>'created_at')::timestamptz
                THEN jsonb_build_object('valid_to', coalesce(k.b->>'valid_from', k.b->>'created_at'))
                ELSE '{{}}'::jsonb END
        END AS a
    FROM {T_ITEM} i
    JOIN {T_GROUP} g ON g.id = i.group_id
    LEFT JOIN LATERAL (SELECT before->'memory' AS b FROM {T_ITEM}
                       WHERE group_id = g.id AND role = 'keep' LIMIT 1) k ON true
    WHERE i.plan_id = %(plan)s AND i.role IN ('fold', 'keep')"""


def _lock_plan(plan_id: int) -> ConsolidationPlan:
    plan = ConsolidationPlan.objects.select_for_update().filter(pk=plan_id).first()
    if plan is None:
        raise ConsolidationPlan.DoesNotExist(f"No consolidation plan {plan_id}.")
    return plan


def _sql(sql: str, params=None, *, fetch: bool = False):
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchall() if fetch else cursor.rowcount


def _lock_memories(plan: ConsolidationPlan) -> None:
    """Row-lock every memory the plan names, in id order (no deadlocks between plans)."""
    _sql(
        f"""SELECT m.id FROM {T_MEMORY} m JOIN {T_ITEM} i ON i.memory_id = m.id
            WHERE i.plan_id = %s ORDER BY m.id FOR UPDATE OF m""",
        [plan.pk],
        fetch=True,
    )


def _changed(plan: ConsolidationPlan, *, stamp: str | None) -> list[int]:
    """Memories whose status, content, version or successor is not what the plan expects:
    its before (to apply; stamp None) or its state after the apply at `stamp` (to revert). A
    merged memory may be approved from the review queue before its plan is applied, so
    queued or active both do for apply."""
    expected = "p.b || p.a" if stamp else "p.b"
    merged_expected = "(i.before->'memory') || coalesce(i.after, '{}'::jsonb)"
    merged_status = (
        "m.status IS DISTINCT FROM e->>'status'" if stamp else "m.status NOT IN ('queued', 'active')"
    )
    check = """m.content_hash IS DISTINCT FROM e->>'content_hash'
               OR m.version IS DISTINCT FROM (e->>'version')::int"""
    rows = _sql(
        f"""WITH p AS ({_ORIGINALS})
            SELECT p.memory_id FROM p JOIN {T_MEMORY} m ON m.id = p.memory_id
            CROSS JOIN LATERAL (SELECT {expected} AS e) x
            WHERE {check} OR m.status IS DISTINCT FROM e->>'status'
                  OR m.superseded_by_id IS DISTINCT FROM (e->>'superseded_by_id')::bigint
            UNION
            SELECT i.memory_id FROM {T_ITEM} i JOIN {T_MEMORY} m ON m.id = i.memory_id
            CROSS JOIN LATERAL (SELECT {merged_expected} AS e) x
            WHERE i.plan_id = %(plan)s AND i.role = 'merged' AND ({check} OR {merged_status})
            ORDER BY 1""",
        {"plan": plan.pk, "stamp": stamp or ""},
        fetch=True,
    )
    return [r[0] for r in rows]


def _audit_by_store(action: str, *, actor, plan, stamp: str, revert: bool, merged) -> None:
    """One event per owner/store naming every memory changed there (ids and counts), and one
    revision per memory with its exact before and after snapshots."""
    rows = _sql(
        f"""SELECT g.owner_id, g.store, array_agg(i.memory_id ORDER BY i.id),
                   count(*) FILTER (WHERE i.role = 'fold'), count(*) FILTER (WHERE i.role = 'keep'),
                   count(*) FILTER (WHERE i.role = 'merged')
            FROM {T_ITEM} i JOIN {T_GROUP} g ON g.id = i.group_id
            WHERE i.plan_id = %s GROUP BY g.owner_id, g.store ORDER BY g.owner_id, g.store""",
        [plan.pk],
        fetch=True,
    )
    owners = dict(Agent.objects.filter(pk__in={r[0] for r in rows}).values_list("pk", "name"))
    events = {}
    for owner_id, store, memory_ids, folds, keeps, merged_count in rows:
        event = audit_record(
            action,
            actor=actor,
            store=store,
            owner=owners[owner_id],
            object_type="memory",
            object_ids=memory_ids,
            counts={"fold": folds, "keep": keeps, "merged": merged_count},
            data={"plan": plan.pk},
        )
        events[(owner_id, store)] = event.pk
    before, after = ("p.b || p.a", "p.b") if revert else ("p.b", "p.b || p.a")
    keys = list(events)
    _sql(
        f"""WITH p AS ({_ORIGINALS})
            INSERT INTO {T_REVISION} (event_id, object_type, object_id, before, after)
            SELECT e.event_id, 'memory', p.memory_id::text, {before}, {after}
            FROM p JOIN unnest(%(owners)s::bigint[], %(stores)s::text[], %(events)s::bigint[])
                        AS e(owner_id, store, event_id)
              ON e.owner_id = p.owner_id AND e.store = p.store
            ORDER BY p.id""",
        {
            "plan": plan.pk,
            "stamp": stamp,
            "owners": [k[0] for k in keys],
            "stores": [k[1] for k in keys],
            "events": [events[k] for k in keys],
        },
    )
    Revision.objects.bulk_create(
        Revision(
            event_id=events[(item.group.owner_id, item.group.store)],
            object_type="memory",
            object_id=str(item.memory_id),
            before=before_state,
            after=after_state,
        )
        for item, before_state, after_state in merged
    )


def _merged_items(plan) -> list[ConsolidationItem]:
    return list(plan.items.filter(role=ConsolidationItem.MERGED).select_related("group").order_by("id"))


def _fresh_snapshots(items) -> dict[int, dict]:
    return {
        m.pk: snapshot(m)
        for m in Memory.objects.filter(pk__in=[i.memory_id for i in items]).defer("embedding")
    }


def plan_apply(*, actor, plan_id: int, now=None) -> ConsolidationPlan:
    """Put a proposed plan in force: folded memories superseded by their target, duplicates'
    sources merged into the kept memory, merged memories activated. All or nothing: if any
    memory changed since the plan was made, PlanConflict and nothing is written."""
    now = now or timezone.now()
    stamp = now.isoformat()
    with transaction.atomic():
        plan = _lock_plan(plan_id)
        if plan.state != ConsolidationPlan.PROPOSED:
            raise PlanConflict(
                f"Plan {plan.pk} is {plan.state}; only a proposed plan can be applied.", state=plan.state
            )
        _lock_memories(plan)
        changed = _changed(plan, stamp=None)
        if changed:
            raise PlanConflict(
                f"{len(changed)} memories changed since plan {plan.pk} was made (#"
                + ", #".join(map(str, changed[:10]))
                + "); discard it and run consolidation again.",
                changed=changed,
            )
        superseded = _sql(
            f"""WITH p AS ({_ORIGINALS})
                UPDATE {T_MEMORY} m SET
                    status = coalesce(p.a->>'status', m.status),
                    status_reason = coalesce(p.a->>'status_reason', m.status_reason),
                    superseded_by_id = CASE WHEN p.a ? 'superseded_by_id'
                                       THEN (p.a->>'superseded_by_id')::bigint ELSE m.superseded_by_id END,
                    valid_to = CASE WHEN p.a ? 'valid_to' THEN (p.a->>'valid_to')::timestamptz ELSE m.valid_to END,
                    updated_at = (p.a->>'updated_at')::timestamptz
                FROM p WHERE m.id = p.memory_id""",
            {"plan": plan.pk, "stamp": stamp},
        )

        # Duplicates: the kept memory carries the provenance of every copy folded into it. The
        # ids of the source rows added are kept on the plan, so a revert removes exactly those.
        pairs = _sql(
            f"""SELECT i.memory_id, g.target_id FROM {T_ITEM} i JOIN {T_GROUP} g ON g.id = i.group_id
                WHERE i.plan_id = %s AND i.role = 'fold' AND g.kind = 'duplicate'""",
            [plan.pk],
            fetch=True,
        )
        added = []
        if pairs:
            added = _sql(
                f"""INSERT INTO {T_SOURCE} (memory_id, kind, ref, fingerprint, snapshot, created_at)
                    SELECT v.keep, s.kind, s.ref, s.fingerprint, s.snapshot, %s
                    FROM unnest(%s::bigint[], %s::bigint[]) AS v(fold, keep)
                    JOIN {T_SOURCE} s ON s.memory_id = v.fold
                    ORDER BY s.id
                    ON CONFLICT (memory_id, kind, ref) DO NOTHING
                    RETURNING id""",
                [now, [p[0] for p in pairs], [p[1] for p in pairs]],
                fetch=True,
            )

        merged = _merged_items(plan)
        merged_memories_activate(memory_ids=[i.memory_id for i in merged], plan=plan, actor=actor, now=now)
        fresh = _fresh_snapshots(merged)
        for item in merged:
            item.after = {k: v for k, v in fresh[item.memory_id].items() if item.before["memory"].get(k) != v}
            item.save(update_fields=["after"])

        plan.state, plan.applied_by, plan.applied_at = ConsolidationPlan.APPLIED, actor_label(actor), now
        plan.added_sources = sorted(a[0] for a in added)
        plan.error = ""
        plan.save(update_fields=["state", "applied_by", "applied_at", "added_sources", "error"])
        audit_record(
            "memory.consolidation.apply",
            actor=actor,
            store=plan.store,
            owner=plan.owner.name if plan.owner_id else "",
            object_type="consolidation_plan",
            object_ids=[plan.pk],
            counts={
                "groups": plan.groups.count(),
                "memories": superseded + len(merged),
                "activated": len(merged),
                "sources_merged": len(added),
            },
        )
        _audit_by_store(
            "memory.consolidation.applied",
            actor=actor,
            plan=plan,
            stamp=stamp,
            revert=False,
            merged=[(i, i.before["memory"], fresh[i.memory_id]) for i in merged],
        )
    return plan


def plan_revert(*, actor, plan_id: int, now=None) -> ConsolidationPlan:
    """Put an applied plan's before back exactly: originals in use again with their exact
    status, reasons, successor, validity, update time and sources; merged memories retired
    (invalidated, rows kept). All or nothing: a memory changed since the apply → PlanConflict."""
    now = now or timezone.now()
    with transaction.atomic():
        plan = _lock_plan(plan_id)
        if plan.state != ConsolidationPlan.APPLIED:
            raise PlanConflict(
                f"Plan {plan.pk} is {plan.state}; only an applied plan can be reverted.", state=plan.state
            )
        stamp = plan.applied_at.isoformat()
        _lock_memories(plan)
        changed = _changed(plan, stamp=stamp)
        if changed:
            raise PlanConflict(
                f"{len(changed)} memories changed since plan {plan.pk} was applied (#"
                + ", #".join(map(str, changed[:10]))
                + "); undo those changes first.",
                changed=changed,
            )
        restored = _sql(
            f"""WITH p AS ({_ORIGINALS})
                UPDATE {T_MEMORY} m SET
                    status = p.b->>'status',
                    status_reason = p.b->>'status_reason',
                    superseded_by_id = (p.b->>'superseded_by_id')::bigint,
                    valid_to = (p.b->>'valid_to')::timestamptz,
                    queue_reason = p.b->>'queue_reason',
                    updated_at = (p.b->>'updated_at')::timestamptz
                FROM p WHERE m.id = p.memory_id""",
            {"plan": plan.pk, "stamp": stamp},
        )
        removed = (
            _sql(f"DELETE FROM {T_SOURCE} WHERE id = ANY(%s)", [plan.added_sources])
            if plan.added_sources
            else 0
        )
        merged = _merged_items(plan)
        merged_memories_retire(
            memory_ids=[i.memory_id for i in merged],
            plan=plan,
            status=Memory.INVALIDATED,
            reason=f"retired: consolidation plan #{plan.pk} was reverted",
            now=now,
        )
        fresh = _fresh_snapshots(merged)
        plan.state, plan.reverted_by, plan.reverted_at = ConsolidationPlan.REVERTED, actor_label(actor), now
        plan.save(update_fields=["state", "reverted_by", "reverted_at"])
        audit_record(
            "memory.consolidation.revert",
            actor=actor,
            store=plan.store,
            owner=plan.owner.name if plan.owner_id else "",
            object_type="consolidation_plan",
            object_ids=[plan.pk],
            counts={"restored": restored, "retired": len(merged), "sources_removed": removed},
        )
        _audit_by_store(
            "memory.consolidation.reverted",
            actor=actor,
            plan=plan,
            stamp=stamp,
            revert=True,
            merged=[(i, {**i.before["memory"], **(i.after or {})}, fresh[i.memory_id]) for i in merged],
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
        merged = _merged_items(plan)
        _lock_memories(plan)
        current = dict(
            Memory.objects.filter(pk__in=[i.memory_id for i in merged]).values_list("pk", "status")
        )
        active = [i.memory_id for i in merged if current[i.memory_id] == Memory.ACTIVE]
        if active:
            raise PlanConflict(
                f"Merged memories #{', #'.join(map(str, active))} are already in force; apply the plan instead.",
                changed=active,
            )
        merged_memories_retire(
            memory_ids=[i.memory_id for i in merged if current[i.memory_id] == Memory.QUEUED],
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
