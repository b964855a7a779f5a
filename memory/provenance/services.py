"""Provenance checks: compare every tracked source with its recorded fingerprint, set-wise in
SQL, and act on the memories whose sources changed according to BRAIN_MEMORY_INVALIDATION:

- flag:       audited `memory.stale`, listed, still recalled;
- requeue:    back to the review queue ("re-check: its source ticket:INC-12 changed"), not
              recalled until approved again;
- invalidate: retired as `invalidated` (row kept), never recalled;
- off:        nothing is checked.

A memory is acted on once per finding: a stale memory is not flagged again until someone
confirms it (re-baselining its fingerprints) — so checking twice writes nothing twice. A retired
memory makes the memories derived from it stale, transitively (the check repeats until no new
memory retires)."""

import json

from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from knowledge.audit.services import (
    audit_record,
)
from knowledge.memories.fingerprints import (
    EXTERNAL_KINDS,
    INTERNAL_SQL,
    MAX_STATE_BYTES,
    NEVER_CHANGES,
    fingerprint,
    fingerprint_fields,
    internal_states,
)
from knowledge.memories.sets import memories_source_changed_act
from knowledge.models import Memory, MemorySource, SourceState
from knowledge.principal import Principal
from knowledge.settings_store import setting_get

LIFECYCLE_FIELDS = ("status", "stale", "stale_reason", "queue_reason", "status_reason", "valid_to")
MAX_ROUNDS = 20


# --- the source registry ------------------------------------------------------------------


def source_push(*, actor: Principal, kind: str, ref: str, fields: dict) -> SourceState:
    """Store the current state of an external source pushed by its owning system. Memory sources
    recorded untracked (we knew nothing of it when they were written) get this as their
    baseline, so a first push never makes anything stale."""
    if kind not in EXTERNAL_KINDS:
        raise ValueError(
            f"Only {', '.join(EXTERNAL_KINDS)} sources are pushed; {kind} is checked internally."
        )
    fp = fingerprint(kind, fields)
    with transaction.atomic():
        state, created = SourceState.objects.select_for_update().get_or_create(
            kind=kind, ref=ref, defaults={"fields": fields, "fingerprint": fp, "pushed_by": actor.name}
        )
        changed = created or state.deleted or state.fingerprint != fp
        if not created:
            state.fields, state.fingerprint, state.deleted, state.pushed_by = fields, fp, False, actor.name
            state.save(update_fields=["fields", "fingerprint", "deleted", "pushed_by", "updated_at"])
        baselined = MemorySource.objects.filter(kind=kind, ref=ref, fingerprint="").update(
            fingerprint=fp, snapshot=fingerprint_fields(kind, fields), state=MemorySource.UNCHANGED
        )
        audit_record(
            "source.pushed",
            actor=actor,
            object_type="source",
            object_ids=[f"{kind}:{ref}"],
            counts={"baselined": baselined},
            data={"fingerprint": fp, "changed": changed},
        )
    return state


def source_delete(*, actor: Principal, kind: str, ref: str) -> SourceState:
    """Record that an external source is gone; memories resting on it go stale at the next check."""
    if kind not in EXTERNAL_KINDS:
        raise ValueError(
            f"Only {', '.join(EXTERNAL_KINDS)} sources are pushed; {kind} is checked internally."
        )
    with transaction.atomic():
        state, _ = SourceState.objects.select_for_update().get_or_create(
            kind=kind, ref=ref, defaults={"deleted": True, "pushed_by": actor.name}
        )
        if not state.deleted:
            state.deleted, state.pushed_by = True, actor.name
            state.save(update_fields=["deleted", "pushed_by", "updated_at"])
        audit_record("source.deleted", actor=actor, object_type="source", object_ids=[f"{kind}:{ref}"])
    return state


# --- the check ----------------------------------------------------------------------------

EXTERNAL_UPDATE = """
UPDATE knowledge_memorysource ms SET state = x.new_state, checked_at = %(now)s
FROM (
    SELECT ms2.id,
           CASE WHEN ms2.fingerprint = '' OR ss.id IS NULL THEN ms2.state
                WHEN ss.deleted THEN 'deleted'
                WHEN ss.fingerprint = ms2.fingerprint THEN 'unchanged'
                ELSE 'changed' END AS new_state
    FROM knowledge_memorysource ms2
    LEFT JOIN knowledge_sourcestate ss ON ss.kind = ms2.kind AND ss.ref = ms2.ref
    WHERE ms2.kind = ANY(%(kinds)s)
) x
WHERE ms.id = x.id AND ms.state <> x.new_state
"""

INTERNAL_UPDATE = """
WITH cur AS ({sql})
UPDATE knowledge_memorysource ms SET state = x.new_state, checked_at = %(now)s
FROM (
    SELECT ms2.id,
           CASE WHEN ms2.fingerprint = '' THEN ms2.state
                WHEN cur.ref IS NULL THEN 'deleted'
                WHEN cur.fingerprint = ms2.fingerprint THEN 'unchanged'
                ELSE 'changed' END AS new_state
    FROM knowledge_memorysource ms2
    LEFT JOIN cur ON cur.ref = ms2.ref
    WHERE ms2.kind = %(kind)s {only}
) x
WHERE ms.id = x.id AND ms.state <> x.new_state
"""


def _refresh_states(now, kinds=None, refs=None) -> None:
    """Recompute every tracked source's state, one statement per kind; only rows whose state
    changed are written (`checked_at` is when the state last changed). With `refs`, only the
    sources citing those refs (of `kinds`) are recomputed."""
    with connection.cursor() as cursor:
        if kinds is None:
            cursor.execute(EXTERNAL_UPDATE, {"now": now, "kinds": list(EXTERNAL_KINDS)})
        for kind, sql in INTERNAL_SQL.items():
            if kinds is not None and kind not in kinds:
                continue
            if refs is not None:
                statement = INTERNAL_UPDATE.format(sql=sql, only="AND ms2.ref = ANY(%(refs)s)")
                cursor.execute(statement, {"now": now, "kind": kind, "refs": list(refs)})
                continue
            cited = "SELECT DISTINCT ref FROM knowledge_memorysource WHERE kind = %(kind)s"
            internal = sql.replace("= ANY(%(refs)s)", f"IN ({cited})")
            cursor.execute(INTERNAL_UPDATE.format(sql=internal, only=""), {"now": now, "kind": kind})


def _lifecycle(memory: Memory) -> dict:
    return {f: _json(getattr(memory, f)) for f in LIFECYCLE_FIELDS}


def _json(value):
    return value.isoformat() if hasattr(value, "isoformat") else value


def _act_until_settled(mode: str, actor: Principal, now, counts: dict) -> list[int]:
    """Act on the findings; a retired memory changes the fingerprint of the memory sources that
    cite it, so repeat (rechecking only those) until nothing more retires (transitive staleness)."""
    ids = []
    for _ in range(MAX_ROUNDS):
        acted = memories_source_changed_act(mode=mode, actor=actor, now=now)
        round_ids = acted.pop("ids")
        ids.extend(round_ids)
        for key, value in acted.items():
            counts[key] += value
        if not acted["invalidated"]:
            break
        _refresh_states(now, kinds=["memory"], refs=[str(i) for i in round_ids])
    return ids


def provenance_recheck_memory_sources(*, actor: Principal, retired, now=None) -> list[int]:
    """Right after memory `retired` retires (superseded, rejected, revoked): recheck the memory
    sources that cite it and act on the dependants per the current mode, transitively. Returns
    the ids acted on. Runs in the caller's transaction."""
    mode = setting_get("BRAIN_MEMORY_INVALIDATION")
    if mode == "off":
        return []
    now = now or timezone.now()
    counts = {"stale": 0, "requeued": 0, "invalidated": 0}
    with transaction.atomic():
        _refresh_states(now, kinds=["memory"], refs=[str(retired.pk)])
        return _act_until_settled(mode, actor, now, counts)


def provenance_recheck_materials(*, actor: Principal, refs: list[str], now=None) -> list[int]:
    """Right after a material's version changed or it was withdrawn: recheck every memory source
    citing it (by any ref form: id, `<connector>:<ref>`, with or without `#<section>`) and act
    on the dependants per the current mode. Runs in the caller's transaction."""
    mode = setting_get("BRAIN_MEMORY_INVALIDATION")
    if mode == "off" or not refs:
        return []
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT ref FROM knowledge_memorysource "
            "WHERE kind = 'material' AND split_part(ref, '#', 1) = ANY(%s)",
            [list(refs)],
        )
        cited = [row[0] for row in cursor.fetchall()]
    if not cited:
        return []
    counts = {"stale": 0, "requeued": 0, "invalidated": 0}
    with transaction.atomic():
        _refresh_states(now, kinds=["material"], refs=cited)
        return _act_until_settled(mode, actor, now, counts)


def provenance_check(*, actor: Principal | None = None, now=None) -> dict:
    """Check every tracked source once and act per the current mode. Returns counts: checked,
    unchanged, changed, deleted, untracked (source rows), stale, requeued, invalidated (memories).
    Idempotent: a second run finds nothing new."""
    actor = actor or Principal.system("provenance-check")
    now = now or timezone.now()
    mode = setting_get("BRAIN_MEMORY_INVALIDATION")
    counts = {
        "mode": mode,
        "checked": 0,
        "unchanged": 0,
        "changed": 0,
        "deleted": 0,
        "untracked": 0,
        "stale": 0,
        "requeued": 0,
        "invalidated": 0,
    }
    if mode == "off":
        return counts
    with transaction.atomic():
        _refresh_states(now)
        _act_until_settled(mode, actor, now, counts)
        tracked = MemorySource.objects.exclude(kind__in=NEVER_CHANGES)
        for state, n in tracked.values_list("state").annotate(n=Count("id")).order_by():
            counts[state] = n
        counts["checked"] = counts["unchanged"] + counts["changed"] + counts["deleted"] + counts["untracked"]
        if counts["stale"]:
            audit_record(
                "memory.provenance.check",
                actor=actor,
                data={"mode": mode},
                counts={k: v for k, v in counts.items() if k != "mode"},
            )
    return counts


# --- acting on one stale memory -------------------------------------------------------------


def memory_confirm_sources(*, actor: Principal, memory_id: int, reason: str = "") -> Memory:
    """A reviewer says a stale memory still holds: its sources are re-baselined to their current
    state and the stale flag is cleared (a requeued memory stays in the queue for approval)."""
    with transaction.atomic():
        memory = Memory.objects.select_for_update().get(pk=memory_id)
        before = _lifecycle(memory)
        provenance_rebaseline(memory)
        memory.stale, memory.stale_reason = False, ""
        memory.save(update_fields=["stale", "stale_reason", "updated_at"])
        after = _lifecycle(memory)
        audit_record(
            "memory.sources_confirmed",
            actor=actor,
            store=memory.store,
            owner=memory.owner.name,
            object_type="memory",
            object_ids=[memory.pk],
            reason=reason,
            revisions=[("memory", memory.pk, before, after)],
        )
    return memory


def provenance_rebaseline(memory: Memory) -> int:
    """Record each of a memory's sources as it is now (inside the caller's transaction)."""
    sources = list(memory.sources.all())
    external = {(s.kind, s.ref): s for s in sources if s.kind in EXTERNAL_KINDS}
    states = {
        (st.kind, st.ref): st
        for st in SourceState.objects.filter(
            kind__in=[k for k, _ in external], ref__in=[r for _, r in external]
        )
    }
    for source in sources:
        if source.kind in EXTERNAL_KINDS:
            st = states.get((source.kind, source.ref))
            if st is None or st.deleted:
                continue
            source.fingerprint, source.snapshot = st.fingerprint, fingerprint_fields(source.kind, st.fields)
        elif source.kind in INTERNAL_SQL:
            current = internal_states(source.kind, [source.ref]).get(source.ref)
            if current is None:
                continue
            source.fingerprint, source.snapshot = current
        else:
            continue
        source.state = MemorySource.UNCHANGED
    MemorySource.objects.bulk_update(sources, ["fingerprint", "snapshot", "state"])
    return len(sources)


def state_size_ok(fields) -> bool:
    return len(json.dumps(fields, default=str)) <= MAX_STATE_BYTES
