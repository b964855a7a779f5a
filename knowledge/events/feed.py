"""The memory event feed: one event per memory revision in the audit trail, in a strict order
that a reader can resume from.

Every committed change of a memory writes an audit event with a revision of that memory (the
one helper `knowledge.audit.services.audit_record`), so the feed reads those revisions: a consumer that
was down reads what it missed from the same rows, and the feed can never disagree with the data.

The cursor is `<xact>-<revision id>`. `xact` is the id of the transaction that wrote the
revision (a column default, `pg_current_xact_id()`), and the feed shows only revisions whose
transaction is older than the oldest transaction still running in the database
(`pg_snapshot_xmin`). A plain row id is not enough: ids are taken when a row is inserted, not
when it commits, so a reader could see id 11 and move past it while id 10's transaction is
still open. Transactions below the horizon are finished, so nothing can later appear before a
cursor already handed out; rows of one transaction share its xact and follow each other by id.
The price is that a long-running writing transaction holds the feed back (never loses events)
until it ends."""

import json
import re
from dataclasses import dataclass

from django.db import connection

from knowledge import access
from knowledge.errors import Invalid
from knowledge.principal import Principal

# The audit action of a memory change → its event type. Review approval is an activation; the
# other lifecycle actions keep their name; any other change of a memory row (entry blocks,
# consolidation, restore, Dreaming) is `memory.changed` with the action that made it.
RENAMED = {"memory.approved": "memory.activated"}
NAMED = [
    "memory.written",
    "memory.activated",
    "memory.held",
    "memory.rejected",
    "memory.revised",
    "memory.requeued",
    "memory.pinned",
    "memory.unpinned",
    "memory.revoked",
    "memory.promoted",
    "memory.superseded",
    "memory.stale",
    "memory.invalidated",
    "memory.expired",
    "memory.cleared",
    "memory.sources_confirmed",
]
CHANGED = "memory.changed"
EVENT_TYPES = [*NAMED, CHANGED]
START = "0-0"
MAX_LIMIT = 500
CURSOR_HELP = "A cursor is <xact>-<id> as returned in next_cursor; 0-0 is the start."
CURSOR_RE = re.compile(r"^(\d{1,20})-(\d{1,20})$")
# A transaction id is an xid8 (unsigned 64 bits), a revision id a bigint: a cursor past either
# names no position, and PostgreSQL would refuse it as out of range.
MAX_XACT = 2**64 - 1
MAX_REVISION_ID = 2**63 - 1


def event_type(action: str) -> str:
    action = RENAMED.get(action, action)
    return action if action in NAMED else CHANGED


_ACTION_OF = {v: k for k, v in RENAMED.items()}
NAMED_ACTIONS = [_ACTION_OF.get(t, t) for t in NAMED]


def types_sql(types) -> tuple[str, list]:
    """SQL over the audit event `e` for events of `types`: their actions, and for
    `memory.changed` every action that is not one of the named ones."""
    actions = [_ACTION_OF.get(t, t) for t in types if t != CHANGED]
    if CHANGED in types:
        return "AND (e.action = ANY(%s) OR NOT e.action = ANY(%s))", [actions, NAMED_ACTIONS]
    return "AND e.action = ANY(%s)", [actions]


def parse_cursor(value: str | None, field: str = "after") -> tuple[int, int]:
    value = (value or "").strip() or START
    match = CURSOR_RE.match(value)
    if not match or int(match[1]) > MAX_XACT or int(match[2]) > MAX_REVISION_ID:
        raise Invalid({field: [CURSOR_HELP]})
    return int(match[1]), int(match[2])


def format_cursor(xact: int, revision_id: int) -> str:
    return f"{xact}-{revision_id}"


@dataclass
class Page:
    events: list[dict]
    next_cursor: str
    has_more: bool


def _visibility(principal: Principal) -> tuple[str, list]:
    """SQL over the memory row `m`: the memories `principal` may see, by the access layer's rule
    for browsing (no conversation)."""
    if principal.is_reviewer:
        return "TRUE", []
    if not principal.is_agent:
        return "FALSE", []
    agent = principal.agent
    stores = access.agent_stores(agent)
    owner_only = [s for s in stores if s.startswith(access.OWNER_ONLY_PREFIXES)]
    open_stores = [s for s in stores if s not in owner_only]
    return "(m.store = ANY(%s) OR (m.store = ANY(%s) AND m.owner_id = %s))", [
        open_stores,
        owner_only,
        agent.pk,
    ]


# A revision's snapshot gives the memory as the change left it; some writers (the provenance
# check's one-statement update) record only the lifecycle fields, so what a snapshot lacks comes
# from the memory row. Store and owner never change, so visibility reads the row.
_COLUMNS = (
    "r.xact::text, r.id, r.object_id, r.before, r.after, e.id, e.action, e.actor_kind, e.actor_name, "
    "e.reason, e.created_at, a.name, m.store, m.content_hash, m.version, m.status, m.tier, m.run_id, "
    "m.turn, m.event_id"
)


def feed_read(principal: Principal, *, after: str | None = None, limit: int = 100, types=None) -> Page:
    """The events after cursor `after` that `principal` may see, oldest first, at most `limit`
    (of `types` when given). `next_cursor` is the last event returned (or `after`), so a reader
    that resumes from it misses nothing and sees nothing twice."""
    xact, rid = parse_cursor(after)
    limit = max(1, min(limit, MAX_LIMIT))
    visible_sql, visible_params = _visibility(principal)
    action_sql, action_params = types_sql(types) if types else ("", [])
    # One row more than asked says whether there is more. Visibility and types are applied in
    # SQL, so a page is full whenever that many visible events exist.
    sql = f"""
        SELECT {_COLUMNS}
        FROM knowledge_revision r
        JOIN knowledge_auditevent e ON e.id = r.event_id
        JOIN knowledge_memory m ON m.id = r.object_id::bigint
        JOIN knowledge_agent a ON a.id = m.owner_id
        WHERE r.object_type = 'memory'
          AND r.xact < pg_snapshot_xmin(pg_current_snapshot())
          AND (r.xact, r.id) > (%s::text::xid8, %s)
          AND {visible_sql} {action_sql}
        ORDER BY r.xact, r.id
        LIMIT %s
    """
    params = [str(xact), rid, *visible_params, *action_params, limit + 1]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    has_more = len(rows) > limit
    events = [_event(row) for row in rows[:limit]]
    next_cursor = events[-1]["cursor"] if events else format_cursor(xact, rid)
    return Page(events=events, next_cursor=next_cursor, has_more=has_more)


def feed_head() -> str:
    """The cursor after the newest event a reader can see now (where a new webhook starts)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT r.xact::text, r.id FROM knowledge_revision r WHERE r.object_type = 'memory' "
            "AND r.xact < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY r.xact DESC, r.id DESC LIMIT 1"
        )
        row = cursor.fetchone()
    return format_cursor(int(row[0]), row[1]) if row else START


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


def _event(row) -> dict:
    (
        xact,
        rid,
        object_id,
        before,
        after,
        event_id,
        action,
        actor_kind,
        actor_name,
        reason,
        at,
        owner,
        store,
        content_hash,
        version,
        status,
        tier,
        run_id,
        turn,
        memory_event_id,
    ) = row
    # Django's backend leaves jsonb to the field, so a raw cursor hands back text.
    after, before = _json(after) or {}, _json(before) or {}
    row_now = {
        "content_hash": content_hash,
        "version": version,
        "status": status,
        "tier": tier,
        "run_id": run_id,
        "turn": turn,
        "event_id": memory_event_id,
    }

    def value(name):
        return after[name] if name in after else row_now[name]

    return {
        "cursor": format_cursor(int(xact), rid),
        "type": event_type(action),
        "action": action,
        "memory": int(object_id),
        "content_hash": value("content_hash"),
        "version": value("version"),
        "status": value("status"),
        "previous_status": before.get("status"),
        "store": store,
        "owner": owner,
        "tier": value("tier"),
        "provenance": {"run_id": value("run_id"), "turn": value("turn"), "event_id": value("event_id")},
        "audit_event": event_id,
        "actor": {"kind": actor_kind, "name": actor_name},
        "reason": reason,
        "at": at,
    }
