"""The Audit tab's and GET /api/audit's filters, read from query parameters (the console and the
REST API both read them here)."""

import uuid

from knowledge.audit.selectors import AuditFilters
from knowledge.entries.selectors import parse_when
from knowledge.errors import Invalid


def audit_filters_from(params) -> AuditFilters:
    def _int(name):
        value = params.get(name, "")
        if value in ("", None):
            return None
        try:
            return int(value)
        except ValueError:
            raise Invalid({name: ["A whole number."]})

    return AuditFilters(
        store=params.get("store", "").strip()[:120],
        action=params.get("action", "").strip()[:64],
        actor=params.get("actor", "").strip()[:150],
        owner=params.get("owner", "").strip()[:64],
        object_type=params.get("object_type", "").strip()[:32],
        entry=_int("entry"),
        dreaming_run=_int("dreaming_run"),
        since=parse_when(params.get("since", ""), "since"),
        until=parse_when(params.get("until", ""), "until", end=True),
        restorable=params.get("restorable", "") in ("1", "true", "yes", "on"),
        batch=_batch(params.get("batch", "")),
    )


def _batch(value: str) -> uuid.UUID | None:
    if not (value or "").strip():
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        raise Invalid({"batch": ["A batch id (a UUID, as an event's batch_id shows it)."]})
