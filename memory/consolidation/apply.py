"""Applying, reverting and discarding consolidation plans: set-wise SQL over a plan's items,
each one transaction with its audit events. All or nothing: if any memory changed since the plan
was made (or applied), PlanConflict and nothing is written."""

import json
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import audit_record, audit_revisions_add, audit_revisions_sql, snapshot
from knowledge.errors import NotFound
from knowledge.memories.sets import memories_patch, memories_put_back
from knowledge.models import Agent, Memory
from memory.consolidation.common import (
    T_GROUP,
    T_ITEM,
    T_MEMORY,
    T_SOURCE,
    PlanConflict,
    _sql,
    actor_label,
    merged_memories_activate,
    merged_memories_retire,
)
from memory.links.services import links_apply, links_revert
from memory.models import ConsolidationGroup, ConsolidationItem, ConsolidationPlan

# --- apply and revert: set-wise SQL over the plan's items --------------------------------------
#
# An original's item keeps `before` = {"memory": <snapshot>, "sources": [...]}. What apply does
# to it is a pure function of the item, its group and the apply time (`_ORIGINALS`), so the memory
# after the apply is exactly `before.memory || patch`: apply writes it, revert checks against it
# and puts `before.memory` back. Merged memories (a few per plan) keep their `after` on the
# item. Everything runs inside PostgreSQL, so a plan of tens of thousands of memories applies
# and reverts in a handful of statements.


# One row per original of the plan: p.memory_id, p.owner_id, p.store, p.b (before), p.a (patch).
# Parameters: %(plan)s and %(stamp)s (the apply time, ISO 8601).
_ORIGINALS = f"""
    SELECT i.id, i.memory_id, i.role, g.owner_id, g.store, i.before->'memory' AS b,
        -- a link changes nothing on the memory itself (its links are rows of their own)
        CASE WHEN i.role = 'keep' AND g.kind = 'link' THEN '{{}}'::jsonb
        WHEN i.role = 'keep' THEN jsonb_build_object('updated_at', %(stamp)s::text)
            -- a promotion: episodic → semantic, no longer expiring
            || CASE WHEN g.kind = 'promotion'
                    THEN jsonb_build_object('tier', 'semantic', 'expires_at', NULL,
                        'status_reason', format('promoted: %%s (consolidation plan #%%s)', g.reason, %(plan)s::bigint))
                    ELSE '{{}}'::jsonb END
        ELSE jsonb_build_object(
                -- a session digest's originals expire (kept for lineage, never recalled)
                'status', CASE WHEN g.kind = 'digest' THEN 'expired' ELSE 'superseded' END,
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
            || CASE WHEN g.kind = 'digest' AND i.before->'memory'->>'valid_to' IS NULL
                THEN jsonb_build_object('valid_to', i.before->'memory'->>'expires_at')
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
        raise NotFound(f"No consolidation plan {plan_id}.")
    return plan


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
        f"""WITH p AS ({_ORIGINALS}) """
        + audit_revisions_sql(
            f"""SELECT e.event_id, 'memory', p.memory_id::text, {before}, {after}
            FROM p JOIN unnest(%(owners)s::bigint[], %(stores)s::text[], %(events)s::bigint[])
                        AS e(owner_id, store, event_id)
              ON e.owner_id = p.owner_id AND e.store = p.store
            ORDER BY p.id"""
        ),
        {
            "plan": plan.pk,
            "stamp": stamp,
            "owners": [k[0] for k in keys],
            "stores": [k[1] for k in keys],
            "events": [events[k] for k in keys],
        },
    )
    audit_revisions_add(
        (events[(item.group.owner_id, item.group.store)], "memory", item.memory_id, before_state, after_state)
        for item, before_state, after_state in merged
    )


@dataclass(frozen=True)
class _Way:
    """Applying or reverting a plan: the state it starts from, what it says when the plan is in
    another one or a memory changed meanwhile, and its two audit events (the plan's, and one per
    owner/store with every memory's revision)."""

    takes: str
    only: str  # "only <this>." when the plan is in another state
    since: str  # "... changed since plan N <since>"
    then: str  # what to do about the changed memories
    action: str
    per_store: str
    revert: bool


_APPLY = _Way(
    takes=ConsolidationPlan.PROPOSED,
    only="a proposed plan can be applied",
    since="was made",
    then="discard it and run consolidation again",
    action="memory.consolidation.apply",
    per_store="memory.consolidation.applied",
    revert=False,
)
_REVERT = _Way(
    takes=ConsolidationPlan.APPLIED,
    only="an applied plan can be reverted",
    since="was applied",
    then="undo those changes first",
    action="memory.consolidation.revert",
    per_store="memory.consolidation.reverted",
    revert=True,
)


def _plan_locked(way: _Way, plan_id: int) -> ConsolidationPlan:
    """The plan, row-locked, in the state `way` starts from, with every memory it names locked
    and as `way` expects it (before the apply; as the apply left it, to revert). PlanConflict
    otherwise."""
    plan = _lock_plan(plan_id)
    if plan.state != way.takes:
        raise PlanConflict(f"Plan {plan.pk} is {plan.state}; only {way.only}.", state=plan.state)
    _lock_memories(plan)
    changed = _changed(plan, stamp=plan.applied_at.isoformat() if way.revert else None)
    if changed:
        raise PlanConflict(
            f"{len(changed)} memories changed since plan {plan.pk} {way.since} (#"
            + ", #".join(map(str, changed[:10]))
            + f"); {way.then}.",
            changed=changed,
        )
    return plan


def _plan_audit(way: _Way, *, actor, plan, stamp: str, counts: dict, merged) -> None:
    """The plan's event with its `counts`, then the per-store events with every revision."""
    audit_record(
        way.action,
        actor=actor,
        store=plan.store,
        owner=plan.owner.name if plan.owner_id else "",
        object_type="consolidation_plan",
        object_ids=[plan.pk],
        counts=counts,
    )
    _audit_by_store(way.per_store, actor=actor, plan=plan, stamp=stamp, revert=way.revert, merged=merged)


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
        plan = _plan_locked(_APPLY, plan_id)
        superseded = memories_patch(_ORIGINALS, {"plan": plan.pk, "stamp": stamp})

        # Duplicates: the kept memory carries the provenance of every copy folded into it. The
        # ids of the source rows added are kept on the plan, so a revert removes exactly those.
        pairs = _sql(
            f"""SELECT i.memory_id, g.target_id FROM {T_ITEM} i JOIN {T_GROUP} g ON g.id = i.group_id
                WHERE i.plan_id = %s AND i.role = 'fold' AND g.kind IN ('duplicate', 'vector_duplicate')""",
            [plan.pk],
            fetch=True,
        )
        added = []
        if pairs:
            added = _sql(
                f"""INSERT INTO {T_SOURCE} (memory_id, kind, ref, fingerprint, snapshot, state, checked_at, created_at)
                    SELECT v.keep, s.kind, s.ref, s.fingerprint, s.snapshot, s.state, s.checked_at, %s
                    FROM unnest(%s::bigint[], %s::bigint[]) AS v(fold, keep)
                    JOIN {T_SOURCE} s ON s.memory_id = v.fold
                    ORDER BY s.id
                    ON CONFLICT (memory_id, kind, ref) DO NOTHING
                    RETURNING id""",
                [now, [p[0] for p in pairs], [p[1] for p in pairs]],
                fetch=True,
            )

        # Promotions: the promoted memory gains the sources of the turns that corroborated it.
        promoted = [
            (g.target_id, src)
            for g in plan.groups.filter(kind=ConsolidationGroup.PROMOTION).order_by("id")
            for src in g.data.get("sources", [])
        ]
        if promoted:
            added += _sql(
                f"""INSERT INTO {T_SOURCE} (memory_id, kind, ref, fingerprint, snapshot, state, created_at)
                    SELECT v.memory_id, v.kind, v.ref, v.fingerprint, v.snapshot, 'unchanged', %s
                    FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::jsonb[])
                         WITH ORDINALITY AS v(memory_id, kind, ref, fingerprint, snapshot, n)
                    ORDER BY v.n
                    ON CONFLICT (memory_id, kind, ref) DO NOTHING
                    RETURNING id""",
                [
                    now,
                    [p[0] for p in promoted],
                    [p[1]["kind"] for p in promoted],
                    [p[1]["ref"] for p in promoted],
                    [p[1].get("fingerprint", "") for p in promoted],
                    [json.dumps(p[1].get("snapshot")) for p in promoted],
                ],
                fetch=True,
            )
        links = links_apply(plan=plan, now=now)

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
        _plan_audit(
            _APPLY,
            actor=actor,
            plan=plan,
            stamp=stamp,
            counts={
                "groups": plan.groups.count(),
                "memories": superseded + len(merged),
                "activated": len(merged),
                "sources_merged": len(added),
                "links": links,
            },
            merged=[(i, i.before["memory"], fresh[i.memory_id]) for i in merged],
        )
    return plan


def plan_revert(*, actor, plan_id: int, now=None) -> ConsolidationPlan:
    """Put an applied plan's before back exactly: originals in use again with their exact
    status, reasons, successor, validity, update time and sources; merged memories retired
    (invalidated, rows kept). All or nothing: a memory changed since the apply → PlanConflict."""
    now = now or timezone.now()
    with transaction.atomic():
        plan = _plan_locked(_REVERT, plan_id)
        stamp = plan.applied_at.isoformat()
        restored = memories_put_back(_ORIGINALS, {"plan": plan.pk, "stamp": stamp})
        removed = (
            _sql(f"DELETE FROM {T_SOURCE} WHERE id = ANY(%s)", [plan.added_sources])
            if plan.added_sources
            else 0
        )
        unlinked = links_revert(plan=plan)
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
        _plan_audit(
            _REVERT,
            actor=actor,
            plan=plan,
            stamp=stamp,
            counts={
                "restored": restored,
                "retired": len(merged),
                "sources_removed": removed,
                "links_removed": unlinked,
            },
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
