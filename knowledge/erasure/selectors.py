"""What an erasure takes: the plan (a dry run answers it as is) and the ledger's reads."""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Q

from knowledge import access
from knowledge.errors import NotFound
from knowledge.models import (
    Agent,
    Channel,
    Conversation,
    Entry,
    ErasedItem,
    Erasure,
    Material,
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


def entry_hash(name: str, summary: str) -> str:
    """The ledger's hash of an entry: its name and summary (an import of an old export knows it)."""
    return content_hash(f"{name}\n{summary}")


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
    materials: set[int] = field(default_factory=set)
    material_refs: set[str] = field(default_factory=set)  # how memories cite them (source_ref)
    requeued: set[int] = field(default_factory=set)  # live memories with other support left
    derived: set[int] = field(default_factory=set)  # memories erased because their sources were

    def counts(self) -> dict[str, int]:
        return {
            "memories": len(self.memories),
            "messages": len(self.messages),
            "episodes": len(self.episodes),
            "conversations": len(self.conversations),
            "entries": len(self.entries),
            "materials": len(self.materials),
            "derived_memories": len(self.derived),
            "requeued_memories": len(self.requeued),
        }

    def is_empty(self) -> bool:
        return not (self.memories or self.messages or self.episodes or self.entries or self.materials)

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
            "materials": sorted(self.materials),
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


def _seed_store(plan: Plan, *, store: str, owner: Agent | None = None) -> None:
    """A store's memories, entries and materials (of one owner when named), with every block of
    those entries and what was learned from those materials."""
    memories = Memory.objects.filter(store=store).exclude(status=Memory.ERASED)
    entries = Entry.all_objects.filter(store=store)
    materials = Material.objects.filter(store=store)
    if owner is not None:
        memories, entries, materials = (
            memories.filter(owner=owner),
            entries.filter(owner=owner),
            materials.filter(owner=owner),
        )
    plan.memories |= set(memories.values_list("pk", flat=True))
    plan.entries |= set(entries.values_list("pk", flat=True)) - _erased_ids("entry", entries)
    for material in materials:
        _seed_material(plan, material)
    _seed_blocks(plan)


def _seed_blocks(plan: Plan) -> None:
    plan.memories |= set(
        Memory.objects.filter(entry_id__in=plan.entries)
        .exclude(status=Memory.ERASED)
        .values_list("pk", flat=True)
    )


def _seed_person(plan: Plan, person: Person) -> None:
    """A person's private store (memories and entries), every message they said, their direct
    messages whole (the agent's replies too) and the conversations held there."""
    dms = list(Channel.objects.filter(kind=Channel.KIND_DM, person=person).values_list("pk", flat=True))
    plan.messages |= set(
        Message.objects.filter(Q(speaker_person=person) | Q(channel_id__in=dms)).values_list("pk", flat=True)
    )
    plan.conversations |= set(Conversation.objects.filter(channel_id__in=dms).values_list("pk", flat=True))
    _seed_store(plan, store=access.private_store(person.name))


def _seed_channel(plan: Plan, channel: Channel) -> None:
    """A channel: every message said there, its conversations, and for a shared channel its
    channel-only store (a direct message's store is its person's: forget the person for that)."""
    plan.messages |= set(Message.objects.filter(channel=channel).values_list("pk", flat=True))
    plan.conversations |= set(Conversation.objects.filter(channel=channel).values_list("pk", flat=True))
    if channel.kind != Channel.KIND_DM:
        _seed_store(plan, store=access.channel_store(channel.name))


def _erased_ids(kind: str, rows) -> set[int]:
    return {int(r) for r in erased_refs(kind, list(rows.values_list("pk", flat=True)))}


def _seed_entry(plan: Plan, entry: Entry) -> None:
    """An entry: its name, summary and properties, and every block of its body."""
    if erased_refs("entry", [entry.pk]):
        return
    plan.entries.add(entry.pk)
    _seed_blocks(plan)


def _seed_material(plan: Plan, material: Material) -> None:
    """A material: its row, versions and stored originals, the entries learned from it (whole)
    and, by the derivation, every memory citing only it."""
    ref = material.source_ref
    plan.materials.add(material.pk)
    plan.material_refs.add(ref)
    learned = Entry.all_objects.filter(properties__material=ref)
    plan.entries |= set(learned.values_list("pk", flat=True)) - _erased_ids("entry", learned)
    _seed_blocks(plan)


@dataclass(frozen=True)
class AgentStore:
    """What an erasure of an agent's store names: the agent and the store."""

    agent: Agent
    store: str

    @property
    def pk(self) -> int:
        return self.agent.pk


def _seed_agent_store(plan: Plan, target: AgentStore) -> None:
    _seed_store(plan, store=target.store, owner=target.agent)


def _find_id(model):
    # _base_manager: a deleted entry still holds its text (for restore), so it can be erased.
    return lambda ref: model._base_manager.filter(pk=int(ref)).first() if str(ref).isdigit() else None


def _find_agent_store(ref: str) -> AgentStore | None:
    name, _, store = str(ref).partition("/")
    agent = Agent.objects.filter(name=name).first() if store else None
    return AgentStore(agent=agent, store=store) if agent else None


@dataclass(frozen=True)
class Kind:
    """One kind an erasure may name: the row its ref names, how it seeds the plan, its label and
    the target the ledger keeps."""

    find: Callable[[str], object]
    seed: Callable[[Plan, object], None]
    label: Callable[[object], str]
    target: Callable[[object], str] = lambda row: str(row.pk)


KINDS = {
    Erasure.MEMORY: Kind(_find_id(Memory), _seed_memory, lambda m: f"memory {m.pk}"),
    Erasure.MESSAGE: Kind(_find_id(Message), _seed_message, lambda m: f"message {m.pk}"),
    Erasure.CONVERSATION: Kind(_find_id(Conversation), _seed_conversation, lambda c: f"conversation {c.pk}"),
    Erasure.CHANNEL: Kind(
        lambda ref: Channel.objects.filter(name=str(ref)).first(),
        _seed_channel,
        lambda c: f"channel {c.name}",
        lambda c: c.name,
    ),
    Erasure.PERSON: Kind(
        lambda ref: Person.objects.filter(name=str(ref)).first(),
        _seed_person,
        lambda p: f"person {p.name}",
        lambda p: p.name,
    ),
    Erasure.ENTRY: Kind(_find_id(Entry), _seed_entry, lambda e: f"entry {e.pk}"),
    Erasure.MATERIAL: Kind(_find_id(Material), _seed_material, lambda m: f"material {m.pk}"),
    Erasure.STORE: Kind(
        _find_agent_store,
        _seed_agent_store,
        lambda s: f"store {s.store} of {s.agent.name}",
        lambda s: f"{s.agent.name}/{s.store}",
    ),
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
        "OR (kind = 'entry' AND ref = ANY(%s)) "
        "OR (kind = 'material' AND split_part(ref, '#', 1) = ANY(%s)) "
        "UNION SELECT id FROM knowledge_memory WHERE conversation_id = ANY(%s)",
        [
            _refs(plan.messages),
            _refs(plan.conversations),
            _refs(plan.memories),
            _refs(plan.entries),
            sorted(plan.material_refs),
            _ids(plan.conversations),
        ],
    )
    return {row[0] for row in rows}


def _gone(plan: Plan) -> set[tuple[str, str]]:
    """The (kind, ref) sources the plan takes; a material's section refs count as the material."""
    gone = {("message", str(i)) for i in plan.messages}
    gone |= {("conversation", str(i)) for i in plan.conversations}
    gone |= {("memory", str(i)) for i in plan.memories}
    gone |= {("entry", str(i)) for i in plan.entries}
    return gone | {("material", ref) for ref in plan.material_refs}


def _derive(plan: Plan) -> None:
    """What depends on it follows: a memory citing only what goes (or distilled in an erased
    conversation and citing nothing else) goes too, transitively; one with other support left is
    sent back to review, stale. Episodes cut from an erased message go whole (their summary may
    quote it); the messages left in them stay, in no episode, where recall's message route finds
    them by themselves."""
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
            sources[memory_id].append((kind, ref.split("#", 1)[0] if kind == "material" else ref))
        gone = _gone(plan)
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
    """Exactly what erasing `row` (a `kind` the KINDS table names) takes, derived items included."""
    named = KINDS[kind]
    plan = Plan(kind=kind, target=named.target(row), label=named.label(row))
    named.seed(plan, row)
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
    """The row an erasure names (by id; a person or a channel by name; an agent's store as
    `<agent>/<store>`) for an admin only (Refused otherwise); NotFound when there is none. Erase
    reaches every store."""
    access.require_role(principal, ADMIN, "Only an admin may erase; an agent retires its own memories.")
    row = KINDS[kind].find(ref)
    if row is None:
        raise NotFound(f"No {kind} {ref} to erase.")
    return row
