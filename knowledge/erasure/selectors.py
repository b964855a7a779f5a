"""What an erasure takes: the plan (a dry run answers it as is) and the ledger's reads."""

import hashlib
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Q

from knowledge import access
from knowledge.errors import NotFound
from knowledge.models import (
    Channel,
    Conversation,
    Entry,
    ErasedItem,
    Erasure,
    Memory,
    Message,
    Person,
)
from knowledge.principal import ADMIN

# The largest plan one request may take (a person's whole history fits many times over).
MAX_ROUNDS = 50


def content_hash(text: str) -> str:
    """The sha256 the ledger keeps of what a row held: a copy can be recognised, not read."""
    return hashlib.sha256((text or "").encode()).hexdigest()


@dataclass
class Plan:
    """Exactly what an erasure takes (ids by kind) and what it sends back to review."""

    kind: str
    target: str
    label: str
    memories: set[int] = field(default_factory=set)
    messages: set[int] = field(default_factory=set)
    episodes: set[int] = field(default_factory=set)
    conversations: set[int] = field(default_factory=set)
    entries: set[int] = field(default_factory=set)
    requeued: set[int] = field(default_factory=set)  # live memories with other support left
    derived: set[int] = field(default_factory=set)  # memories erased because their sources were

    def counts(self) -> dict[str, int]:
        return {
            "memories": len(self.memories),
            "messages": len(self.messages),
            "episodes": len(self.episodes),
            "conversations": len(self.conversations),
            "entries": len(self.entries),
            "derived_memories": len(self.derived),
            "requeued_memories": len(self.requeued),
        }

    def is_empty(self) -> bool:
        return not (self.memories or self.messages or self.episodes or self.entries)

    def preview(self) -> dict:
        """The dry run's answer: counts by kind and the ids of every item, derived ones named."""
        return {
            "kind": self.kind,
            "target": self.target,
            "label": self.label,
            "counts": self.counts(),
            "memories": sorted(self.memories),
            "derived_memories": sorted(self.derived),
            "requeued_memories": sorted(self.requeued),
            "messages": sorted(self.messages),
            "episodes": sorted(self.episodes),
            "conversations": sorted(self.conversations),
            "entries": sorted(self.entries),
        }


def _conversation_messages(conversation: Conversation) -> Q:
    """The messages a conversation saw: its channel (and thread) while it was open."""
    q = Q(channel_id=conversation.channel_id, ts__gte=conversation.started_at)
    if conversation.thread:
        q &= Q(thread=conversation.thread)
    if conversation.finished_at:
        q &= Q(ts__lte=conversation.finished_at)
    return q


def _seed_memory(plan: Plan, memory: Memory) -> None:
    if memory.status != Memory.ERASED:
        plan.memories.add(memory.pk)


def _seed_message(plan: Plan, message: Message) -> None:
    plan.messages.add(message.pk)


def _seed_conversation(plan: Plan, conversation: Conversation) -> None:
    plan.conversations.add(conversation.pk)
    plan.messages |= set(
        Message.objects.filter(_conversation_messages(conversation)).values_list("pk", flat=True)
    )


def _seed_person(plan: Plan, person: Person) -> None:
    """A person's private store (memories and entries), every message they said, their direct
    messages whole (the agent's replies too) and the conversations held there."""
    store = access.private_store(person.name)
    dms = list(Channel.objects.filter(kind=Channel.KIND_DM, person=person).values_list("pk", flat=True))
    plan.messages |= set(
        Message.objects.filter(Q(speaker_person=person) | Q(channel_id__in=dms)).values_list("pk", flat=True)
    )
    plan.conversations |= set(Conversation.objects.filter(channel_id__in=dms).values_list("pk", flat=True))
    plan.memories |= set(
        Memory.objects.filter(store=store).exclude(status=Memory.ERASED).values_list("pk", flat=True)
    )
    plan.entries |= set(
        Entry.all_objects.filter(store=store)
        .exclude(pk__in=_erased_entries(store))
        .values_list("pk", flat=True)
    )
    plan.memories |= set(
        Memory.objects.filter(entry_id__in=plan.entries)
        .exclude(status=Memory.ERASED)
        .values_list("pk", flat=True)
    )


# One entry per kind an erasure may name: how it seeds the plan and how the row is labelled.
def _erased_entries(store: str) -> list[int]:
    refs = Entry.all_objects.filter(store=store).values_list("pk", flat=True)
    return [int(r) for r in erased_refs("entry", list(refs))]


def _seed_entry(plan: Plan, entry: Entry) -> None:
    """An entry: its name, summary and properties, and every block of its body."""
    if erased_refs("entry", [entry.pk]):
        return
    plan.entries.add(entry.pk)
    plan.memories |= set(
        Memory.objects.filter(entry=entry).exclude(status=Memory.ERASED).values_list("pk", flat=True)
    )


SEEDS = {
    Erasure.MEMORY: (_seed_memory, lambda m: f"memory {m.pk}"),
    Erasure.MESSAGE: (_seed_message, lambda m: f"message {m.pk}"),
    Erasure.CONVERSATION: (_seed_conversation, lambda c: f"conversation {c.pk}"),
    Erasure.PERSON: (_seed_person, lambda p: f"person {p.name}"),
    Erasure.ENTRY: (_seed_entry, lambda e: f"entry {e.pk}"),
}


def _rows(sql: str, params: list) -> list[tuple]:
    # Plain SQL with array parameters: a person's plan names tens of thousands of ids, which as
    # IN lists cost more to build and bind than to run.
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _ids(ids) -> list[int]:
    return sorted(int(i) for i in ids)


def _refs(ids) -> list[str]:
    return [str(i) for i in sorted(ids)]


def _citing(plan: Plan) -> set[int]:
    """Memories citing what the plan takes, or distilled in a conversation it takes."""
    rows = _rows(
        "SELECT memory_id FROM knowledge_memorysource WHERE (kind = 'message' AND ref = ANY(%s)) "
        "OR (kind = 'conversation' AND ref = ANY(%s)) OR (kind = 'memory' AND ref = ANY(%s)) "
        "UNION SELECT id FROM knowledge_memory WHERE conversation_id = ANY(%s)",
        [_refs(plan.messages), _refs(plan.conversations), _refs(plan.memories), _ids(plan.conversations)],
    )
    return {row[0] for row in rows}


def _derive(plan: Plan) -> None:
    """What depends on it follows: a memory citing only what goes (or distilled in an erased
    conversation and citing nothing else) goes too, transitively; one with other support left is
    sent back to review, stale. Episodes cut from an erased message go whole (their summary may
    quote it); the messages left in them are cut again by Dreaming."""
    for _ in range(MAX_ROUNDS):
        candidates = _citing(plan) - plan.memories
        rows = _rows(
            "SELECT id, conversation_id FROM knowledge_memory WHERE id = ANY(%s) AND status <> %s",
            [_ids(candidates), Memory.ERASED],
        )
        if not rows:
            break
        sources: dict[int, list[tuple[str, str]]] = {pk: [] for pk, _ in rows}
        for memory_id, kind, ref in _rows(
            "SELECT memory_id, kind, ref FROM knowledge_memorysource WHERE memory_id = ANY(%s)",
            [_ids(sources)],
        ):
            sources[memory_id].append((kind, ref))
        gone = {("message", str(i)) for i in plan.messages}
        gone |= {("conversation", str(i)) for i in plan.conversations}
        gone |= {("memory", str(i)) for i in plan.memories}
        new = set()
        for pk, conversation_id in rows:
            cited = sources[pk]
            if conversation_id is not None and conversation_id not in plan.conversations:
                cited = [*cited, ("conversation", str(conversation_id))]
            if all(pair in gone for pair in cited):
                new.add(pk)
        if not new:
            break
        plan.memories |= new
        plan.derived |= new
    still = _citing(plan) - plan.memories
    plan.requeued = {
        row[0]
        for row in _rows(
            "SELECT id FROM knowledge_memory WHERE id = ANY(%s) AND status = ANY(%s)",
            [_ids(still), list(Memory.LIVE)],
        )
    }
    if plan.messages:
        plan.episodes = {
            row[0]
            for row in _rows(
                "SELECT episode_id FROM knowledge_episode_evidence WHERE message_id = ANY(%s) "
                "UNION SELECT episode_id FROM knowledge_message WHERE id = ANY(%s) AND episode_id IS NOT NULL",
                [_ids(plan.messages), _ids(plan.messages)],
            )
        }


def erasure_plan(*, kind: str, row) -> Plan:
    """Exactly what erasing `row` (a `kind` the SEEDS table names) takes, derived items included."""
    seed, label = SEEDS[kind]
    target = row.name if kind == Erasure.PERSON else str(row.pk)
    plan = Plan(kind=kind, target=target, label=label(row))
    seed(plan, row)
    _derive(plan)
    return plan


def erased_refs(kind: str, refs) -> set[str]:
    """Which of `refs` (ids as strings) of row type `kind` the ledger holds as erased."""
    return set(
        ErasedItem.objects.filter(kind=kind, ref__in=[str(r) for r in refs]).values_list("ref", flat=True)
    )


def erasures_recent(limit: int = 50):
    return Erasure.objects.all()[:limit]


def erasure_target(principal, *, kind: str, ref: str):
    """The row an erasure names (a Memory, Message, Conversation or Entry by id, a Person by name) for
    an admin only (Refused otherwise); NotFound when there is none. Erase reaches every store."""
    access.require_role(principal, ADMIN, "Only an admin may erase; an agent retires its own memories.")
    if kind == "person":
        row = Person.objects.filter(name=str(ref)).first()
    else:
        model = {"memory": Memory, "message": Message, "conversation": Conversation, "entry": Entry}[kind]
        # _base_manager: a deleted entry still holds its text (for restore), so it can be erased.
        row = model._base_manager.filter(pk=int(ref)).first() if str(ref).isdigit() else None
    if row is None:
        raise NotFound(f"No {kind} {ref} to erase.")
    return row
