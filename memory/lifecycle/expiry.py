"""Short-term memory: expiring what reached its expiry time and clearing a finished
conversation's or run's working memory, in audited batches."""

import datetime

from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import audit_record, snapshot
from knowledge.memories.rows import memory_row_state, memory_rows_save
from knowledge.models import Agent, Conversation, Memory
from knowledge.principal import Principal
from memory.models import ConsolidationItem, ConsolidationPlan


def _retire_batch(
    *, actor: Principal, memories: list[Memory], action: str, reason: str, at, data=None
) -> None:
    revisions = []
    changed_at = timezone.now()
    for memory in memories:
        before = snapshot(memory)
        ends = at or memory.expires_at  # an expired memory was valid until its expiry time
        memory_row_state(
            memory,
            save=False,
            status=Memory.EXPIRED,
            status_reason=reason,
            queue_reason="",
            valid_to=ends if memory.valid_to is None or memory.valid_to > ends else memory.valid_to,
            updated_at=changed_at,
        )
        revisions.append(("memory", memory.pk, before, snapshot(memory)))
    memory_rows_save(memories, "status", "status_reason", "queue_reason", "valid_to")
    stores = {m.store for m in memories}
    owners = {m.owner.name for m in memories}
    audit_record(
        action,
        actor=actor,
        store=stores.pop() if len(stores) == 1 else "",
        owner=owners.pop() if len(owners) == 1 else "",
        object_type="memory",
        object_ids=[m.pk for m in memories],
        reason=reason,
        counts={"memories": len(memories)},
        data=data,
        revisions=revisions,
    )


def memories_in_open_plans():
    """The ids of memories a running or proposed consolidation plan names (a subquery): they
    are that plan's to change, so expiry and the reconciler leave them alone."""
    return ConsolidationItem.objects.filter(plan__state__in=ConsolidationPlan.OPEN_STATES).values("memory_id")


def memory_expire_due(
    *,
    actor: Principal | None = None,
    now: datetime.datetime | None = None,
    batch: int = 500,
    episodes_kept_for=(),
) -> int:
    """Expire every live memory whose `expires_at` has passed (status expired, never recalled
    again), in batches of `batch`, one audited transaction each, except the episodic memories of
    a conversation owned by an agent in `episodes_kept_for` (their digest waits for the model
    server). Idempotent and safe to run on two workers at once (rows are claimed with SKIP
    LOCKED). Returns how many expired."""
    actor = actor or Principal.system("short-term expiry")
    now = now or timezone.now()
    due = (
        Memory.objects.filter(status__in=Memory.LIVE, expires_at__lte=now)
        # a memory in an open plan (a session digest waiting for review) is the plan's to expire
        .exclude(pk__in=memories_in_open_plans())
    )
    if episodes_kept_for:
        due = due.exclude(
            tier=Memory.EPISODIC, conversation__isnull=False, owner_id__in=list(episodes_kept_for)
        )
    total = 0
    while True:
        with transaction.atomic():
            memories = list(
                due.select_for_update(of=("self",), skip_locked=True)
                .select_related("owner")
                .order_by("expires_at", "pk")[:batch]
            )
            if not memories:
                break
            _retire_batch(
                actor=actor,
                memories=memories,
                action="memory.expired",
                reason="short-term memory reached its expiry time",
                at=None,
            )
        total += len(memories)
        if len(memories) < batch:
            break
    return total


def memory_clear_working(
    *,
    actor: Principal,
    conversation: Conversation | None = None,
    run_id: str = "",
    owner: Agent | None = None,
    now: datetime.datetime | None = None,
) -> list[int]:
    """Clear the working memory of a finished conversation or run: its live working-tier
    memories become expired ("cleared"), audited as memory.cleared. For a run, `owner` limits it
    to one agent's run (run ids are chosen by agents). Returns the ids cleared; running it again
    clears nothing more."""
    if (conversation is None) == (not run_id):
        raise ValueError("give exactly one of conversation or run_id")
    now = now or timezone.now()
    qs = Memory.objects.filter(status__in=Memory.LIVE, tier=Memory.WORKING)
    if conversation is not None:
        qs = qs.filter(conversation=conversation)
        reason, data = f"conversation {conversation.pk} finished", {"conversation": conversation.pk}
    else:
        qs = qs.filter(run_id=run_id)
        reason, data = f"run {run_id} finished", {"run_id": run_id}
    if owner is not None:
        qs = qs.filter(owner=owner)
    with transaction.atomic():
        memories = list(qs.select_for_update(of=("self",)).select_related("owner").order_by("pk"))
        if memories:
            _retire_batch(
                actor=actor, memories=memories, action="memory.cleared", reason=reason, at=now, data=data
            )
    return [m.pk for m in memories]
