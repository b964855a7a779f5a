"""Reads of the audit trail: filtered, newest first, and the before/after of each revision
presented for people (changed fields, with a word diff for texts)."""

import dataclasses
import datetime
import difflib
import json
import re
import uuid

from django.db.models import Exists, OuterRef, Q
from django.utils.html import escape
from django.utils.safestring import mark_safe

from knowledge.models import AuditEvent, Revision

# Columns of a snapshot that say nothing to a person comparing two values.
HIDDEN_FIELDS = {"id", "created_at", "updated_at", "embedding", "embedding_model", "content_hash"}
# How people read the fields of a before/after (never the column names): ids of other objects
# are shown as "#12", an owner as the agent's name.
FIELD_LABELS = {
    "owner_id": "owner agent",
    "entry_id": "entry",
    "skill_id": "skill",
    "supersedes_id": "supersedes",
    "superseded_by_id": "superseded by",
    "source_id": "from entry",
    "target_id": "to entry",
    "agent_id": "agent",
    "status_reason": "reason",
    "queue_reason": "why queued",
    "stale_reason": "why stale",
    "valid_from": "valid from",
    "valid_to": "valid until",
    "expires_at": "expires",
    "deleted_at": "deleted",
    "author_kind": "author (kind)",
    "author_name": "author",
}


def field_label(field: str) -> str:
    return FIELD_LABELS.get(field, field.replace("_", " "))


def _shown_field(field: str, value, agents: dict) -> str:
    if field == "owner_id" and value is not None:
        return agents.get(value, f"agent #{value}")
    if field.endswith("_id") and value is not None:
        return f"#{value}"
    return _shown(value)


@dataclasses.dataclass
class AuditFilters:
    store: str = ""
    action: str = ""  # exact, or a prefix ending in "." or "*" (entry., block.*)
    actor: str = ""
    owner: str = ""
    object_type: str = ""
    entry: int | None = None
    dreaming_run: int | None = None
    since: datetime.datetime | None = None
    until: datetime.datetime | None = None
    restorable: bool = False
    batch: uuid.UUID | None = None  # the events of one batch (a bulk decision, a restore, a run)


def audit_events(f: AuditFilters):
    qs = AuditEvent.objects.all()
    if f.store:
        qs = qs.filter(store=f.store)
    if f.action:
        if f.action.endswith(("*", ".")):
            qs = qs.filter(action__startswith=f.action.rstrip("*"))
        else:
            qs = qs.filter(action=f.action)
    if f.actor:
        qs = qs.filter(actor_name=f.actor)
    if f.owner:
        qs = qs.filter(owner=f.owner)
    if f.object_type:
        qs = qs.filter(Q(object_type=f.object_type) | Q(revisions__object_type=f.object_type)).distinct()
    if f.entry is not None:
        qs = qs.filter(data__entry=f.entry)
    if f.dreaming_run is not None:
        qs = qs.filter(dreaming_run=f.dreaming_run)
    if f.batch is not None:
        qs = qs.filter(batch_id=f.batch)
    if f.since:
        qs = qs.filter(created_at__gte=f.since)
    if f.until:
        qs = qs.filter(created_at__lt=f.until)
    has_revisions = Exists(Revision.objects.filter(event=OuterRef("pk")))
    if f.restorable:
        qs = qs.filter(has_revisions)
    return qs.annotate(restorable=has_revisions).order_by("-created_at", "-id")


def audit_actions() -> list[str]:
    return list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct())


def _shown(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


TOKENS = re.compile(r"\s+|[^\s]+")


def word_diff(before: str, after: str) -> tuple[str, str]:
    """(before, after) as HTML: removed words marked <del> in the first, added words <ins> in
    the second; every piece escaped."""
    a, b = TOKENS.findall(before), TOKENS.findall(after)
    old, new = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            old.append(escape("".join(a[i1:i2])))
            new.append(escape("".join(b[j1:j2])))
            continue
        if i2 > i1:
            old.append(f"<del>{escape(''.join(a[i1:i2]))}</del>")
        if j2 > j1:
            new.append(f"<ins>{escape(''.join(b[j1:j2]))}</ins>")
    return mark_safe("".join(old)), mark_safe("".join(new))


def changed_fields(before: dict | None, after: dict | None) -> list[dict]:
    """[{field, before, after, diff}] for the fields that differ (all fields of a creation or a
    deletion), for display."""
    from knowledge.models import Agent

    before, after = before or {}, after or {}
    owners = {v for v in (before.get("owner_id"), after.get("owner_id")) if v is not None}
    agents = dict(Agent.objects.filter(pk__in=owners).values_list("pk", "name")) if owners else {}
    rows = []
    for field in sorted(set(before) | set(after)):
        if field in HIDDEN_FIELDS:
            continue
        old, new = before.get(field), after.get(field)
        if old == new and before and after:
            continue
        row = {
            "field": field,
            "label": field_label(field),
            "before": _shown_field(field, old, agents) if before else "",
            "after": _shown_field(field, new, agents) if after else "",
        }
        if isinstance(old, str) and isinstance(new, str) and old != new:
            row["before"], row["after"] = word_diff(old, new)
        rows.append(row)
    return rows
