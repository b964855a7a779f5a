"""Consolidation plans: write a run's change set, apply it, revert it exactly, or discard it.

Every write here is one transaction with its audit events. Apply and revert are bulk changes of
many memories, done set-wise in SQL; each memory's exact state before (and after) is kept on the
plan's items, so a revert puts back status, reason, successor, validity, update time and sources
exactly — and refuses (409) if anything changed since, writing nothing."""

import hashlib
import json
from collections import defaultdict
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from knowledge.audit.services import audit_record, snapshot
from knowledge.llm import LIGHT, defer_later, deferral_pending, outage
from knowledge.llm.jobs import actor_args, actor_from
from knowledge.memories.activation import Activation, NewRow, memory_rows_activate
from knowledge.memories.fingerprints import NEVER_CHANGES
from knowledge.memories.rows import memory_row_new
from knowledge.models import Agent, Memory, MemorySource
from knowledge.settings_store import setting_get
from memory.consolidation.apply import plan_apply
from memory.consolidation.bulk import allocate_ids, copy_rows
from memory.consolidation.common import (
    SNAPSHOT_FIELDS,
    SOURCE_FIELDS,
    T_GROUP,
    T_ITEM,
    T_MEMORY,
    T_SOURCE,
    ConsolidationBusy,
    ConsolidationOff,
    PlanConflict,
    _locked_snapshots,
    _source_row,
    _sql,
    actor_label,
    memory_state,
)
from memory.consolidation.find import Change, Findings, find_changes
from memory.models import ConsolidationGroup, ConsolidationItem, ConsolidationPlan

STALE_RUN = timedelta(hours=1)
MERGING_KINDS = (ConsolidationGroup.NEAR_DUPLICATE, ConsolidationGroup.SUMMARY, ConsolidationGroup.DIGEST)


# --- run ------------------------------------------------------------------------------------


def consolidation_run(
    *,
    actor,
    owner: Agent | None = None,
    store: str = "",
    mode: str | None = None,
    now=None,
    find=None,
    created_by: str = "",
    deferrals: int = 0,
):
    """Run consolidation (optionally for one owner agent and/or one store) and write its plan.
    Mode (default: the BRAIN_MEMORY_CONSOLIDATION setting) `propose` leaves the plan for a
    reviewer, `apply` applies it at once, `off` refuses. One run at a time (ConsolidationBusy).
    Model calls happen before the write transaction; see memory.consolidation.find. `find`
    (default find_changes, same keyword arguments) lets another job (the reconciler) write its
    findings as a plan through the same machinery. When the model server did not answer (an
    outage), what needs no model is written now and the run is asked again after a back-off
    (`deferrals`: outages in a row so far), so near-duplicates and summaries are not lost; a job
    with its own `find` reads its findings' `deferred` and defers itself."""
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
                created_by=created_by or actor_label(actor),
                created_at=now,
            )
    except IntegrityError:
        raise ConsolidationBusy("Another consolidation run is in progress; try again when it has finished.")
    try:
        findings = (find or find_changes)(
            owner_id=owner.pk if owner else None, store=store, actor=actor, now=now
        )
        plan = _plan_write(plan=plan, findings=findings, actor=actor, now=now)
    except Exception as exc:
        ConsolidationPlan.objects.filter(pk=plan.pk).update(
            state=ConsolidationPlan.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:1000],
            finished_at=timezone.now(),
        )
        raise
    if getattr(findings, "deferred", "") and find is None:  # another job's `find` defers its own way
        consolidation_defer(actor=actor, owner=owner, store=store, deferrals=deferrals)
    if mode == "apply" and plan.state == ConsolidationPlan.PROPOSED:
        try:
            plan = plan_apply(actor=actor, plan_id=plan.pk)
        except PlanConflict as exc:  # something changed in between: the plan waits, saying why
            ConsolidationPlan.objects.filter(pk=plan.pk).update(error=exc.message)
            plan.refresh_from_db()
    return plan


RESUME = "memory.consolidation.plans.consolidation_resume"


def _deferral_name(owner: Agent | None, store: str) -> str:
    return f"consolidation {owner.name if owner else 'every agent'}/{store or 'every store'}"


def consolidation_deferred(*, owner: Agent | None = None, store: str = ""):
    """When the deferred run of this scope comes back (None when none waits): the scheduled
    run leaves the scope to it, so the model work is not asked for twice."""
    return deferral_pending(RESUME, what=_deferral_name(owner, store))


def consolidation_defer(*, actor, owner: Agent | None, store: str, deferrals: int):
    """Ask for this run's model work again after the back-off of its next deferral; once: while
    one waits for this scope no second is asked for."""
    return consolidation_deferred(owner=owner, store=store) or defer_later(
        RESUME,
        actor_args(actor),
        owner.pk if owner else None,
        store,
        deferrals=deferrals + 1,
        what=_deferral_name(owner, store),
    )


def consolidation_resume(actor: dict, owner: int | None, store: str, deferrals: int = 0) -> str:
    """The django-q2 task a deferred run comes back to: still no answer from the model server,
    or another run in progress, defers it once more; else the run goes ahead."""
    principal, agent = actor_from(actor), Agent.objects.filter(pk=owner).first() if owner else None
    down = outage(profile=LIGHT)
    if not down:
        try:
            plan = consolidation_run(actor=principal, owner=agent, store=store, deferrals=deferrals)
        except ConsolidationOff as exc:
            return exc.message
        except ConsolidationBusy as exc:
            down = exc.message
        else:
            return f"plan {plan.pk}: {plan.state}"
    consolidation_defer(actor=principal, owner=agent, store=store, deferrals=deferrals)
    return f"deferred again: {down}"


def _merged_row(*, change: Change, memories: dict, sources: dict, plan) -> NewRow:
    """The new memory a merge or summary proposes, queued (marked as a merge) until the plan is
    applied, carrying the provenance of every original as it was recorded."""
    members = [memories[i] for i in change.folds]
    keys = {m["key"] for m in members}
    values = {json.dumps(m["value"], sort_keys=True) for m in members}
    key = keys.pop() if len(keys) == 1 else ""
    value = members[0]["value"] if key and len(values) == 1 else None
    tier = Memory.PROCEDURAL if all(m["tier"] == Memory.PROCEDURAL for m in members) else Memory.SEMANTIC
    confidences = [m["confidence"] for m in members]
    confidence = max(confidences) if change.kind == ConsolidationGroup.NEAR_DUPLICATE else min(confidences)
    what = {ConsolidationGroup.NEAR_DUPLICATE: "merges", ConsolidationGroup.DIGEST: "digests"}.get(
        change.kind, "summarises"
    )
    memory = memory_row_new(
        owner=Agent.objects.get(pk=change.owner_id),
        store=change.store,
        text=change.merged_text,
        author_kind="system",
        author_name="consolidation",
        replaces=list(change.folds),
        tier=tier,
        category=change.category,
        key=key,
        value=value,
        confidence=confidence,
    )
    carried = []
    for member_id in change.folds:  # the provenance of every original, once
        for source in sources[member_id]:
            carried.append(
                {
                    "kind": source["kind"],
                    "ref": source["ref"],
                    "recorded": {
                        "fingerprint": source["fingerprint"],
                        "snapshot": source["snapshot"],
                        # the next provenance check recomputes the state of fingerprinted sources
                        "state": MemorySource.UNTRACKED
                        if not source["fingerprint"] and source["kind"] not in NEVER_CHANGES
                        else MemorySource.UNCHANGED,
                    },
                }
            )
    if change.kind == ConsolidationGroup.DIGEST:  # a digest cites each memory it digests
        carried.extend(
            {
                "kind": "memory",
                "ref": str(i),
                # as knowledge.memories.fingerprints fingerprints a live memory
                "recorded": {"fingerprint": hashlib.md5(b"live").hexdigest(), "snapshot": {"status": "live"}},
            }
            for i in change.folds
        )
    held = Activation.held(
        queue_reason="merge",
        status_reason=f"{what} #{', #'.join(map(str, change.folds))} (consolidation plan #{plan.pk})",
    )
    return NewRow(memory, held, carried, reason=f"consolidation plan #{plan.pk}")


def _snapshot_sql(alias: str = "m") -> str:
    """SQL for knowledge.audit.services.snapshot(memory) of the row `alias`, as jsonb (built in the
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
        new_rows = {
            n: _merged_row(change=change, memories=members, sources=sources, plan=plan)
            for n, change in enumerate(kept)
            if change.kind in MERGING_KINDS
        }
        memory_rows_activate(rows=list(new_rows.values()))
        group_ids = allocate_ids(T_GROUP, len(kept))
        groups, merged = [], {}
        for position, (group_id, change) in enumerate(zip(group_ids, kept, strict=True)):
            if change.kind in MERGING_KINDS:
                target = new_rows[position].memory
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
                    json.dumps(change.data),
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
                "data",
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
