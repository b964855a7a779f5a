"""What the memory lifecycle's services share: the review-queue reasons, the state conflict
(another reviewer acted first), locking a memory row, saving fields and auditing one memory's
change, and recording who last changed an entry's body or a skill overlay."""

from collections.abc import Iterable

from django.utils import timezone

from knowledge.audit.services import audit_record, snapshot
from knowledge.errors import Conflict, NotFound
from knowledge.models import AgentSkill, AuditEvent, Entry, Memory
from knowledge.principal import Principal
from knowledge.rowsql import update_fields

QUEUE_NEW, QUEUE_REQUEUED, QUEUE_MERGE, QUEUE_GATE = "new", "requeued", "merge", "gate"
QUEUE_SUPERSEDES, QUEUE_CONFLICT = "supersedes", "conflict"
QUEUE_REASONS = (QUEUE_NEW, QUEUE_REQUEUED, QUEUE_MERGE, QUEUE_GATE, QUEUE_SUPERSEDES, QUEUE_CONFLICT)


class MemoryStateConflict(Conflict):
    """The memory is no longer in a state the action needs — usually another reviewer acted
    first. Nothing was changed. The API turns it into 409."""

    code = "state_conflict"

    def __init__(self, memory: Memory, action: str):
        self.memory_id, self.current_status = memory.pk, memory.status
        last = (
            AuditEvent.objects.filter(object_type="memory", object_ids__contains=[str(memory.pk)])
            .exclude(action__in=["memory.stale", "memory.policy_violation"])
            .order_by("-created_at", "-id")
            .first()
        )
        by = ""
        if last is not None and last.action != "memory.written":
            by = f" ({last.action.removeprefix('memory.')} by {last.actor_name})"
        message = (
            f"Memory {memory.pk} is {memory.status} now{by}; it cannot be {action}. Nothing was changed."
        )
        super().__init__(message, memory=memory.pk, status=memory.status)


class MemoryNotFound(NotFound, Memory.DoesNotExist):
    """No memory with that id (the domain NotFound, 404). It is a Memory.DoesNotExist too, so
    the views that still map that one keep answering as before."""


def memories_lock(ids: Iterable[int]) -> dict[int, Memory]:
    """The memory rows `ids` that exist, locked for the caller's transaction in one statement
    (in id order, so two lockers of overlapping sets never wait on each other in a cycle), with
    their owner and the memory each supersedes (and its owner: activation reads them)."""
    return {
        memory.pk: memory
        for memory in Memory.objects.select_for_update(of=("self",))
        .select_related("owner", "supersedes__owner")
        .filter(pk__in=list(ids))
        .order_by("pk")
    }


def memory_lock(memory_id: int) -> Memory:
    """The memory row, locked for the caller's transaction (MemoryNotFound when there is none)."""
    memory = memories_lock([memory_id]).get(memory_id)
    if memory is None:
        raise MemoryNotFound(f"There is no memory {memory_id}.")
    return memory


def memory_lock_in(memory_id: int, states: Iterable[str], action: str) -> Memory:
    """Lock the row and check its state. select_for_update re-reads the newest committed row,
    so of two reviewers acting at once the second sees the first one's result here."""
    memory = memory_lock(memory_id)
    if memory.status not in states:
        raise MemoryStateConflict(memory, action)
    return memory


def memory_save(memory: Memory, *fields: str) -> None:
    """Save fields other than the state (knowledge.memories.rows.memory_row_state sets that)."""
    update_fields(memory, *fields, "updated_at")


def memory_audit(action: str, *, actor: Principal, memory: Memory, before, reason: str = "", data=None):
    return audit_record(
        action,
        actor=actor,
        store=memory.store,
        owner=memory.owner.name,
        object_type="memory",
        object_ids=[memory.pk],
        reason=reason,
        data=data,
        revisions=[("memory", memory.pk, before, snapshot(memory))],
    )


def overlay_touched(memory: Memory, change: str, actor: Principal) -> None:
    """A skill lesson's review changes its overlay: the Skill experience tab shows it as the
    overlay's last change. Review locks memories only; the overlay's own writers lock the
    (agent, skill) row first and its memories after, so this skips a row one of them holds
    rather than wait for it (no lock cycle; that writer records its own change)."""
    if not memory.skill_id:
        return
    locked = list(
        AgentSkill.objects.select_for_update(skip_locked=True)
        .filter(agent_id=memory.owner_id, skill_id=memory.skill_id)
        .values_list("pk", flat=True)
    )
    AgentSkill.objects.filter(pk__in=locked).update(
        overlay_change=change,
        overlay_changed_at=timezone.now(),
        overlay_changed_by=f"{actor.kind_label} {actor.name}",
    )


def entry_touched(memory: Memory, actor: Principal) -> None:
    """A decision on an entry's block changes that entry's body: the entry's "changed by" names
    whoever made it (the reviewer, the agent), not whoever last edited the entry's fields."""
    entries_touched([memory], actor)


def entries_touched(memories: Iterable[Memory], actor: Principal) -> None:
    """entry_touched for many decisions at once: one UPDATE of the entries their blocks belong to
    (none when no memory is a block)."""
    ids = {memory.entry_id for memory in memories if memory.entry_id}
    if ids:
        Entry.all_objects.filter(pk__in=ids).update(
            author_kind=actor.kind_label, author_name=actor.name, updated_at=timezone.now()
        )
