"""Set-wise changes of many memory rows' state, each one statement: what the provenance check
does to memories whose sources changed (`memories_source_changed_act`), and what a consolidation
plan's apply and revert do to its originals (`memories_patch`, `memories_put_back`). Callers
choose the rows (and, for consolidation, the patch) with their own queries; the statements that
set `status` on the memory table live here, beside the row functions of `rows`."""

import json

from django.db import connection

from knowledge.audit.services import (
    audit_actor_params,
    audit_event_id_sql,
    audit_events_sql,
    audit_revisions_sql,
)
from knowledge.memories.guard import writes_memory_rows
from knowledge.models import Memory

# What each mode does to a memory with a changed source (f = the finding, with the old values).
MODE_SET = {
    "flag": "status = f.status, queue_reason = f.queue_reason, status_reason = f.status_reason,"
    " valid_to = f.valid_to",
    "requeue": "status = 'queued', queue_reason = 'requeued', status_reason = f.reason, valid_to = f.valid_to",
    "invalidate": "status = 'invalidated', queue_reason = f.queue_reason, status_reason = f.reason,"
    " valid_to = coalesce(f.valid_to, %(now)s)",
}
ACTIONS = {"flag": "memory.stale", "requeue": "memory.requeued", "invalidate": "memory.invalidated"}
LIFECYCLE_JSON = """jsonb_build_object('status', {t}.status, 'stale', {t}.stale, 'stale_reason', {t}.stale_reason,
    'queue_reason', {t}.queue_reason, 'status_reason', {t}.status_reason, 'valid_to', {t}.valid_to)"""

# One statement: find the live, not-yet-stale memories with a changed or deleted source, change
# them per the mode, and write one audit event plus one lifecycle revision each. Event ids are
# drawn in the UPDATE so neither INSERT has to join the CTEs (which the planner does badly).
ACT = (
    """
WITH f AS (
    SELECT m.id, m.store, m.owner_id, m.status, m.stale, m.stale_reason, m.queue_reason, m.status_reason,
           m.valid_to,
           're-check: its source ' || ms.kind || ':' || ms.ref
             || CASE WHEN ms.state = 'deleted' THEN ' was deleted' ELSE ' changed' END AS reason
    FROM knowledge_memory m
    JOIN LATERAL (
        SELECT s.kind, s.ref, s.state FROM knowledge_memorysource s
        WHERE s.memory_id = m.id AND s.state IN ('changed', 'deleted') ORDER BY s.id LIMIT 1
    ) ms ON true
    WHERE m.stale = false AND m.status IN ('active', 'queued')
      AND m.id IN (SELECT memory_id FROM knowledge_memorysource WHERE state IN ('changed', 'deleted'))
    FOR UPDATE OF m
), upd AS (
    UPDATE knowledge_memory m SET stale = true, stale_reason = f.reason, updated_at = %(now)s, {set}
    FROM f WHERE m.id = f.id
    RETURNING m.id, m.store, f.owner_id, f.reason, {before} AS before, {after} AS after,
              """
    + audit_event_id_sql()
    + """ AS event_id
), ev AS (
    """
    + audit_events_sql(
        """SELECT upd.event_id, %(action)s, %(actor_kind)s, %(actor_name)s, upd.store, a.name, 'memory',
           jsonb_build_array(upd.id::text), upd.reason, '{{}}'::jsonb, %(data)s::jsonb, %(batch)s,
           %(request_id)s, %(now)s
    FROM upd JOIN knowledge_agent a ON a.id = upd.owner_id"""
    )
    + """
)
"""
    + audit_revisions_sql("SELECT upd.event_id, 'memory', upd.id::text, upd.before, upd.after FROM upd")
    + """
RETURNING object_id
"""
)


@writes_memory_rows
def memories_source_changed_act(*, mode: str, actor, now) -> dict:
    """The provenance check's status change: every live, not yet stale memory with a changed or
    deleted source is marked stale and changed per `mode` (flag, requeue, invalidate), with one
    audit event and one lifecycle revision each, in one statement. Returns how many memories
    became stale / requeued / invalidated, and their ids."""
    sql = ACT.format(
        set=MODE_SET[mode], before=LIFECYCLE_JSON.format(t="f"), after=LIFECYCLE_JSON.format(t="m")
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "now": now,
                "action": ACTIONS[mode],
                "data": json.dumps({"mode": mode}),
                **audit_actor_params(actor),
            },
        )
        ids = [int(row[0]) for row in cursor.fetchall()]
    acted = len(ids)
    return {
        "stale": acted,
        "requeued": acted if mode == "requeue" else 0,
        "invalidated": acted if mode == "invalidate" else 0,
        "ids": ids,
    }


T_MEMORY = Memory._meta.db_table


@writes_memory_rows
def memories_patch(rows_sql: str, params: dict) -> int:
    """Apply a patch to many memories in one UPDATE. `rows_sql` selects one row per memory with
    `memory_id` and `a`, a jsonb patch naming any of status, status_reason, superseded_by_id,
    valid_to, tier, expires_at and updated_at (what is not named stays); rows whose patch is
    empty are left alone. Returns the count."""
    return _execute(
        f"""WITH p AS ({rows_sql})
            UPDATE {T_MEMORY} m SET
                status = coalesce(p.a->>'status', m.status),
                status_reason = coalesce(p.a->>'status_reason', m.status_reason),
                superseded_by_id = CASE WHEN p.a ? 'superseded_by_id'
                                   THEN (p.a->>'superseded_by_id')::bigint ELSE m.superseded_by_id END,
                valid_to = CASE WHEN p.a ? 'valid_to' THEN (p.a->>'valid_to')::timestamptz ELSE m.valid_to END,
                tier = coalesce(p.a->>'tier', m.tier),
                expires_at = CASE WHEN p.a ? 'expires_at' THEN (p.a->>'expires_at')::timestamptz
                             ELSE m.expires_at END,
                updated_at = (p.a->>'updated_at')::timestamptz
            FROM p WHERE m.id = p.memory_id AND p.a <> '{{}}'::jsonb""",
        params,
    )


@writes_memory_rows
def memories_put_back(rows_sql: str, params: dict) -> int:
    """Undo memories_patch exactly: for each row of `rows_sql` whose patch `a` is not empty, put
    back the state its snapshot `b` recorded (status, reasons, successor, validity, tier, expiry
    and update time). Returns the count."""
    return _execute(
        f"""WITH p AS ({rows_sql})
            UPDATE {T_MEMORY} m SET
                status = p.b->>'status',
                status_reason = p.b->>'status_reason',
                superseded_by_id = (p.b->>'superseded_by_id')::bigint,
                valid_to = (p.b->>'valid_to')::timestamptz,
                queue_reason = p.b->>'queue_reason',
                tier = p.b->>'tier',
                expires_at = (p.b->>'expires_at')::timestamptz,
                updated_at = (p.b->>'updated_at')::timestamptz
            FROM p WHERE m.id = p.memory_id AND p.a <> '{{}}'::jsonb""",
        params,
    )


def _execute(sql: str, params) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
