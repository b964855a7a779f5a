"""What the consolidation modules share: the conflict error, actor labels, plan snapshots of
memories, table names, and the activation step of merged memories."""

from django.db import connection

from knowledge.audit.services import json_value, snapshot
from knowledge.errors import Conflict
from knowledge.memories.rows import memory_row_state, memory_rows_state
from knowledge.models import Memory, MemorySource, Revision
from memory.lifecycle.activation import memory_activate_stored
from memory.lifecycle.activation_hooks import REVIEW
from memory.lifecycle.conflicts import ConflictDecisionNeeded, MemoryConflict
from memory.models import ConsolidationGroup, ConsolidationItem, ConsolidationPlan

T_MEMORY = Memory._meta.db_table
T_SOURCE = MemorySource._meta.db_table
T_ITEM = ConsolidationItem._meta.db_table
T_GROUP = ConsolidationGroup._meta.db_table
T_REVISION = Revision._meta.db_table


class PlanConflict(Conflict):
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
    return f"{actor.kind_label}:{actor.name}"


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
    """Lock the memories and return each one's snapshot, exactly as knowledge.audit.services.snapshot
    would make it from the row (built from values(), which is much cheaper for many rows)."""
    rows = Memory.objects.select_for_update().filter(pk__in=ids).order_by("pk").values(*SNAPSHOT_FIELDS)
    return {row["id"]: {k: json_value(v) for k, v in row.items()} for row in rows}


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
    """Put a plan's merged memories into force through the one activation function (route
    review: applying a plan is a reviewer's decision, or the apply mode's), so the eval gate and
    strict anti-drift see them like any other memory. If one is held or refused, the whole apply
    fails and writes nothing — the originals must not be folded away behind a held memory."""
    for memory in (
        Memory.objects.select_for_update().filter(pk__in=memory_ids, status=Memory.QUEUED).order_by("pk")
    ):
        try:
            status = memory_activate_stored(actor=actor, memory=memory, route=REVIEW, now=now)
        except MemoryConflict as exc:
            raise PlanConflict(f"merged memory #{memory.pk} contradicts active memories {exc.conflicts_with}")
        except ConflictDecisionNeeded as exc:
            # The conflict rule holds here too: a merge never puts a second value of a key in
            # force; a reviewer decides in the queue, and the plan waits.
            raise PlanConflict(
                f"merged memory #{memory.pk} conflicts with active memories {exc.conflicts_with} "
                "(same key, another value): decide in the review queue first",
                conflicts_with=exc.conflicts_with,
            )
        if status != Memory.ACTIVE:
            raise PlanConflict(f"merged memory #{memory.pk} was held: {memory.status_reason}")
        memory_row_state(memory, status_reason=f"consolidation plan #{plan.pk} applied")


def merged_memories_retire(
    *, memory_ids: list[int], plan: ConsolidationPlan, status: str, reason: str, now
) -> None:
    """Take a plan's merged memories out of use for good (the rows stay, for lineage)."""
    memory_rows_state(memory_ids, now=now, status=status, queue_reason="", status_reason=reason)


def _sql(sql: str, params=None, *, fetch: bool = False):
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchall() if fetch else cursor.rowcount
