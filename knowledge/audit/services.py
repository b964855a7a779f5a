"""The audit writers: `audit_record` writes one event (and its revisions) inside a write
service's transaction; `audit_events_sql` / `audit_revisions_sql` are the set-wise writer, the
INSERTs a set-wise statement (the provenance check, consolidation) embeds to write one event and
revision per row it changes, in the same statement. Plus the snapshot function restore relies on."""

import contextlib
import contextvars
import datetime
import decimal
import uuid

from django.db import connection, models

from knowledge.models import AuditEvent, Revision
from knowledge.rowsql import insert_many, insert_with_children

current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("brain_request_id", default="")
current_batch_id: contextvars.ContextVar[uuid.UUID | None] = contextvars.ContextVar(
    "brain_batch_id", default=None
)
# Set by a Dreaming run around the services it calls, so every event they write carries the run
# (the Audit tab's run filter and "Restore this run" find them) without a parameter on each.
current_dreaming_run: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "brain_dreaming_run", default=None
)


def json_value(value):
    """A value as a snapshot holds it (JSON-safe; vectors left out)."""
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "tolist"):  # pgvector / numpy arrays are not part of a snapshot
        return None
    return value


def snapshot(obj: models.Model, exclude: tuple[str, ...] = ("embedding",)) -> dict:
    """A JSON-safe copy of a row's concrete fields (foreign keys as ids); generated columns (the
    full-text vectors) are derived, not part of it."""
    data = {}
    for field in obj._meta.concrete_fields:
        if field.name in exclude or field.generated:
            continue
        data[field.attname] = json_value(getattr(obj, field.attname))
    return data


def audit_record(
    action: str,
    *,
    actor,
    store: str = "",
    owner: str = "",
    object_type: str = "",
    object_ids=(),
    reason: str = "",
    counts: dict | None = None,
    data: dict | None = None,
    revisions=(),
    dreaming_run: int | None = None,
    batch_id: uuid.UUID | None = None,
) -> AuditEvent:
    """Write one audit event. Must run inside the caller's transaction, so the trail can never
    disagree with the data. `revisions` is an iterable of (object_type, object_id, before, after)."""
    assert connection.in_atomic_block, "audit_record must be called inside transaction.atomic()"
    event = AuditEvent(
        action=action,
        actor_kind=actor.kind_label,
        actor_name=actor.name,
        store=store,
        owner=owner,
        object_type=object_type,
        object_ids=[str(i) for i in object_ids],
        reason=reason,
        counts=counts or {},
        data=data or {},
        batch_id=batch_id or current_batch_id.get() or uuid.uuid4(),
        request_id=current_request_id.get(),
        dreaming_run=dreaming_run or current_dreaming_run.get(),
    )
    rows = [
        Revision(event=event, object_type=otype, object_id=str(oid), before=before, after=after)
        for otype, oid, before, after in revisions
    ]
    held = _held.get()
    if held is not None:
        held.append((event, rows))
        return event
    insert_with_children(event, ("event", rows))  # one statement: this runs in every write
    return event


@contextlib.contextmanager
def audit_batch():
    """One decision, one batch: every event written inside the block shares one batch id — the
    enclosing block's when there is one — so restoring that batch undoes the whole decision
    (an approval and every memory it retired, a bulk decision's every memory). Yields the id."""
    batch = current_batch_id.get()
    if batch is not None:
        yield batch
        return
    batch = uuid.uuid4()
    token = current_batch_id.set(batch)
    try:
        yield batch
    finally:
        current_batch_id.reset(token)


# Set by audit_held: the events audit_record built and has not written yet.
_held: contextvars.ContextVar[list | None] = contextvars.ContextVar("brain_audit_held", default=None)


@contextlib.contextmanager
def audit_held():
    """Inside it, audit_record keeps the events it builds, and they are written when the block
    ends, all in two statements (events, revisions) — for a writer of many rows in one
    transaction that calls the same event builders as the one-row writers. The events have no
    id until then. If the block raises, nothing is written (the transaction rolls back anyway)."""
    held: list = []
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
    if held:
        assert connection.in_atomic_block, "audit_held must be used inside transaction.atomic()"
        insert_many([event for event, _ in held])
        insert_many([row for _, rows in held for row in rows])


# --- the set-wise writer ------------------------------------------------------------------------

EVENT_COLUMNS = (
    "id",
    "action",
    "actor_kind",
    "actor_name",
    "store",
    "owner",
    "object_type",
    "object_ids",
    "reason",
    "counts",
    "data",
    "batch_id",
    "request_id",
    "created_at",
)
REVISION_COLUMNS = ("event_id", "object_type", "object_id", "before", "after")


def audit_events_sql(rows: str) -> str:
    """An INSERT of one audit event per row of the query `rows`, whose columns are
    EVENT_COLUMNS in that order (`id` drawn from the event sequence, `object_ids` a jsonb array
    of strings). For a set-wise statement that changes many rows at once; use
    `audit_actor_params` for the actor, batch and request columns."""
    columns = ", ".join(EVENT_COLUMNS)
    return f"INSERT INTO {AuditEvent._meta.db_table} ({columns}) SELECT * FROM ({rows}) AS audit_rows"


def audit_revisions_sql(rows: str) -> str:
    """An INSERT of one revision per row of the query `rows`, whose columns are
    REVISION_COLUMNS in that order (before and after as jsonb)."""
    columns = ", ".join(REVISION_COLUMNS)
    return f"INSERT INTO {Revision._meta.db_table} ({columns}) SELECT * FROM ({rows}) AS revision_rows"


def audit_revisions_add(revisions) -> None:
    """Add revisions to events already written (the set-wise writer's rows that are not a query):
    `revisions` is an iterable of (event_id, object_type, object_id, before, after). One INSERT."""
    Revision.objects.bulk_create(
        Revision(event_id=event_id, object_type=otype, object_id=str(oid), before=before, after=after)
        for event_id, otype, oid, before, after in revisions
    )


def audit_event_id_sql() -> str:
    """SQL for a fresh audit event id (drawn where the changed rows are, so the INSERTs need not
    join back)."""
    return f"nextval(pg_get_serial_sequence('{AuditEvent._meta.db_table}', 'id'))"


def audit_actor_params(actor, *, batch: uuid.UUID | None = None) -> dict:
    """The query parameters `actor_kind`, `actor_name`, `batch` (a new batch unless given) and
    `request_id` for the columns audit_record fills from the actor and the current request."""
    return {
        "actor_kind": actor.kind_label,
        "actor_name": actor.name,
        "batch": batch or uuid.uuid4(),
        "request_id": current_request_id.get(),
    }
