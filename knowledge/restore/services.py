"""Restore: put objects back to the values audited changes found them in, atomically.

Every restorable change is an audit event with revisions (object_type, object_id, before,
after). Restoring a batch of events walks their revisions newest first and, for each one,
compares the object's current value (as left by the newer steps of the same batch) with the
value that record left behind (`after`) on content fields only — timestamps, embeddings,
versions and other derived columns do not count. Any difference is a conflict: the whole batch
writes nothing and the conflicting records are named. Otherwise each object is written once,
to its final value, and the restore is itself an audited event with revisions (so it can be
restored in turn).

Restore is generic over object types: each type registers a `Restorer` (knowledge.restore.
restorers) that knows how to lock and read the current value, which fields are content, and how
to write a value back."""

import dataclasses
from collections import defaultdict

from django.db import transaction

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.erasure.selectors import erased_refs
from knowledge.errors import Conflict, Invalid, NotFound
from knowledge.models import AuditEvent
from knowledge.principal import ADMIN, Principal
from knowledge.restore.restorers import RESTORERS, Restorer

MAX_EVENTS = 500


class RestoreConflict(Conflict):
    """A record's current value differs from the value its event left behind."""

    def __init__(self, conflicts: list[dict], plan: "RestorePlan"):
        self.conflicts, self.plan = conflicts, plan
        super().__init__("; ".join(c["message"] for c in conflicts))


@dataclasses.dataclass
class RestoreStep:
    event: AuditEvent
    object_type: str
    object_id: str
    left_behind: dict | None  # the value the event left (its revision's `after`)
    restore_to: dict | None  # the value it found (its revision's `before`)
    current: dict | None  # the value now (after the newer steps of this batch)
    label: str = ""
    conflict_fields: list = dataclasses.field(default_factory=list)

    @property
    def conflict(self) -> bool:
        return bool(self.conflict_fields)

    @property
    def changes(self) -> list[tuple[str, object, object]]:
        """(field, value now, value after the restore) for the content fields this step changes."""
        restorer = RESTORERS[self.object_type]
        now, then = restorer.content(self.left_behind) or {}, restorer.content(self.restore_to) or {}
        return [
            (k, now.get(k), then.get(k)) for k in sorted(set(now) | set(then)) if now.get(k) != then.get(k)
        ]


@dataclasses.dataclass
class RestoreOutcome:
    """What the restore does to one object: exactly what it writes (one per object, however
    many events of the batch touched it; an object it would leave as it is is not listed)."""

    object_type: str
    object_id: str
    label: str
    current: dict | None  # the value now
    target: dict | None  # the value it writes (None: the object is retired)
    fields: list  # the fields it writes
    kind: str  # change | recreate | the restorer's `removal` word (invalidate, delete, ...)


@dataclasses.dataclass
class RestorePlan:
    steps: list[RestoreStep]
    conflicts: list[dict]
    event: AuditEvent | None = None  # the restore's own audit event, once written
    outcomes: list[RestoreOutcome] = dataclasses.field(default_factory=list)
    # Objects the erasure ledger holds: left out of the restore, listed so people see why.
    erased: list[dict] = dataclasses.field(default_factory=list)


def _fields_to_write(
    restorer: Restorer, current: dict | None, target: dict | None, changed: set
) -> list[str]:
    if target is None:
        return []
    keys = (set(restorer.content_fields) | changed) & set(target)
    keys -= set(restorer.derived_fields)
    return sorted(k for k in keys if current is None or current.get(k) != target.get(k))


def _clean_event_ids(event_ids) -> list[int]:
    if not isinstance(event_ids, list | tuple) or not event_ids:
        raise Invalid({"events": ["Give one or more audit event ids."]})
    try:
        ids = list(dict.fromkeys(int(i) for i in event_ids))
    except (TypeError, ValueError):
        raise Invalid({"events": ["Audit event ids are whole numbers."]})
    if len(ids) > MAX_EVENTS:
        raise Invalid({"events": [f"At most {MAX_EVENTS} events in one restore."]})
    return ids


def audit_restore(*, actor: Principal, event_ids, preview: bool = False) -> RestorePlan:
    """Restore the objects changed by the given audit events to the values those events found
    them in, newest event first, in one transaction. Raises RestoreConflict (nothing written)
    when any object changed since its event; with `preview`, plans and checks but writes
    nothing. Admins only."""
    access.require_role(actor, ADMIN, "Only admins restore from the audit trail.")
    ids = _clean_event_ids(event_ids)
    with transaction.atomic():
        events = list(AuditEvent.objects.filter(pk__in=ids).prefetch_related("revisions"))
        missing = sorted(set(ids) - {e.pk for e in events})
        if missing:
            raise NotFound(f"No audit event {', '.join(map(str, missing))}.")
        empty = [e for e in events if not e.revisions.all()]
        if empty:
            raise Invalid(
                {
                    "events": [
                        f"Event {e.pk} ({e.action}) recorded no before/after; it cannot be restored."
                        for e in empty
                    ]
                }
            )
        events.sort(key=lambda e: (e.created_at, e.pk), reverse=True)
        pending = [(event, rev) for event in events for rev in reversed(event.revisions.all())]
        # Erased is for good: no restore brings an erased row's content back (knowledge.erasure).
        gone = {
            (object_type, ref)
            for object_type in {rev.object_type for _, rev in pending}
            for ref in erased_refs(
                object_type, [r.object_id for _, r in pending if r.object_type == object_type]
            )
        }
        erased = [
            {
                "object_type": object_type,
                "object_id": object_id,
                "label": f"{object_type} {object_id}: erased, cannot be restored",
            }
            for object_type, object_id in sorted(gone)
        ]
        pending = [(event, rev) for event, rev in pending if (rev.object_type, rev.object_id) not in gone]
        unknown = sorted({rev.object_type for _, rev in pending} - set(RESTORERS))
        if unknown:
            raise Invalid({"events": [f"Objects of type {', '.join(unknown)} cannot be restored."]})

        by_type = defaultdict(list)
        for _, rev in pending:
            if rev.object_id not in by_type[rev.object_type]:
                by_type[rev.object_type].append(rev.object_id)
        current, locked = {}, defaultdict(dict)
        for object_type in sorted(by_type):
            restorer = RESTORERS[object_type]
            for object_id, value in restorer.lock(by_type[object_type], locked[object_type]).items():
                current[(object_type, object_id)] = value

        state, changed, steps, conflicts = dict(current), defaultdict(set), [], []
        for event, rev in pending:
            restorer, key = RESTORERS[rev.object_type], (rev.object_type, rev.object_id)
            step = RestoreStep(
                event=event,
                object_type=rev.object_type,
                object_id=rev.object_id,
                left_behind=rev.after,
                restore_to=rev.before,
                current=state[key],
                label=restorer.label(rev.object_id, rev.after or rev.before),
            )
            step.conflict_fields = restorer.differs(state[key], rev.after)
            if step.conflict:
                conflicts.append(
                    {
                        "event": event.pk,
                        "action": event.action,
                        "object_type": rev.object_type,
                        "object_id": rev.object_id,
                        "fields": step.conflict_fields,
                        "message": (
                            f"{step.label} changed since event {event.pk} ({event.action}): "
                            f"{', '.join(step.conflict_fields)} differ"
                        ),
                    }
                )
            for field in set(rev.before or {}) | set(rev.after or {}):
                if (rev.before or {}).get(field) != (rev.after or {}).get(field):
                    changed[key].add(field)
            state[key] = rev.before
            steps.append(step)
        plan = RestorePlan(steps=steps, conflicts=conflicts, erased=erased)
        # The preview and the restore come from this one list, so they never disagree on how
        # many objects change, how, or which fields.
        for key in sorted(state, key=lambda k: (k[0], k[1])):
            object_type, object_id = key
            restorer, before, target = RESTORERS[object_type], current[key], state[key]
            fields = _fields_to_write(restorer, before, target, changed[key])
            if before is not None and target is not None and not fields:
                continue
            if before is None and target is None:
                continue
            kind = "recreate" if before is None else restorer.removal if target is None else "change"
            plan.outcomes.append(
                RestoreOutcome(
                    object_type=object_type,
                    object_id=object_id,
                    label=restorer.label(object_id, target or before),
                    current=before,
                    target=target,
                    fields=fields,
                    kind=kind,
                )
            )
        if conflicts:
            raise RestoreConflict(conflicts, plan)
        if preview:
            return plan

        revisions, stores, owners = [], set(), set()
        for outcome in plan.outcomes:
            object_type, object_id = outcome.object_type, outcome.object_id
            restorer, before, target, fields = (
                RESTORERS[object_type],
                outcome.current,
                outcome.target,
                outcome.fields,
            )
            after = restorer.write(
                object_id, before, target, actor=actor, fields=fields, row=locked[object_type].get(object_id)
            )
            revisions.append((object_type, object_id, before, after))
            store, _ = restorer.scope(after or before)
            stores.add(store)
        for event in events:
            owners.add(event.owner)
            stores.add(event.store)
        stores.discard("")
        owners.discard("")
        plan.event = audit_record(
            "audit.restored",
            actor=actor,
            store=stores.pop() if len(stores) == 1 else "",
            owner=owners.pop() if len(owners) == 1 else "",
            object_type="audit",
            object_ids=[e.pk for e in events],
            counts={"events": len(events), "records": len(revisions)},
            data={"events": [e.pk for e in events], "actions": sorted({e.action for e in events})},
            revisions=revisions,
        )
    return plan
